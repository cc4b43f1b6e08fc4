"""The 70B's uncapped cell at TP 2 in the simulator, below the rates session 53 played (CPU, ~15 s;
repository root):

    D=bench/results/sim_uncapped70_s55_2026-11-28; PYTHONPATH=. python $D/uncapped_70b_low.py > $D/uncapped_70b_low.md

Session 53's `uncapped_70b.py` (bench/results/sim_hybrid_s53_2026-11-28/, its docstring says the
framing: TP-2 table, session 53's served hybrid draws, 600-s points, seeds 0-2, the TTFT rule at
K = 0.2 and 0.8 ms a prompt token) with the rates from 0.03 req/s: there every system failed
0.075 or passed only it, so no chunked goodput was found to divide by."""
import re

SRC = "bench/results/sim_hybrid_s53_2026-11-28/uncapped_70b.py"
src, n = re.subn(r"^RATES = .*$", "RATES = (0.03, 0.04, 0.05, 0.06, 0.065, 0.07, 0.075, 0.08)",
                 open(SRC).read(), count=1, flags=re.M)
assert n == 1, f"{SRC} no longer sets RATES on a line of its own"
exec(compile(src, SRC, "exec"))
