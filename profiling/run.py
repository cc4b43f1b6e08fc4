"""`python -m profiling.run`: profile a model on this GPU into a contention table (resumable).

    python -m profiling.run --model-config launch/models/llama-3.1-8b/config.json \\
        --out contention_tables/llama-3.1-8b__nvidia-h100-80gb-hbm3__triton [--what solo_prefill,solo_decode,contention] \\
        [--time-budget-s 500] [--grid coarse|paper|coarse+solo] [--plan-only]

Writes meta.json, then one CSV row per measured cell (profiling/store.py), stops cleanly before
the time budget (start-up included), and when every CSV has rows calls the estimator's fit
(`sglang_mux.estimator.fit_table`: fit.json + guard.json) and prints its held-out check.
Run the same command again to continue: measured and skipped cells are not repeated.
``--plan-only`` needs no GPU and no torch: it prints the grid, its estimated time and how many
runs of ``--time-budget-s`` it takes (and, with an existing --out, what is left).
``--remeasure-noisy PCT`` measures only the cells logged with a sample spread above PCT % again
and keeps the steadier measurement. Run it on the machine that made the table: launch-bound
cells time the host, and a second H100 machine put them at 25-32 ms against 14-20 ms
(bench/results/h100_launch_floor_two_hosts.json).
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import math
import shlex
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

from sglang_mux import cli_io as _cli_io
from profiling import gemm_curve as GC
from profiling import grid as G
from profiling.stats import median, spread_pct
from profiling.store import FILES, TableStore, cell_id, check_meta_compatible
from sglang_mux import cli
from sglang_mux.tables import ModelShape

logger = logging.getLogger("profiling")
GEMM_POINT_S = 0.1  # planning estimate of one gemm-curve point (s)


class AbortRun(RuntimeError):
    pass


# ----------------------------------------------------------------------------- measuring

@dataclass
class RunSummary:
    done: int = 0
    skipped: int = 0
    errors: int = 0
    stopped_by_budget: bool = False
    interrupted: bool = False
    remaining: list = field(default_factory=list)
    wall_s: float = 0.0


class Profiler:
    """Runs plan cells on a harness (the real one, or a fake in the CPU tests)."""

    def __init__(self, harness, plan: G.Plan, store: TableStore, *, budget_s: float,
                 t0: float | None = None, clock: Callable[[], float] = time.monotonic,
                 progress: bool = True, max_consecutive_errors: int = 3, retry_skipped: bool = False,
                 remeasure: Mapping[tuple, float] | None = None):
        self.h = harness
        self.plan = plan
        self.store = store
        self.budget_s = float(budget_s)
        self.clock = clock
        self.t0 = clock() if t0 is None else t0
        self.progress = progress
        self.max_consecutive_errors = max_consecutive_errors
        self.retry_skipped = retry_skipped
        self.remeasure = dict(remeasure or {})  # {(kind, key): old spread %}: measured cells to redo
        self.replaced = 0
        self.rep = plan.repeats
        # calibration: actual/estimated wall time and latency, per kind
        self._wall = {k: [0.0, 0.0] for k in G.KINDS}
        self._lat = {k: [0.0, 0.0] for k in G.KINDS}

    # ---------------------------------------------------------------- calibration
    def wall_ratio(self, kind: str) -> float:
        act, est = self._wall[kind]
        if est <= 0:
            act, est = sum(v[0] for v in self._wall.values()), sum(v[1] for v in self._wall.values())
        return min(max(act / est, 0.3), 10.0) if est > 0 else 1.0

    def lat_ratio(self, kind: str) -> float:
        act, est = self._lat[kind]
        return min(max(act / est, 0.2), 5.0) if est > 0 else 1.0

    def expected_s(self, cell: G.Cell) -> float:
        return self.plan.cost_s(cell) * self.wall_ratio(cell.kind)

    def elapsed(self) -> float:
        return self.clock() - self.t0

    # ---------------------------------------------------------------- one cell
    def todo(self, cells: Sequence[G.Cell] | None = None) -> list[G.Cell]:
        cells = self.plan.cells if cells is None else cells
        if self.remeasure:
            return [c for c in cells if cell_id(c) in self.remeasure]
        return [c for c in cells if not self.store.done(c) and (self.retry_skipped or not self.store.was_skipped(c))]

    def _noisy(self, xs) -> bool:
        return spread_pct(xs) > self.rep.noise_pct

    def measure(self, cell: G.Cell) -> tuple[list[float], dict]:
        """(CSV latency values, log info) of one cell; may raise CellSkipped."""
        m, gpu = self.plan.model, self.plan.gpu
        est = G.cell_latency_ms(cell, m, gpu) * self.lat_ratio(cell.kind)
        info: dict = {"est_ms": round(est, 3)}
        if cell.kind == G.KIND_SOLO_PREFILL:
            cfg = self.h.config(cell.decode_sms, cell.prefill_sms)
            reqs = [(cell.n, cell.r)] * cell.prefill_bs
            lpl = G.layers_per_launch(m, gpu, cell.prefill_sms, reqs, target_ms=10.0)
            reps = self.rep.prefill(est)
            xs = list(self.h.prefill_samples(reqs, cfg, layers_per_launch=lpl, repeats=reps))
            host = list(getattr(self.h, "last_host_ms", []))
            info.update(layers_per_launch=lpl, repeats=reps)
            if self._noisy(xs):
                info["first_samples"], info["remeasured"] = list(xs), True
                xs += list(self.h.prefill_samples(reqs, cfg, layers_per_launch=lpl, repeats=reps))
                host += list(getattr(self.h, "last_host_ms", []))
            if host:  # the host's enqueue time per repeat (not in the CSV: it is the host's, not the GPU's)
                info["host_ms"] = [round(x, 3) for x in host]
            info.update(samples=xs, spread_pct=round(spread_pct(xs), 2))
            self._lat[cell.kind][0] += median(xs)
            self._lat[cell.kind][1] += G.cell_latency_ms(cell, m, gpu)
            return [median(xs)], info
        if cell.kind == G.KIND_SOLO_DECODE:
            cfg = self.h.config(cell.decode_sms, cell.prefill_sms)
            xs = list(self.h.decode_samples(cell.decode_bs, cell.decode_reused, cfg,
                                            repeats=self.rep.decode, warmup=self.rep.decode_warmup))
            if self._noisy(xs):
                info["first_samples"], info["remeasured"] = list(xs), True
                xs += list(self.h.decode_samples(cell.decode_bs, cell.decode_reused, cfg,
                                                 repeats=self.rep.decode, warmup=self.rep.decode_warmup))
            info.update(samples=xs, spread_pct=round(spread_pct(xs), 2))
            self._lat[cell.kind][0] += median(xs)
            self._lat[cell.kind][1] += G.cell_latency_ms(cell, m, gpu)
            return [median(xs)], info
        cfg = self.h.config(cell.decode_sms, cell.prefill_sms)
        reqs = [(cell.n, cell.r)] * cell.prefill_bs
        lpl = G.layers_per_launch(m, gpu, cell.prefill_sms, reqs, target_ms=4.0)
        kw = dict(layers_per_launch=lpl, solo_repeats=self.rep.decode, warmup=self.rep.decode_warmup,
                  min_overlap=self.rep.corun_min_overlap)
        res = self.h.corun_detailed(reqs, cell.decode_bs, cell.decode_reused, cfg, **kw)
        solo, over = list(res.solo_samples), list(res.corun_samples)
        if self._noisy(solo):
            info["first_solo_samples"], info["remeasured"] = list(solo), True
            res2 = self.h.corun_detailed(reqs, cell.decode_bs, cell.decode_reused, cfg, **kw)
            solo += list(res2.solo_samples)
            over += list(res2.corun_samples)
        info.update(layers_per_launch=lpl, solo_samples=solo, corun_samples=over,
                    corun_max_ms=max(over), outside_samples=len(res.outside_samples),
                    prefill_launches=res.prefill_launches, prefill_launch_ms=res.prefill_launch_ms,
                    solo_spread_pct=round(spread_pct(solo), 2))
        self._lat[cell.kind][0] += median(solo)
        self._lat[cell.kind][1] += G.cell_latency_ms(cell, m, gpu)
        return [median(solo), median(over)], info

    # ---------------------------------------------------------------- the loop
    def run(self, cells: Sequence[G.Cell] | None = None) -> RunSummary:
        from profiling.harness import CellSkipped, HarnessError  # no torch at import time

        todo = canaries_first(self.todo(cells))
        summ = RunSummary()
        bar = None
        total_est = sum(self.plan.cost_s(c) for c in todo)
        if self.progress and todo:
            from tqdm import tqdm

            tty = sys.stderr.isatty()
            bar = tqdm(total=max(1, round(total_est)), unit="est-s", desc="profiling", dynamic_ncols=True,
                       smoothing=0.05, mininterval=1.0 if tty else 20.0)  # few lines in captured logs
        consecutive = 0
        shown = 0.0  # est-s shown on the bar
        progressed = 0.0
        try:
            for i, cell in enumerate(todo):
                need = self.expected_s(cell) * G.BUDGET_SAFETY + G.FIT_RESERVE_S
                if self.elapsed() + need > self.budget_s:
                    summ.stopped_by_budget = True
                    summ.remaining = todo[i:]
                    break
                t = self.clock()
                try:
                    values, info = self.measure(cell)
                except CellSkipped as e:
                    self.store.skip(cell, str(e))
                    summ.skipped += 1
                    consecutive = 0
                    logger.info("skipped %s: %s", cell.label(), e)
                except HarnessError:
                    raise
                except Exception as e:  # noqa: BLE001 - logged, counted, aborts if systematic
                    summ.errors += 1
                    consecutive += 1
                    self.store.skip(cell, f"error: {type(e).__name__}: {e}", {"traceback": traceback.format_exc()})
                    logger.error("cell %s failed: %s", cell.label(), e)
                    if consecutive >= self.max_consecutive_errors:
                        raise AbortRun(f"{consecutive} cells in a row failed; last: {cell.label()}: "
                                       f"{type(e).__name__}: {e} (tracebacks in {self.store.path}/skipped.jsonl)") from e
                else:
                    consecutive = 0
                    info["wall_s"] = round(self.clock() - t, 3)
                    k = cell_id(cell)
                    if k in self.remeasure:
                        self.replaced += self.store.replace(cell, values, info, self.remeasure.pop(k))
                    else:
                        self.store.append(cell, values, info)
                    summ.done += 1
                cost = self.plan.cost_s(cell)
                self._wall[cell.kind][0] += self.clock() - t
                self._wall[cell.kind][1] += cost
                progressed += cost
                if bar is not None:
                    step = int(progressed - shown)
                    if step:
                        bar.update(step)
                        shown += step
                    rest = sum(self.expected_s(c) for c in todo[i + 1:])
                    bar.set_postfix_str(f"{i + 1}/{len(todo)} cells, ETA {rest / 60:.1f} min, "
                                        f"budget left {max(0.0, self.budget_s - self.elapsed()):.0f} s")
        except KeyboardInterrupt:
            summ.interrupted = True
            summ.remaining = [c for c in todo if not self.store.done(c) and not self.store.was_skipped(c)]
        finally:
            if bar is not None:
                bar.close()
        summ.wall_s = self.elapsed()
        return summ


def canaries_first(cells: Sequence[G.Cell]) -> list[G.Cell]:
    """The cheapest cell of each kind first: a broken code path shows in the first minute,
    not after every cell of the kinds before it."""
    first = {}
    for c in cells:
        if c.kind not in first or c.kv_tokens < first[c.kind].kv_tokens:
            first[c.kind] = c
    head = [first[k] for k in G.KINDS if k in first]
    return head + [c for c in cells if c not in head]


# ----------------------------------------------------------------------------- fit hook

def fit_table_dir(out: Path, store: TableStore, check: bool = True) -> bool:
    """Call the estimator's fit (fit.json + guard.json) when all three CSVs have rows."""
    missing = store.complete_for_fit()
    if missing:
        print(f"fit: skipped, {', '.join(missing)} still empty (run again to measure them)")
        return False
    try:
        from sglang_mux.estimator import check_table, fit_table
    except ImportError as e:  # TODO(estimator): the fit lives in sglang_mux/estimator.py
        print(f"fit: sglang_mux.estimator.fit_table is not available ({e}); "
              f"run: python -m sglang_mux.estimator fit {out}")
        return False
    try:
        fit, guard = fit_table(out)
    except Exception as e:  # noqa: BLE001 - the CSVs stay; the fit can be redone by hand
        print(f"fit: failed ({type(e).__name__}: {e}); the CSVs are kept; retry with "
              f"python -m sglang_mux.estimator fit {out}")
        return False
    print(f"fit: wrote {out}/fit.json ({len(fit.get('prefill', {}))} prefill, {len(fit.get('decode', {}))} decode "
          f"partitions) and {out}/guard.json")
    if check:
        try:
            check_table(out)
        except Exception as e:  # noqa: BLE001
            print(f"check: could not run ({type(e).__name__}: {e})")
    return True


# ----------------------------------------------------------------------------- CLI

def _parse(argv):
    pos, pos_i = cli.positive(float), cli.positive(int)
    ap = cli.ArgumentParser(prog="python -m profiling.run", description=__doc__.split("\n")[0])
    ap.add_argument("--model-config", required=True, type=_cli_io.model_config_arg, help="HF config.json of the model (dummy weights)")
    ap.add_argument("--out", help="table dir, e.g. contention_tables/llama-3.1-8b__nvidia-h100-80gb-hbm3__triton "
                                  "(default: contention_tables/<model>__<gpu-slug>)")
    ap.add_argument("--what", default=",".join(G.KINDS), help="comma list of solo_prefill,solo_decode,contention")
    ap.add_argument("--grid", choices=G.GRIDS, default="coarse", help="how many cells to measure")
    ap.add_argument("--time-budget-s", type=pos, default=500.0,
                    help="wall-clock budget of this run, start-up included; stops cleanly before it")
    ap.add_argument("--plan-only", action="store_true", help="print the plan and its estimated time (no GPU)")
    ap.add_argument("--granularity", type=pos_i, default=16, help="SMs per partition step")
    ap.add_argument("--mem-fraction-static", type=_cli_io.fraction, default=0.75,
                    help="SGLang's static share (weights + KV pool); the rest holds activations of "
                         "unchunked prefills and one decode graph set per partition")
    ap.add_argument("--attention-backend", default=None, help="SGLang attention backend (default: SGLang's choice, "
                                                              "as the server; fa3 on H100/H200)")
    ap.add_argument("--max-running-requests", type=pos_i, default=512, help="SGLang's request slots")
    ap.add_argument("--tp-size", type=pos_i, default=1,
                    help="profile one tensor-parallel rank's slice of the model on this one GPU (heads, KV "
                         "heads, MLP and vocabulary divided by N) into a table for serving at --tp-size N")
    ap.add_argument("--retry-skipped", action="store_true", help="try cells a previous run skipped again")
    ap.add_argument("--no-fit", action="store_true", help="do not fit the table after measuring")
    ap.add_argument("--noise-pct", type=pos, default=10.0, help="re-measure a cell once above this spread")
    ap.add_argument("--remeasure-noisy", type=cli.positive(float, allow_zero=True), default=None, metavar="PCT",
                    help="only measure again the table's cells whose spread exceeded PCT %% (host jitter "
                         "catches launch-bound cells); the steadier measurement stays in the CSV. Use the "
                         "machine that made the table: launch-bound cells time its host")
    ap.add_argument("--seed", type=cli.seed, default=0, help="a whole number >= 0")
    ap.add_argument("--log-level", default="info", type=str.lower,
                    choices=("debug", "info", "warning", "error"), help="logging level")
    g = ap.add_argument_group("planning assumptions (--plan-only; a GPU run uses the real values)")
    g.add_argument("--total-sms", type=pos_i, default=132, help="the GPU's SMs")
    g.add_argument("--gpu-mem-gib", type=pos, default=79.2, help="79.2 for H100 80GB, 139.8 for H200")
    g.add_argument("--kv-pool-tokens", type=pos_i, default=None, help="override the estimated KV pool")
    a = ap.parse_args(argv)
    a.what = [w.strip() for w in a.what.split(",") if w.strip()]
    bad = [w for w in a.what if w not in G.KINDS]
    if bad or not a.what:
        ap.error(f"--what: {'unknown ' + ', '.join(bad) if bad else 'empty'}; choose from {', '.join(G.KINDS)}")
    return a


def command_line(argv: Sequence[str]) -> str:
    return "python -m profiling.run " + " ".join(shlex.quote(x) for x in argv)


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


def build_meta(old: dict | None, model: ModelShape, facts: dict, args, cmd: str, plan: G.Plan) -> dict:
    """``model``: the whole model's shape (a server matches tables by it), whatever TP slice ran."""
    meta = dict(old or {})
    meta.update({
        "gpu_name": facts["gpu_name"], "sm_count": facts["sm_count"], "model": model.to_dict(),
        "versions": facts["versions"], "date": _now(), "command": cmd, "granularity": args.granularity,
        "attention_backend": facts["attention_backend"],
    })
    if args.tp_size > 1:
        # The rank's kernels, timed on one GPU; the all-reduces between them are not in these rows.
        meta["tp_size"] = args.tp_size
    prof = {k: facts[k] for k in ("attention_backend", "kv_pool_tokens", "request_slots", "mem_fraction_static",
                                  "capture_bs", "stream_groups", "prefix_mode", "gpu_memory_gib", "prefill_timing",
                                  "decode_blocks_per_sm", "decode_kernel")
            if k in facts}
    prof.update(grid=plan.grid, model_config=str(args.model_config), repeats=asdict(plan.repeats),
                context_len=model.context_len, harness_timings_s=facts.get("timings_s"))
    meta.setdefault("profiler", {}).update(prof)
    meta.setdefault("runs", [])
    return meta


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    t_start = time.monotonic()
    args = _parse(argv)
    logging.basicConfig(level=getattr(logging, args.log_level.upper(), logging.INFO),
                        format="[profiling] %(message)s")
    model = ModelShape.from_config(args.model_config)
    try:
        rank = model.per_rank(args.tp_size)  # what one GPU runs: the plan's memory and the harness's model
    except ValueError as e:
        return cli.print_error(str(e))
    reps = G.Repeats(noise_pct=args.noise_pct)
    gpu = G.GpuSpec(total_sms=args.total_sms, granularity=args.granularity, mem_gib=args.gpu_mem_gib)
    plan = G.make_plan(rank, gpu, args.grid, kv_pool_tokens=args.kv_pool_tokens,
                       mem_fraction_static=args.mem_fraction_static, max_requests=args.max_running_requests,
                       what=args.what, repeats=reps)
    if args.plan_only:
        done = TableStore(args.out).done_keys() if args.out and Path(args.out).is_dir() else set()
        print(plan.format(args.time_budget_s, done))
        if G.KIND_SOLO_PREFILL in args.what:
            sms = sorted({c.prefill_sms for c in plan.cells if c.kind == G.KIND_SOLO_PREFILL})
            total = len(sms) * len(GC.TOKENS)
            left = len(GC.todo(Path(args.out) / GC.FILE, sms, GC.TOKENS)) if args.out else total
            print(f"  gemm curve: {left} of {total} points to do, est {left * GEMM_POINT_S:.0f} s "
                  f"(before the cells, in the same run)")
        return 0

    # ---- GPU run
    _cli_io.need_gpu("profiling.run (without --plan-only)")
    from profiling.harness import Harness, HarnessError

    rank_config = write_rank_config(args.model_config, model, args.tp_size)
    try:
        h = Harness(rank_config, granularity=args.granularity, mem_fraction_static=args.mem_fraction_static,
                    attention_backend=args.attention_backend, decode_bs=plan.capture_bs,
                    max_running_requests=args.max_running_requests, seed=args.seed)
    except HarnessError as e:
        return cli.print_error(str(e))
    facts = h.facts()
    from sglang_mux.tables import table_dirname

    want = table_dirname(model.name, facts["gpu_name"], facts["attention_backend"], args.tp_size)
    out = Path(args.out or f"contention_tables/{want}")
    if "__" in out.name and out.name.split("__", 1)[1] != want.split("__", 1)[1]:
        logger.warning("--out %s does not end in this GPU's and backend's %s", out, want.split("__", 1)[1])
    gpu = G.GpuSpec(total_sms=h.total_sms, granularity=args.granularity, mem_gib=facts["gpu_memory_gib"])
    plan = G.make_plan(rank, gpu, args.grid, kv_pool_tokens=h.kv_pool_tokens, max_requests=h.max_requests,
                       what=args.what, capture_bs=h.capture_bs, repeats=reps)
    store = TableStore(out)
    old = store.read_meta()
    meta = build_meta(old, model, facts, args, command_line(argv), plan)
    if old:
        problems = check_meta_compatible(old, meta)
        ob, nb = (old.get("profiler") or {}).get("attention_backend"), facts.get("attention_backend")
        if ob and nb and ob != nb:
            problems.append(f"attention backend: table has {ob}, this run {nb}")
        if problems:
            return cli.print_error(f"{out} holds a table made elsewhere: {'; '.join(problems)}. "
                                      "Use another --out.")
    store.write_meta(meta)
    print(plan.format(args.time_budget_s, store.done_keys()))
    print(f"start-up took {h.timings.get('startup_s', 0):.0f} s; budget {args.time_budget_s:.0f} s "
          f"(elapsed {time.monotonic() - t_start:.0f} s)")
    logged = store.logged_skips()
    for c, reason in plan.skipped:  # logged once, for the record; the next plan decides again
        if (c.kind, tuple(c.key)) not in logged and not store.done(c):
            store.skip(c, "plan cap: " + reason, blocking=False)

    if G.KIND_SOLO_PREFILL in args.what and args.remeasure_noisy is None:
        _gemm_curve(h, rank_config, out, deadline=t_start + args.time_budget_s - G.FIT_RESERVE_S)
    redo = store.noisy(args.remeasure_noisy) if args.remeasure_noisy is not None else None
    if redo is not None:
        print(f"re-measuring {len(redo)} cells with a spread above {args.remeasure_noisy:g} %")
        if not redo:
            return 0
    prof = Profiler(h, plan, store, budget_s=args.time_budget_s, t0=t_start, retry_skipped=args.retry_skipped,
                    remeasure=redo)
    try:
        summ = prof.run()
    except (AbortRun, HarnessError) as e:
        print(f"profiling: aborted: {e}", file=sys.stderr)
        _record_run(store, meta, argv, None, time.monotonic() - t_start)
        return 1
    _record_run(store, meta, argv, summ, summ.wall_s)
    if redo is not None:
        print(f"this run: {summ.done} noisy cells measured again, {prof.replaced} rows replaced by the steadier "
              f"measurement, {summ.skipped} skipped, {summ.errors} errors in {summ.wall_s:.0f} s; "
              f"{len(prof.remeasure)} left")
        if not args.no_fit:
            fit_table_dir(out, store)
        return 130 if summ.interrupted else 0
    left = prof.todo()
    rest_s = sum(prof.expected_s(c) for c in left)
    print(f"this run: {summ.done} cells measured, {summ.skipped} skipped, {summ.errors} errors in {summ.wall_s:.0f} s"
          + (" (stopped before the time budget)" if summ.stopped_by_budget else "")
          + (" (interrupted)" if summ.interrupted else ""))
    print(f"table {out}: " + ", ".join(f"{FILES[k]} {store.count(k)} rows" for k in G.KINDS))
    if left:
        runs = math.ceil(rest_s / max(1.0, args.time_budget_s - plan.run_overhead_s))
        print(f"{len(left)} cells left (about {rest_s / 60:.1f} min + start-up, ~{runs} more run(s)); "
              f"run the same command again to continue")
    else:
        print("plan complete")
    if summ.interrupted:
        return 130
    if not args.no_fit:
        fit_table_dir(out, store)
    return 0


def write_rank_config(model_config: str, model: ModelShape, tp: int) -> str:
    """The config.json one GPU profiles: ``model_config`` itself at TP 1, else one rank's slice
    (`ModelShape.rank_config`) in a directory of its own (the harness loads dummy weights of the
    directory's config)."""
    if tp == 1:
        return model_config
    import tempfile

    d = Path(tempfile.mkdtemp(prefix=f"tp{tp}_rank_"))
    cfg = model.rank_config(json.loads(Path(model_config).read_text()), tp)
    (d / "config.json").write_text(json.dumps(cfg, indent=1))
    logger.info("profiling one TP-%d rank's slice: %s", tp, d / "config.json")
    return str(d / "config.json")


def _gemm_curve(h, model_config: str, out: Path, deadline: float) -> None:
    """The projections' time per partition and token count (profiling.gemm_curve), on the
    harness's prefill streams, for the points not yet in the table; cheap (~1 min)."""
    streams = GC.prefill_streams(h.parts)
    sms = sorted(streams)
    if not GC.todo(out / GC.FILE, sms, GC.TOKENS):
        return
    cfg = json.loads(Path(model_config).read_text())
    t = time.monotonic()
    n = GC.measure(GC.torch_layer_timer(cfg, streams), sms, GC.TOKENS, int(cfg["num_hidden_layers"]),
                   out / GC.FILE, deadline=deadline)
    left = len(GC.todo(out / GC.FILE, sms, GC.TOKENS))
    print(f"gemm curve: {n} points in {time.monotonic() - t:.0f} s" + (f", {left} left" if left else ""))


def _record_run(store: TableStore, meta: dict, argv, summ: RunSummary | None, wall_s: float) -> None:
    meta = dict(meta)
    meta["runs"] = list(meta.get("runs", [])) + [{
        "date": _now(), "command": command_line(argv), "wall_s": round(wall_s, 1),
        "cells_done": summ.done if summ else None, "cells_skipped": summ.skipped if summ else None,
        "errors": summ.errors if summ else None, "stopped_by_budget": summ.stopped_by_budget if summ else None,
        "aborted": summ is None,
    }]
    store.write_meta(meta)


if __name__ == "__main__":
    cli.run(main)
