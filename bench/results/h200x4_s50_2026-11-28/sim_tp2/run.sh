cd "$(dirname "$0")/../../../.."
T=llama-3.1-70b__nvidia-h200__fa3__tp2; TL=bench/results/h200x4_s50_2026-11-28/smoke70/mux-hybrid.timeline.jsonl.xz
for r in 0.5 0.6 0.7 0.8 0.9; do
  n=$(python -c "print(int($r*45))"); echo "== rate $r"
  timeout 900 python -m sglang_mux.sim --table $T --arrival poisson --rate $r --input-cap 8000 --limit $n --tbt-slo-ms 100 --ttft-slo-ms 5000 --policy hybrid --prefill-graph --online-guard --host-from $TL --decode-jitter $TL 2>&1 | tail -3
  for b in 256 512 1024 2048; do timeout 600 python -m sglang_mux.sim_chunked --table $T --arrival poisson --rate $r --input-cap 8000 --limit $n --tbt-slo-ms 100 --ttft-slo-ms 5000 --budget $b --host-ms 0 2>&1 | tail -1 | sed "s/^/chunked $b: /"; done
done
