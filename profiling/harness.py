"""In-process SGLang 0.5.16 model runner for timing prefill/decode on SM partitions (GPU).

Built on `sglang.benchmark.one_batch` (its `extend`, `TreeCacheNamespace` and the ModelRunner
construction of `load_model`, minus the tokenizer: dummy-weight dirs have none) with the
server's multiplexing settings: ``enable_pdmux``, ``disable_overlap_schedule``,
``chunked_prefill_size=-1``. Before the ModelRunner exists, one `GreenPartitionSet` (disjoint
SMs, sglang_mux/green_ctx.py) is written into `sglang.srt.multiplex.pdmux_context` exactly as
`sglang_mux.scheduler_loop.init_mux` does (stream-group order = ``parts.all_configs()``), so
SGLang's graph runner captures one decode CUDA-graph set per partition, and a partition is
selected with ``set_current_stream_idx(i)`` + ``model_runner.update_decode_attn_backend(i)``.

What is timed (CUDA events on the partition's own stream, warm-up first, then repeats):
- prefill: a SPLIT_PREFILL batch (``ScheduleBatch.prepare_for_split_prefill``), launched
  ``layers_per_launch`` layers at a time through ``model_runner.forward(fb,
  split_forward_count=k)`` as the engine does (tp_worker.forward_batch_split_prefill), on the
  partition's prefill stream. Reused tokens really hold KV and are attended: each request's
  prefix gets KV slots and ``req.prefix_indices`` (as the radix cache hands them to
  ``prepare_for_extend``). By default (``prefix_mode="alloc"``) the prefix slots are
  allocated, not computed: attention cost does not depend on the KV values, and a 128K-token
  prefix extend would cost seconds per cell. ``prefix_mode="extend"`` computes them with a
  real extend first (engine_bench compares the two);
  before each repeat the stream is held behind a sleep kernel until the host has enqueued
  all of it, so the events time the GPU alone (``prefill_samples``): the host's launch time
  is the serving host's, and the engine measures it online;
- decode: ``decode_bs`` requests whose KV holds ``reused`` tokens (prefix slots + one real
  extend step, then ``prepare_for_decode``), replayed as the partition's decode CUDA graph on
  its decode stream (the replay must hit a graph: checked);
- co-run: both at once; decode iterations are classified by event timestamps as overlapped
  when they lie wholly inside the prefill stream's busy intervals.
After each cell the KV pools are cleared (`req_to_token_pool.clear()`,
`token_to_kv_pool_allocator.clear()`, as one_batch does between runs) and the CUDA caching
allocator is emptied, so thousands of cells cannot leak. A cell that does not fit (KV pool,
request slots, GPU memory) raises `CellSkipped` with the reason.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import statistics
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from profiling.stats import INF, inside, median, merge_intervals, overhead_pct

logger = logging.getLogger(__name__)


class HarnessError(RuntimeError):
    """The harness cannot work here (wrong SGLang, no graphs, ...); the message says why."""


class CellSkipped(Exception):
    """This cell cannot be measured (does not fit); the run logs the reason and goes on."""


HOLD_ATTEMPTS = 4
SLEEP_CYCLES_PER_MS = 2.0e6  # torch.cuda._sleep spins cycles; ~2 GHz on H100/H200 (purity is checked)
MAX_HOLD_MS = 500.0


# Layers timed under one hold. A stream queues ~1000 launches and a layer's prefill is ~16 (the
# 8B's 32 layers, ~500, were timed whole); past that the host blocks on the full queue while the
# GPU drains it, so no hold can keep it ahead: the 70B shape's 80 layers were 0 of 3 pure at the
# 500 ms cap (bench/results/x4_s41_2026-11-27/). Deeper models are timed in segments, summed.
MAX_LAYERS_PER_HOLD = 32


def hold_segments(num_layers: int, max_layers: int = MAX_LAYERS_PER_HOLD) -> list[int]:
    """The model's layers in as few near-equal segments of at most ``max_layers`` as there can
    be, each timed under its own hold; e.g. 80 -> [27, 27, 26], 32 -> [32]."""
    if num_layers < 1 or max_layers < 1:
        raise ValueError(f"need at least one layer and one per segment, got {num_layers}, {max_layers}")
    n = -(-num_layers // max_layers)
    return [num_layers // n + (1 if i < num_layers % n else 0) for i in range(n)]


def hold_ms(host_ms: float) -> float:
    """How long the prefill stream sleeps before a timed prefill so that the host can enqueue
    all of it first: 1.5x the expected host time plus slack, at most MAX_HOLD_MS."""
    return min(MAX_HOLD_MS, 1.5 * max(0.0, float(host_ms)) + 5.0)


@dataclass
class CaptureStat:
    stream_idx: int
    label: str
    seconds: float
    free_before: int
    free_after: int
    reserved_before: int
    reserved_after: int

    @property
    def used_bytes(self) -> int:
        return self.free_before - self.free_after


@dataclass
class CorunResult:
    decode_solo_ms: float
    decode_corun_ms: float
    solo_samples: list
    corun_samples: list
    outside_samples: list
    prefill_launches: int
    prefill_launch_ms: float | None
    layers_per_launch: int
    wall_s: float


class Harness:
    def __init__(self, model_config: str | os.PathLike, *, granularity: int = 16,
                 mem_fraction_static: float = 0.75, attention_backend: str | None = None,
                 decode_bs: Sequence[int] = (1, 8, 16, 32, 64, 128, 256), max_running_requests: int = 512,
                 device_index: int = 0, seed: int = 0, prefix_mode: str = "alloc",
                 max_total_tokens: int | None = None, log_level: str = "warning",
                 tp_rank: int = 0, tp_size: int = 1, nccl_port: int | None = None):
        """``tp_rank`` / ``tp_size`` / ``nccl_port``: one rank of a TP group whose other ranks build
        the same harness in their own processes, on GPU ``device_index``, with the same port
        (profiling/allreduce.py); every rank must then run the same collectives in the same order."""
        if prefix_mode not in ("alloc", "extend"):
            raise ValueError(f"prefix_mode must be 'alloc' or 'extend', got {prefix_mode!r}")
        # Must precede CUDA init (SGLang's _set_envs_and_config sets the same value later).
        os.environ.setdefault("CUDA_DEVICE_MAX_CONNECTIONS", "8")
        import numpy as np
        import torch

        if not torch.cuda.is_available():
            raise HarnessError("no CUDA device: the profiling harness needs an H100/H200 GPU")
        from sglang_mux.green_ctx import install_stream_groups
        from sglang_mux.patches import check_sglang_version

        check_sglang_version()
        from sglang.srt.entrypoints.engine import _set_envs_and_config
        from sglang.srt.server_args import PortArgs, ServerArgs

        from sglang_mux.green_ctx import GreenPartitionSet

        self.t_start = time.perf_counter()
        self.timings: dict[str, float] = {}
        self.capture_stats: list[CaptureStat] = []
        self.prefix_mode = prefix_mode
        self._host_layer_ms = 1.0  # host enqueue time per layer, updated by every held prefill
        self.last_host_ms: list[float] = []
        self._rng = np.random.default_rng(seed)
        self._rid = 0
        cfg_path = Path(model_config).resolve()  # absolute: a relative name could be taken for a hub id
        model_dir = cfg_path.parent if cfg_path.name == "config.json" else cfg_path
        self.model_dir = model_dir
        if not (model_dir / "config.json").is_file():
            raise HarnessError(f"{model_dir}/config.json not found (pass --model-config path/to/config.json)")
        kwargs = dict(
            model_path=str(model_dir), load_format="dummy", skip_tokenizer_init=True,
            enable_pdmux=True, disable_overlap_schedule=True, chunked_prefill_size=-1,
            mem_fraction_static=mem_fraction_static, max_running_requests=max_running_requests,
            cuda_graph_bs_decode=sorted(set(int(b) for b in decode_bs)),
            # The engine runs prefill only as SPLIT_PREFILL (never graphed); an eager monolithic
            # EXTEND is the right baseline for the layer-wise overhead too.
            disable_prefill_cuda_graph=True,
            sampling_backend="pytorch", grammar_backend="none", random_seed=seed, log_level=log_level,
            tp_size=tp_size,
        )
        if attention_backend:
            kwargs["attention_backend"] = attention_backend
        if max_total_tokens:
            kwargs["max_total_tokens"] = int(max_total_tokens)
        self.server_args = server_args = ServerArgs(**kwargs)
        _set_envs_and_config(server_args)

        t0 = time.perf_counter()
        self.parts = parts = GreenPartitionSet(device_index=device_index, granularity=granularity)
        self.timings["green_contexts_s"] = time.perf_counter() - t0
        self.total_sms = parts.total_sms
        # The same stream groups as the server (sglang_mux/scheduler_loop.py init_mux).
        self.cfgs = install_stream_groups(parts, server_args)
        self.cfg_index = {c: i for i, c in enumerate(self.cfgs)}

        t0 = time.perf_counter()
        self.tp_rank = tp_rank
        port_args = PortArgs.init_new(server_args)
        if nccl_port is not None:
            port_args.nccl_port = nccl_port
        self.model_runner = self._load_model(server_args, port_args, device_index)
        self.timings["model_and_graphs_s"] = time.perf_counter() - t0
        mr = self.model_runner
        self.num_layers = int(mr.model_config.num_hidden_layers)
        self.context_len = int(mr.model_config.context_len)
        self.page_size = int(getattr(mr, "page_size", 1) or 1)
        self.kv_pool_tokens = int(mr.max_total_num_tokens)
        self.max_requests = int(mr.req_to_token_pool.size)
        gr = mr.decode_cuda_graph_runner
        if gr is None or not hasattr(gr, "capture_bs"):
            raise HarnessError("SGLang captured no decode CUDA graphs (decode graphs disabled?); "
                               "decode timings must be graph replays")
        self.capture_bs = sorted(int(b) for b in gr.capture_bs)
        missing = sorted(set(int(b) for b in decode_bs) - set(self.capture_bs))
        if missing:
            logger.warning("decode batch sizes %s were not captured (request pool %d); their cells are skipped",
                           missing, self.max_requests)
        self.graph_mem_gb = float(getattr(mr, "graph_mem_usage", 0.0) or 0.0)
        self.attention_backend = str(getattr(mr, "decode_attention_backend_str", None)
                                     or server_args.attention_backend)
        self.timings["startup_s"] = time.perf_counter() - self.t_start
        logger.info("harness ready in %.0f s: %d SMs, %d stream groups, KV pool %d tokens, %d request slots, "
                    "graphs for bs=%s", self.timings["startup_s"], self.total_sms, len(self.cfgs),
                    self.kv_pool_tokens, self.max_requests, self.capture_bs)

    # ------------------------------------------------------------------ start-up
    def _load_model(self, server_args, port_args, gpu_id: int):
        """one_batch.load_model (SGLang 0.5.16) without the tokenizer, with per-stream-group
        capture accounting for engine_bench."""
        import torch
        from sglang.srt.configs.model_config import ModelConfig
        from sglang.srt.distributed.parallel_state_wrapper import ParallelState
        from sglang.srt.layers.dp_attention import compute_dp_attention_world_info
        from sglang.srt.model_executor.model_runner import ModelRunner
        from sglang.srt.utils import configure_logger

        with contextlib.suppress(Exception):
            configure_logger(server_args, prefix=f" TP{self.tp_rank}")
        for mod, fn in (("sglang.srt.layers.moe", "initialize_moe_config"),
                        ("sglang.srt.layers.quantization.fp8_utils", "initialize_fp8_gemm_config"),
                        ("sglang.srt.layers.quantization.fp4_utils", "initialize_fp4_gemm_config")):
            # one_batch.latency_test calls these before load_model
            getattr(importlib.import_module(mod), fn)(server_args)
        tp_rank = self.tp_rank
        model_config = ModelConfig.from_server_args(server_args)
        attn_tp_rank, attn_tp_size, attn_dp_rank, attn_dp_size = compute_dp_attention_world_info(
            server_args.enable_dp_attention, tp_rank, server_args.tp_size, server_args.dp_size,
            server_args.attn_cp_size)
        ps = ParallelState(
            tp_rank=tp_rank, tp_size=server_args.tp_size, pp_rank=0, pp_size=1, dp_rank=None,
            dp_size=server_args.dp_size, attn_tp_rank=attn_tp_rank, attn_tp_size=attn_tp_size,
            attn_cp_rank=0, attn_cp_size=server_args.attn_cp_size, attn_dp_rank=attn_dp_rank,
            attn_dp_size=attn_dp_size, moe_ep_rank=0, moe_ep_size=server_args.ep_size, moe_dp_rank=None,
            moe_dp_size=server_args.moe_dp_size, dcp_size=server_args.dcp_size, gpu_id=gpu_id,
        )
        mr = ModelRunner(model_config=model_config, mem_fraction_static=server_args.mem_fraction_static,
                         gpu_id=gpu_id, ps=ps, nccl_port=port_args.nccl_port, server_args=server_args)
        mr.alloc_memory_pool()
        mr.init_attention_backends()
        torch.cuda.synchronize()
        free0, _ = torch.cuda.mem_get_info()
        t0 = time.perf_counter()
        with self._instrument_capture():
            mr.init_cuda_graphs()
        torch.cuda.synchronize()
        self.timings["graph_capture_s"] = time.perf_counter() - t0
        self.graph_capture_bytes = free0 - torch.cuda.mem_get_info()[0]
        return mr

    @contextlib.contextmanager
    def _instrument_capture(self):
        """Wrap DecodeCudaGraphRunner._capture_one_stream to record memory and time per stream
        group (restored afterwards; SGLang's code is not changed)."""
        import torch

        try:
            from sglang.srt.model_executor.runner.decode_cuda_graph_runner import DecodeCudaGraphRunner
        except ImportError:
            yield
            return
        orig = getattr(DecodeCudaGraphRunner, "_capture_one_stream", None)
        if orig is None:
            logger.warning("DecodeCudaGraphRunner._capture_one_stream not found: no per-partition graph memory")
            yield
            return
        stats, cfgs = self.capture_stats, self.cfgs

        def wrapped(runner, stream_idx=None):
            torch.cuda.synchronize()
            free0, _ = torch.cuda.mem_get_info()
            res0 = torch.cuda.memory_reserved()
            t0 = time.perf_counter()
            try:
                return orig(runner, stream_idx)
            finally:
                torch.cuda.synchronize()
                free1, _ = torch.cuda.mem_get_info()
                i = -1 if stream_idx is None else int(stream_idx)
                stats.append(CaptureStat(i, cfgs[i].label() if 0 <= i < len(cfgs) else "single",
                                         time.perf_counter() - t0, free0, free1, res0,
                                         torch.cuda.memory_reserved()))

        DecodeCudaGraphRunner._capture_one_stream = wrapped
        try:
            yield
        finally:
            DecodeCudaGraphRunner._capture_one_stream = orig

    # ------------------------------------------------------------------ partitions
    def config(self, decode_sms: int, prefill_sms: int):
        """The PartitionConfig of (decode SMs, prefill SMs); 0 or the total on one side maps
        to the full-GPU modes."""
        from sglang_mux.partitions import PartitionConfig

        T = self.total_sms
        if decode_sms in (0, None) or prefill_sms >= T:
            return self.parts.full_prefill
        if prefill_sms in (0, None) or decode_sms >= T:
            return self.parts.full_decode
        cfg = PartitionConfig(int(decode_sms), int(prefill_sms))
        if cfg not in self.cfg_index:
            raise ValueError(f"{cfg.label()} is not a partition of this GPU: {[c.label() for c in self.cfgs]}")
        return cfg

    def _select(self, cfg):
        """Make ``cfg`` current (scheduler_loop._switch without the event chaining: the harness
        synchronizes between cells). Returns (prefill_stream, decode_stream)."""
        from sglang.srt.multiplex import pdmux_context

        i = self.cfg_index[cfg]
        pdmux_context.set_current_stream_idx(i)
        self.model_runner.update_decode_attn_backend(i)
        return self.parts.streams(cfg)

    # ------------------------------------------------------------------ cell hygiene
    def _sync_all(self) -> None:
        """Wait for every partition stream, then the device (green-context streams belong to
        their own contexts: a device sync alone is not relied upon)."""
        import torch

        seen = set()
        for c in self.cfgs:
            for s in self.parts.streams(c):
                if id(s) not in seen:
                    seen.add(id(s))
                    s.synchronize()
        torch.cuda.synchronize()

    @contextlib.contextmanager
    def _cell(self):
        """Free everything a cell allocated, whatever happens; GPU OOM -> CellSkipped."""
        import torch

        try:
            yield
        except torch.cuda.OutOfMemoryError as e:
            raise CellSkipped(f"GPU out of memory: {str(e).splitlines()[0][:200]}") from None
        except RuntimeError as e:
            msg = str(e)
            if "out of memory" in msg.lower() and "illegal" not in msg.lower():
                raise CellSkipped(f"out of memory: {msg.splitlines()[0][:200]}") from None
            raise
        finally:
            try:
                self._sync_all()
            finally:
                from sglang.srt.distributed.parallel_state import set_pdmux_status

                set_pdmux_status(False)
                self.model_runner.req_to_token_pool.clear()
                self.model_runner.token_to_kv_pool_allocator.clear()
                torch.cuda.empty_cache()

    def _check_capacity(self, kv_tokens: int, requests: int) -> None:
        mr = self.model_runner
        free_kv = mr.token_to_kv_pool_allocator.available_size()
        free_req = mr.req_to_token_pool.available_size()
        if kv_tokens > free_kv:
            raise CellSkipped(f"KV pool: the cell needs {kv_tokens} tokens, {free_kv} free of {self.kv_pool_tokens}")
        if requests > free_req:
            raise CellSkipped(f"request pool: the cell needs {requests} slots, {free_req} free")

    # ------------------------------------------------------------------ batch building
    def _new_req(self, n_new: int, n_reused: int):
        from array import array

        import numpy as np
        from sglang.srt.managers.schedule_batch import Req
        from sglang.srt.sampling.sampling_params import SamplingParams

        ids = self._rng.integers(0, 10000, size=n_new + n_reused, dtype=np.int64)
        tokens = array("q")
        tokens.frombytes(ids.tobytes())
        self._rid += 1
        req = Req(rid=f"prof-{self._rid}", origin_input_text="", origin_input_ids=tokens,
                  sampling_params=SamplingParams(temperature=0, max_new_tokens=8))
        req.full_untruncated_fill_ids = req.origin_input_ids
        req.logprob_start_len = -1
        return req

    def _alloc(self, n: int):
        t = self.model_runner.token_to_kv_pool_allocator.alloc(n)
        if t is None:
            raise CellSkipped(f"KV pool: cannot allocate {n} prefix tokens")
        return t

    def _one_batch(self):
        from sglang.benchmark import one_batch

        return one_batch

    def _prefill_reqs(self, specs: Sequence[tuple[int, int]]):
        """Requests of (new, reused) tokens whose reused prefix holds KV (see module doc)."""
        import torch

        for n, r in specs:
            if n < 1 or r < 0:
                raise ValueError(f"bad prefill request (new={n}, reused={r})")
            if n + r > self.context_len:
                raise CellSkipped(f"n+r={n + r} exceeds the context {self.context_len}")
            if self.page_size > 1 and r % self.page_size:
                raise CellSkipped(f"reused {r} is not a multiple of the KV page size {self.page_size}")
        reqs = [self._new_req(n, r) for n, r in specs]
        if self.prefix_mode == "extend" and any(r for _, r in specs):
            # Compute the prefix KV with a real extend (untimed), then extend the new tokens.
            pre = [(q, r) for q, (_, r) in zip(reqs, specs) if r]
            for q, r in pre:
                q.set_extend_range(0, r)
            self._one_batch().extend([q for q, _ in pre], self.model_runner)
            torch.cuda.synchronize()
            r2t = self.model_runner.req_to_token_pool.req_to_token
            for q, r in pre:
                q.prefix_indices = r2t[q.req_pool_idx, :r].to(torch.int64)
        else:
            total = sum(r for _, r in specs)
            if total:
                slots = self._alloc(total)
                off = 0
                for q, (_, r) in zip(reqs, specs):
                    if r:
                        q.prefix_indices = slots[off: off + r]
                        off += r
        for q in reqs:
            q.set_extend_range(len(q.prefix_indices), len(q.origin_input_ids))
        return reqs

    def _extend_batch(self, reqs, split: bool):
        """ScheduleBatch + ForwardBatch of an extend, as one_batch.extend builds them; split:
        SPLIT_PREFILL mode (prepare_for_split_prefill), as the mux scheduler runs prefill."""
        from sglang.srt.managers.schedule_batch import ScheduleBatch
        from sglang.srt.model_executor.forward_batch_info import ForwardBatch
        from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

        ob = self._one_batch()
        mr = self.model_runner
        tree_cache = ob.TreeCacheNamespace(page_size=mr.server_args.page_size, device=mr.device,
                                           token_to_kv_pool_allocator=mr.token_to_kv_pool_allocator)
        batch = ScheduleBatch.init_new(reqs=reqs, req_to_token_pool=mr.req_to_token_pool,
                                       token_to_kv_pool_allocator=mr.token_to_kv_pool_allocator,
                                       tree_cache=tree_cache, model_config=mr.model_config,
                                       enable_overlap=False, spec_algorithm=SpeculativeAlgorithm.NONE)
        if split:
            batch.prepare_for_split_prefill()
        else:
            batch.prepare_for_extend()
        ob._maybe_prepare_mlp_sync_batch(batch, mr)
        if batch.input_ids is None and getattr(batch, "prefill_input_ids_cpu", None) is not None:
            batch.input_ids = batch.prefill_input_ids_cpu.to(batch.device, non_blocking=True)
            batch.prefill_input_ids_cpu = None
        fb = ForwardBatch.init_new(batch, mr, return_hidden_states_before_norm=False)
        return batch, fb

    def _decode_batch(self, bs: int, reused: int):
        """bs requests holding ``reused`` KV tokens each, prepared for one decode step."""
        import torch
        from sglang.srt.model_executor.forward_batch_info import ForwardBatch

        if reused + 1 > self.context_len:
            raise CellSkipped(f"decode reused {reused} exceeds the context {self.context_len}")
        tail = self.page_size  # new tokens of the set-up extend (one page)
        prefix = max(0, reused - tail)
        tail = reused - prefix if reused > 0 else 1
        ob = self._one_batch()
        reqs = [self._new_req(tail, prefix) for _ in range(bs)]
        if prefix:
            slots = self._alloc(bs * prefix)
            for i, q in enumerate(reqs):
                q.prefix_indices = slots[i * prefix:(i + 1) * prefix]
        for q in reqs:
            q.set_extend_range(len(q.prefix_indices), len(q.origin_input_ids))
        # one_batch: extend (a real forward over the tail tokens), then prepare_for_decode.
        next_ids, _, batch = ob.extend(reqs, self.model_runner)
        batch.input_ids = next_ids.to(torch.int64)
        batch.prepare_for_decode()
        ob._maybe_prepare_mlp_sync_batch(batch, self.model_runner)
        fb = ForwardBatch.init_new(batch, self.model_runner, return_hidden_states_before_norm=False)
        return batch, fb

    # ------------------------------------------------------------------ launching
    @staticmethod
    def _reset_split(fb) -> None:
        fb.split_index = 0
        fb.hidden_states = None
        fb.residual = None

    def _launch_layers(self, fb, count: int) -> None:
        """One SPLIT_PREFILL launch of ``count`` layers (model_runner.forward_split_prefill via
        ModelRunner.forward, as tp_worker.forward_batch_split_prefill runs it)."""
        self.model_runner.forward(fb, split_forward_count=int(count))

    def _run_split(self, fb, lpl: int) -> None:
        self._reset_split(fb)
        while fb.split_index < self.num_layers:
            self._launch_layers(fb, min(lpl, self.num_layers - fb.split_index))

    def _time_decode(self, fb, stream, repeats: int, warmup: int) -> list[float]:
        import torch
        from sglang.srt.distributed.parallel_state import set_pdmux_status

        mr = self.model_runner
        pairs = []
        with torch.cuda.stream(stream):
            set_pdmux_status(False)
            for i in range(max(1, warmup)):
                out = mr.forward(fb)
                if i == 0 and not out.can_run_graph:
                    raise HarnessError(
                        f"decode bs={fb.batch_size} did not replay a CUDA graph (captured bs {self.capture_bs}); "
                        "decode timings must be graph replays")
            for _ in range(repeats):
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record(stream)
                mr.forward(fb)
                e.record(stream)
                pairs.append((s, e))
        stream.synchronize()
        return [s.elapsed_time(e) for s, e in pairs]

    # ------------------------------------------------------------------ public API
    def prefill_samples(self, reqs: Sequence[tuple[int, int]], cfg, layers_per_launch: int | None = None,
                        repeats: int = 3, warmup_layers: int = 2, hold_host: bool = True) -> list[float]:
        """Whole-model prefill latencies (ms) of a batch [(n_new, n_reused), ...] on ``cfg``'s
        prefill stream (the full GPU for the prefill-only mode).

        ``hold_host`` (the default): the GPU's time. Before each repeat the stream runs a sleep
        kernel long enough for the host to enqueue the whole prefill, and the repeats count
        only if the GPU had not reached a repeat's start event when its last launch was
        enqueued (else the hold doubles and the cell is timed again). A model deeper than
        ``MAX_LAYERS_PER_HOLD`` is timed in segments (`hold_segments`), each under its own hold,
        and a repeat is the sum of its segments' GPU times. Without the hold a short
        prefill times the host's launches, and this host's CPU speed swings 2x within seconds
        (bench/results/host_floor_h100.json). The host's enqueue time per repeat is kept in ``last_host_ms``;
        the engine tracks the host's share online (estimator.observe_prefill_launch).
        """
        import torch
        from sglang.srt.distributed.parallel_state import set_pdmux_status

        lpl = int(layers_per_launch or self.num_layers)
        ps, _ = self._select(cfg)
        self._check_capacity(sum(n + r for n, r in reqs), len(reqs))
        with self._cell(), torch.inference_mode():
            batch, fb = self._extend_batch(self._prefill_reqs(reqs), split=True)
            torch.cuda.synchronize()
            segments = hold_segments(self.num_layers) if hold_host else [self.num_layers]
            hold = hold_ms(max(segments) * self._host_layer_ms) if hold_host else 0.0
            with torch.cuda.stream(ps):
                set_pdmux_status(True)
                if warmup_layers:  # allocator + kernels warm, at a fraction of the cost
                    self._reset_split(fb)
                    self._launch_layers(fb, min(warmup_layers, self.num_layers))
                for _attempt in range(HOLD_ATTEMPTS):
                    pairs, hosts, pure, seg_hosts = [], [], [], []
                    for _ in range(repeats):
                        # One segment per hold, and an empty queue before each: the stream's
                        # launch queue is finite (~1000 launches), and a host blocked on a full
                        # queue times the sleeps, not its launches.
                        self._reset_split(fb)
                        rep, host = [], 0.0
                        for seg in segments:
                            if hold:
                                torch.cuda._sleep(int(hold * SLEEP_CYCLES_PER_MS))
                            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                            t0 = time.perf_counter()
                            s.record(ps)
                            end = fb.split_index + seg
                            while fb.split_index < end:
                                self._launch_layers(fb, min(lpl, end - fb.split_index))
                            e.record(ps)
                            seg_hosts.append((time.perf_counter() - t0) * 1e3)
                            host += seg_hosts[-1]
                            pure.append(not s.query())  # GPU not yet at this segment: all of it was queued
                            rep.append((s, e))
                            if hold:
                                ps.synchronize()
                        hosts.append(host)
                        pairs.append(rep)
                    if not hold or all(pure):
                        break
                    ps.synchronize()
                    hold = min(MAX_HOLD_MS, max(2 * hold, hold_ms(statistics.median(seg_hosts))))
                else:
                    set_pdmux_status(False)
                    raise CellSkipped(f"the host could not be held ahead of the GPU ({sum(pure)}/{len(pure)} "
                                      f"launches of {segments} layers pure with a {hold:.0f} ms hold)")
                set_pdmux_status(False)
                if hold:  # pure repeats: the host was never blocked, so this is its launch time
                    self._host_layer_ms = statistics.median(hosts) / self.num_layers
            ps.synchronize()
            out = [sum(s.elapsed_time(e) for s, e in rep) for rep in pairs]
            self.last_host_ms = hosts
            del batch, fb
        return out

    def prefill_ms(self, reqs: Sequence[tuple[int, int]], cfg, layers_per_launch: int | None = None,
                   repeats: int = 3) -> float:
        return median(self.prefill_samples(reqs, cfg, layers_per_launch, repeats))

    def decode_samples(self, bs: int, reused_per_req: int, cfg, repeats: int = 10, warmup: int = 3) -> list[float]:
        """Decode iteration latencies (ms): graph replays on ``cfg``'s decode stream."""
        import torch

        _, ds = self._select(cfg)
        self._check_capacity(bs * (reused_per_req + 1), bs)
        with self._cell(), torch.inference_mode():
            batch, fb = self._decode_batch(bs, reused_per_req)
            torch.cuda.synchronize()
            out = self._time_decode(fb, ds, repeats, warmup)
            del batch, fb
        return out

    def decode_ms(self, bs: int, reused_per_req: int, cfg, repeats: int = 10) -> float:
        return median(self.decode_samples(bs, reused_per_req, cfg, repeats))

    def corun_detailed(self, prefill_reqs: Sequence[tuple[int, int]], decode_bs: int, decode_reused: int, cfg, *,
                       layers_per_launch: int = 1, solo_repeats: int = 10, warmup: int = 3,
                       min_overlap: int = 8, max_wall_s: float = 20.0) -> CorunResult:
        """Decode solo, then decode replays looped on the decode stream while the prefill runs
        layer-wise on the prefill stream (at most two launches queued, like the engine). The
        prefill restarts from layer 0 if it finishes before ``min_overlap`` decode iterations
        were seen inside its busy time; launching stops once they were."""
        import torch
        from sglang.srt.distributed.parallel_state import set_pdmux_status

        if not cfg.is_multiplexed:
            raise ValueError(f"co-run needs a multiplexed partition, not {cfg.label()}")
        ps, ds = self._select(cfg)
        kv = sum(n + r for n, r in prefill_reqs) + decode_bs * (decode_reused + 1)
        self._check_capacity(kv, len(prefill_reqs) + decode_bs)
        mr, L = self.model_runner, self.num_layers
        lpl = max(1, min(int(layers_per_launch), L))
        ev = lambda: torch.cuda.Event(enable_timing=True)  # noqa: E731
        with self._cell(), torch.inference_mode():
            dbatch, dfb = self._decode_batch(decode_bs, decode_reused)
            pbatch, pfb = self._extend_batch(self._prefill_reqs(prefill_reqs), split=True)
            torch.cuda.synchronize()
            solo = self._time_decode(dfb, ds, solo_repeats, warmup)
            with torch.cuda.stream(ps):  # warm the prefill path on this stream (first layers)
                set_pdmux_status(True)
                self._reset_split(pfb)
                self._launch_layers(pfb, min(2, L))
                set_pdmux_status(False)
            self._sync_all()
            self._reset_split(pfb)

            base = ev()
            base.record(ds)
            ps.wait_event(base)  # base precedes all work on both streams: elapsed times >= 0
            chunks, pending, over, other = [], deque(), [], []

            def launch_chunk():
                if pfb.split_index >= L:
                    self._reset_split(pfb)  # restart: same KV slots, idempotent
                with torch.cuda.stream(ps):
                    set_pdmux_status(True)
                    s, e = ev(), ev()
                    s.record(ps)
                    self._launch_layers(pfb, min(lpl, L - pfb.split_index))
                    e.record(ps)
                    set_pdmux_status(False)
                chunks.append((s, e))

            def launch_decode():
                with torch.cuda.stream(ds):
                    s, e = ev(), ev()
                    s.record(ds)
                    mr.forward(dfb)
                    e.record(ds)
                pending.append((s, e))

            def classify():
                done = []
                while pending and pending[0][1].query():
                    done.append(pending.popleft())
                if not done:
                    return
                # Queried after the decode ends: a launch still running now ends after them.
                iv = []
                for s, e in chunks:
                    if not s.query():
                        break
                    iv.append((base.elapsed_time(s), base.elapsed_time(e) if e.query() else INF))
                merged = merge_intervals(iv)
                for s, e in done:
                    ts, te = base.elapsed_time(s), base.elapsed_time(e)
                    (over if inside(ts, te, merged) else other).append(te - ts)

            t0 = time.monotonic()
            while len(over) < min_overlap and time.monotonic() - t0 < max_wall_s:
                busy = False
                if sum(1 for _, e in chunks[-2:] if not e.query()) < 2:
                    launch_chunk()
                    busy = True
                if len(pending) < 2:
                    launch_decode()
                    busy = True
                classify()
                if not busy:
                    time.sleep(5e-5)
            self._sync_all()
            classify()
            wall = time.monotonic() - t0
            launch_ms = [s.elapsed_time(e) for s, e in chunks]
            del dbatch, dfb, pbatch, pfb
        if len(over) < 3:
            raise CellSkipped(f"only {len(over)} decode iterations overlapped the prefill in {wall:.1f} s "
                              f"({len(other)} did not)")
        return CorunResult(median(solo), median(over), solo, over, other, len(chunks),
                           median(launch_ms) if launch_ms else None, lpl, wall)

    def corun(self, prefill_reqs: Sequence[tuple[int, int]], decode_bs: int, decode_reused: int, cfg,
              **kw) -> tuple[float, float]:
        """(decode_solo_ms, decode_corun_ms)."""
        r = self.corun_detailed(prefill_reqs, decode_bs, decode_reused, cfg, **kw)
        return r.decode_solo_ms, r.decode_corun_ms

    def monolithic_vs_layerwise(self, n_tokens: int = 8192, repeats: int = 10, warmup: int = 2) -> dict:
        """One n-token prefill on the full GPU: a monolithic EXTEND forward vs L single-layer
        SPLIT_PREFILL launches (alternating, medians). The engine issue requires <= 1.5 %."""
        import torch
        from sglang.srt.distributed.parallel_state import set_pdmux_status

        cfg = self.parts.full_prefill
        ps, _ = self._select(cfg)
        self._check_capacity(2 * n_tokens, 2)
        mr = self.model_runner
        mono, split = [], []
        with self._cell(), torch.inference_mode():
            b1, fb_mono = self._extend_batch(self._prefill_reqs([(n_tokens, 0)]), split=False)
            b2, fb_split = self._extend_batch(self._prefill_reqs([(n_tokens, 0)]), split=True)
            torch.cuda.synchronize()
            with torch.cuda.stream(ps):
                set_pdmux_status(True)
                for _ in range(warmup):
                    mr.forward(fb_mono)
                    self._run_split(fb_split, 1)
                pairs = []
                for i in range(repeats):
                    order = ("mono", "split") if i % 2 == 0 else ("split", "mono")
                    for kind in order:
                        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                        s.record(ps)
                        if kind == "mono":
                            mr.forward(fb_mono)
                        else:
                            self._run_split(fb_split, 1)
                        e.record(ps)
                        pairs.append((kind, s, e))
                set_pdmux_status(False)
            ps.synchronize()
            for kind, s, e in pairs:
                (mono if kind == "mono" else split).append(s.elapsed_time(e))
            del b1, b2, fb_mono, fb_split
        m, s_ = median(mono), median(split)
        return {"n_tokens": n_tokens, "launches": self.num_layers, "monolithic_ms": m, "layerwise_ms": s_,
                "overhead_pct": overhead_pct(m, s_), "monolithic_samples": mono, "layerwise_samples": split,
                "repeats": repeats, "limit_pct": 1.5}

    # ------------------------------------------------------------------ facts for meta.json
    def facts(self) -> dict:
        import torch

        import sglang

        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        return {
            "gpu_name": torch.cuda.get_device_name(),
            "sm_count": int(self.total_sms),
            "device_multiprocessors": int(props.multi_processor_count),
            "gpu_memory_gib": round(props.total_memory / 2**30, 1),
            "versions": {"sglang": getattr(sglang, "__version__", "unknown"), "torch": torch.__version__,
                         "cuda": torch.version.cuda},
            "attention_backend": self.attention_backend,
            "kv_pool_tokens": self.kv_pool_tokens,
            "request_slots": self.max_requests,
            "mem_fraction_static": self.server_args.mem_fraction_static,
            "capture_bs": self.capture_bs,
            "stream_groups": [c.label() for c in self.cfgs],
            "prefix_mode": self.prefix_mode,
            # solo prefill rows time the GPU, with the host held ahead (prefill_samples)
            "prefill_timing": "gpu",
            "timings_s": {k: round(v, 2) for k, v in self.timings.items()},
            **self._decode_occupancy(),
        }

    def _decode_occupancy(self) -> dict:
        """meta.json's decode_blocks_per_sm (the triton decode kernel's occupancy, the fit's k); {}
        with a warning if it cannot be measured: the fit then chooses k from the rows. Other
        backends' decode kernels are not that kernel: {}."""
        import json

        if self.attention_backend != "triton":
            return {}

        from profiling.decode_kernel import occupancy

        try:
            occ = occupancy(json.loads((self.model_dir / "config.json").read_text()))
        except Exception as e:  # noqa: BLE001 - a profile run is too costly to lose to this
            logger.warning("decode kernel occupancy not measured (%s): the fit will choose k from the rows", e)
            return {}
        return {"decode_blocks_per_sm": occ["blocks_per_sm"], "decode_kernel": occ}
