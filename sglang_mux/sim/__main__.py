from sglang_mux import cli
from sglang_mux.sim.command import main

if __name__ == "__main__":
    cli.run(main)
