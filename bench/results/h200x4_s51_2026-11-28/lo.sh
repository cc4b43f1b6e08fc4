# The lease's second job, as run (written on the host beside issue44_70b_x4.sh in /tmp/t/bench/plans/ and
# started with LEASE_OUT=/tmp/res2 and END = now + 460 s): the hybrid below the 0.7 req/s it failed.
END=$1; source "$(dirname "$0")/lease.sh"; export CELL=capped
A="$(cores_for 4 0),$(cores_for 4 1)" B="$(cores_for 4 2),$(cores_for 4 3)"
pair70 0,1 "$A" cap70_lo mux-hybrid:0.5,0.6 &
pair70 2,3 "$B" cap70_b_lo mux-hybrid:0.6
wait; echo done > $R/done
