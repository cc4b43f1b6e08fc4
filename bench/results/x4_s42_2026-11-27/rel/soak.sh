left=$(( 18 * 60 )); i=0
while [ $left -gt 0 ]; do
    p=$(( left < 454 ? left : 454 ))
    python -m bench.soak --server-url http://127.0.0.1:30000 --server-pid 1724 --timeline /tmp/res/rel/timeline.jsonl         --rate 4.4 --piece $i --piece-s $p --drain-s 120 --out /tmp/res/rel/soak > /tmp/res/rel/soak_piece$i.log 2>&1 &
    sleep $p; left=$(( left - p )); i=$(( i + 1 ))
done
wait
python -m bench.soak --report --out /tmp/res/rel/soak > /tmp/res/rel/soak_report.json
