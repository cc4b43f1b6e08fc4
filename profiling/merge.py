"""`python -m profiling.merge INTO FROM...`: make one table of parts measured apart.

A table's kinds can be measured on several GPUs of one host at once (``profiling.run --what``,
one kind per GPU, each into its own directory); this adds each FROM's cells that INTO lacks
(TableStore.merge) and prints what it added. Fit and check INTO afterwards."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from profiling.store import TableStore
from sglang_mux import cli


def main(argv: Sequence[str] | None = None) -> int:
    ap = cli.ArgumentParser(prog="python -m profiling.merge", description=__doc__.splitlines()[0])
    ap.add_argument("into", help="the table directory that receives the cells")
    ap.add_argument("sources", nargs="+", metavar="from", help="table directories measured apart")
    args = ap.parse_args(argv)
    for d in [args.into, *args.sources]:
        if not Path(d).is_dir():
            return cli.print_error(f"{d} is not a table directory")
    into = TableStore(args.into)
    for src in args.sources:
        try:
            added = into.merge(TableStore(src))
        except ValueError as e:
            return cli.print_error(str(e))
        print(f"{src} -> {args.into}: " + ", ".join(f"{name} +{n}" for name, n in added.items()))
    return 0


if __name__ == "__main__":
    cli.run(main)
