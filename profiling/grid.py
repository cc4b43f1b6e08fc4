"""The profiling grid: which cells to measure, what each costs, and how a plan splits into runs.

Pure Python (no torch): `python -m profiling.run --plan-only` runs on any machine.

Cells (MuxWise §3.3.2; table columns in docs/design.md):
- ``solo_prefill``: a prefill batch of ``prefill_bs`` requests, each with ``n`` new and ``r``
  reused (cached) tokens, alone on a prefill partition (or the full GPU), run layer-wise.
  Samples are spread in Σn², Σn·r, Σn so Eq. 1 can be fitted per partition.
- ``solo_decode``: one decode iteration (CUDA-graph replay) of ``decode_bs`` requests holding
  ``decode_reused`` tokens each, alone on a decode partition (or the full GPU).
- ``contention``: the same decode iteration while a one-request prefill (n new, r reused)
  runs on the remaining SMs; the row holds decode solo and co-run latencies.

Grids: ``paper`` is §3.3.2's grid (new/reused prefill tokens at powers of 4 from 2K to 128K,
reused may be 0; decode reused per request at powers of 4; decode batch sizes = every size
SGLang captures a graph for; all multiplexed partitions) — hours of GPU time. ``coarse`` (the
default) keeps every partition and the corners of every guard axis but far fewer points, so a
whole table fits in <= 25 minutes of GPU time in runs of <= 9 minutes (see `Plan.format`).
``coarse+solo`` is every ``coarse`` cell plus solo cells where the extended solo model
(sglang_mux/latency_model.py) changes regime and the coarse grid has no point: the launch
floor's edge (n = 256, 1024 and 2x512 with r = 0), the attention wave count (n = 256, 1024 over
32K cached), the L2 knee and the spilled slope (r = 16K, 64K), and small decode batches with
long contexts (bs = 2, 4, 16; their graphs are captured too). A coarse table is topped up by
running it into the same directory: done cells are found by key.

Caps: every cell fits the model's context (n + r <= context; a 128K value is clipped to the
context) and the KV pool (all tokens of the cell at once, with a margin); a cell that does not
fit is listed as skipped with the reason, never attempted.

Cost model (planning only; the runner calibrates it on the fly): a per-SM roofline from the
GPU facts measured on an H200 (bf16 GEMM ~111 TFLOP/s per 16 SMs; copy bandwidth 1.2 TB/s on
16 SMs ... 4.2 TB/s on the full GPU) with efficiency factors, plus a CPU launch floor per layer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Iterable, Sequence

from sglang_mux.tables import ModelShape

KIND_SOLO_PREFILL = "solo_prefill"
KIND_SOLO_DECODE = "solo_decode"
KIND_CONTENTION = "contention"
KINDS = (KIND_SOLO_DECODE, KIND_SOLO_PREFILL, KIND_CONTENTION)  # run order: cheap first

K = 1024
POW4 = [2 * K, 8 * K, 32 * K, 128 * K]  # MuxWise's grid values (2K..128K at powers of 4)
GRIDS = ("coarse", "paper", "coarse+solo")
KV_MARGIN = 0.97  # use at most this share of the KV pool for one cell
MAX_PREFILL_BATCH_TOKENS = 16384  # SGLang's default max_prefill_tokens: a multi-request batch stays below


# ----------------------------------------------------------------------------- GPU

# The model is sglang_mux.tables.ModelShape (ModelShape.from_config: shape, name, context).

@dataclass(frozen=True)
class GpuSpec:
    """Planning assumptions about the GPU (the real numbers come from the run)."""

    total_sms: int = 132
    granularity: int = 16
    mem_gib: float = 79.2  # H100 80GB as torch reports it; H200 ~139.8
    gemm_flops_per_sm: float = 111e12 / 16
    # (SMs, TB/s) copy bandwidth measured on an H200; an H100 has ~0.75x the HBM bandwidth.
    bw_points: tuple = ((16, 1.2), (32, 2.2), (48, 3.0), (64, 3.6), (132, 4.2))
    bw_scale: float = 0.8

    def bandwidth(self, sms: int) -> float:
        pts = self.bw_points
        if sms <= pts[0][0]:
            tb = pts[0][1] * sms / pts[0][0]
        elif sms >= pts[-1][0]:
            tb = pts[-1][1]
        else:
            for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
                if x0 <= sms <= x1:
                    tb = y0 + (y1 - y0) * (sms - x0) / (x1 - x0)
                    break
        return tb * 1e12 * self.bw_scale


def estimate_kv_pool_tokens(model: ModelShape, gpu: GpuSpec, mem_fraction_static: float) -> int:
    """SGLang's pool ~ (fraction x memory - weights) / KV bytes per token (planning only)."""
    free = mem_fraction_static * gpu.mem_gib * 2**30 - model.weight_bytes
    return max(0, int(free / model.kv_bytes_per_token))


# ----------------------------------------------------------------------------- SGLang facts

def sglang_decode_capture_bs(max_bs: int = 256) -> list[int]:
    """SGLang 0.5.16's default decode CUDA-graph batch sizes (ServerArgs.
    _generate_decode_cuda_graph_batch_sizes, no speculative decoding, padding on). max_bs is
    256 for tp < 4 on H100/H200 (ServerArgs._handle_gpu_memory_settings)."""
    bs = [1, 2, 4, 8, 12] + list(range(16, 257, 8)) + list(range(272, 512, 16)) + list(range(512, max_bs + 1, 32))
    bs = [b for b in bs if b <= max_bs]
    if max_bs not in bs:
        bs.append(max_bs)
    return bs


def partitions(gpu: GpuSpec) -> list[tuple[int, int]]:
    """(decode_sms, prefill_sms) of the multiplexed configs, ascending decode SMs."""
    from sglang_mux.partitions import partition_configs

    return [(c.decode_sms, c.prefill_sms) for c in partition_configs(gpu.total_sms, gpu.granularity)]


# ----------------------------------------------------------------------------- cells

@dataclass(frozen=True)
class Cell:
    kind: str
    decode_sms: int  # the partition config is (decode_sms, prefill_sms); 0 = that side idle/absent
    prefill_sms: int
    prefill_bs: int = 0
    n: int = 0  # new tokens per prefill request
    r: int = 0  # reused tokens per prefill request
    decode_bs: int = 0
    decode_reused: int = 0  # reused tokens per decode request

    @property
    def key(self) -> tuple:
        """The CSV key columns (unique per cell; how a resumed run finds done cells)."""
        if self.kind == KIND_SOLO_PREFILL:
            b = self.prefill_bs
            return (self.prefill_sms, b, b * self.n * self.n, b * self.n * self.r, b * self.n)
        if self.kind == KIND_SOLO_DECODE:
            return (self.decode_sms, self.decode_bs, self.decode_bs * self.decode_reused)
        return (self.decode_sms, self.prefill_bs * self.n, self.prefill_bs * self.r,
                self.decode_bs, self.decode_reused)

    @property
    def kv_tokens(self) -> int:
        """KV slots the cell holds at once (decode: prefix + the token of the set-up step + the
        decoded token)."""
        p = self.prefill_bs * (self.n + self.r) if self.kind != KIND_SOLO_DECODE else 0
        d = self.decode_bs * (self.decode_reused + 1) if self.kind != KIND_SOLO_PREFILL else 0
        return p + d

    @property
    def requests(self) -> int:
        return (self.prefill_bs if self.kind != KIND_SOLO_DECODE else 0) + \
            (self.decode_bs if self.kind != KIND_SOLO_PREFILL else 0)

    def label(self) -> str:
        if self.kind == KIND_SOLO_PREFILL:
            return f"prefill P{self.prefill_sms} bs={self.prefill_bs} n={self.n} r={self.r}"
        if self.kind == KIND_SOLO_DECODE:
            return f"decode D{self.decode_sms} bs={self.decode_bs} r={self.decode_reused}"
        return (f"corun D{self.decode_sms}/P{self.prefill_sms} prefill n={self.n} r={self.r} | "
                f"decode bs={self.decode_bs} r={self.decode_reused}")

    def to_json(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def solo_prefill_cell(prefill_sms: int, total_sms: int, bs: int, n: int, r: int) -> Cell:
    return Cell(KIND_SOLO_PREFILL, total_sms - prefill_sms if prefill_sms < total_sms else 0,
                prefill_sms, prefill_bs=bs, n=n, r=r)


def solo_decode_cell(decode_sms: int, total_sms: int, bs: int, reused: int) -> Cell:
    return Cell(KIND_SOLO_DECODE, decode_sms, total_sms - decode_sms if decode_sms < total_sms else 0,
                decode_bs=bs, decode_reused=reused)


def contention_cell(decode_sms: int, total_sms: int, n: int, r: int, bs: int, reused: int) -> Cell:
    return Cell(KIND_CONTENTION, decode_sms, total_sms - decode_sms, prefill_bs=1, n=n, r=r,
                decode_bs=bs, decode_reused=reused)


# ----------------------------------------------------------------------------- cost model

CPU_LAYER_MS = 0.3  # host time to launch one layer (python + ~20 kernels): the floor of tiny prefills
GEMM_EFF = 0.7
ATTN_EFF = 0.45


def est_prefill_ms(model: ModelShape, gpu: GpuSpec, sms: int, reqs: Sequence[tuple[int, int]]) -> float:
    """Whole-model prefill latency of a batch [(n, r), ...] on ``sms`` SMs (rough)."""
    L = model.num_layers
    sum_n = sum(n for n, _ in reqs)
    lin = 2.0 * L * model.layer_params * sum_n + 2.0 * model.vocab_size * model.hidden_size * len(reqs)
    attn = 4.0 * L * model.num_heads * model.head_dim * sum(n * (r + n / 2) for n, r in reqs)
    peak = sms * gpu.gemm_flops_per_sm
    gpu_ms = 1e3 * (lin / (peak * GEMM_EFF) + attn / (peak * ATTN_EFF))
    return max(gpu_ms, L * CPU_LAYER_MS) + 1.0


def est_layer_ms(model: ModelShape, gpu: GpuSpec, sms: int, reqs: Sequence[tuple[int, int]]) -> float:
    return est_prefill_ms(model, gpu, sms, reqs) / model.num_layers


def est_decode_ms(model: ModelShape, gpu: GpuSpec, sms: int, bs: int, reused: int) -> float:
    """One decode iteration (graph replay) of bs requests with ``reused`` KV tokens each."""
    L = model.num_layers
    mem = model.weight_bytes + bs * (reused + 1) * model.kv_bytes_per_token
    t_mem = mem / gpu.bandwidth(sms)
    peak = sms * gpu.gemm_flops_per_sm
    flops = 2.0 * (L * model.layer_params + model.vocab_size * model.hidden_size) * bs
    attn = 4.0 * L * model.num_heads * model.head_dim * bs * reused
    t_cmp = flops / (peak * 0.6) + attn / (peak * 0.3)
    return 1e3 * max(t_mem, t_cmp) + 0.3


# ----------------------------------------------------------------------------- repeats policy

@dataclass(frozen=True)
class Repeats:
    """How many timed runs a cell gets (used by the runner and by the cost estimate alike)."""

    prefill_fast: int = 5  # latency < 50 ms
    prefill_mid: int = 3  # < 1 s
    prefill_slow: int = 2
    decode: int = 10
    decode_warmup: int = 3
    corun_min_overlap: int = 8  # overlapped decode iterations collected per co-run
    noise_pct: float = 10.0  # (max-min)/median above this: re-measure once

    def prefill(self, est_ms: float) -> int:
        return self.prefill_fast if est_ms < 50 else self.prefill_mid if est_ms < 1000 else self.prefill_slow


CELL_SETUP_S = {KIND_SOLO_PREFILL: 0.15, KIND_SOLO_DECODE: 0.25, KIND_CONTENTION: 0.45}
# Process start to the first cell, less the graphs: imports, dummy weights, green contexts, pools
# (a fresh H100 machine: 145 s with 108 graphs, of which the harness's own start-up timer saw 109;
# bench/results/profiling_startup_h100/).
STARTUP_BASE_S = 118.0
STARTUP_PER_GRAPH_S = 0.25  # one decode CUDA graph (2 warm-up forwards + capture)
FIT_RESERVE_S = 20.0  # left at the end of a run for the fit and the summary
BUDGET_SAFETY = 1.25  # a cell is started only if its estimate x this still fits


def layers_per_launch(model: ModelShape, gpu: GpuSpec, sms: int, reqs, target_ms: float = 4.0) -> int:
    """Layers per SPLIT_PREFILL launch in a co-run: enough that two queued launches keep the
    prefill stream busy while the host launches a decode iteration (>= ~target_ms each)."""
    per = est_layer_ms(model, gpu, sms, reqs)
    return max(1, min(model.num_layers, math.ceil(target_ms / max(per, 1e-3))))


def cell_latency_ms(cell: Cell, model: ModelShape, gpu: GpuSpec) -> float:
    """Estimated latency of the timed thing (prefill: whole model; decode: one iteration)."""
    if cell.kind == KIND_SOLO_PREFILL:
        return est_prefill_ms(model, gpu, cell.prefill_sms, [(cell.n, cell.r)] * cell.prefill_bs)
    return est_decode_ms(model, gpu, cell.decode_sms, cell.decode_bs, cell.decode_reused)


def cell_cost_s(cell: Cell, model: ModelShape, gpu: GpuSpec, rep: Repeats = Repeats(),
                noisy_share: float = 0.1) -> float:
    """Estimated wall time of one cell, including set-up, warm-up, repeats and re-measures."""
    setup = CELL_SETUP_S[cell.kind]
    if cell.kind == KIND_SOLO_PREFILL:
        t = cell_latency_ms(cell, model, gpu)
        # warm-up runs the first two layers only (allocator + kernels); then the timed runs
        work = t * (2 / model.num_layers) + rep.prefill(t) * t
        return setup + 1e-3 * work * (1 + noisy_share)
    d = est_decode_ms(model, gpu, cell.decode_sms, cell.decode_bs, cell.decode_reused)
    # The set-up step is an extend of decode_bs tokens over their prefixes (about one decode).
    solo = (rep.decode_warmup + rep.decode + 1) * d
    if cell.kind == KIND_SOLO_DECODE:
        return setup + 1e-3 * solo * (1 + noisy_share)
    reqs = [(cell.n, cell.r)]
    lpl = layers_per_launch(model, gpu, cell.prefill_sms, reqs)
    chunk = lpl * est_layer_ms(model, gpu, cell.prefill_sms, reqs) * 1.15  # co-run slows prefill too
    window = max(rep.corun_min_overlap * d * 1.2 + chunk, 2 * chunk)
    return setup + 1e-3 * (solo * (1 + noisy_share) + window + 2 * chunk)


# ----------------------------------------------------------------------------- grids

def _clip_values(values: Iterable[int], limit: int, quantum: int = K) -> list[int]:
    """Values <= limit; the first value above the limit is clipped down to it (rounded to a
    quantum) so the top of the range stays represented (e.g. 128K reused at a 128K context)."""
    out = []
    for v in sorted(set(values)):
        if v <= limit:
            out.append(v)
        else:
            c = limit // quantum * quantum if limit >= quantum else limit
            if c > 0 and (not out or c > out[-1]):
                out.append(c)
            break
    return out


@dataclass(frozen=True)
class GridSpec:
    name: str
    # solo prefill: (bs, n, r) candidates per partition
    prefill_single_n: tuple
    prefill_single_r: tuple
    prefill_multi: tuple  # ((bs, n, r), ...)
    prefill_max_ms: float | None  # cost cap per timed run (coarse); the smallest cells are always kept
    prefill_min_rows: int
    decode_bs: tuple | None  # None: SGLang's capture list
    decode_reused: tuple
    corun_prefill: tuple  # ((n, r), ...)
    corun_decode_bs: tuple | None
    corun_decode_reused: tuple
    # Extra solo cells added on top (every partition, no cost cap): ((bs, n, r), ...) prefill
    # and ((bs, reused), ...) decode.
    solo_prefill_extra: tuple = ()
    solo_decode_extra: tuple = ()


# Where the extended solo model changes regime and the coarse grid has no point (see above).
# n = 64..768 without a prefix: the token-linear cost bends there (the projections go from
# reading the weights to computing), and a held-out n = 128 row needs neighbours on both sides;
# the n = 64 rows are the estimator's bound check for batches under 128 tokens. n = 96 .. 3000:
# token counts where cuBLAS's kernel choice is slow on some partition (profiling.gemm_curve:
# 448 everywhere, 96/160/320/896/1536 on 20 SMs) or that are no multiple of 64 (1000, 3000),
# so that the check sees what the server's arbitrary batch sizes meet.
SOLO_PREFILL_EXTRA = ((1, 256, 0), (1, 1024, 0), (2, 512, 0), (1, 256, 32 * K), (1, 1024, 32 * K),
                      (1, 512, 16 * K), (1, 2 * K, 16 * K), (1, 512, 64 * K), (1, 2 * K, 64 * K),
                      (1, 64, 0), (1, 192, 0), (1, 384, 0), (1, 768, 0),
                      (1, 96, 0), (1, 160, 0), (1, 320, 0), (1, 448, 0), (1, 896, 0), (1, 1000, 0),
                      (1, 1536, 0), (1, 3000, 0))
# Decode: (b, r) = requests of r keys. The last five span 128 to 768 FA3 tiles (b x 8 KV heads) at
# 3K-16K keys: FA3's decode on a partition below the whole GPU turns from waves of blocks to
# one block's own speed somewhere there (H200, 112 SMs: 16 x 32K slower than on 64 SMs, 64 x 8K
# faster), and the coarse grid has only 32 and 64 x 8K to place it. 32 x 16K fits only the
# H200's pool.
SOLO_DECODE_EXTRA = (tuple((b, r) for b in (2, 4, 16) for r in (2 * K, 8 * K, 32 * K)) + ((2, 127 * K), (4, 127 * K))
                     + ((16, 16 * K), (24, 12 * K), (32, 16 * K), (48, 6 * K), (96, 3 * K)))


def grid_spec(name: str) -> GridSpec:
    if name == "coarse+solo":
        return replace(grid_spec("coarse"), name=name, solo_prefill_extra=SOLO_PREFILL_EXTRA,
                       solo_decode_extra=SOLO_DECODE_EXTRA)
    if name == "coarse":
        return GridSpec(
            name="coarse",
            prefill_single_n=(128, 512, 2 * K, 8 * K, 32 * K, 128 * K),
            prefill_single_r=(0, 8 * K, 32 * K),
            prefill_multi=((4, 512, 0), (4, 2 * K, 0), (4, 2 * K, 8 * K), (16, 512, 2 * K)),
            prefill_max_ms=4000.0,
            prefill_min_rows=10,
            decode_bs=(1, 8, 32, 64, 128, 256),
            decode_reused=tuple(POW4),
            corun_prefill=tuple((n, r) for n in (2 * K, 8 * K, 32 * K) for r in (0, 32 * K)),
            corun_decode_bs=(1, 32, 128),  # 3 sizes: the whole table fits ~13 min of an H200
            corun_decode_reused=(2 * K, 8 * K, 32 * K),
        )
    if name == "paper":
        return GridSpec(
            name="paper",
            prefill_single_n=(128, 512, *POW4),
            prefill_single_r=(0, *POW4),
            prefill_multi=tuple((b, n, r) for b in (2, 4, 8) for n in (512, 2 * K, 8 * K) for r in (0, 2 * K, 8 * K)),
            prefill_max_ms=None,
            prefill_min_rows=0,
            decode_bs=None,
            decode_reused=tuple(POW4),
            corun_prefill=tuple((n, r) for n in POW4 for r in (0, *POW4)),
            corun_decode_bs=None,
            corun_decode_reused=tuple(POW4),
        )
    raise ValueError(f"unknown grid {name!r}; choose one of {GRIDS}")


@dataclass
class Plan:
    grid: str
    model: ModelShape
    gpu: GpuSpec
    kv_pool_tokens: int
    max_requests: int
    capture_bs: list[int]
    cells: list[Cell] = field(default_factory=list)
    skipped: list[tuple[Cell, str]] = field(default_factory=list)
    repeats: Repeats = Repeats()

    def cost_s(self, cell: Cell) -> float:
        return cell_cost_s(cell, self.model, self.gpu, self.repeats)

    @property
    def n_graphs(self) -> int:
        return len(self.capture_bs) * (len(partitions(self.gpu)) + 2)

    @property
    def startup_s(self) -> float:
        return STARTUP_BASE_S + STARTUP_PER_GRAPH_S * self.n_graphs

    @property
    def run_overhead_s(self) -> float:
        """What a run spends besides its cells: start-up and the reserve at its end."""
        return self.startup_s + FIT_RESERVE_S

    def total_cells_s(self, cells: Iterable[Cell] | None = None) -> float:
        return sum(self.cost_s(c) for c in (self.cells if cells is None else cells))

    def by_kind(self, cells: Iterable[Cell] | None = None) -> dict[str, tuple[int, float]]:
        out = {k: [0, 0.0] for k in KINDS}
        for c in (self.cells if cells is None else cells):
            out[c.kind][0] += 1
            out[c.kind][1] += self.cost_s(c)
        return {k: (v[0], v[1]) for k, v in out.items()}

    def split_runs(self, budget_s: float, cells: Sequence[Cell] | None = None) -> list[list[Cell]]:
        """Greedy split into runs of at most ``budget_s`` each, by the rule a run starts a cell
        with (start-up, each cell's estimate x BUDGET_SAFETY, FIT_RESERVE_S at the end)."""
        runs, cur, t = [], [], self.run_overhead_s
        for c in (self.cells if cells is None else cells):
            cost = self.cost_s(c) * BUDGET_SAFETY
            if cur and t + cost > budget_s:
                runs.append(cur)
                cur, t = [], self.run_overhead_s
            cur.append(c)
            t += cost
        if cur:
            runs.append(cur)
        return runs

    def format(self, budget_s: float, done: set | None = None) -> str:
        """Human-readable plan: counts, estimated time, runs needed."""
        done = done or set()
        todo = [c for c in self.cells if (c.kind, c.key) not in done]
        runs = self.split_runs(budget_s, todo)
        lines = [
            f"plan: grid={self.grid} model={self.model.name} ({self.model.num_layers} layers, "
            f"context {self.model.context_len}) on {self.gpu.total_sms} SMs, granularity {self.gpu.granularity}",
            f"  KV pool {self.kv_pool_tokens} tokens, {self.max_requests} request slots; decode graphs for "
            f"bs={self.capture_bs} on {len(partitions(self.gpu)) + 2} stream groups ({self.n_graphs} graphs)",
        ]
        allk, todok = self.by_kind(), self.by_kind(todo)
        for k in KINDS:
            n, s = allk[k]
            tn, ts = todok[k]
            lines.append(f"  {k:13s} {n:5d} cells, est {s / 60:6.1f} min   (to do: {tn} cells, {ts / 60:.1f} min)")
        tot = self.total_cells_s()
        rem = self.total_cells_s(todo)
        lines.append(f"  skipped (caps): {len(self.skipped)} cells")
        lines.append(
            f"  total: {len(self.cells)} cells, est {tot / 60:.1f} min of cells + {self.startup_s:.0f} s start-up per run")
        lines.append(
            f"  to do: {len(todo)} cells, est {rem / 60:.1f} min -> {len(runs)} run(s) of <= {budget_s:.0f} s, "
            f"about {(rem + len(runs) * self.startup_s) / 60:.1f} min of GPU time in all")
        first = min((self.cost_s(c) for c in todo), default=0.0) * BUDGET_SAFETY
        if todo and self.run_overhead_s + first > budget_s:
            lines.append(f"  budget too small: start-up and the end's reserve take ~{self.run_overhead_s:.0f} s, "
                         f"so a run of {budget_s:.0f} s measures nothing; pass --time-budget-s "
                         f">= {math.ceil(self.run_overhead_s + first)}")
        return "\n".join(lines)


def make_plan(model: ModelShape, gpu: GpuSpec = GpuSpec(), grid: str = "coarse", *,
              kv_pool_tokens: int | None = None, mem_fraction_static: float = 0.75,
              max_requests: int = 512, what: Sequence[str] = KINDS,
              capture_bs: Sequence[int] | None = None, repeats: Repeats = Repeats()) -> Plan:
    """Build the grid for a model on a GPU. ``kv_pool_tokens``: the real pool (from the
    harness) or, for planning, an estimate from ``mem_fraction_static``."""
    spec = grid_spec(grid)
    for w in what:
        if w not in KINDS:
            raise ValueError(f"unknown --what {w!r}; choose from {', '.join(KINDS)}")
    pool = estimate_kv_pool_tokens(model, gpu, mem_fraction_static) if kv_pool_tokens is None else int(kv_pool_tokens)
    full_list = sglang_decode_capture_bs(256)
    if capture_bs is None:
        want = set(spec.decode_bs or full_list) | set(spec.corun_decode_bs or full_list)
        want |= {b for b, _ in spec.solo_decode_extra}
        capture_bs = sorted(b for b in want if b <= max_requests)
    capture_bs = sorted(set(int(b) for b in capture_bs))
    plan = Plan(grid, model, gpu, pool, max_requests, list(capture_bs), repeats=repeats)
    total = gpu.total_sms
    parts = partitions(gpu)
    ctx = model.context_len
    cap = int(pool * KV_MARGIN)

    def admit(cell: Cell) -> bool:
        reason = None
        if cell.kind != KIND_SOLO_DECODE and cell.n + cell.r > ctx:
            reason = f"prefill n+r={cell.n + cell.r} exceeds the context {ctx}"
        elif cell.kind != KIND_SOLO_PREFILL and cell.decode_reused + 1 > ctx:
            reason = f"decode reused {cell.decode_reused} exceeds the context {ctx}"
        elif cell.kind != KIND_SOLO_PREFILL and cell.decode_bs not in capture_bs:
            reason = f"decode bs {cell.decode_bs} has no captured graph ({capture_bs})"
        elif cell.kv_tokens > cap:
            reason = f"needs {cell.kv_tokens} KV tokens, pool holds {pool} (x{KV_MARGIN})"
        elif cell.requests + 1 > max_requests:
            reason = f"needs {cell.requests} request slots, pool has {max_requests}"
        if reason:
            plan.skipped.append((cell, reason))
            return False
        plan.cells.append(cell)
        return True

    if KIND_SOLO_DECODE in what:
        reused = _clip_values(spec.decode_reused, ctx - 1)
        for d in [p[0] for p in parts] + [total]:
            for r in reused:
                for b in (spec.decode_bs or full_list):
                    admit(solo_decode_cell(d, total, b, r))

    if KIND_SOLO_PREFILL in what:
        for p in [p[1] for p in sorted(parts, key=lambda x: -x[1])] + [total]:
            cand = []
            for n in spec.prefill_single_n:
                if n > ctx:
                    continue
                for r in _clip_values(spec.prefill_single_r, ctx - n):
                    cand.append(solo_prefill_cell(p, total, 1, n, r))
            for b, n, r in spec.prefill_multi:
                if b * n <= MAX_PREFILL_BATCH_TOKENS:
                    cand.append(solo_prefill_cell(p, total, b, n, r))
            cand.sort(key=lambda c: cell_latency_ms(c, model, gpu))
            kept = 0
            for i, c in enumerate(cand):
                if (spec.prefill_max_ms is not None and kept >= spec.prefill_min_rows
                        and cell_latency_ms(c, model, gpu) > spec.prefill_max_ms):
                    plan.skipped.append((c, f"coarse grid: est {cell_latency_ms(c, model, gpu):.0f} ms per run "
                                            f"> {spec.prefill_max_ms:.0f} ms cap (use --grid paper)"))
                    continue
                kept += admit(c)

    # Extra solo cells after the grid's own (which they never displace), duplicates dropped.
    have = {(c.kind, c.key) for c in plan.cells}
    for kind, extra, make in ((KIND_SOLO_DECODE, spec.solo_decode_extra,
                               lambda s, e: solo_decode_cell(s, total, e[0], e[1])),
                              (KIND_SOLO_PREFILL, spec.solo_prefill_extra,
                               lambda s, e: solo_prefill_cell(s, total, *e))):
        if kind not in what:
            continue
        sms = [p[0] for p in parts] + [total] if kind == KIND_SOLO_DECODE else [p[1] for p in parts] + [total]
        for s in sms:
            for e in extra:
                c = make(s, e)
                if (c.kind, c.key) not in have:
                    have.add((c.kind, c.key))
                    admit(c)

    if KIND_CONTENTION in what:
        for d, p in parts:
            for n, r in spec.corun_prefill:
                if n > ctx:
                    continue
                rr = _clip_values([r], ctx - n)
                if not rr and r:
                    plan.skipped.append((contention_cell(d, total, n, r, 1, POW4[0]),
                                         f"prefill n+r={n + r} exceeds the context {ctx}"))
                    continue
                r = rr[0] if rr else 0
                for rd in _clip_values(spec.corun_decode_reused, ctx - 1):
                    for b in (spec.corun_decode_bs or full_list):
                        admit(contention_cell(d, total, n, r, b, rd))
    order = {k: i for i, k in enumerate(KINDS)}
    plan.cells.sort(key=lambda c: order[c.kind])  # stable: partition/size order within a kind
    return plan


def replan_for_pool(plan: Plan, kv_pool_tokens: int, max_requests: int, capture_bs: Sequence[int]) -> Plan:
    """Re-apply the caps with the real pool of a running harness (same grid)."""
    new = Plan(plan.grid, plan.model, plan.gpu, int(kv_pool_tokens), int(max_requests), sorted(capture_bs),
               skipped=list(plan.skipped), repeats=plan.repeats)
    cap = int(kv_pool_tokens * KV_MARGIN)
    for c in plan.cells:
        if c.kv_tokens > cap:
            new.skipped.append((c, f"needs {c.kv_tokens} KV tokens, pool holds {kv_pool_tokens} (x{KV_MARGIN})"))
        elif c.requests + 1 > max_requests:
            new.skipped.append((c, f"needs {c.requests} request slots, pool has {max_requests}"))
        elif c.kind != KIND_SOLO_PREFILL and c.decode_bs not in new.capture_bs:
            new.skipped.append((c, f"decode bs {c.decode_bs} has no captured graph ({new.capture_bs})"))
        else:
            new.cells.append(c)
    return new
