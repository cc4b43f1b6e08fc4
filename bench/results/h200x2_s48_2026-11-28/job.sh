#!/bin/bash
# Two of issue 43's cells on one 2-GPU lease (nvidia-h100-x2), one cell per GPU with 16 vCPUs each
# (per_gpu.sh: a lone H100's share), run from a copy of the tree in /tmp/t in the background with an
# end time (epoch) and polled; results in /tmp/res:
#   (setsid nohup bash /tmp/t/bench/plans/issue43_x2.sh END > /tmp/job.log 2>&1 < /dev/null &)
# H100:
# GPU 0: the capped conversation at TBT 30 with the code that drops cuBLAS's slow sizes (session 47's
#        4-GPU host: both >= 2.9, not bracketed; session 46's lone H100, older code: hybrid 3.45,
#        chunked 512 3.9), chunked 512 before 1024 (the better one at TBT 30).
# GPU 1: sharegpt at TBT 50, which the hybrid missed on session 47's 4-GPU host (< 50 against
#        chunked 1024's 50) with its TTFT lost after admission; the client keeps SGLang's per-request
#        stamps now (bench.analysis.ttft_parts says where the time went).
# H200 (the lease gave H200s): the capped conversation at TBT 50 with seed 1 (session 40: both >= 4,
#        rates stopped at 4) on GPU 0, sharegpt at TBT 50 (session 41: 60 against chunked 1024's 66 on
#        a 10 % grid) on GPU 1, with the stamps.
END=${1:?END epoch}
source /tmp/t/bench/plans/lease.sh
if nvidia-smi -L | grep -q H200; then
    cell 0 cap50_s1 3.8,5.6 SEED=1 &
    cell 1 sharegpt50 54,72 CLIENT_PROCS=12 WORKLOAD=sharegpt &
else
    cell 0 cap30 3,4.8 TBT_SLO_MS=30 SYSTEMS="mux-hybrid sglang-chunked-512 sglang-chunked-1024" &
    cell 1 sharegpt50 36,66 CLIENT_PROCS=12 WORKLOAD=sharegpt &
fi
wait
echo done > $R/done
