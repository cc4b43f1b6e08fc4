"""The capped conversation at TBT 50 ms in both calibrated simulators (this host's served calibration:
../sim_calibration_s21/, ./README.md): the mux, the mux with --mux-defer-prefill-start, chunked 512-2048 + mixed.
CPU, ~20 s:

    python bench/results/sim_chunked_s21/tbt50_capped.py > bench/results/sim_chunked_s21/tbt50_capped.md
"""
import pandas as pd
from sglang_mux import sim
from sglang_mux.estimator import Estimator
from sglang_mux.sim_chunked import simulate_chunked
from sglang_mux.mux_metrics import host_ms_per_decode, load_timeline
T='contention_tables/llama-3.1-8b__nvidia-h100-80gb-hbm3__fa3'; J='bench/results/sim_calibration_s21/served_mux_3.timeline.jsonl.xz'
est=Estimator.from_table(T); jit=sim.decode_jitter(J); co,alone=sim.served_host_ms(J)
t=load_timeline(J); h=host_ms_per_decode(t); laps=pd.DataFrame(list(t.loc[h.index,'host_ms']),index=h.index).fillna(0)
co_less=(h-laps['plan']).clip(lower=0)[t.loc[h.index,'prefill_sms']>0].to_numpy()
P=((3,135),(3.5,158),(4,180),(4.5,202),(5,225),(5.5,248))
print('Each cell: rate: pass, P99 TTFT s / P99 TBT ms (D: TTFT drift). Goodput: the last pass before the first failure.\n')
print('| seed | system | points | goodput |')
print('|---|---|---|---:|')
for tbt in (50,):
  for seed in (0,1):
    for name,run in (('mux',lambda r,s: sim.run_policies(r,est,'dispatcher',tbt_slo_ms=tbt,ttft_slo_ms=5000,jitter=jit,online_guard=True,prefill_slowdown=1.4,host_draws=(co,alone),seed=s)[0].summary),
                     ('mux-defer',lambda r,s: sim.run_policies(r,est,'dispatcher',tbt_slo_ms=tbt,ttft_slo_ms=5000,jitter=jit,online_guard=True,prefill_slowdown=1.4,host_draws=(co_less,alone),seed=s)[0].summary),
                     ('chunked-512',lambda r,s: simulate_chunked(r,est,budget=512,host_ms=2.0,tbt_slo_ms=tbt).summary),
                     ('chunked-1024',lambda r,s: simulate_chunked(r,est,budget=1024,host_ms=2.0,tbt_slo_ms=tbt).summary),
                     ('chunked-2048',lambda r,s: simulate_chunked(r,est,budget=2048,host_ms=2.0,tbt_slo_ms=tbt).summary)):
        row=[];good=None;failed=False
        for rate,n in P:
            reqs=sim.load_trace('conversation',limit=n,rate=rate,input_cap=8000,arrival='poisson',seed=seed)
            s=run(reqs,seed); ok=s['ttft_p99_s']<=5 and s['tbt_p99_ms']<=tbt and s['ttft_drift']['ok']
            failed=failed or not ok; good=rate if not failed else good
            row.append(f"{rate}:{'✓' if ok else '✗'}{s['ttft_p99_s']:.1f}/{s['tbt_p99_ms']:.0f}{'' if s['ttft_drift']['ok'] else 'D'}")
        print(f"| {seed} | {name} | " + " ".join(row) + f" | {good} |")
