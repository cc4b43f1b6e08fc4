#!/bin/bash
# Issue 43's cells at fixed rates on one 4-GPU lease with ~13 minutes left (session 47 lost its first
# lease's results to an idle release): each system of a cell climbs two rates, 45-s points, from the
# served or simulated goodput, and stops at its first failure; all systems of a cell on one GPU.
#   (setsid nohup bash /tmp/t/bench/plans/issue43_x4_short.sh END > /tmp/job.log 2>&1 < /dev/null &)
END=${1:?END epoch}
source /tmp/t/bench/plans/lease.sh
fixed() {  # fixed GPU NAME RATES [ENV...]
    local g=$1 n=$2 r=$3; shift 3
    env SYSTEMS="${SYS:-mux-hybrid sglang-chunked-1024 sglang-chunked-512}" "$@" bash bench/plans/per_gpu.sh "$g" \
        bash bench/plans/fa3_conv8k_sweep.sh $R/$n "$r" $(( $(left) - 30 )) > $R/$n.log 2>&1
}
fixed 0 cap50_s1 4,4.4 SEED=1 &                                            # seed 0: 4.4 / 4.4
fixed 1 code50_s1 18,20 SEED=1 CLIENT_PROCS=12 WORKLOAD=code &              # H200 seed 1: 18 / 18
fixed 2 sharegpt50 50,55 CLIENT_PROCS=12 WORKLOAD=sharegpt &                # lost lease: hybrid ~50-55
SYS="mux-hybrid sglang-chunked-512" fixed 3 cap30 2.65,2.9 TBT_SLO_MS=30 &  # session 44's x4: 2.25 / 2.65
wait
echo done > $R/done
