#!/bin/bash
# One of issue 43's TBT-30 cells on a lone H100 (nvidia-h100-x1: one server on its machine, as the
# simulator's calibration was), run from a copy of the tree in /tmp/t in the background with an end
# time (epoch) and polled; results in /tmp/res/<cell>:
#   (setsid nohup bash /tmp/t/bench/plans/issue43_lone.sh END cap30|sharegpt30 > /tmp/job.log 2>&1 < /dev/null &)
# Why lone: on session 44's 4 x H100 host, four cells side by side slowed SGLang's launch of a mixed
# batch 38 % at the median and 2.1x at P99 against a lone H100 (bench/results/profile_s45_2026-11-27/),
# and chunked prefill 512 reached ~65 % of its lone-H100 goodput there (capped conversation 2.65
# against 4, code 12 against 18.5, bench/results/capped_tbt30_h100_2026-11-27/ and code_tbt30_...).
# The hybrid's small fused iterations hide that host time least. A cell takes ~25 minutes, so one
# machine does one cell: give the END ~27 minutes after the install. Two machines fit one session's
# device time while a one-chip machine counts half (the run reply's lease.counts); counted in full
# (session 46), one cell fits, END ~25 minutes after the first call.
END=${1:?END epoch}
CELL=${2:?cap30 or sharegpt30}
source /tmp/t/bench/plans/lease.sh
case $CELL in
cap30) cell 0 cap30 3,4.8 TBT_SLO_MS=30 ;;  # session 46: hybrid 3.45, chunked 512 3.9; predicted 4 / 4 (4.12 / 4.12 bisected)
sharegpt30) cell 0 sharegpt30 36,72 CLIENT_PROCS=12 WORKLOAD=sharegpt TBT_SLO_MS=30 ;;  # predicted 72 / 66
*) echo "cell: cap30 or sharegpt30"; exit 2 ;;
esac
echo done > $R/done
