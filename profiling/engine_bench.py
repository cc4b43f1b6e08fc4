"""`python -m profiling.engine_bench`: engine facts measured with the profiling harness (GPU).

    python -m profiling.engine_bench --model-config launch/models/llama-3.1-8b/config.json \\
        [--out bench/results/engine.json] [--n-tokens 8192] [--repeats 10]

Writes (merges) one entry per GPU x model into ``bench/results/engine.json``:
- ``layerwise_overhead``: one n-token prefill on the full GPU as one monolithic EXTEND forward
  vs L single-layer SPLIT_PREFILL launches (medians, overhead %, the issue's 1.5 % limit);
- ``graph_memory``: GPU memory taken by decode-graph capture per stream group (one set per
  partition, captured in `all_configs()` order) and the overhead of all sets vs one set;
- ``prefix_check``: a prefill with reused tokens whose KV was allocated (the profiler's way)
  vs computed by a real extend — the two latencies should agree within noise;
- ``partition_switch_us``: host cost of selecting a partition (stream index + decode attention
  backend), and the start-up timings (green contexts, model + graphs).
"""

from __future__ import annotations

import datetime as _dt
import json
import shlex
import sys
import time
from pathlib import Path
from typing import Sequence

from sglang_mux import cli_io as _cli_io
from sglang_mux import cli

DEFAULT_OUT = "bench/results/engine.json"


def merge_entry(path: str | Path, key: str, entry: dict) -> dict:
    """Insert/replace ``entries[key]`` in the JSON file (other entries kept); atomic write."""
    path = Path(path)
    doc = {"format": 1, "entries": {}}
    if path.exists():
        try:
            old = json.loads(path.read_text())
            if isinstance(old, dict) and isinstance(old.get("entries"), dict):
                doc = old
        except json.JSONDecodeError:
            bad = path.with_suffix(".json.corrupt")
            path.replace(bad)
            print(f"engine_bench: {path} was not valid JSON; moved to {bad}", file=sys.stderr)
    doc.setdefault("format", 1)
    doc["entries"][key] = entry
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n")
    tmp.replace(path)
    return doc


def graph_memory_summary(stats, sglang_total_gb: float | None = None) -> dict:
    """Per-stream-group capture memory (MiB) and all-sets vs one-set overhead."""
    rows = [{"stream_idx": s.stream_idx, "partition": s.label, "mib": round(s.used_bytes / 2**20, 1),
             "seconds": round(s.seconds, 2)} for s in stats]
    out = {"per_stream_group": rows, "sglang_reported_gb": sglang_total_gb}
    if rows:
        total = sum(r["mib"] for r in rows)
        one = rows[0]["mib"]
        extra = total - one
        out.update(total_mib=round(total, 1), one_set_mib=one, extra_for_all_partitions_mib=round(extra, 1),
                   extra_per_additional_set_mib=round(extra / max(1, len(rows) - 1), 1),
                   overhead_vs_one_set_pct=round(100.0 * extra / one, 1) if one > 0 else None,
                   note="first set includes the graph pool's one-time growth; later sets reuse it")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    pos_i = cli.positive(int)
    ap = cli.ArgumentParser(prog="python -m profiling.engine_bench", description=__doc__.split("\n")[0])
    ap.add_argument("--model-config", required=True, type=_cli_io.model_config_arg,
                    help="the model's Hugging Face config.json")
    ap.add_argument("--out", default=DEFAULT_OUT, help="the figures file the entry is merged into")
    ap.add_argument("--n-tokens", type=pos_i, default=8192, help="prefill tokens of the layer-wise check")
    ap.add_argument("--repeats", type=pos_i, default=10, help="timed runs per measurement")
    ap.add_argument("--granularity", type=pos_i, default=16, help="SMs per partition step")
    ap.add_argument("--mem-fraction-static", type=_cli_io.fraction, default=0.75, help="SGLang's static memory share")
    ap.add_argument("--attention-backend", default=None)
    ap.add_argument("--decode-bs", default="1,8,16,32,64,128,256", type=_cli_io.numbers(int, example="1,8,16"),
                    help="decode graph batch sizes to capture (the profiler's coarse set by default)")
    a = ap.parse_args(argv)
    _cli_io.need_gpu("profiling.engine_bench")

    from profiling.harness import Harness
    from sglang_mux.tables import slug

    bs = a.decode_bs
    h = Harness(a.model_config, granularity=a.granularity, mem_fraction_static=a.mem_fraction_static,
                attention_backend=a.attention_backend, decode_bs=bs)
    facts = h.facts()
    entry: dict = {
        "device": facts["gpu_name"], "gpu_name": facts["gpu_name"], "sm_count": facts["sm_count"],
        "date": _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat(),
        "command": "python -m profiling.engine_bench " + " ".join(shlex.quote(x) for x in argv),
        "model_config": a.model_config, "versions": facts["versions"],
        "attention_backend": facts["attention_backend"], "startup_s": facts["timings_s"],
        "kv_pool_tokens": facts["kv_pool_tokens"], "stream_groups": facts["stream_groups"],
        "decode_capture_bs": facts["capture_bs"],
    }
    key = f"{slug(facts['gpu_name'])}/{slug(Path(a.model_config).resolve().parent.name)}"

    def step(name, fn):
        t = time.perf_counter()
        try:
            entry[name] = fn()
        except Exception as e:  # noqa: BLE001 - one failed measurement must not lose the others
            entry[name] = {"error": f"{type(e).__name__}: {e}"}
        print(f"{name}: {json.dumps(entry[name])[:400]}  ({time.perf_counter() - t:.1f} s)")
        merge_entry(a.out, key, entry)  # after each step: a crash keeps what was measured

    step("graph_memory", lambda: graph_memory_summary(h.capture_stats, h.graph_mem_gb))
    step("layerwise_overhead", lambda: h.monolithic_vs_layerwise(a.n_tokens, repeats=a.repeats))

    def prefix_check():
        cfg = h.parts.full_prefill
        reqs = [(2048, 8192)]
        h.prefix_mode = "alloc"
        alloc = h.prefill_samples(reqs, cfg, layers_per_launch=h.num_layers, repeats=5)
        h.prefix_mode = "extend"
        try:
            comp = h.prefill_samples(reqs, cfg, layers_per_launch=h.num_layers, repeats=5)
        finally:
            h.prefix_mode = "alloc"
        from profiling.stats import median, overhead_pct

        return {"reqs": reqs, "alloc_ms": median(alloc), "extend_ms": median(comp),
                "diff_pct": overhead_pct(median(comp), median(alloc)), "alloc_samples": alloc, "extend_samples": comp}

    step("prefix_check", prefix_check)

    def switch_cost():
        n = 200
        t = time.perf_counter()
        for i in range(n):
            h._select(h.cfgs[i % len(h.cfgs)])
        return round((time.perf_counter() - t) / n * 1e6, 2)

    step("partition_switch_us", switch_cost)
    lo = entry.get("layerwise_overhead", {})
    if isinstance(lo, dict) and "overhead_pct" in lo:
        ok = lo["overhead_pct"] <= lo.get("limit_pct", 1.5)
        print(f"layer-wise overhead {lo['overhead_pct']:.2f} % (limit {lo.get('limit_pct', 1.5)} %): "
              f"{'OK' if ok else 'OVER'}")
    print(f"wrote {a.out} [{key}]")
    return 0


if __name__ == "__main__":
    cli.run(main)
