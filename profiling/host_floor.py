"""GPU diagnostic: where a short prefill's time goes (host launches vs GPU work), and what
steadies the host.

    python -m profiling.host_floor --model-config launch/models/llama-3.1-8b/config.json \
        --out bench/results/host_floor_<gpu>.json

Short prefills (n ≤ 512 new tokens) sit on a launch floor: the table's rows take as long as
the host needs to launch 32 layers' kernels, and that time moved between cells of one run
(H200: 11.2-13.7 ms for n = 128; H100: single cells bimodal, ~17 vs ~35 ms) and between
machines. For a few prefills (r = 0) on a few partitions this measures, per repeat and with
the stream synchronized between repeats (an empty queue at each start, as at the start of a
prefill in the engine):

- ``host_ms``: time for the host to enqueue the whole prefill (perf_counter);
- ``event_ms``: the CUDA-event time the table records (host- or GPU-bound);
- ``cpu_probe_ms``: a fixed pure-Python loop timed just before, to see whether a slow
  prefill comes with a slow CPU;
under four host conditions, interleaved round by round so drift hits all alike:
``base``; ``gc`` (Python's collector frozen and disabled, as SGLang's graph capture does);
``pin`` (the launching thread pinned to one core); ``pin+gc``.

Also, once per (partition, n): the GPU-only time (the stream held by a sleep kernel until
the host has enqueued everything, so the events time the GPU alone) and, on the full GPU,
a torch.profiler summary of host time by operator.
"""

from __future__ import annotations

import datetime as dt
import gc
import json
import os
import platform
import sys
import threading
import time
from pathlib import Path

from sglang_mux import cli_io as _cli_io
from sglang_mux import cli

CONDITIONS = ("base", "gc", "pin", "pin+gc")


def _cpu_probe_ms() -> float:
    t0 = time.perf_counter()
    x = 0
    for i in range(200_000):
        x += i & 7
    return (time.perf_counter() - t0) * 1e3


def _host_facts() -> dict:
    out = {"platform": platform.platform(), "python": sys.version.split()[0], "cpu_count": os.cpu_count(),
           "affinity": len(os.sched_getaffinity(0)), "loadavg": os.getloadavg()}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                out["cpu_model"] = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    gov = Path("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
    out["governor"] = gov.read_text().strip() if gov.exists() else None
    return out


class _Condition:
    """Apply one host condition around a block of repeats; restore afterwards."""

    def __init__(self, name: str, core: int):
        self.name, self.core = name, core

    def __enter__(self):
        self._tid = threading.get_native_id()
        self._aff = os.sched_getaffinity(self._tid)
        self._gc = gc.isenabled()
        if "pin" in self.name:
            os.sched_setaffinity(self._tid, {self.core})
        if "gc" in self.name:
            gc.collect()
            gc.freeze()
            gc.disable()
        return self

    def __exit__(self, *exc):
        if "gc" in self.name:
            gc.unfreeze()
            if self._gc:
                gc.enable()
        os.sched_setaffinity(self._tid, self._aff)


def main(argv=None) -> int:
    ap = cli.ArgumentParser(prog="python -m profiling.host_floor", description=_cli_io.about(__doc__))
    ap.add_argument("--model-config", required=True, type=_cli_io.model_config_arg,
                    help="the model's Hugging Face config.json")
    ap.add_argument("--out", default=None, help="also write the rows here as JSON")
    ap.add_argument("--tokens", default="128,512,2048", type=_cli_io.numbers(int, example="128,512"),
                    help="prefill token counts, comma list")
    ap.add_argument("--prefill-sms", default="132,68,20", type=_cli_io.numbers(int, example="132,68"),
                    help="prefill partitions (132 = the full GPU)")
    ap.add_argument("--rounds", type=cli.positive(int), default=4, help="rounds over every configuration")
    ap.add_argument("--repeats", type=cli.positive(int), default=5, help="timed prefills per point and round")
    ap.add_argument("--attention-backend", default="triton", help="SGLang attention backend")
    args = ap.parse_args(argv)
    _cli_io.need_gpu("profiling.host_floor")
    import torch
    from sglang.srt.distributed.parallel_state import set_pdmux_status

    from profiling.harness import SLEEP_CYCLES_PER_MS, Harness
    from profiling.stats import median

    h = Harness(args.model_config, attention_backend=args.attention_backend)
    L = h.num_layers
    allowed = sorted(os.sched_getaffinity(0))
    core = allowed[len(allowed) // 2]
    tokens = args.tokens
    cfgs = []
    for p in args.prefill_sms:
        cfgs.append(h.config(h.total_sms - p if p < h.total_sms else 0, p))
    rows, gpu_only, profile = [], [], None

    def one(fb, ps, sleep_cycles: int = 0):
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.cuda.stream(ps):
            if sleep_cycles:
                torch.cuda._sleep(sleep_cycles)
            t0 = time.perf_counter()
            s.record(ps)
            h._run_split(fb, L)
            e.record(ps)
            t1 = time.perf_counter()
        ps.synchronize()
        return (t1 - t0) * 1e3, s.elapsed_time(e)

    for cfg in cfgs:
        for n in tokens:
            ps, _ = h._select(cfg)
            with h._cell(), torch.inference_mode():
                batch, fb = h._extend_batch(h._prefill_reqs([(n, 0)]), split=True)
                set_pdmux_status(True)
                for _ in range(2):  # warm-up
                    one(fb, ps)
                for rnd in range(args.rounds):
                    for cond in CONDITIONS:
                        with _Condition(cond, core):
                            for _ in range(args.repeats):
                                probe = _cpu_probe_ms()
                                host, ev = one(fb, ps)
                                rows.append(dict(prefill_sms=cfg.prefill_sms, n=n, cond=cond, round=rnd,
                                                 host_ms=round(host, 3), event_ms=round(ev, 3),
                                                 cpu_probe_ms=round(probe, 3)))
                hosts = [r["host_ms"] for r in rows if r["prefill_sms"] == cfg.prefill_sms and r["n"] == n]
                sleep_ms = 2 * max(hosts) + 20
                g = []
                for _ in range(args.repeats):
                    host, ev = one(fb, ps, int(sleep_ms * SLEEP_CYCLES_PER_MS))
                    g.append((host, ev))
                gpu_only.append(dict(prefill_sms=cfg.prefill_sms, n=n, sleep_ms=sleep_ms,
                                     host_ms=[round(x, 3) for x, _ in g], gpu_ms=[round(y, 3) for _, y in g],
                                     gpu_ms_median=round(median([y for _, y in g]), 3)))
                if cfg.prefill_sms == h.total_sms and n == tokens[0]:
                    from torch.profiler import ProfilerActivity, profile as tprof

                    with tprof(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                        one(fb, ps)
                    ka = prof.key_averages()
                    top = sorted(ka, key=lambda a: a.self_cpu_time_total, reverse=True)[:25]
                    profile = dict(
                        n=n, prefill_sms=cfg.prefill_sms,
                        top_self_cpu=[dict(name=a.key, calls=a.count, self_cpu_us=round(a.self_cpu_time_total, 1))
                                      for a in top],
                        launches={a.key: a.count for a in ka
                                  if "launch" in a.key.lower() or a.key.lower().startswith("cu")},
                    )
                    print(ka.table(sort_by="self_cpu_time_total", row_limit=30), flush=True)
                set_pdmux_status(False)
                del batch, fb
            print(f"P{cfg.prefill_sms} n={n} done", flush=True)

    import pandas as pd

    df = pd.DataFrame(rows)
    summary = (df.groupby(["prefill_sms", "n", "cond"])
               .agg(host_med=("host_ms", "median"), event_med=("event_ms", "median"),
                    event_min=("event_ms", "min"), event_max=("event_ms", "max"),
                    probe_med=("cpu_probe_ms", "median"))
               .round(3).reset_index())
    print(summary.to_string(), flush=True)
    go = pd.DataFrame(gpu_only)[["prefill_sms", "n", "gpu_ms_median"]]
    print(go.to_string(), flush=True)
    corr = float(df[["event_ms", "cpu_probe_ms"]].corr().iloc[0, 1]) if len(df) > 2 else None
    out = {
        "what": "short-prefill host launch floor: host enqueue vs GPU time, under host conditions",
        "device": torch.cuda.get_device_name(),
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "command": "python -m profiling.host_floor " + " ".join(argv if argv is not None else sys.argv[1:]),
        "host": _host_facts(), "pinned_core": core, "layers": L,
        "summary": summary.to_dict(orient="records"), "gpu_only": gpu_only,
        "corr_event_vs_cpu_probe": corr, "profile": profile, "rows": rows,
    }
    text = json.dumps(out, indent=1)
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    cli.run(main)
