#!/bin/bash
# CPU only. The simulator against a served TBT-30 point: the capped conversation at 3-5 req/s,
# the same prompts and Poisson arrivals as bench.run's points, for each prefill-beside-decode model
# (1 = the paper's, the table's co-run cells, 1.4 = fitted to session 20's served prefill busy
# time) and each guard (the table's; refined online to its max, as served). Co-run decode draws
# its measured / worst-case ratio from the served point's timeline (TIMELINE); each decode
# iteration's host time is HOST ms, or with HOST=served a draw from that timeline's.
#   bash bench/plans/sim_calibration.sh OUT.jsonl
# Session 20 (bench/results/sim_calibration_s20/): the defaults. Session 21 (sim_calibration_s21/):
#   TIMELINE=bench/results/sim_calibration_s21/served_mux_3.timeline.jsonl.xz HOST=served GUARDS=online \
#       TBTS=30 bash bench/plans/sim_calibration.sh bench/results/sim_calibration_s21/grid.jsonl
set -eu
OUT=${1:?usage: sim_calibration.sh OUT.jsonl}
T=contention_tables/llama-3.1-8b__nvidia-h100-80gb-hbm3__fa3
J=${TIMELINE:-bench/results/sim_calibration_s20/jitter_mux_3.timeline.jsonl.xz}
HOST=${HOST:-1.9}
host=(--host-ms "$HOST"); [ "$HOST" = served ] && host=(--host-from "$J")
: > "$OUT"
for tbt in ${TBTS:-30 50}; do for x in 1 table 1.4; do for og in ${GUARDS:-table online}; do
    for r in "3 135" "3.5 158" "4 180" "4.5 202" "5 225"; do   # bench.run's request count per 45 s point
        set -- $r
        extra=(); [ "$og" = online ] && extra=(--online-guard)
        cmd=(python -m sglang_mux.sim --table $T --trace conversation --arrival poisson --rate "$1" --limit "$2"
             --input-cap 8000 "${host[@]}" --tbt-slo-ms "$tbt" --decode-jitter "$J" --prefill-slowdown "$x"
             "${extra[@]}" --json)
        "${cmd[@]}" 2> /dev/null | python -c '
import json, sys
d = json.load(sys.stdin); r = d["results"][0]
print(json.dumps({"tbt_slo_ms": float(sys.argv[1]), "prefill_slowdown": sys.argv[2], "online_guard": sys.argv[3],
                  "host": sys.argv[6], "rate": float(sys.argv[4]), "requests": r["requests"],
                  "ttft_p99_s": round(r["ttft_p99_s"], 3), "tbt_p99_ms": round(r["tbt_p99_ms"], 2),
                  "ttft_drift_ok": r["ttft_drift"]["ok"], "prefill_busy_s": round(r["prefill_busy_s"], 2),
                  "partition_share": {k: round(v, 3) for k, v in r["partition_share"].items()},
                  "command": sys.argv[5]}))' "$tbt" "$x" "$og" "$1" "${cmd[*]}" "$HOST" >> "$OUT"
    done
done; done; done
echo "$(wc -l < "$OUT") points in $OUT"
