"""What-if (CPU): two answers to a fused prompt holding the queue, on issue 43's uncapped cell.

    D=bench/results/sim_uncapped_s54_2026-11-28
    PYTHONPATH=. python $D/hybrid_variants.py yield 0,1,2      # ~3 minutes
    git apply $D/cut_within_ttft.patch && PYTHONPATH=. python $D/hybrid_variants.py cut 0,1,2; git apply -R $D/cut_within_ttft.patch

The hybrid alone, walked up the cell's rates as `sim_hybrid_map` walks them: H100 table, the lone
H100's fused draws, 300-s points, the length-aware drift test, TBT 50, for each seed given.
- ``yield``: session 53's `chunk_yield.py` rule: the chunked request goes to the back of the queue,
  once, when a waiting prompt would miss its deadline behind its rest.
- ``cut`` (with the patch): a fused candidate cuts a prompt only if its commitment ends within
  the shortest prompt's TTFT SLO; a longer one goes layer-wise, where rule 4 can preempt it.
- ``plain``: today's code.
Why: at seed 0, 0.7 req/s, an 81K-token prompt ran as ~5.6 s of fused chunks, and a 4.6K one that
arrived 0.7 s later waited 5.1 s. The dispatcher preempted the same prompt's layer-wise prefill,
and the short one waited 0.15 s."""
import sys
import tempfile
from pathlib import Path

if sys.argv[1] == "yield":  # the classes and patches of chunk_yield.py, not its runs
    src = open("bench/results/sim_hybrid_s53_2026-11-28/chunk_yield.py").read()
    exec(compile(src.split('if sys.argv[1] == "map":')[0], "chunk_yield", "exec"))
from bench.analysis import sim_hybrid_map as M  # noqa: E402
from bench.analysis.tbt_tail import fused_hosts  # noqa: E402
from sglang_mux import sim  # noqa: E402

FJ = "bench/results/cap30_lone_h100_s46_2026-11-28/mux-hybrid.timeline.jsonl.xz"
est, jit, host, corun = M.simulator_inputs()
kw = {"fused_jitter": sim.fused_jitter(FJ), "fused_host": list(fused_hosts(FJ))}
name = "uncapped conversation (1 session in 20)"
w = M.chosen_workloads((name,), 300.0, True)[name]
with tempfile.TemporaryDirectory() as d:
    for seed in map(int, sys.argv[2].split(",")):
        g, pts = M.run_cell(est, jit, host, corun, w, 50.0, "hybrid", Path(d), seed, **kw)
        print(sys.argv[1], "seed", seed, "goodput", g,
              [(p["rate"], p["ok"], p["ttft_p99_s"], p["tbt_p99_ms"]) for p in pts[-2:]], flush=True)
