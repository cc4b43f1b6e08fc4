#!/bin/bash
# Issue 19 on one GPU machine, one device command per step, the server kept alive between them
# (started with setsid: it outlives a command and goes when the machine goes back):
#   bash bench/plans/reliability.sh start RATE   # server; fuzz (1000 malformed); every fault but KV x 20 under load
#                                               # (FUZZ=0: the faults alone)
#   bash bench/plans/reliability.sh soak RATE    # one soak piece of <= 9 minutes (repeat)
#   bash bench/plans/reliability.sh end RATE     # soak report; SIGTERM under load; exit time
#   bash bench/plans/reliability.sh kv RATE      # a server with a 64K-token KV pool: 20 bursts of 12 x 8K prompts
#                                               # (the retraction path), under load; the server alive after
# The server preempts (a length-aware TTFT SLO: without it disconnect_preempted never meets a
# preemption) and rotates its timeline at 4 MB (~4 minutes of load), so both are exercised.
# Everything goes to /tmp/rel (tar it to $OUT after each step). A machine is held at most 30
# minutes, installation and server start included, so one server's soak is at most ~25 minutes
# here: issue 19's 30 minutes at the goodput rate does not fit in one lease.
set -u
STEP=${1:?start|soak|end}; RATE=${2:?rate, req/s}
R=/tmp/rel; PORT=30000; URL=http://127.0.0.1:$PORT
mkdir -p $R
healthy() { python -c "import urllib.request; urllib.request.urlopen('$URL/health', timeout=2)" 2> /dev/null; }
case $STEP in
start|kv)
    [ $STEP = kv ] && { pkill -f "[s]glang_mux.launch_server"; sleep 5; EXTRA="--max-total-tokens 65536"; L=$R/kv_; } \
        || { EXTRA=""; L=$R/; }
    nvidia-smi --query-gpu=name,uuid --format=csv,noheader >> $R/gpu.txt
    SGLANG_MUX_NO_INSTALL=1 PORT=$PORT setsid bash launch/serve.sh llama-3.1-8b --enable-metrics $EXTRA \
        --mux-ttft-ms-per-token 0.5 \
        --mux-timeline ${L}timeline.jsonl --mux-timeline-max-mb 4 > ${L}server.log 2>&1 < /dev/null &
    for _ in $(seq 300); do healthy && break; sleep 1; done
    healthy || { echo "server did not start"; tail -30 ${L}server.log; exit 1; }
    pgrep -f "sglang_mux.launch_server" | head -1 > ${L}server.pid   # the launcher, not bash
    if [ $STEP = kv ]; then
        python -m bench.faults --server-url $URL --faults kv_exhaustion --repeat 20 --workers 1 --kv-burst 12 \
            --long-tokens 8192 --rate 1 --load-s 120 --context-len 131072 --out $R/faults_kv.json | tail -30
    else
        # out-of-range token ids kill plain SGLang 0.5.16 too (bench/results/reliability.json): tested
        # on their own there, skipped here so that one request does not end the pass
        [ "${FUZZ:-1}" = 1 ] && python -m bench.fuzz --server-url $URL --n 1000 --context-len 131072 --out $R/fuzz.json \
            --skip generate:input_ids=negative_id,generate:input_ids=id_past_vocab
        python -m bench.faults --server-url $URL --repeat 20 --rate "$RATE" --load-s 200 --context-len 131072 \
            --faults disconnect_prefill,disconnect_decode,disconnect_preempted,abort_running,prompt_past_context,max_new_tokens_past_context \
            --out $R/faults.json | tail -40
    fi
    ;;
soak)
    python -m bench.soak --server-url $URL --server-pid "$(cat $R/server.pid)" --timeline $R/timeline.jsonl \
        --rate "$RATE" --piece-s 480 --drain-s 40 --out $R/soak
    ;;
end)
    python -m bench.soak --report --out $R/soak
    python -m bench.faults --server-url $URL --faults "" --rate "$RATE" --load-s 30 \
        --sigterm-pid "$(cat $R/server.pid)" --out $R/sigterm.json | tail -20
    ;;
*) echo "step: start, soak, end or kv"; exit 2 ;;
esac
