#!/bin/bash
# Issue 71 on one lent GPU, in order of what it settles, each part skipped once the lease's END
# (epoch) is too near (results in LEASE_OUT, default /tmp/res; run from /tmp/t, the bundle installed):
#   1. mixed, seed 0: the hybrid at 0.8, 0.9 and 1.0 (the yield at once behind long prompts, the park:
#      the simulator's goodput 0.9, highest pass 0.9), the capped baseline at 0.6 on the same GPU (its
#      highest pass on three H100s and in the simulator);
#   2. the greedy token check (token_check.sh: long prompts alone, short ones 8 ms behind each: a
#      preemption; a yield into the 38K-token prompts' fused chunks);
#   3. one cold start-up pair (COLD=1 startup.sh: compile caches emptied before each start);
#   4. mixed, seed 1: the hybrid at 1.0 (the simulator's highest pass) and the capped baseline at 0.6.
# Served 2026-12-06 (the parts then: the hybrid at 0.7 and 0.8, the capped baseline at 0.7, the
# token check, a warm pair, the hybrid at 0.6): bench/results/long_prompts_h100_c_2026-12-06/.
#   END=$(( $(date +%s) + SECONDS )) bash bench/plans/issue71_lease.sh
set -u
cd "$(dirname "$0")/../.." && source .gpu/env.sh
R=${LEASE_OUT:-/tmp/res}; mkdir -p "$R"
left() { echo $(( END - $(date +%s) )); }
lp() {  # lp OUT SYSTEM RATES [SEED]: long_prompts.sh for one system, into R/OUT
    SEED=${4:-0} SYSTEMS=$2 bash bench/plans/long_prompts.sh "$R/$1" "$(( $(left) - 20 ))" "$3" >> "$R/$1.log" 2>&1
}
lp mixed mux-hybrid 0.8,0.9,1.0
lp mixed sglang-chunked-2048-cap512 0.6
[ "$(left)" -gt 330 ] && bash bench/plans/token_check.sh "$R/token_check" $(( $(left) - 30 < 420 ? $(left) - 30 : 420 )) \
    > "$R/token_check.log" 2>&1
[ "$(left)" -gt 330 ] && COLD=1 bash bench/plans/startup.sh "$R/startup_cold" "$(( $(left) - 20 ))" 1 > "$R/startup.log" 2>&1
[ "$(left)" -gt 300 ] && lp mixed_s1 mux-hybrid 1.0 1
[ "$(left)" -gt 300 ] && lp mixed_s1 sglang-chunked-2048-cap512 0.6 1
echo "lease done, $(left) s left" > "$R/done.txt"
