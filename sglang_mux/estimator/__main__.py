from sglang_mux import cli
from sglang_mux.estimator.command import main

if __name__ == "__main__":
    cli.run(main)
