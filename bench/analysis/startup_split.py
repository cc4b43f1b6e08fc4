"""Where a server's start went, from its log and bench.run's ``<system>__start.json``.

    python -m bench.analysis.startup_split RUN_DIR [RUN_DIR ...]      (repository root)

bench.run times a start from the launch to /health (``startup_s``); the server's log stamps its
phases to the second. The launch is the ready line's time less ``startup_s``, and each phase runs
to the next mark: before SGLang's first log line (the launcher's imports and argument checks), to
"Init torch distributed begin" (the scheduler process's start: imports, and the mux's partitions),
weights, the KV pool, the prefill CUDA graph, the decode CUDA graphs (the mux: one set per
partition), and to "ready" (the HTTP server and its warm-up). A log or ``.xz`` of it as
bench/results keeps them. One line per server; CPU, instant.
"""
from __future__ import annotations

import datetime as dt
import json
import lzma
import re
from pathlib import Path

from sglang_mux import cli

# (phase, the log line that ends it); the first phase ends at the first stamped line
MARKS = (("imports", None), ("scheduler", r"Init torch distributed begin"), ("weights", r"Memory pool end"),
         ("prefill graph", r"Capture target prefill CUDA graph end"),
         ("decode graphs", r"Capture target decode CUDA graph end"), ("ready", r"fired up and ready"))
STAMP = re.compile(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\] (.*)")


def _text(p: Path) -> str:
    return lzma.open(p, "rt").read() if p.suffix == ".xz" else p.read_text()


def split(log: str, startup_s: float) -> dict[str, float] | None:
    """Seconds of each phase (MARKS, in order; a phase whose line is missing, e.g. no prefill graph,
    is left out and the next one takes its time) of the server's first start in ``log``; None if
    the log never says it is ready."""
    at: dict[str, float] = {}
    for line in log.splitlines():
        m = STAMP.match(line)
        if not m:
            continue
        t = dt.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S").timestamp()
        at.setdefault("imports", t)
        for name, pat in MARKS[1:]:
            if name not in at and re.search(pat, m.group(2)):
                at[name] = t
        if "ready" in at:
            break
    if "ready" not in at:
        return None
    out, prev = {"imports": at["imports"] - (at["ready"] - startup_s)}, at["imports"]
    for name, _ in MARKS[1:]:
        if name in at:
            out[name], prev = at[name] - prev, at[name]
    return out


def run_splits(run_dir: Path) -> list[tuple[str, float, dict[str, float]]]:
    """(system, startup_s, split) for each server of a bench.run directory whose start and log are kept."""
    out = []
    for start in sorted(run_dir.glob("*__start.json*")):
        system = start.name.split("__start.json")[0]
        logs = [p for p in (run_dir / f"{system}.log", run_dir / f"{system}.log.xz") if p.exists()]
        up = json.loads(_text(start)).get("startup_s")
        if not logs or up is None:
            continue
        s = split(_text(logs[0]), float(up))
        if s is not None:
            out.append((system, float(up), s))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = cli.ArgumentParser(prog="python -m bench.analysis.startup_split", description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path, help="bench.run output directories (their *__start.json and logs)")
    a = ap.parse_args(argv)
    names = [m[0] for m in MARKS]
    print("| run | server | start (s) | " + " | ".join(names) + " |")
    print("|---|---|---:|" + "---:|" * len(names))
    found = 0
    for d in a.runs:
        if not d.is_dir():
            ap.error(f"{d}: not a directory (give bench.run output directories)")
        for system, up, s in run_splits(d):
            found += 1
            print(f"| {d.parent.name}/{d.name} | {system} | {up:.1f} | " + " | ".join(f"{s[n]:.0f}" if n in s else "—" for n in names)
                  + " |")
    if not found:
        ap.error("no server start with its log in " + ", ".join(map(str, a.runs)))
    return 0


if __name__ == "__main__":
    cli.run(main)
