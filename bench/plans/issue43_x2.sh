#!/bin/bash
# Issue 43's cells on one 2-GPU lease (nvidia-h100-x2 / nvidia-h200-x2), one cell per GPU with 16
# vCPUs each (per_gpu.sh: a lone GPU's share), run from a copy of the tree in /tmp/t in the background
# with an end time (epoch) and polled; results in /tmp/res:
#   (setsid nohup bash /tmp/t/bench/plans/issue43_x2.sh END > /tmp/job.log 2>&1 < /dev/null &)
# The cells are lease.sh's cells43 (an H100's, or an H200's); every system of a sharegpt cell gets
# 4 tokenizer workers ($TM4).
# Earlier versions: session 48's (the capped conversation with seed 1, sharegpt as served):
# bench/results/h200x2_s48_2026-11-28/job.sh (in commit f634912); session 49 ran its front-end question on a 4-GPU host
# (bench/results/h200x4_s49_2026-11-28/fe.sh (in commit f634912)).
END=${1:?END epoch}
source "$(dirname "$0")/lease.sh"
cells43 0 1
wait
echo done > $R/done
