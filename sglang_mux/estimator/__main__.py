from sglang_mux import cli
from sglang_mux.estimator.command import main

cli.run(main)
