# Sourced by the lease plans (issue43_x4.sh, issue43_x2.sh, issue43_lone.sh, issue44_x4.sh,
# issue44_x2.sh, issue44_70b_x4.sh) once END (epoch) is set: run from the copy of the tree in /tmp/t
# with the bundle's environment, results in R=/tmp/res, left = seconds to END, the host's GPUs in
# R/host0.txt, cell: one SLO-map cell on one GPU, and mg: multi_gpu.sh's parts on two.
cd /tmp/t && source .gpu/env.sh
R=/tmp/res; mkdir -p $R
left() { echo $(( END - $(date +%s) )); }
nvidia-smi --query-gpu=name,uuid --format=csv > $R/host0.txt
lscpu -e > $R/lscpu.txt 2>&1  # which vCPUs share a core (bench/cpu_split.py keeps them in one cell)
cores_for() {  # cores_for CELLS CELL: that cell's CPUs, whole cores (bench/cpu_split.py), else by number
    python -m bench.cpu_split --cells "$1" --cell "$2" 2> /dev/null \
        || echo "$(( $2 * $(nproc) / $1 ))-$(( ($2 + 1) * $(nproc) / $1 - 1 ))"
}
cell() {  # cell GPU NAME LO,HI [ENV...]: each system's goodput bisected on that GPU (per_gpu.sh)
    local g=$1 n=$2 r=$3; shift 3
    env SYSTEMS="mux-hybrid sglang-chunked-1024 sglang-chunked-512" "$@" bash bench/plans/per_gpu.sh "$g" \
        bash bench/plans/fa3_conv8k_sweep.sh $R/$n "search:$r" $(( $(left) - 40 )) > $R/$n.log 2>&1
}
mg() {  # mg GPUS CORES NAME PARTS SECONDS [ENV...]: multi_gpu.sh's parts on two GPUs
    local g=$1 c=$2 n=$3 parts=$4 s=$5; shift 5
    CUDA_VISIBLE_DEVICES=$g taskset -c "$c" env PARTS="$parts" "$@" bash bench/plans/multi_gpu.sh $R/$n "$s" \
        > $R/$n.log 2>&1
}
