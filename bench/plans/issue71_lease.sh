#!/bin/bash
# Issue 71 on one lent GPU, in order of what it settles, each part skipped once the lease's END
# (epoch) is too near (results in LEASE_OUT, default /tmp/res; run from /tmp/t, the bundle installed):
#   1. mixed, seed 0: the hybrid at 0.7 and 0.8 (31ce242: a resumed batch may be preempted again;
#      the decode graph thinned to 17 sizes), the capped baseline at 0.7 (its missing point);
#   2. the greedy token check (token_check.sh: a preemption and a yield);
#   3. one start-up pair (startup.sh), the hybrid first;
#   4. the hybrid at 0.6 (the simulator's first failure).
#   END=$(( $(date +%s) + SECONDS )) bash bench/plans/issue71_lease.sh
set -u
cd "$(dirname "$0")/../.." && source .gpu/env.sh
R=${LEASE_OUT:-/tmp/res}; mkdir -p "$R"
left() { echo $(( END - $(date +%s) )); }
lp() {  # lp OUT SYSTEM RATES: long_prompts.sh for one system, into R/OUT
    SYSTEMS=$2 bash bench/plans/long_prompts.sh "$R/$1" "$(( $(left) - 20 ))" "$3" >> "$R/$1.log" 2>&1
}
lp mixed mux-hybrid 0.7,0.8
lp mixed sglang-chunked-2048-cap512 0.7
[ "$(left)" -gt 330 ] && bash bench/plans/token_check.sh "$R/token_check" $(( $(left) - 30 < 420 ? $(left) - 30 : 420 )) \
    > "$R/token_check.log" 2>&1
[ "$(left)" -gt 240 ] && bash bench/plans/startup.sh "$R/startup" "$(( $(left) - 20 ))" 1 > "$R/startup.log" 2>&1
[ "$(left)" -gt 300 ] && lp mixed06 mux-hybrid 0.6
echo "lease done, $(left) s left" > "$R/done.txt"
