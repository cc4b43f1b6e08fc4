# Sourced by the lease plans (issue43_x4.sh, issue43_x2.sh, issue43_lone.sh, issue44_x4.sh,
# issue44_x2.sh, issue44_70b_x4.sh) once END (epoch) is set: run from the copy of the tree it is in
# (/tmp/t) with the bundle's environment, results in R (LEASE_OUT, default /tmp/res), left =
# seconds to END, the host's GPUs in R/host0.txt, cell: one SLO-map cell on one GPU, cells43: issue
# 43's two open cells on two GPUs, mg: multi_gpu.sh's parts on two, tp2_sigterms: issue 44's TP-2
# goodput and SIGTERMs on two, pair70: the 70B's systems at TP 2 on two GPUs, tp2_soak: issue 44's
# run at the TP goodput. tests/test_plans.py runs the issue-44 plans with their cells stubbed.
cd "$(dirname "${BASH_SOURCE[0]}")/../.." && source .gpu/env.sh
R=${LEASE_OUT:-/tmp/res}; mkdir -p $R
left() { echo $(( END - $(date +%s) )); }
# Server arguments for every system of a sharegpt cell: as served, SGLang's one HTTP + tokenizer
# process backed up at ~60 req/s on an H200 before the GPU did, and 4 tokenizer workers removed the
# backlog (bench/results/h200x4_s49_2026-11-28/).
TM4="--tokenizer-worker-num 4"
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
cells43() {  # cells43 GPU GPU: issue 43's two open cells for this host's GPU, one a GPU, in the background
    # H100: the capped conversation at TBT 30 with the per-size fused price (session 47's 4-GPU host:
    # both >= 2.9; session 46's lone H100, older code: hybrid 3.45, chunked 512 3.9), chunked 512
    # before 1024; sharegpt at TBT 50 (session 47, as served: < 50 against 50).
    # H200: sharegpt at TBT 30 (session 41: both >= 60, not bracketed) and chat-1k at TBT 50.
    if nvidia-smi -L | grep -q H200; then
        cell "$1" sharegpt30 50,72 CLIENT_PROCS=12 WORKLOAD=sharegpt TBT_SLO_MS=30 EXTRA_SA="$TM4" &
        cell "$2" chat50 14,26 CLIENT_PROCS=12 WORKLOAD=chat-1k &
    else
        cell "$1" cap30 3,4.8 TBT_SLO_MS=30 SYSTEMS="mux-hybrid sglang-chunked-512 sglang-chunked-1024" &
        cell "$2" sharegpt50 36,66 CLIENT_PROCS=12 WORKLOAD=sharegpt EXTRA_SA="$TM4" &
    fi
}
mg() {  # mg GPUS CORES NAME PARTS SECONDS [ENV...]: multi_gpu.sh's parts on two GPUs
    local g=$1 c=$2 n=$3 parts=$4 s=$5; shift 5
    CUDA_VISIBLE_DEVICES=$g taskset -c "$c" env PARTS="$parts" "$@" bash bench/plans/multi_gpu.sh $R/$n "$s" \
        > $R/$n.log 2>&1
}
tp2_sigterms() {  # tp2_sigterms GPUS CORES: the 8B shape's goodput at TP 2 with the hybrid (capped
    # conversation, TBT 50, bisected: multi_gpu.sh serving), then SIGTERM under load 3 times at it
    # (reliability.sh sigterms: every in-flight request must complete); ~12 minutes are kept for those
    local g=$1 c=$2 rate
    mg "$g" "$c" tp2 serving $(( $(left) - 720 )) SYSTEMS=mux-hybrid SEARCH=4,9 PORT=31000
    rate=$(python -c "import json,sys; print(json.load(open(sys.argv[1]))['systems']['mux-hybrid']['goodput_rps'] or 4)" \
           $R/tp2/serving/summary.json 2> /dev/null || echo 4)
    echo "SIGTERMs at $rate req/s" > $R/tp2_sigterms.log
    CUDA_VISIBLE_DEVICES=$g PORT=31000 REL_OUT=$R/tp2_sigterms SERVER_ARGS="--tp-size 2" \
        timeout $(( $(left) - 20 )) taskset -c "$c" bash bench/plans/reliability.sh sigterms 3 "$rate" >> $R/tp2_sigterms.log 2>&1
}
pair70() {  # pair70 GPUS CORES NAME SYSTEM:RATES...: the Llama-3.1-70B shape at TP 2 on those two GPUs,
    # each system in turn climbing its rates (capped conversation at TBT 100, fa3_conv8k_sweep.sh; with
    # CELL=uncapped the uncapped one, conv_uncapped_sweep.sh), one OUT, R/NAME; DURATION_S: the capped
    # sweep's seconds of arrivals a point
    local g=$1 c=$2 n=$3 s rates sweep=fa3_conv8k_sweep.sh; shift 3
    [ "${CELL:-capped}" = capped ] || sweep=conv_uncapped_sweep.sh
    for s in "$@"; do
        rates=${s#*:}; [ "$sweep" = fa3_conv8k_sweep.sh ] || rates=""  # conv_uncapped_sweep.sh reads RATES
        CUDA_VISIBLE_DEVICES=$g PORT=$(( 31000 + 1000 * ${g%%,*} )) SYSTEMS=${s%%:*} RATES=${s#*:} MODEL=llama-3.1-70b \
            TBT_SLO_MS=100 EXTRA_SA="--tp-size 2" STARTUP_S=${STARTUP_S:-240} taskset -c "$c" \
            bash bench/plans/$sweep $R/$n $rates $(( $(left) - 40 )) >> $R/$n.log 2>&1
    done
}
tp2_soak() {  # tp2_soak GPUS CORES RATE MINUTES: issue 44's run at the TP goodput: the 8B shape at TP 2 with
    # the hybrid, the capped conversation at RATE for MINUTES (reliability.sh soak: requests, GPU memory,
    # lost ones), 20 prompts of 100K tokens preempted and disconnected in it (reliability.sh preempt),
    # then SIGTERM under load (end) -> R/tp2_soak/
    local g=$1 c=$2 rate=$3 min=$4
    rel() { CUDA_VISIBLE_DEVICES=$g PORT=32000 REL_OUT=$R/tp2_soak SERVER_ARGS="--tp-size 2" taskset -c "$c" \
                bash bench/plans/reliability.sh "$@" >> $R/tp2_soak.log 2>&1; }
    rel serve || return
    rel soak "$rate" "$min" "$END"
    rel preempt 0
    rel wait $(( $(left) - 60 ))  # the soak's arrivals end by END - 150, its last tail ~80 s after
    rel end "$rate" 60
}
