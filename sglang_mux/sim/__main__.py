from sglang_mux import cli
from sglang_mux.sim.command import main

cli.run(main)
