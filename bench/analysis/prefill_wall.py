"""How long a mux server's layer-wise prefill batches took against the T_P planned for them.

    python -m bench.analysis.prefill_wall TIMELINE [TIMELINE ...]      (from the repository root)

Input: a served ``--mux-timeline`` (``.jsonl`` or ``.xz``). A batch starts at a row that forms
one (``new_prefill`` 1 on prefill SMs) and ends at the first later row that forms another or
runs no prefill (a decode or a fused iteration alone); its wall time is the time between those
rows, its plan the starting row's ``t_prefill_ms``. Batches over 5 s (a stall) and batches still
running at the end are left out; a batch that another preempts is left out (its wall time
would include the pause), as the server's ``prefill_wall.PrefillWall`` leaves it out.

Output (stdout, one line per timeline): the batches counted, Σ wall / Σ planned (what
PrefillWall learns) and the median of wall / planned per batch. It read 1.71 (capped
conversation, the hybrid) and 2.00 (the s28 dispatcher) where each chunk's GPU time had matched
its estimate: the partitions shrink under a growing decode (docs/engine.md, rule 3). CPU, seconds.
"""
from __future__ import annotations

import numpy as np

from sglang_mux import cli
from sglang_mux.mux_metrics import load_timeline

STALL_MS = 5000.0


def batch_walls(t) -> list[tuple[float, float]]:
    """(planned ms, wall ms) of each finished layer-wise batch of timeline ``t`` (file order)."""
    t = t.reset_index(drop=True)
    rows = len(t)
    out = []
    for i in t.index[(t.new_prefill == 1) & (t.prefill_sms > 0)]:
        j = i + 1
        while j < rows and t.new_prefill[j] != 1 and t.prefill_sms[j] > 0 and t.reason[j] not in ("fused",
                                                                                                  "decode-only"):
            j += 1
        if j >= rows or bool(t.preempt[j]):
            continue
        wall = (t.time[j] - t.time[i]) * 1e3
        if t.t_prefill_ms[i] > 0 and wall < STALL_MS:
            out.append((float(t.t_prefill_ms[i]), float(wall)))
    return out


def main(argv=None) -> int:
    ap = cli.ArgumentParser(prog="python -m bench.analysis.prefill_wall", description=__doc__.split("\n\n")[0])
    ap.add_argument("timelines", nargs="+", help="served --mux-timeline files (.jsonl or .xz)")
    a = ap.parse_args(argv)
    for path in a.timelines:
        try:
            walls = batch_walls(load_timeline(path))
        except (OSError, ValueError, KeyError) as e:
            ap.error(f"{path}: not a mux timeline with prefill batches ({e})")
        if not walls:
            print(f"{path}: no finished layer-wise batch")
            continue
        planned, wall = np.array(walls).T
        print(f"{path}: {len(walls)} batches, sum wall / sum planned {wall.sum() / planned.sum():.3f}, "
              f"median wall / planned {np.median(wall / planned):.2f}")
    return 0


if __name__ == "__main__":
    cli.run(main)
