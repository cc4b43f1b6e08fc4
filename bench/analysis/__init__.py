"""CPU analyses of served runs and traces, run from the repository root as ``python -m bench.analysis.<name>``.

- ``replay_estimator``: a mux server's decode iterations replayed through the estimator's online
  refinement (TABLE RUN_DIR RATES).
- ``predict_synthetic``: the simulators' goodput on the Mooncake synthetic slice (any table, pools, offset).
- ``predict_uncapped_conv``: the simulators' goodput on the uncapped conversation (H100 FA3 table).
- ``sim_hybrid_map``: the hybrid policy's predicted SLO map (hybrid, dispatcher, chunked 512 / 1024)
  on five workloads at TBT 50 and 30 ms, with the H100 points (bench/results/sim_hybrid_2026-11-27/).
- ``whatif_host_time``: the mux's simulated TBT-30 goodput with less host time per decode iteration.
- ``trace_reuse_windows``: how much prefix reuse a window of the full Mooncake synthetic trace can show.

Each writes a markdown or text report to stdout; ``--help`` says what it reads. Not installed with
the package: they read the checkout's ``bench/results`` and ``bench/data``.
"""
