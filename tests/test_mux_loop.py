"""The multiplexed loop driven end to end on the CPU: SGLang's Scheduler, its batches, CUDA
streams and events are stand-ins that log every call, and `torch` / `sglang` are fake modules in
sys.modules. The server's own entry points run (`init_mux`, then `mux_event_loop` until the
scheduler asks to exit), so these tests pin down what the GPU smoke run relies on: which SGLang
calls the loop makes, in which order, on which streams, and what it writes to the timeline."""

import contextlib
import json
import os
import sys
import types
from types import SimpleNamespace as NS

import pytest

from sglang_mux import scheduler_loop
from sglang_mux.partitions import PartitionConfig
from sglang_mux.policy import DecodePlan, FusedPlan, SpatialPlan
from sglang_mux.estimator import PrefillReq
from sglang_mux.partitions import full_modes, partition_configs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.path.join(ROOT, "launch", "models", "llama-3.1-8b")
LAYERS = 32


class World:
    """The call log and the fake GPU clock (each event record advances it by 1 ms)."""

    def __init__(self):
        self.log: list[str] = []
        self.t = 0.0
        self.events = 0
        self.slow: set[str] = set()  # events not complete until synchronized (a chunk still running)
        self.event_ms = 1.0

    def __call__(self, *parts) -> None:
        self.log.append(" ".join(str(p) for p in parts))


class Stream:
    def __init__(self, w: World, name: str):
        self.w, self.name = w, name

    def wait_event(self, ev):
        self.w("wait_event", self.name, ev.name)

    def wait_stream(self, other):
        self.w("wait_stream", self.name, other.name)

    def synchronize(self):
        self.w("synchronize", self.name)


class Event:
    def __init__(self, w: World, enable_timing=False):
        w.events += 1
        self.w, self.name, self.timing, self.t = w, f"ev{w.events}", enable_timing, None

    def record(self, stream):
        self.w.t += self.w.event_ms
        self.t = self.w.t
        self.w("record", self.name, stream.name)

    def query(self):
        return self.t is not None and self.name not in self.w.slow

    def elapsed_time(self, other):
        return other.t - self.t

    def synchronize(self):
        self.w("event_synchronize", self.name)
        self.w.slow.discard(self.name)


def fake_modules(w: World) -> dict[str, types.ModuleType]:
    """torch and the sglang modules the loop imports, as far as the loop uses them."""
    current = Stream(w, "current")

    @contextlib.contextmanager
    def stream(s):
        w("enter_stream", s.name)
        yield
        w("exit_stream", s.name)

    torch = types.ModuleType("torch")
    torch.cuda = NS(Event=lambda enable_timing=False: Event(w, enable_timing), stream=stream,
                    current_stream=lambda: current, empty_cache=lambda: w("empty_cache"),
                    mem_get_info=lambda: (20 * 2**30, int(79.18 * 2**30)), memory_stats=lambda: {},
                    get_device_name=lambda i: "NVIDIA H100 80GB HBM3")
    torch.inference_mode = contextlib.nullcontext
    mods = {"torch": torch}
    for name in ("sglang", "sglang.srt", "sglang.srt.multiplex", "sglang.srt.distributed",
                 "sglang.srt.model_executor"):
        mods[name] = types.ModuleType(name)
    ctx = types.ModuleType("sglang.srt.multiplex.pdmux_context")
    ctx.STREAM_GROUPS, ctx.SM_COUNTS = None, None
    ctx.set_current_stream_idx = lambda i: w("set_current_stream_idx", i)
    ps = types.ModuleType("sglang.srt.distributed.parallel_state")
    ps.set_pdmux_status = lambda on: w("set_pdmux_status", on)
    fbi = types.ModuleType("sglang.srt.model_executor.forward_batch_info")
    fbi.ForwardMode = NS(SPLIT_PREFILL="SPLIT_PREFILL")
    mods["sglang.srt.multiplex"].pdmux_context = ctx
    mods["sglang.srt.distributed"].parallel_state = ps
    mods["sglang.srt.model_executor"].forward_batch_info = fbi
    mods.update({"sglang.srt.multiplex.pdmux_context": ctx, "sglang.srt.distributed.parallel_state": ps,
                 "sglang.srt.model_executor.forward_batch_info": fbi})
    return mods


class Parts:
    """GreenPartitionSet's interface: named stand-in streams, the full modes sharing one pair."""

    def __init__(self, w: World, device_index=0, granularity=16):
        self.total_sms = 132
        self.configs = partition_configs(132, granularity)
        self.full_prefill, self.full_decode = full_modes(132)
        full = (Stream(w, "Pfull"), Stream(w, "Dfull"))
        self._streams = {c: (Stream(w, f"P{c.prefill_sms}"), Stream(w, f"D{c.decode_sms}")) for c in self.configs}
        self._streams.update({self.full_prefill: full, self.full_decode: full})
        w("green_partitions", device_index, granularity)

    def streams(self, cfg):
        return self._streams[cfg]

    def all_configs(self):
        return [self.full_prefill, *sorted(self.configs, key=lambda c: -c.prefill_sms), self.full_decode]


class Estimator:
    """The real estimator of the synthetic table, logging what the loop feeds back."""

    def __init__(self, w: World, real):
        self.w, self.real = w, real

    def __getattr__(self, name):
        return getattr(self.real, name)

    def observe_prefill_launch(self, layers, host_ms):
        self.w("est.observe_prefill_launch", layers)
        return self.real.observe_prefill_launch(layers, host_ms)

    def observe_prefill(self, psms, reqs, ms):
        self.w("est.observe_prefill", psms, [(r.n, r.r) for r in reqs], ms)
        return self.real.observe_prefill(psms, reqs, ms)

    def observe_decode(self, *a, **kw):
        self.w("est.observe_decode", *a, *sorted(kw.items()))
        return self.real.observe_decode(*a, **kw)


def req(rid, prompt, output=0):
    return NS(rid=rid, origin_input_ids=[0] * prompt, output_ids=[0] * output, fill_ids=[0] * prompt,
              prefix_indices=[])


class Batch:
    def __init__(self, w: World, name: str, reqs):
        self.w, self.name, self.reqs = w, name, list(reqs)
        self.forward_mode = None
        self.split_forward_batch = f"forward_batch:{name}"  # the hidden state a paused prefill keeps

    @property
    def seq_lens_sum(self):
        return sum(len(r.origin_input_ids) + len(r.output_ids) for r in self.reqs)

    def batch_size(self):
        return len(self.reqs)

    def is_empty(self):
        return not self.reqs

    def filter_batch(self, chunked_req_to_exclude=()):
        out = [r.rid for r in chunked_req_to_exclude]
        self.w("filter_batch", self.name, *(["excluding", *out] if out else []))
        self.reqs = [r for r in self.reqs if r.rid not in out]

    def merge_batch(self, other):
        self.w("merge_batch", self.name, other.name)
        self.reqs += other.reqs

    def copy(self):
        """SGLang's copy of a launched batch: what its result is processed against."""
        c = Batch(self.w, self.name, self.reqs)
        c.forward_mode, c.extend_lens = self.forward_mode, getattr(self, "extend_lens", None)
        return c


class Scheduler:
    """SGLang's Scheduler as far as the loop uses it; `touched` collects every attribute the
    loop reads or writes (not the test's own set-up)."""

    def __init__(self, w: World, waiting, running, arrivals=()):
        object.__setattr__(self, "touched", set())
        object.__setattr__(self, "tracking", False)
        self.w = w
        self.gpu_id = 0
        self.server_args = NS(model_path=MODEL, attention_backend="fa3", mem_fraction_static=0.85)
        self.max_req_input_len, self.max_prefill_tokens = 131071, 16384
        self.model_config = NS(num_hidden_layers=LAYERS)
        self.waiting_queue = list(waiting)
        self.running_batch = running
        self.chunked_req, self.chunked_prefill_size, self.is_mixed_chunk = None, None, False
        self.gracefully_exit = False
        arrivals = iter(arrivals)
        self.request_receiver = NS(recv_requests=lambda: w("recv_requests") or next(arrivals, []))
        runner = NS(update_decode_attn_backend=lambda i: w("update_decode_attn_backend", i),
                    attn_backend=NS(init_forward_metadata=lambda fb: w("init_forward_metadata", fb)))
        self.tp_worker = NS(model_runner=runner)
        self.forward_stream = Stream(w, "fwd")  # SGLang's own, full GPU (overlap mode launches there)
        self.enable_overlap, self.batch_result_processor = False, NS(enable_overlap=False)
        self.prefill_names = iter(["prefill1", "prefill2", "prefill3", "prefill4"])
        object.__setattr__(self, "tracking", True)

    def __getattribute__(self, name):
        if name not in ("untracked", "touched") and not name.startswith("__") \
                and object.__getattribute__(self, "tracking"):
            object.__getattribute__(self, "touched").add(name)
        return object.__getattribute__(self, name)

    def __setattr__(self, name, value):
        if object.__getattribute__(self, "tracking"):
            self.touched.add(name)
        object.__setattr__(self, name, value)

    def untracked(self, name):
        return object.__getattribute__(self, name)

    def process_input_requests(self, reqs):
        self.untracked("w")("process_input_requests", len(reqs))
        self.untracked("waiting_queue").extend(reqs)

    def get_new_batch_prefill(self, running):
        w = self.untracked("w")
        chosen = list(self.untracked("waiting_queue"))
        w("get_new_batch_prefill", [r.rid for r in chosen])
        object.__setattr__(self, "waiting_queue", [])
        batch = Batch(w, next(self.untracked("prefill_names")), chosen) if chosen else None
        return NS(running_batch=running, batch_to_run=batch)

    def get_next_batch_to_run(self, running, last_batch):
        """SGLang's mixed chunk as far as the loop relies on it: the chunked request's rest first,
        then the waiting queue, up to the chunk budget less one token per decode row."""
        u = self.untracked
        chunked, waiting = u("chunked_req"), list(u("waiting_queue"))
        u("w")("get_next_batch_to_run", u("chunked_prefill_size"), u("is_mixed_chunk"),
               chunked.rid if chunked else None, [r.rid for r in waiting],
               last_batch.name if last_batch is not None else None, u("enable_overlap"))
        return u("form_mixed")(u("merge_last")(running, last_batch))

    def merge_last(self, running, last_batch):
        """The last extend batch joins the running batch, the chunked request kept out."""
        chunked = self.untracked("chunked_req")
        if last_batch is not None and getattr(last_batch, "extend_lens", None) is not None \
                and last_batch.forward_mode != "DECODE":
            last_batch.filter_batch(chunked_req_to_exclude=[chunked] if chunked else [])
            if running is None or running.is_empty():
                running = last_batch
            else:
                running.merge_batch(last_batch)
        return running

    def form_mixed(self, running):
        u = self.untracked
        w, chunked, waiting = u("w"), u("chunked_req"), list(u("waiting_queue"))
        decoding = running.reqs if running is not None else []
        room, rows, new_chunked = u("chunked_prefill_size") - len(decoding), [], None
        for r in ([chunked] if chunked else []) + waiting:
            done = r.extend_range.end if r is chunked else 0
            take = min(len(r.origin_input_ids) - done, room)
            if take <= 0:
                break
            new_chunked = r if take < len(r.origin_input_ids) - done else None
            r.extend_range = NS(start=done, end=done + take)
            rows.append((r, take, done))
            room -= take
        object.__setattr__(self, "waiting_queue", [r for r in waiting if all(r is not x for x, _, _ in rows)])
        object.__setattr__(self, "chunked_req", new_chunked)
        if not rows:  # no new batch: SGLang runs the running batch's decode
            running = self.update_running_batch(running)
            return NS(batch_to_run=running if not running.is_empty() else None, running_batch=running)
        batch = Batch(w, next(u("prefill_names")), [r for r, _, _ in rows] + decoding)
        batch.extend_lens = [n for _, n, _ in rows] + [1] * len(decoding)
        batch.prefix_lens = [d for _, _, d in rows] + [len(r.origin_input_ids) + len(r.output_ids) - 1
                                                         for r in decoding]
        return NS(batch_to_run=batch, running_batch=Batch(w, "empty", []))

    def update_running_batch(self, batch):
        self.untracked("w")("update_running_batch", batch.name, batch.batch_size())
        batch.forward_mode = "DECODE"  # as ScheduleBatch.prepare_for_decode does
        return batch

    def run_batch(self, batch):
        extra = [batch.forward_mode, batch.split_index, batch.split_forward_count] \
            if batch.forward_mode == "SPLIT_PREFILL" else []
        self.untracked("w")("run_batch", batch.name, batch.batch_size(), *extra)
        return f"result:{batch.name}"

    def process_batch_result(self, batch, result):
        self.untracked("w")("process_batch_result", batch.name, result)

    def _apply_war_barrier(self):
        self.untracked("w")("war_barrier")

    def on_idle(self):
        self.untracked("w")("on_idle")


class Script:
    """The policy: hands out the given plans in turn; the last one also asks the scheduler to exit."""

    fuses_long_prompts = False  # as the dispatcher: prompts one prefill cannot hold are refused
    layerwise_max_tokens = None

    def __init__(self, sched, plans):
        self.sched, self.plans, self.snaps = sched, list(plans), []

    def queue_key(self, arrival_s, prompt_tokens):  # first come, first served
        return None

    def plan(self, snap):
        self.snaps.append(snap)
        if len(self.plans) == 1:
            object.__setattr__(self.sched, "gracefully_exit", True)
        return self.plans.pop(0)


def plan(d, p, layers, rids=(), reason="test", preempt=False):
    """A decode plan where nothing launches prefill on prefill SMs, else a spatial one."""
    if p == 0 and layers == 0 and not rids:
        return DecodePlan(partition=PartitionConfig(d, p), t_decode_worst_ms=10.0, reason=reason)
    return SpatialPlan(partition=PartitionConfig(d, p), t_decode_worst_ms=10.0, t_prefill_ms=20.0,
                       prefill_layers=layers, new_prefill_rids=tuple(rids), preempt=preempt, reason=reason)


def serve(monkeypatch, tmp_path, good, plans, *, waiting, running, arrivals=(), mux_flags=(), slow=(),
          wants_decode_contexts=False, event_ms=1.0, consensus=None, ps=None, tp_group=None):
    """init_mux + mux_event_loop on stand-ins, as SGLang's scheduler process calls them;
    ``consensus(sched)``: the TP consensus to use instead of a single rank's; ``tp_group``: set
    between the two, where SGLang creates it."""
    from sglang_mux import estimator as est_mod
    from sglang_mux import green_ctx
    from sglang_mux.mux_args import ENV_VAR, split_argv

    w = World()
    w.slow.update(slow)
    w.event_ms = event_ms
    for name, mod in fake_modules(w).items():
        monkeypatch.setitem(sys.modules, name, mod)
    monkeypatch.setattr(green_ctx, "GreenPartitionSet", lambda device_index, granularity: Parts(w, device_index,
                                                                                                granularity))
    real = est_mod.Estimator.from_table(good)
    monkeypatch.setattr(est_mod.Estimator, "for_model", classmethod(lambda cls, *a, **kw: Estimator(w, real)))
    # the loop as under the dispatcher (the plans are scripted) unless a test names the hybrid
    args = split_argv(["--mux-timeline", str(tmp_path / "timeline.jsonl"), "--mux-policy", "dispatcher",
                       *mux_flags])[0]
    from dataclasses import asdict

    monkeypatch.setenv(ENV_VAR, json.dumps(asdict(args)))
    sched = Scheduler(w, waiting, running(w), arrivals)
    if ps is not None:
        object.__setattr__(sched, "ps", ps)
    scheduler_loop.init_mux(sched)
    if tp_group is not None:
        object.__setattr__(sched, "tp_group", tp_group)
    script = Script(sched, plans)
    script.wants_decode_contexts = wants_decode_contexts  # as the hybrid policy asks
    sched.untracked("_mux").policy = script
    if consensus is not None:
        c = sched.untracked("_mux").consensus = consensus(sched)
        if not c.leader:
            sched.untracked("_mux").policy = NS(plan=lambda snap: pytest.fail("a TP follower never plans"),
                                                wants_decode_contexts=False, fuses_long_prompts=False,
                                                queue_key=lambda arrival_s, prompt_tokens: None)
    w("--- loop")
    scheduler_loop.mux_event_loop(sched)
    from sglang_mux.mux_metrics import replica_path

    dp = ps.dp_rank if ps is not None and ps.dp_size > 1 else None
    rows = [json.loads(line) for line in open(replica_path(str(tmp_path / "timeline.jsonl"), dp))]
    return w.log, sched, rows, script


# What the loop touches on SGLang's Scheduler at TP 1 (the set is the contract with SGLang 0.5.16;
# at TP > 1 also ``tp_group``, joined when the loop starts).
SCHEDULER_ATTRIBUTES = {
    "_mux", "gpu_id", "server_args", "stream_groups", "sm_counts", "real_sm_group_num", "split_prefill_batch",
    "gracefully_exit", "process_input_requests", "request_receiver", "running_batch", "waiting_queue",
    "get_new_batch_prefill", "update_running_batch", "run_batch", "process_batch_result", "on_idle",
    "last_batch", "model_config", "tp_worker", "max_req_input_len", "max_prefill_tokens", "chunked_req", "ps",
}

# One decode batch of two requests; a 100-token prompt arrives. Iteration 1: the whole prefill
# (32 layers) runs beside the decode on D48/P84; iteration 2: it has finished, joins the decode
# batch before that iteration's decode, which runs alone on the full GPU.
MUX_THEN_MERGE = [
    "green_partitions 0 16", "set_current_stream_idx 0", "--- loop", "empty_cache",
    # iteration 1
    "recv_requests", "process_input_requests 0", "get_new_batch_prefill ['p1']",
    "record ev1 Pfull", "wait_event P84 ev1", "record ev2 Dfull", "wait_event D48 ev2",
    "record ev3 Dfull", "wait_event P84 ev3", "set_current_stream_idx 3", "update_decode_attn_backend 3",
    "enter_stream D48", "set_pdmux_status False", "update_running_batch decode 2",
    "record ev4 D48", "run_batch decode 2", "record ev5 D48", "exit_stream D48",
    "enter_stream P84", "set_pdmux_status True", "record ev6 P84",
    "run_batch prefill1 1 SPLIT_PREFILL 0 32", "record ev7 P84", "est.observe_prefill_launch 32",
    "set_pdmux_status False", "exit_stream P84",
    "enter_stream D48", "synchronize D48", "process_batch_result decode result:decode", "exit_stream D48",
    "est.observe_decode 48 2 2201 100 0 1.0 ('max_reused', 1199)",
    # iteration 2
    "recv_requests", "process_input_requests 0",
    "est.observe_prefill 84 [(100, 0)] 1.0",
    "process_batch_result prefill1 result:prefill1", "filter_batch prefill1", "merge_batch decode prefill1",
    "record ev8 P84", "wait_event Pfull ev8", "record ev9 D48", "wait_event Dfull ev9",
    "record ev10 D48", "wait_event Pfull ev10", "set_current_stream_idx 8", "update_decode_attn_backend 8",
    "enter_stream Dfull", "set_pdmux_status False", "update_running_batch decode 3",
    "record ev11 Dfull", "run_batch decode 3", "record ev12 Dfull", "exit_stream Dfull",
    "enter_stream Dfull", "synchronize Dfull", "process_batch_result decode result:decode", "exit_stream Dfull",
    "est.observe_decode 132 3 2300 0 0 1.0 ('max_reused', 1199)",
]


def test_a_prefill_runs_beside_decode_then_joins_the_decode_batch(monkeypatch, tmp_path, good):
    log, sched, rows, script = serve(
        monkeypatch, tmp_path, good, [plan(48, 84, LAYERS, ["p1"]), plan(132, 0, 0, reason="decode-only")],
        waiting=[req("p1", 100)], running=lambda w: Batch(w, "decode", [req("d1", 1000, 3), req("d2", 1100, 100)]))
    assert log == MUX_THEN_MERGE
    # decode launched before the prefill layers, on their own partition's streams
    assert log.index("run_batch decode 2") < log.index("run_batch prefill1 1 SPLIT_PREFILL 0 32")
    # the finished prefill is merged before the next decode
    assert log.index("merge_batch decode prefill1") < log.index("run_batch decode 3")
    assert sched.untracked("touched") == SCHEDULER_ATTRIBUTES - {"on_idle"}
    assert sched.untracked("stream_groups") == sys.modules["sglang.srt.multiplex.pdmux_context"].STREAM_GROUPS
    assert sched.untracked("real_sm_group_num") == 9 and sched.untracked("split_prefill_batch") is None
    assert sched.untracked("server_args").sm_group_num == 9
    assert sched.untracked("last_batch").name == "decode" and sched.untracked("waiting_queue") == []
    # the policy saw the prompt waiting, then the three requests decoding
    assert [w.rid for w in script.snaps[0].waiting] == ["p1"] and script.snaps[0].decode_bs == 2
    assert script.snaps[1].decode_bs == 3 and not script.snaps[1].waiting
    # one timeline row per decode iteration, with the estimate's inputs and the host's phases
    assert [(r["decode_sms"], r["prefill_sms"], r["decode_bs"], r["prefill_new"], r["measured_decode_ms"])
            for r in rows] == [(48, 84, 2, 100, 1.0), (132, 0, 3, 0, 1.0)]
    assert "guard" in rows[0] and "guard" not in rows[1]
    assert set(rows[0]["host_ms"]) >= {"recv", "poll", "plan", "switch", "decode_launch", "prefill_launch",
                                       "sync", "result"}
    assert "book" in rows[1]["host_ms"]
    # the finished batch's wall time against its plan's T_P
    (booked, wall), = sched.untracked("_mux").estimator.prefill_wall._obs
    assert booked == 20.0 and wall >= 0.0
    assert rows[0]["prefill_wall"] == 1.0 and "prefill_wall" not in rows[1]


# --mux-defer-prefill-start: the new prefill batch is formed after the decode launch, and the
# prefill stream waits for its inputs (copied on the current stream) before its first layers.
DEFERRED = [
    "green_partitions 0 16", "set_current_stream_idx 0", "--- loop", "empty_cache",
    "recv_requests", "process_input_requests 0",
    "record ev1 Pfull", "wait_event P84 ev1", "record ev2 Dfull", "wait_event D48 ev2",
    "record ev3 Dfull", "wait_event P84 ev3", "set_current_stream_idx 3", "update_decode_attn_backend 3",
    "enter_stream D48", "set_pdmux_status False", "update_running_batch decode 2",
    "record ev4 D48", "run_batch decode 2", "record ev5 D48", "exit_stream D48",
    "get_new_batch_prefill ['p1']", "wait_stream P84 current",
    "enter_stream P84", "set_pdmux_status True", "record ev6 P84",
    "run_batch prefill1 1 SPLIT_PREFILL 0 16", "record ev7 P84", "est.observe_prefill_launch 16",
    "set_pdmux_status False", "exit_stream P84",
    "enter_stream D48", "synchronize D48", "process_batch_result decode result:decode", "exit_stream D48",
    "est.observe_decode 48 2 2201 100 0 1.0 ('max_reused', 1199)",
]


def test_a_deferred_prefill_start_follows_the_decode_launch(monkeypatch, tmp_path, good):
    log, sched, rows, _ = serve(
        monkeypatch, tmp_path, good, [plan(48, 84, 16, ["p1"])], mux_flags=["--mux-defer-prefill-start"],
        waiting=[req("p1", 100)], running=lambda w: Batch(w, "decode", [req("d1", 1000, 3), req("d2", 1100, 100)]))
    assert log == DEFERRED
    assert log.index("run_batch decode 2") < log.index("get_new_batch_prefill ['p1']")
    assert len(rows) == 1 and "prefill_start" in rows[0]["host_ms"]
    assert sched.untracked("_mux").layerwise.active.batch.split_index == 16


# Nothing to run: SGLang's on_idle. Then a prompt arrives and prefills alone on the full GPU (the
# decision gets its own timeline row); once finished it is the decode batch, decoding alone.
IDLE_PREFILL_DECODE = [
    "green_partitions 0 16", "set_current_stream_idx 0", "--- loop", "empty_cache",
    # iteration 1: nothing to run
    "recv_requests", "process_input_requests 0", "on_idle",
    # iteration 2: the prompt arrives; prefill-only runs on the full GPU (stream group 0, current)
    "recv_requests", "process_input_requests 1", "get_new_batch_prefill ['p1']",
    "enter_stream Pfull", "set_pdmux_status True", "record ev1 Pfull",
    "run_batch prefill1 1 SPLIT_PREFILL 0 32", "record ev2 Pfull", "est.observe_prefill_launch 32",
    "set_pdmux_status False", "exit_stream Pfull",
    # iteration 3: its result, then its first decode on the full GPU (the full modes share streams)
    "recv_requests", "process_input_requests 0", "est.observe_prefill 132 [(100, 0)] 1.0",
    "process_batch_result prefill1 result:prefill1", "filter_batch prefill1",
    "record ev3 Dfull", "wait_event Pfull ev3", "set_current_stream_idx 8", "update_decode_attn_backend 8",
    "enter_stream Dfull", "set_pdmux_status False", "update_running_batch prefill1 1",
    "record ev4 Dfull", "run_batch prefill1 1", "record ev5 Dfull", "exit_stream Dfull",
    "enter_stream Dfull", "synchronize Dfull", "process_batch_result prefill1 result:prefill1", "exit_stream Dfull",
    "est.observe_decode 132 1 99 0 0 1.0 ('max_reused', 99)",
]


def test_idle_then_prefill_alone_then_its_first_decode(monkeypatch, tmp_path, good):
    log, sched, rows, script = serve(
        monkeypatch, tmp_path, good, [plan(132, 0, 0, reason="idle"),
                                      plan(0, 132, LAYERS, ["p1"], reason="prefill-only"),
                                      plan(132, 0, 0, reason="decode-only")],
        waiting=[], running=lambda w: None, arrivals=[[], [req("p1", 100)]])
    assert log == IDLE_PREFILL_DECODE
    assert sched.untracked("touched") == SCHEDULER_ATTRIBUTES
    assert log.index("on_idle") < log.index("process_input_requests 1")
    assert sched.untracked("running_batch").name == "prefill1"  # the finished prefill is the decode batch
    assert [(r["decode_bs"], r["prefill_sms"], r["reason"]) for r in rows] == [(0, 132, "prefill-only"),
                                                                               (1, 0, "decode-only")]
    assert rows[0]["waiting"] == 1 and rows[0]["head"][0] == 100  # what the policy was shown waiting
    assert "waiting" not in rows[1] and "chunked" not in rows[1]
    assert sched.untracked("last_batch").name == "prefill1"


# Preemption: a long prefill runs 8 layers; a short prompt arrives and preempts it (its launched
# layers are waited for first, it keeps its state), runs whole and joins the decode batch; then the
# long one resumes at layer 8 with its attention metadata rebuilt.
PREEMPT_RESUME = [
    "green_partitions 0 16", "set_current_stream_idx 0", "--- loop", "empty_cache",
    # iteration 1: the long prompt's first 8 layers beside the decode
    "recv_requests", "process_input_requests 0", "get_new_batch_prefill ['long']", "record ev1 Pfull",
    "wait_event P84 ev1", "record ev2 Dfull", "wait_event D48 ev2", "record ev3 Dfull", "wait_event P84 ev3",
    "set_current_stream_idx 3", "update_decode_attn_backend 3", "enter_stream D48", "set_pdmux_status False",
    "update_running_batch decode 2", "record ev4 D48", "run_batch decode 2", "record ev5 D48", "exit_stream D48",
    "enter_stream P84", "set_pdmux_status True", "record ev6 P84", "run_batch prefill1 1 SPLIT_PREFILL 0 8",
    "record ev7 P84", "est.observe_prefill_launch 8", "set_pdmux_status False", "exit_stream P84",
    "enter_stream D48", "synchronize D48", "process_batch_result decode result:decode", "exit_stream D48",
    "est.observe_decode 48 2 2201 4000 0 1.0 ('max_reused', 1199)",
    # iteration 2: the short prompt preempts: the long one's launched layers are waited for
    "recv_requests", "process_input_requests 1", "event_synchronize ev7", "est.observe_prefill 84 [(4000, 0)] 4.0",
    "get_new_batch_prefill ['short']", "enter_stream D48", "set_pdmux_status False",
    "update_running_batch decode 2", "record ev8 D48", "run_batch decode 2", "record ev9 D48", "exit_stream D48",
    "enter_stream P84", "set_pdmux_status True", "record ev10 P84", "run_batch prefill2 1 SPLIT_PREFILL 0 32",
    "record ev11 P84", "est.observe_prefill_launch 32", "set_pdmux_status False", "exit_stream P84",
    "enter_stream D48", "synchronize D48", "process_batch_result decode result:decode", "exit_stream D48",
    "est.observe_decode 48 2 2201 50 0 1.0 ('max_reused', 1199)",
    # iteration 3: the short one joins the decode batch; the long one resumes at layer 8
    "recv_requests", "process_input_requests 0", "est.observe_prefill 84 [(50, 0)] 1.0",
    "process_batch_result prefill2 result:prefill2", "filter_batch prefill2", "merge_batch decode prefill2",
    "enter_stream D48", "set_pdmux_status False", "update_running_batch decode 3", "record ev12 D48",
    "run_batch decode 3", "record ev13 D48", "exit_stream D48", "enter_stream P84", "set_pdmux_status True",
    "record ev14 P84", "init_forward_metadata forward_batch:prefill1", "run_batch prefill1 1 SPLIT_PREFILL 8 24",
    "record ev15 P84", "est.observe_prefill_launch 24", "set_pdmux_status False", "exit_stream P84",
    "enter_stream D48", "synchronize D48", "process_batch_result decode result:decode", "exit_stream D48",
    "est.observe_decode 48 3 2250 4000 0 1.0 ('max_reused', 1199)",
]


def test_a_preempted_prefill_resumes_where_it_stopped(monkeypatch, tmp_path, good):
    log, sched, rows, _ = serve(
        monkeypatch, tmp_path, good, [plan(48, 84, 8, ["long"]), plan(48, 84, LAYERS, ["short"], preempt=True),
                                      plan(48, 84, 24)],
        waiting=[req("long", 4000)], arrivals=[[], [req("short", 50)]], slow=["ev7"],
        running=lambda w: Batch(w, "decode", [req("d1", 1000, 3), req("d2", 1100, 100)]))
    assert log == PREEMPT_RESUME
    assert log.index("event_synchronize ev7") < log.index("get_new_batch_prefill ['short']")
    assert log.index("merge_batch decode prefill2") < log.index("init_forward_metadata forward_batch:prefill1")
    assert sched.untracked("_mux").layerwise.paused is None and sched.untracked("_mux").layerwise.active.batch.name == "prefill1"
    assert [r["prefill_new"] for r in rows] == [4000, 50, 4000]
    assert len(sched.untracked("_mux").estimator.prefill_wall._obs) == 1  # the preemptor's; the paused one runs on


# The hybrid policy's fused plans: SGLang's own mixed chunk on the whole GPU, run as SGLang's
# overlap loop runs it. A 600-token prompt runs as a 400-token chunk with the two decode rows, then
# its last 200 with them; in between it is SGLang's chunked request, kept out of the running batch.
# Each fused batch is launched before the last one's result is processed; a decode plan ends the
# streak (the last result processed and merged) and is made again. Then the three decode alone.
# A streak's first fused iteration (400 prompt tokens of p1 beside two decode rows): the full GPU;
# SGLang's forward stream after the partitions' work; chunk budget 400 + 2 decode rows, mixing on,
# only the chunk's request shown, formed with nothing in flight (overlap off), then launched in
# overlap mode; nothing to process yet.
FIRST_FUSED = [
    "recv_requests", "process_input_requests 0",
    "record ev1 Dfull", "wait_event Pfull ev1", "set_current_stream_idx 8", "update_decode_attn_backend 8",
    "wait_stream fwd Pfull", "wait_stream fwd Dfull", "set_pdmux_status False",
    "get_next_batch_to_run 402 True None ['p1'] None False",
    "record ev2 fwd", "run_batch prefill1 3", "war_barrier", "record ev3 fwd",
]
FUSED = [
    "green_partitions 0 16", "set_current_stream_idx 0", "--- loop", "empty_cache",
    *FIRST_FUSED,  # iteration 1
    # iteration 2: the chunked request's last 200 tokens; SGLang merges the first batch into the
    # running batch (the chunked request kept out), the budget counts its two decode rows; only
    # once this one is launched is the first one's result processed
    "recv_requests", "process_input_requests 0", "set_pdmux_status False",
    "get_next_batch_to_run 202 True p1 [] prefill1 True", "filter_batch prefill1 excluding p1",
    "record ev4 fwd", "run_batch prefill2 3", "war_barrier", "record ev5 fwd",
    "process_batch_result prefill1 result:prefill1",
    # iteration 3: a decode plan ends the streak: the second result, its rows into the running
    # batch, the partitions' streams after the forward stream; planned again, decode alone
    "recv_requests", "process_input_requests 0",
    "process_batch_result prefill2 result:prefill2", "filter_batch prefill2",
    "wait_stream Pfull fwd", "wait_stream Dfull fwd",
    "enter_stream Dfull", "set_pdmux_status False", "update_running_batch prefill2 3",
    "record ev6 Dfull", "run_batch prefill2 3", "record ev7 Dfull", "exit_stream Dfull",
    "enter_stream Dfull", "synchronize Dfull", "process_batch_result prefill2 result:prefill2", "exit_stream Dfull",
    "est.observe_decode 132 3 2800 0 0 15.0 ('max_reused', 1199)",
]


def fused(chunk):
    return FusedPlan(chunk=tuple(chunk), t_ms=5.0, total_sms=132)


def test_fused_plans_run_sglangs_mixed_chunk_on_the_whole_gpu(monkeypatch, tmp_path, good):
    log, sched, rows, script = serve(
        monkeypatch, tmp_path, good,
        [fused([("p1", 400)]), fused([("p1", 200)]), plan(132, 0, 0, reason="decode-only"),
         plan(132, 0, 0, reason="decode-only")],
        mux_flags=["--mux-policy", "hybrid", "--no-mux-overlap-decode"], waiting=[req("p1", 600)],
        wants_decode_contexts=True, event_ms=15.0,
        running=lambda w: Batch(w, "decode", [req("d1", 1000, 3), req("d2", 1100, 100)]))
    assert log == FUSED
    assert sched.untracked("touched") == SCHEDULER_ATTRIBUTES - {"get_new_batch_prefill", "on_idle", "model_config"} | {
        "get_next_batch_to_run", "chunked_prefill_size", "is_mixed_chunk", "forward_stream", "_apply_war_barrier",
        "enable_overlap", "batch_result_processor", "result_queue", "batch_record_buf", "batch_record_ct"}
    # overlap mode only during the streak: off again, nothing left in flight, its buffers made
    assert sched.untracked("enable_overlap") is False and sched.untracked("batch_result_processor").enable_overlap is False
    assert not sched.untracked("result_queue") and sched.untracked("batch_record_buf") == [None, None]
    assert sched.untracked("_mux").fused.pending is None
    # SGLang's settings are restored after each fused batch is formed (spatial prefills stay whole)
    assert sched.untracked("chunked_prefill_size") is None and sched.untracked("is_mixed_chunk") is False
    assert sched.untracked("chunked_req") is None
    # between the chunks the policy sees the rest as the chunked request, not as waiting
    second = script.snaps[1]
    assert (second.chunked.rid, second.chunked.n, second.chunked.r) == ("p1", 200, 400) and not second.waiting
    assert script.snaps[0].decode_contexts == [1002, 1199] and script.snaps[0].chunked is None
    assert [r.rid for r in sched.untracked("running_batch").reqs] == ["p1", "d1", "d2"]
    # each fused iteration is a timeline row (its extend tokens and measured/priced); the estimator
    # learned a fused correction from them
    assert [(r["reason"], r["decode_bs"], r.get("extend_tokens")) for r in rows] == [
        ("fused", 2, 402), ("fused", 2, 202), ("decode-only", 3, None)]
    # and says what the policy saw: p1 waiting, then p1's rest as the chunked request
    assert rows[0]["head"][0] == 600 and "chunked" not in rows[0]
    assert rows[1]["chunked"][0] == 200 and "waiting" not in rows[1]
    est = sched.untracked("_mux").estimator.real
    solo = [est.fused_base_ms([PrefillReq(400, 0), PrefillReq(1, 1002), PrefillReq(1, 1199)]),
            est.fused_base_ms([PrefillReq(200, 400), PrefillReq(1, 1002), PrefillReq(1, 1199)])]
    assert rows[0]["fused_ratio"] == pytest.approx(15.0 / solo[0], abs=1e-4)  # priced solo before any
    assert rows[0]["prefill_sms"] == 0 and "fused_form" in rows[0]["host_ms"]
    # the served price learned from both: 15 ms at two solo prices is flat, a slope out of bounds,
    # so the price is the median ratio's (or excess's) form
    assert rows[1]["fused_price"]["slope"] == 1.0
    assert rows[1]["fused_price"]["ratio"] == pytest.approx((15.0 / solo[0] + 15.0 / solo[1]) / 2, abs=1e-4)
    assert est.fused_ms([PrefillReq(200, 400)], [1002, 1199]) == pytest.approx(est.fused_price.price(solo[1]))
    assert est.fused_price.price(solo[1]) > solo[1]
    # a fused iteration's host time is budgeted apart from a decode's (the first of each loop has
    # no gap before it): the second fused one went to the fused budget, the decode to its own
    mux = sched.untracked("_mux")
    budgets = mux.gaps.budgets
    assert (budgets.fused._seen, budgets.decode._seen) == (1, 1)
    assert budgets.fused_start is None  # --mux-fused-start-budget is off by default
    # one fused overrun is too few (fewer than 3): the policy is told none and budgets the decode's
    assert not budgets.fused.ready and [s.fused_host_ms for s in script.snaps] == [None] * 4
    # while a fused batch is in flight the decode batch is its rows (SGLang mixed the running batch
    # into it), less the chunked request: the plan made before the drain saw the three as after it
    assert [(s.decode_bs, s.decode_contexts) for s in script.snaps] == [
        (2, [1002, 1199]), (2, [1002, 1199]), (3, [599, 1002, 1199]), (3, [599, 1002, 1199])]
    # a fused plan continues a streak while a fused batch is in flight, and starts one after a drain
    assert [s.fused_streak for s in script.snaps] == [False, True, True, False]
    assert [r.get("fused_streak") for r in rows] == [False, True, None]
    assert "fused_host_ms" in rows[0] and "fused_host_ms" not in rows[2]


# ---- tensor parallelism: every rank runs the leader's decisions -----------------------------

class Leader:
    """The TP leader's consensus, recording what it shares."""
    leader = True

    def __init__(self, sched):
        self.decisions = []

    def share(self, decision):
        self.decisions.append(decision)
        return decision

    def min(self, value):
        return value


class Follower:
    """A TP follower receiving the leader's decisions in turn; the last one ends its loop (the
    leader's ended there too)."""
    leader = False

    def __init__(self, sched, decisions):
        self.sched, self.decisions = sched, list(decisions)

    def share(self, decision):
        assert decision is None
        if len(self.decisions) == 1:
            object.__setattr__(self.sched, "gracefully_exit", True)
        return self.decisions.pop(0)

    def min(self, value):
        return value


@pytest.mark.parametrize("error, named", [
    ("[/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:547] Connection closed by peer [127.0.0.1]:10121", True),
    ("CUDA error: an illegal memory access was encountered", False)])
def test_a_rank_lost_while_receiving_requests_is_named(monkeypatch, tmp_path, good, error, named):
    """At TP, SGLang broadcasts each iteration's new requests from rank 0 over the CPU group, so a
    dead rank often shows there first (two of session 43's three rank kills), before any plan is
    shared: that error names the ranks too. Any other error is raised as it came."""
    from sglang_mux.tp_consensus import TpConsensus

    def receiver():
        raise RuntimeError(error)
        yield  # a generator: the loop draws its arrivals one iteration at a time

    c = TpConsensus("g", rank=0, src=0, broadcast=lambda d, r, g, src: list(d), all_min=lambda v, g: v, ranks=(0, 1))
    want = (r"sglang_mux: TP rank 0 lost the TP group while receiving requests: TP rank 1 ended \(.*Connection "
            r"closed by peer.*\); the server stops") if named else "^CUDA error: an illegal memory access"
    with pytest.raises(RuntimeError, match=want):
        serve(monkeypatch, tmp_path, good, plans=[plan(132, 0, 0, reason="decode-only")], waiting=[],
              running=lambda w: Batch(w, "decode", [req("d1", 1000, 3)]), arrivals=receiver(), consensus=lambda s: c)


@pytest.mark.parametrize("scenario", ["mux_then_merge", "preempt_resume", "fused_streak", "fused_streak_ends"])
def test_a_tp_follower_makes_the_leaders_sglang_calls_waiting_on_its_own_events(monkeypatch, tmp_path, good,
                                                                                  scenario):
    """A follower never plans: it retires the chunks the leader retired, waiting on its own event
    where its GPU is behind (its chunk ev7 / ev11 has not finished when the leader's had), and
    then makes exactly the leader's calls into SGLang, in the same order, on the same streams. A
    fused streak goes on through a decode alone; where it ends instead (--no-mux-overlap-decode),
    that takes two decisions on every rank (the plan made again after the drain)."""
    decode = lambda w: Batch(w, "decode", [req("d1", 1000, 3), req("d2", 1100, 100)])  # noqa: E731
    if scenario.startswith("fused_streak"):
        off = ["--no-mux-overlap-decode"] if scenario == "fused_streak_ends" else []
        kw = dict(plans=[fused([("p1", 400)]), fused([("p1", 200)]), plan(132, 0, 0, reason="decode-only"),
                         plan(132, 0, 0, reason="decode-only")],
                  waiting=[req("p1", 600)], running=decode, mux_flags=["--mux-policy", "hybrid", *off],
                  wants_decode_contexts=True)
        behind = None
    elif scenario == "mux_then_merge":
        kw = dict(plans=[plan(48, 84, LAYERS, ["p1"]), plan(132, 0, 0, reason="decode-only")],
                  waiting=[req("p1", 100)], running=decode)
        behind = "ev7"
    else:
        kw = dict(plans=[plan(48, 84, 8, ["long"]), plan(48, 84, LAYERS, ["short"], preempt=True), plan(48, 84, 24)],
                  waiting=[req("long", 4000)], arrivals=[[], [req("short", 50)]], slow=["ev7"], running=decode)
        behind = "ev11"
    leader = {}
    log, *_ = serve(monkeypatch, tmp_path, good, consensus=lambda s: leader.setdefault("c", Leader(s)), **kw)
    decisions = leader["c"].decisions
    assert [d.plan for d in decisions] == kw["plans"]
    follower_dir = tmp_path / "follower"
    follower_dir.mkdir()
    kw = dict(kw, slow=[*kw.get("slow", ()), *([behind] if behind else [])])
    flog, fsched, _, _ = serve(monkeypatch, follower_dir, good, consensus=lambda s: Follower(s, decisions), **kw)
    sglang = lambda lines: [x for x in lines if not x.startswith(("est.", "event_synchronize"))]  # noqa: E731
    assert sglang(flog) == sglang(log)
    if behind:
        assert f"event_synchronize {behind}" in flog and f"event_synchronize {behind}" not in log
    else:
        assert "process_batch_result prefill2 result:prefill2" in flog and fsched.untracked("_mux").fused.pending is None
    if scenario == "preempt_resume":  # the leader waited for ev7 before its preemption; so did the follower
        assert "event_synchronize ev7" in log and "event_synchronize ev7" in flog
        assert decisions[2].retired == 1 and not decisions[0].retired


@pytest.mark.parametrize("tp_rank", [0, 1])
def test_a_tp_rank_joins_sglangs_tp_group_when_its_loop_starts(monkeypatch, tmp_path, good, tp_rank):
    """SGLang 0.5.16 creates ``Scheduler.tp_group`` after ``init_pdmux``: the loop is built knowing
    only its role (TP rank 0 leads; only the leader writes the timeline) and joins the group before
    its first iteration, first agreeing on the partitions. Built on the missing group, each rank
    led itself."""
    from sglang_mux.tp_consensus import PendingTp

    joined = []

    def of(sched):
        assert isinstance(sched.untracked("_mux").consensus, PendingTp)
        assert sched.untracked("tp_group") == "TP group"  # SGLang's, created after init_mux
        parts = [(c.decode_sms, c.prefill_sms) for c in sched.untracked("_mux").cfgs]  # the leader's, shared
        joined.append(Leader(sched) if tp_rank == 0 else Follower(sched, [parts, *decisions]))
        return joined[-1]

    decisions = []
    if tp_rank == 1:  # the follower replays a leader's run of the same plan
        _, lsched, _, _ = serve(monkeypatch, tmp_path, good, [plan(132, 0, 0, reason="decode-only")], waiting=[],
                                running=lambda w: Batch(w, "decode", [req("d1", 1000, 3)]),
                                consensus=lambda s: Leader(s))
        decisions = [d for d in lsched.untracked("_mux").consensus.decisions]
        tmp_path = tmp_path / "rank1"
        tmp_path.mkdir()
        (tmp_path / "timeline.jsonl").write_text("")
    monkeypatch.setattr(scheduler_loop.TpConsensus, "of", staticmethod(of))
    pending = PendingTp.share
    monkeypatch.setattr(PendingTp, "share", lambda self, d: pytest.fail("shared before joining") or pending(self, d))
    log, sched, rows, _ = serve(monkeypatch, tmp_path, good, [plan(132, 0, 0, reason="decode-only")], waiting=[],
                                running=lambda w: Batch(w, "decode", [req("d1", 1000, 3)]),
                                ps=NS(tp_size=2, tp_rank=tp_rank, dp_size=1, gpu_id=0), tp_group="TP group")
    c = sched.untracked("_mux").consensus
    assert len(joined) == 1 and c is joined[0]
    if tp_rank == 0:
        parts = c.decisions[0]  # agree() shares the partition list first, then one Decision an iteration
        assert parts == [(g.decode_sms, g.prefill_sms) for g in sched.untracked("_mux").cfgs]
        assert parts[0] == (0, 132) and parts[-1] == (132, 0) and len(c.decisions) == 2
        assert len(rows) == 1 and sched.untracked("_mux").timeline is not None
    else:
        assert not c.decisions and rows == [] and sched.untracked("_mux").timeline is None
        assert any(x.startswith("run_batch decode") for x in log)


def test_a_data_parallel_replica_writes_its_own_timeline_and_labels_its_metrics(monkeypatch, tmp_path, good):
    from prometheus_client import CollectorRegistry

    from sglang_mux import mux_metrics

    monkeypatch.setattr(mux_metrics, "REGISTRY", CollectorRegistry())  # a replica is a process of its own
    log, sched, rows, _ = serve(monkeypatch, tmp_path, good, [plan(132, 0, 0, reason="decode-only")], waiting=[],
                                running=lambda w: Batch(w, "decode", [req("d1", 1000, 3)]),
                                ps=NS(dp_rank=1, dp_size=2, gpu_id=1))
    assert (tmp_path / "timeline.jsonl.dp1").exists() and not (tmp_path / "timeline.jsonl").exists()
    assert len(rows) == 1 and sched.untracked("_mux").metrics.labels == {"dp_rank": "1"}


def test_the_fused_price_pads_to_sglangs_prefill_graph_sizes_and_eager_has_none():
    class EagerRunner:  # SGLang's stand-in when no prefill graph was captured
        capture_num_tokens = [1024]

    class BreakableCudaGraphRunner:
        capture_num_tokens = [1280, 1024]

    def sched(runner):
        return NS(tp_worker=NS(model_runner=NS(prefill_cuda_graph_runner=runner)))

    assert scheduler_loop._prefill_graph_tokens(sched(BreakableCudaGraphRunner())) == (1024, 1280)
    assert scheduler_loop._prefill_graph_tokens(sched(EagerRunner())) == ()
    assert scheduler_loop._prefill_graph_tokens(sched(None)) == ()


def test_the_servers_exit_drains_the_last_fused_batch(monkeypatch, tmp_path, good):
    """A fused batch still in flight when the scheduler exits is processed and merged, overlap off:
    its requests' tokens are sent."""
    log, sched, rows, _ = serve(
        monkeypatch, tmp_path, good, [fused([("p1", 400)]), fused([("p1", 200)])],
        mux_flags=["--mux-policy", "hybrid"], waiting=[req("p1", 600)], wants_decode_contexts=True, event_ms=15.0,
        running=lambda w: Batch(w, "decode", [req("d1", 1000, 3), req("d2", 1100, 100)]))
    assert log[-8:] == ["run_batch prefill2 3", "war_barrier", "record ev5 fwd",
                        "process_batch_result prefill1 result:prefill1",
                        "process_batch_result prefill2 result:prefill2", "filter_batch prefill2",
                        "wait_stream Pfull fwd", "wait_stream Dfull fwd"]
    assert [r.rid for r in sched.untracked("running_batch").reqs] == ["p1", "d1", "d2"]
    assert not sched.untracked("result_queue") and sched.untracked("enable_overlap") is False
    assert [r["extend_tokens"] for r in rows] == [402, 202]  # both booked


def test_a_formation_that_gives_nothing_ends_the_streak_without_merging_twice(monkeypatch, tmp_path, good):
    """When SGLang forms no batch for a fused plan (no KV for the chunk), it has already merged the
    last fused batch into the running batch: the streak ends with that batch's result processed,
    not merged again, and the next plan runs on the running batch."""
    calls, real = [], Scheduler.get_next_batch_to_run

    def formed(self, running, last_batch):
        calls.append(last_batch)
        if len(calls) != 2:
            return real(self, running, last_batch)
        self.untracked("w")("get_next_batch_to_run (no KV)", last_batch.name)
        last_batch.filter_batch()
        return NS(batch_to_run=None, running_batch=last_batch)  # merged, nothing to run

    monkeypatch.setattr(Scheduler, "get_next_batch_to_run", formed)
    log, sched, rows, _ = serve(
        monkeypatch, tmp_path, good,
        [fused([("p1", 600)]), fused([("p2", 100)]), plan(132, 0, 0, reason="decode-only")],
        mux_flags=["--mux-policy", "hybrid"], waiting=[req("p1", 600), req("p2", 100)],
        wants_decode_contexts=True, event_ms=15.0,
        running=lambda w: Batch(w, "decode", [req("d1", 1000, 3)]))
    i = log.index("get_next_batch_to_run (no KV) prefill1")
    assert log[i + 1:i + 3] == ["filter_batch prefill1", "process_batch_result prefill1 result:prefill1"]
    assert "merge_batch" not in " ".join(log) and log.count("filter_batch prefill1") == 1
    assert [r.rid for r in sched.untracked("running_batch").reqs] == ["p1", "d1"]
    assert sched.untracked("enable_overlap") is False and sched.untracked("_mux").fused.pending is None
    assert "update_running_batch prefill1 2" in log  # the decode plan ran on them


def test_a_decode_alone_goes_on_with_the_fused_streak_in_overlap_mode(monkeypatch, tmp_path, good):
    """With the hybrid (--mux-overlap-decode, on by default), a decode alone with no prefill
    anywhere runs as SGLang's overlap loop runs one: formed by SGLang with the last batch in
    flight, launched on the forward stream, and only then the last result processed. The streak
    does not end, so the next fused chunk is formed in overlap mode with no drain before it; its
    host time is not booked as a synchronous decode's."""
    log, sched, rows, script = serve(
        monkeypatch, tmp_path, good,
        [fused([("p1", 400)]), plan(132, 0, 0, reason="decode-only"), plan(132, 0, 0, reason="decode-only"),
         fused([("p2", 200)])],
        mux_flags=["--mux-policy", "hybrid"], waiting=[req("p1", 400)], arrivals=[[], [], [req("p2", 200)]],
        wants_decode_contexts=True, event_ms=15.0,
        running=lambda w: Batch(w, "decode", [req("d1", 1000, 3), req("d2", 1100, 100)]))
    DECODE_ALONE = "est.observe_decode 132 3 2600 0 0 15.0 ('max_reused', 1199)"  # 3 decoding, 15 ms
    assert log[log.index("--- loop"):] == [
        "--- loop", "empty_cache",
        *FIRST_FUSED,  # a fused chunk that finishes p1's prompt: the streak starts
        # a decode alone, with that batch in flight: SGLang merges it and decodes; only then its result
        "recv_requests", "process_input_requests 0", "set_pdmux_status False",
        "get_next_batch_to_run 3 True None [] prefill1 True", "filter_batch prefill1",
        "update_running_batch prefill1 3", "record ev4 fwd", "run_batch prefill1 3", "war_barrier", "record ev5 fwd",
        "process_batch_result prefill1 result:prefill1",
        "recv_requests", "process_input_requests 1", "set_pdmux_status False",
        "get_next_batch_to_run 3 True None [] prefill1 True",
        "update_running_batch prefill1 3", "record ev6 fwd", "run_batch prefill1 3", "war_barrier", "record ev7 fwd",
        "process_batch_result prefill1 result:prefill1",
        DECODE_ALONE,  # the table's fixed cost learns from it, as from a synchronous decode alone
        # the next chunk goes on with the streak: formed in overlap mode, no drain, no stream wait
        "recv_requests", "process_input_requests 0", "set_pdmux_status False",
        "get_next_batch_to_run 203 True None ['p2'] prefill1 True",
        "record ev8 fwd", "run_batch prefill2 4", "war_barrier", "record ev9 fwd",
        "process_batch_result prefill1 result:prefill1", DECODE_ALONE,
        # the server's exit drains the last one
        "process_batch_result prefill2 result:prefill2", "filter_batch prefill2",
        "wait_stream Pfull fwd", "wait_stream Dfull fwd"]
    assert [s.fused_streak for s in script.snaps] == [False, True, True, True]
    assert [(r["reason"], r["decode_bs"], r["extend_tokens"]) for r in rows] == [
        ("fused", 2, 402), ("decode-only", 3, 0), ("decode-only", 3, 0), ("fused", 3, 203)]
    # the chunk after the decodes is a streak's, booked to the fused budget; no synchronous decode ran
    mux = sched.untracked("_mux")
    assert (mux.gaps.budgets.fused._seen, mux.gaps.budgets.decode._seen) == (1, 0)
    assert sched.untracked("enable_overlap") is False and not sched.untracked("result_queue")
    assert [r.rid for r in sched.untracked("running_batch").reqs] == ["p2", "p1", "d1", "d2"]


def test_a_yield_forms_the_batch_without_the_chunked_request_and_keeps_it():
    """loop_fused.chunked_sits_out: SGLang's get_new_batch_prefill runs with no chunked request
    (so the batch is the waiting prompts alone) and the chunked one is back after, for its next
    chunk; a prompt cut into a second chunked request is an error, not a silent truncation."""
    from types import SimpleNamespace

    from sglang_mux.loop_fused import chunked_sits_out

    class Sched:
        def __init__(self):
            self.chunked_req, self.seen, self.cut = SimpleNamespace(rid="long"), [], None

        def get_new_batch_prefill(self, running):
            self.seen.append(self.chunked_req)
            if self.cut:
                self.chunked_req = SimpleNamespace(rid=self.cut)
            return running

    s = Sched()
    held = s.chunked_req
    with chunked_sits_out(s, True):
        assert s.get_new_batch_prefill("run") == "run"
    assert s.seen == [None] and s.chunked_req is held and "get_new_batch_prefill" not in vars(s)
    with chunked_sits_out(s, False):
        s.get_new_batch_prefill("run")
    assert s.seen == [None, held]
    s.cut = "b"
    with pytest.raises(RuntimeError, match="a yield cut b while long is mid-prefill"), chunked_sits_out(s, True):
        s.get_new_batch_prefill("run")
    assert s.chunked_req is held


def test_a_park_keeps_the_chunked_request_until_the_one_cut_in_its_place_is_done():
    """loop_fused.chunked_sits_out with a streak to park in: SGLang forms the batch with no chunked request, and the request it
    cuts becomes SGLang's chunked one while the old one waits in ``parked`` (its KV kept);
    FusedStreak.unpark gives it back only once SGLang has no chunked request left. A formation that
    cuts nobody (the head fit, or no KV) leaves the old one in place, and so does an error."""
    from types import SimpleNamespace

    from sglang_mux.loop_fused import FusedStreak, chunked_sits_out

    class Sched:
        def __init__(self):
            self.chunked_req, self.seen, self.cut = SimpleNamespace(rid="long"), [], "medium"

        def get_new_batch_prefill(self, running):
            self.seen.append(self.chunked_req)
            if self.cut == "boom":
                raise ValueError("boom")
            if self.cut:
                self.chunked_req = SimpleNamespace(rid=self.cut)
            return running

    s = Sched()
    streak = FusedStreak(SimpleNamespace(sched=s))
    held = s.chunked_req
    with chunked_sits_out(s, True, streak):
        assert s.get_new_batch_prefill("run") == "run"
    assert s.seen == [None] and streak.parked is held and s.chunked_req.rid == "medium"
    assert "get_new_batch_prefill" not in vars(s)
    streak.unpark()  # the medium prompt is still mid-prefill: nothing changes
    assert streak.parked is held and s.chunked_req.rid == "medium"
    s.chunked_req = None  # SGLang scheduled its last chunk
    streak.unpark()
    assert s.chunked_req is held and streak.parked is None
    for cut in (None, "boom"):
        s.cut = cut
        with contextlib.suppress(ValueError), chunked_sits_out(s, True, streak):
            s.get_new_batch_prefill("run")
        assert s.chunked_req is held and streak.parked is None
    s.cut = None
    with chunked_sits_out(s, False, streak):
        s.get_new_batch_prefill("run")
    assert s.seen[-1] is held


def test_sglangs_formation_sees_the_chosen_requests_in_the_plans_order():
    """loop_layerwise.only_waiting: SGLang forms its batch from the plan's requests alone, in the
    plan's order (a TP follower's queue may be in another order: the cut must fall alike), and
    what it leaves of them stays at the head, before the requests not chosen."""
    from types import SimpleNamespace

    from sglang_mux.loop_layerwise import only_waiting

    reqs = {rid: SimpleNamespace(rid=rid) for rid in "abcde"}
    sched = SimpleNamespace(waiting_queue=[reqs[r] for r in "abcde"])
    with only_waiting(sched, ["d", "b"]):
        assert [r.rid for r in sched.waiting_queue] == ["d", "b"]
        sched.waiting_queue.remove(reqs["d"])  # taken into the batch; b left (no memory)
    assert [r.rid for r in sched.waiting_queue] == ["b", "a", "c", "e"]
    with only_waiting(sched, None):
        assert len(sched.waiting_queue) == 4


class MixedScheduler(Scheduler):
    """The stand-in with SGLang's split: get_next_batch_to_run merges the last batch, then forms
    the mixed chunk through get_new_batch_prefill (where a yield or a park steps in)."""

    def get_next_batch_to_run(self, running, last_batch):
        u = self.untracked
        chunked = u("chunked_req")
        u("w")("get_next_batch_to_run", chunked.rid if chunked else None, [r.rid for r in u("waiting_queue")])
        return self.get_new_batch_prefill(u("merge_last")(running, last_batch))

    def get_new_batch_prefill(self, running):
        return self.untracked("form_mixed")(running)


def test_a_parked_request_waits_out_the_one_cut_in_its_place_and_resumes(monkeypatch, tmp_path, good):
    """Through the loop: p1 is cut (400 of 1,000 tokens); a park plan forms m's first chunk with
    no chunked request, m becomes SGLang's chunked request and p1 waits in ``parked`` (the policy
    sees both); once m's last chunk is formed the next plan sees p1 again, its 600 tokens left
    where it stopped, and finishes it."""
    monkeypatch.setattr(sys.modules[__name__], "Scheduler", MixedScheduler)
    log, sched, rows, script = serve(
        monkeypatch, tmp_path, good,
        [fused([("p1", 400)]), FusedPlan(chunk=(("m", 300),), t_ms=5.0, total_sms=132, parks=True),
         fused([("m", 300)]), fused([("p1", 600)]), plan(132, 0, 0, reason="decode-only"),
         plan(132, 0, 0, reason="decode-only")],
        mux_flags=["--mux-policy", "hybrid", "--no-mux-overlap-decode"], waiting=[req("p1", 1000), req("m", 600)],
        wants_decode_contexts=True,
        running=lambda w: Batch(w, "decode", [req("d1", 1000, 3), req("d2", 1100, 100)]))
    snaps = script.snaps
    assert snaps[1].chunked.rid == "p1" and snaps[1].parked is None
    assert (snaps[2].chunked.rid, snaps[2].chunked.n, snaps[2].parked.rid, snaps[2].parked.n) == ("m", 300, "p1", 600)
    assert (snaps[3].chunked.rid, snaps[3].chunked.n, snaps[3].chunked.r) == ("p1", 600, 400)
    assert snaps[3].parked is None and sched.untracked("_mux").fused.parked is None
    assert sched.untracked("chunked_req") is None
    assert [r["reason"] for r in rows[:4]] == ["fused", "park+fused", "fused", "fused"]
    assert rows[2]["parked"][0] == 600 and rows[2]["chunked"][0] == 300
    # every prompt reached the decode batch, each once
    assert sorted(r.rid for r in sched.untracked("running_batch").reqs) == ["d1", "d2", "m", "p1"]
