# Run on the device at 05:18 UTC, after killing job.sh's main shell (its table70_tp2's bare `wait`
# also waited for tp2_sigterms, which ran in the background beside it; fixed since: it waits for its
# own pid). END is job.sh's. The rest of job.sh (tp2_sigterms) went on untouched.
END=1795843874
source /tmp/t/bench/plans/lease.sh
t=$R/llama-3.1-70b__nvidia-h200__fa3__tp2
{ python -m profiling.merge $t $R/table_contention && cp bench/results/h200x4_s40_2026-11-27/allreduce/allreduce.json $t/ && python -m sglang_mux.estimator fit $t && python -m sglang_mux.estimator check $t; } > $R/table_fit.log 2>&1
echo "fit rc=$?" >> $R/table_fit.log
smoke70_tp2 0,3 "$(cores_for 4 0),$(cores_for 4 3)"
echo done > $R/done
