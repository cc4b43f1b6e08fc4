"""Rule 3 of HybridPolicy at the served 70B point's batch starts (CPU, seconds; repository root):

    python bench/results/h200x4_s51_2026-11-28/whatif_rates.py [TIMELINE]

For every layer-wise batch the hybrid started (a timeline row with new_prefill > 0, best-fit), the
spatial rate it weighed (new tokens / (T_P x prefill_wall), the row's own) beside the fused
candidate's rate from the shipped TP-2 table under the fused price the server held then (the last
fused row's fixed / slope / ratio / margin), once with the margin in the rate (as served, session 50's
code) and once without (the rate at the median, this session's change). Approximate: one waiting
request (the batch's first), uniform decode contexts (the row's sum over its batch), the last fused
row's fused_host_ms as the budget's host term and the served fused overruns' median, clipped at 0
(`bench.analysis.whatif_fused_tail.overruns`: -3.1 ms), as the rate's. Served fused iterations
beside it: prompt tokens per ms."""
import argparse
import json
import sys

from sglang_mux.dispatch import Snapshot, WaitingReq, make_policy
from sglang_mux.estimator import from_table_arg
from sglang_mux.fused_price import sglang_graph_tokens

path = sys.argv[1] if len(sys.argv) > 1 else "bench/results/h200x4_s51_2026-11-28/cap70/mux-hybrid.timeline.jsonl.xz"
if path.endswith(".xz"):
    import lzma
    lines = lzma.open(path, "rt").read().splitlines()
else:
    lines = open(path).read().splitlines()
rows = [json.loads(x) for x in lines]
est = from_table_arg(argparse.ArgumentParser(), "llama-3.1-70b__nvidia-h200__fa3__tp2")
est.graph_tokens = sglang_graph_tokens(4096)
est.fused_price.known = True
pol = make_policy("hybrid", est, tbt_slo_ms=100)
t0, fp, host = rows[0]["time"], None, None
print("| s | decode bs | decode SMs | new tokens | spatial rate | fused, tail in the rate | fused, at the median |")
print("|---:|---:|---:|---:|---:|---:|---:|")
for r in rows:
    if r["reason"] == "fused":
        fp, host = r["fused_price"], r.get("fused_host_ms")
    if r["new_prefill"] > 0 and r["reason"] == "best-fit" and fp is not None and r["decode_bs"] > 0:
        bs, n = r["decode_bs"], r["prefill_new"]
        snap = Snapshot(1.0, bs, r["decode_sum_reused"], decode_max_reused=r["decode_max_reused"],
                        waiting=(WaitingReq("a", 0.0, n, r["prefill_reused"]),),
                        decode_contexts=(r["decode_sum_reused"] // bs,) * bs, fused_host_ms=host,
                        fused_rate_host_ms=0.0, fused_streak=True, decode_host_ms=r.get("decode_host_ms") or 0.0)
        fpr = est.fused_price
        fpr.fixed, fpr.slope, fpr.ratio, fpr.margin = fp["fixed_ms"], fp["slope"], fp["ratio"], fp["margin_ms"]
        median = pol.fused_candidate(snap)[1]
        pol.fused_tail_ms = lambda: 0.0  # as session 50's code weighed it: the price's margin in the rate
        served = pol.fused_candidate(snap)[1]
        del pol.fused_tail_ms
        print(f"| {r['time'] - t0:.1f} | {bs} | {r['decode_sms']} | {n} | "
              f"{n / (r['t_prefill_ms'] * (r.get('prefill_wall') or 1.0)):.2f} | {served:.2f} | {median:.2f} |")
fz = [r for r in rows if r["reason"] == "fused" and r.get("measured_decode_ms") and r["extend_tokens"] > 256]
rates = sorted((r["extend_tokens"] - r["decode_bs"]) / r["measured_decode_ms"] for r in fz)
if rates:
    print(f"\nserved fused iterations of > 256 tokens: {len(rates)}, prompt tokens a ms P10 / P50 / P90 "
          f"{rates[len(rates) // 10]:.2f} / {rates[len(rates) // 2]:.2f} / {rates[9 * len(rates) // 10]:.2f}")
