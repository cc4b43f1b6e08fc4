left=1200; i=0
while [ $left -gt 0 ]; do
    p=$(( left < 258 ? left : 258 ))
    python -m bench.soak --server-url http://127.0.0.1:32000 --server-pid 1066 --timeline /tmp/res/tp2_soak/timeline.jsonl         --rate 7.75 --piece $i --piece-s $p --drain-s 120 --out /tmp/res/tp2_soak/soak > /tmp/res/tp2_soak/soak_piece$i.log 2>&1 &
    sleep $p; left=$(( left - p )); i=$(( i + 1 ))
done
wait
python -m bench.soak --report --out /tmp/res/tp2_soak/soak > /tmp/res/tp2_soak/soak_report.json
