left=$(( 25 * 60 )); i=0
while [ $left -gt 0 ]; do
    p=$(( left < 416 ? left : 416 ))
    python -m bench.soak --server-url http://127.0.0.1:30000 --server-pid 834 --timeline /tmp/rel/timeline.jsonl         --rate 4.8 --piece $i --piece-s $p --drain-s 120 --out /tmp/rel/soak > /tmp/rel/soak_piece$i.log 2>&1 &
    sleep $p; left=$(( left - p )); i=$(( i + 1 ))
done
wait
python -m bench.soak --report --out /tmp/rel/soak > /tmp/rel/soak_report.json
