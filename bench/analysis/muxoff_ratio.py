"""``--disable-mux`` against plain SGLang: their output throughput, pair by pair.

    python -m bench.analysis.muxoff_ratio DIR      (from the repository root)

Input: ``DIR/pair*/summary.json``, each a ``bench.run`` of ``sglang`` and ``mux-off`` at one rate
(the plans alternate which runs first). Output: ``DIR/ratios.json`` and stdout, each pair's
output tokens/s and mux-off / sglang, and their median: the entry point with multiplexing off
must cost nothing (issue 44 asks within 2 % at TP 2). A pair missing either system is left out
and named. CPU, instant.
"""
from __future__ import annotations

import json
import statistics
from pathlib import Path

from sglang_mux import cli
from sglang_mux import cli_io as _cli_io

SYSTEMS = ("sglang", "mux-off")


def ratios(out: Path) -> dict:
    """{"pairs": {name: {sglang, mux-off, ratio}}, "median_ratio", "incomplete": [names]}."""
    pairs, incomplete = {}, []
    for p in sorted(out.glob("pair*/summary.json")):
        systems = _cli_io.read_json(p, "bench.run summary")["systems"]
        tput = {s: v["points"][0]["summary"]["output_tok_s"] for s, v in systems.items() if v["points"]}
        if set(SYSTEMS) <= set(tput):
            pairs[p.parent.name] = {**{s: tput[s] for s in SYSTEMS}, "ratio": round(tput["mux-off"] / tput["sglang"], 4)}
        else:
            incomplete.append(p.parent.name)
    return {"pairs": pairs, "median_ratio": statistics.median(v["ratio"] for v in pairs.values()) if pairs else None,
            "incomplete": incomplete}


def main(argv=None) -> int:
    ap = cli.ArgumentParser(prog="python -m bench.analysis.muxoff_ratio", description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", type=Path, help="the directory holding pair*/summary.json")
    a = ap.parse_args(argv)
    if not any(a.dir.glob("pair*/summary.json")):
        ap.error(f"{a.dir} holds no pair*/summary.json (bench.run outputs of sglang and mux-off)")
    res = ratios(a.dir)
    (a.dir / "ratios.json").write_text(json.dumps(res, indent=1) + "\n")
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    cli.run(main)
