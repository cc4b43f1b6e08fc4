END=1795839963
source /tmp/t/bench/plans/lease.sh
cell_r() { local g=$1 n=$2 r=$3; shift 3
  env SYSTEMS="sglang-chunked-1024 mux-hybrid" "$@" bash bench/plans/per_gpu.sh "$g" bash bench/plans/fa3_conv8k_sweep.sh $R/$n "$r" $(( $(left) - 40 )) > $R/$n.log 2>&1; }
cell_r 0 fe_served 58.5,63 CLIENT_PROCS=12 WORKLOAD=sharegpt &
cell_r 1 fe_tm4 58.5,63 CLIENT_PROCS=12 WORKLOAD=sharegpt EXTRA_SA="--tokenizer-worker-num 4" &
wait
