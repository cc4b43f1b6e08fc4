left=$(( 5 * 60 )); i=0
while [ $left -gt 0 ]; do
    p=$(( left < 333 ? left : 333 ))
    python -m bench.soak --server-url http://127.0.0.1:30000 --server-pid 1038 --timeline /tmp/rel/timeline.jsonl         --rate 6 --piece $i --piece-s $p --drain-s 120 --out /tmp/rel/soak > /tmp/rel/soak_piece$i.log 2>&1 &
    sleep $p; left=$(( left - p )); i=$(( i + 1 ))
done
wait
python -m bench.soak --report --out /tmp/rel/soak > /tmp/rel/soak_report.json
