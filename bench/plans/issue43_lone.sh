#!/bin/bash
# One of issue 43's TBT-30 cells on a lone H100 (nvidia-h100-x1: one server on its machine, as the
# simulator's calibration was), run from a copy of the tree in /tmp/t in the background with an end
# time (epoch) and polled; results in /tmp/res/<cell>:
#   (setsid nohup bash /tmp/t/bench/plans/issue43_lone.sh END CELLS > /tmp/job.log 2>&1 < /dev/null &)
# Why lone: on session 44's 4 x H100 host, four cells side by side slowed SGLang's launch of a mixed
# batch 38 % at the median and 2.1x at P99 against a lone H100 (bench/results/profile_s45_2026-11-27/),
# and chunked prefill 512 reached ~65 % of its lone-H100 goodput there (capped conversation 2.65
# against 4, code 12 against 18.5, bench/results/capped_tbt30_h100_2026-11-27/ and code_tbt30_...).
# The hybrid's small fused iterations hide that host time least. A cell takes ~25 minutes, so one
# machine does one cell: give the END ~27 minutes after the install. Two machines fit one session's
# device time while a one-chip machine counts half (the run reply's lease.counts); counted in full
# (session 46), one cell fits, END ~25 minutes after the first call.
# CELLS is a comma list run in order, e.g. sizes,cap30. "sizes" times bench.prefill_mixed --fused
# --fused-sizes (68 batches, not yet timed on a GPU): fused batches filling every prefill-graph size
# 256-1,024 (the fused rows have none at 385-512 or 641-1,024, where cuBLAS is slow at 448 and 832:
# session 46).
END=${1:?END epoch}
CELLS=${2:?comma list of sizes, cap30, sharegpt30}
source "$(dirname "$0")/lease.sh"
for c in ${CELLS//,/ }; do
    case $c in
    sizes) timeout $(( $(left) - 60 )) python -m bench.prefill_mixed --fused --fused-sizes \
               --model-config launch/models/llama-3.1-8b/config.json --table llama-3.1-8b__nvidia-h100-80gb-hbm3__fa3 \
               --attention-backend fa3 --out $R/fused_sizes.json > $R/sizes.log 2>&1 ;;
    # session 46: hybrid 3.45, chunked 512 3.9; predicted 3.3-4 / 4 by framing (sim_hybrid_s52_2026-11-28)
    cap30) cell 0 cap30 3,4.8 TBT_SLO_MS=30 ;;
    sharegpt30) cell 0 sharegpt30 36,72 CLIENT_PROCS=12 WORKLOAD=sharegpt TBT_SLO_MS=30 EXTRA_SA="$TM4" ;;  # predicted 72 / 66
    *) echo "cell: sizes, cap30 or sharegpt30, got $c"; exit 2 ;;
    esac
done
echo done > $R/done
