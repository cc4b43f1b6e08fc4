#!/bin/bash
# Issue 19, items 2 and 3, on one GPU: hostile input and access, the mux beside plain SGLang.
#   bash bench/plans/hostile_input.sh OUT BUDGET_S
# The caller has sourced .gpu/env.sh (the offline SGLang bundle); run from any copy of the tree.
#  1. the mux server (launch/serve.sh llama-3.1-8b, dummy weights, FA3, --enable-metrics) with
#     --api-key KEY; at the same time a goodput load of valid traffic (the capped conversation,
#     <= 8000-token prompts, LOAD_RATE=4 req/s for LOAD_S=90 s: the mux's goodput on one H100 is
#     ~4.4 req/s at TBT 50) and bench.fuzz --n FUZZ_N=2000 --api-key KEY; then bench.auth_probe
#     --routes sglang (every route of SGLang's app without the key); the server stopped;
#  2. plain SGLang (bench.systems' `sglang` command line: --mem-fraction-static 0.85
#     --enable-cache-report --incremental-streaming-output, FA3, serve.sh's --sampling-backend
#     pytorch --grammar-backend none, --enable-metrics), no key, the same fuzz: it dies on the
#     out-of-range token ids, and the fuzz then stops sending (the rest counted unsent).
# Device time on one H100 (estimated): each server start ~1.5 min (dummy weights, CUDA graphs;
# 5 min at most), the load with the fuzz beside it ~3.5 min (90 s of arrivals, their drain, the
# fuzz's --budget-s), the auth probe < 30 s, plain SGLang's fuzz < 1 min (it dies early): ~7-8
# minutes. Between steps the time left of BUDGET_S is checked; a step that no longer fits is
# skipped and says so (steps.tsv, summary.json).
# OUT gets: host.txt, mux_server.log, mux_load.json (+ .jsonl, every valid request's outcome),
# mux_fuzz.json, auth_probe.json, sglang_server.log, sglang_fuzz.json, steps.tsv, summary.json
# (device, date, the command; per system: malformed sent, 5xx, deaths, valid sent and completed;
# the auth probe's served-without-key).
# Overrides (tests/test_plan_hostile_input.py runs this on the CPU with stub servers): PORT,
# HOSTILE_KEY, MUX_CMD and SGLANG_CMD (command lines run by bash -c; PORT and KEY are exported),
# ROUTES (a JSON file instead of sglang), FUZZ_N, FUZZ_TIMEOUT_S, LOAD_RATE, LOAD_S.
set -u
OUT=${1:?OUT directory}; BUDGET=${2:?BUDGET_S, the device seconds this plan may take}
cd "$(dirname "$0")/../.."
mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd)
export PORT=${PORT:-30000}; URL=http://127.0.0.1:$PORT
export KEY=${HOSTILE_KEY:-sglang-mux-hostile-input-test-key}  # a fixed test key, not a secret
FUZZ_N=${FUZZ_N:-2000}; FUZZ_TIMEOUT_S=${FUZZ_TIMEOUT_S:-60}; LOAD_RATE=${LOAD_RATE:-4}; LOAD_S=${LOAD_S:-90}
ROUTES=${ROUTES:-sglang}
MODEL=launch/models/llama-3.1-8b
MUX_CMD=${MUX_CMD:-"SGLANG_MUX_NO_INSTALL=1 exec bash launch/serve.sh llama-3.1-8b --attention-backend fa3 \
--enable-metrics --api-key \$KEY"}
SGLANG_CMD=${SGLANG_CMD:-"exec $(python -c "import shlex, sys
from bench import systems
print(shlex.join(systems.server_command('sglang', '$MODEL', $PORT, tokenizer_path='sglang_mux/data/tokenizer',
      attention_backend='fa3', extra_args=['--sampling-backend', 'pytorch', '--grammar-backend', 'none',
                                           '--enable-metrics'])))")"}
source bench/plans/one_host.sh  # left, one_host (GPU recorded, and free), healthy
one_host "$OUT"
printf 'step\tstart_s\tend_s\tnote\n' > "$OUT/steps.tsv"
step() {  # step NAME NEED_S CMD...: run CMD if NEED_S seconds of the budget are left, timed in steps.tsv
    local name=$1 need=$2 t0 rc; shift 2
    t0=$(( $(date +%s) - T0 ))
    if [ "$(left)" -lt "$need" ]; then
        printf '%s\t%s\t%s\t%s\n' "$name" "$t0" "$t0" "skipped: $(left) s left, needs $need" >> "$OUT/steps.tsv"
        echo "budget: $name skipped ($(left) s left, needs $need)"; return 1
    fi
    "$@"; rc=$?
    printf '%s\t%s\t%s\t%s\n' "$name" "$t0" "$(( $(date +%s) - T0 ))" "rc=$rc" >> "$OUT/steps.tsv"
    return $rc
}
start_server() {  # start_server NAME CMD: in its own session (its process group is the server's tree)
    setsid bash -c "$2" > "$OUT/$1_server.log" 2>&1 < /dev/null &
    local pid=$! limit=$(( $(left) < 300 ? $(left) : 300 ))
    echo "$pid" > "$OUT/$1_server.pid"
    for _ in $(seq "$limit"); do
        healthy "$URL" && { echo "$1 up after $(( $(date +%s) - T0 )) s of the plan"; return 0; }
        kill -0 "$pid" 2> /dev/null || break
        sleep 1
    done
    echo "$1 did not start"; tail -30 "$OUT/$1_server.log"; return 1
}
stop_server() {  # stop_server NAME: SIGTERM to its process group, SIGKILL after 30 s; the GPU freed
    local pid i
    pid=$(cat "$OUT/$1_server.pid" 2> /dev/null) || return 0
    kill -0 "$pid" 2> /dev/null && echo alive > "$OUT/$1_server.end" || echo "gone" > "$OUT/$1_server.end"
    kill -TERM -- "-$pid" 2> /dev/null
    for i in $(seq 30); do kill -0 "$pid" 2> /dev/null || break; sleep 1; done
    kill -KILL -- "-$pid" 2> /dev/null
    rm -f "$OUT/$1_server.pid"
    gpu_free
}
cleanup() {  # the plan cut short (a command's time limit): no server outlives it
    local n pid
    for n in mux sglang; do
        pid=$(cat "$OUT/${n}_server.pid" 2> /dev/null) && kill -KILL -- "-$pid" 2> /dev/null
    done
}
trap cleanup EXIT
trap 'exit 143' TERM INT
load() {  # load NAME: the capped conversation at LOAD_RATE for LOAD_S, with the key; every outcome kept
    python - "$URL" "$KEY" "$LOAD_RATE" "$LOAD_S" "$OUT/$1_load" << 'EOF'
import collections, json, sys
from bench import client, soak, workloads
url, key, rate, secs, out = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
wl = workloads.build("conversation", rate=rate, duration_s=secs, arrival="poisson", seed=7, input_cap=8000,
                     salt="hostile")
recs, info = client.run_workload(url, wl, wl.span_s + 120, progress=False, api_key=key)
with open(out + ".jsonl", "w") as f:
    for r in recs:  # per-token times left out (a few MB); each request's worst gap kept
        gaps = [b - a for a, b in zip(r["tok_ms"], r["tok_ms"][1:])]
        f.write(json.dumps({**{k: v for k, v in r.items() if k != "tok_ms"}, "ttft_ms": (r["tok_ms"] or [None])[0],
                            "max_tbt_ms": round(max(gaps), 3) if gaps else None}) + "\n")
res = {**soak.outcome(recs), "rate": rate, "arrivals_s": secs, "input_cap": 8000, "run": info,
       "errors": collections.Counter(r["error"] for r in recs if not r["ok"]).most_common(10)}
json.dump(res, open(out + ".json", "w"), indent=1)
print("load:", json.dumps({k: res[k] for k in ("sent", "completed", "errored", "lost")}))
EOF
}
fuzz() {  # fuzz NAME BUDGET_S [ARGS...]
    local name=$1 b=$2; shift 2
    python -m bench.fuzz --server-url "$URL" --n "$FUZZ_N" --context-len 131072 --timeout-s "$FUZZ_TIMEOUT_S" \
        --budget-s "$b" --out "$OUT/${name}_fuzz.json" "$@" | tail -25
}
mux_pass() {  # the load and the fuzz at once (the load's first arrival is at its start); the fuzz
    # may not outlast the load's drain
    load mux &
    local lp=$!
    fuzz mux $(( LOAD_S + 90 )) --api-key "$KEY"
    wait $lp
}
# 1. the mux with --api-key: the fuzz under load, then the auth probe
if step mux_start 150 start_server mux "$MUX_CMD"; then
    step mux_load_and_fuzz $(( LOAD_S + 240 )) mux_pass
    step auth_probe 60 timeout 120 python -m bench.auth_probe --server-url "$URL" --api-key "$KEY" \
        --routes "$ROUTES" --timeout-s 30 --out "$OUT/auth_probe.json" | tail -12
fi
step mux_stop 0 stop_server mux
# 2. plain SGLang, no key, the same fuzz
if step sglang_start 150 start_server sglang "$SGLANG_CMD"; then
    FB=$(( $(left) - 60 )); [ "$FB" -gt 150 ] && FB=150; [ "$FB" -lt 30 ] && FB=30  # 0 would be no limit
    step sglang_fuzz 60 fuzz sglang "$FB"
fi
step sglang_stop 0 stop_server sglang
# summary.json: what the issue asks of each system, from the files above
python - "$OUT" "$BUDGET" "$(( $(date +%s) - T0 ))" "bash $0 $*" "$MUX_CMD" "$SGLANG_CMD" "$FUZZ_N" << 'EOF'
import csv, datetime as dt, json, subprocess, sys
from pathlib import Path
out, budget, wall, command, mux_cmd, sglang_cmd, n = Path(sys.argv[1]), *sys.argv[2:]
def read(name):
    p = out / name
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError):
        return None
def smi(q):
    try:
        return subprocess.run(["nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader"], capture_output=True,
                              text=True, timeout=30).stdout.strip()
    except OSError:
        return None
def system(name, cmd, load=None, auth=None):
    f = read(f"{name}_fuzz.json")
    end = out / f"{name}_server.end"  # "alive" or "gone" when the plan stopped it
    s = {"server": cmd, "ran": f is not None, "server_at_stop": end.read_text().strip() if end.exists() else None}
    if f:
        s.update({k: f[k] for k in ("malformed", "malformed_sent", "unsent", "five_xx", "deaths", "death",
                                    "server_alive_after", "counts", "not_right_total", "wall_s")})
        s["fuzz_valid"] = {"sent": f["valid_sent"], "completed": f["counts"].get("ok", 0)}
    if load is not None:
        s["load"] = {k: load[k] for k in ("sent", "completed", "errored", "lost", "errors", "rate", "arrivals_s")}
    if f:
        s["valid_sent"] = f["valid_sent"] + (load or {}).get("sent", 0)
        s["valid_completed"] = f["counts"].get("ok", 0) + (load or {}).get("completed", 0)
    if auth is not None:
        s["auth_probe"] = {k: auth[k] for k in ("routes_from", "routes_probed", "served_without_key",
                                                "reached_without_key", "auth_off", "ok", "not_ok")}
    return s
mux = system("mux", mux_cmd, read("mux_load.json"), read("auth_probe.json"))
plain = system("sglang", sglang_cmd)
ok = lambda *xs: all(x is not None and x for x in xs)  # noqa: E731
summary = {
    "device": smi("name,uuid,driver_version"), "date": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
    "command": command, "budget_s": int(budget), "wall_s": int(wall),
    "steps": list(csv.DictReader(open(out / "steps.tsv"), delimiter="\t")),
    "systems": {"mux": mux, "sglang": plain},
    "must_show": {  # the issue's: on the mux, 0 5xx, 0 deaths, every valid request completed, 0 served without key
        f"mux_malformed_sent_ge_{n}": ok(mux.get("malformed_sent", 0) >= int(n)),
        "mux_0_5xx": ok(mux.get("ran"), mux.get("five_xx") == 0),
        "mux_0_deaths": ok(mux.get("ran"), mux.get("deaths") == 0),
        "mux_every_valid_completed": ok("load" in mux, mux.get("valid_sent") == mux.get("valid_completed")),
        "mux_0_served_without_key": ok("auth_probe" in mux,
                                       (mux.get("auth_probe") or {}).get("served_without_key") == 0,
                                       (mux.get("auth_probe") or {}).get("ok")),
        "sglang_beside_it": plain["ran"]}}
(out / "summary.json").write_text(json.dumps(summary, indent=1))
print(json.dumps(summary["must_show"], indent=1))
EOF
