"""What capping prefill launches at half the decode's worst case would have done to these
timelines' gaps (a replay estimate, not a measurement): python replay_launch_cap.py

A decode row's gap is modelled as the host work before the decode launch, then the longer of
the decode's GPU time and the prefill launch that follows it, then the result processing; the
cap shortens the launch to at most 0.5 x the plan's worst-case decode (the rest of the layers
go to later iterations, where they are hidden too). Gaps are weighted by the decode batch
(each request in it sees one)."""
import json
import lzma
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).parent
PRE = ["book", "recv", "poll", "plan", "switch", "decode_launch"]


def rows(rate: str) -> pd.DataFrame:
    raw = lzma.open(HERE / "mux.timeline.jsonl.xz").read()
    a, b = json.loads((HERE / f"mux__{rate}.meta.json").read_text())["timeline_bytes"]
    recs = [json.loads(x) for x in raw[a:b].decode().splitlines() if x.strip()]
    return pd.DataFrame([{**r["host_ms"], "meas": r["measured_decode_ms"], "worst": r["t_decode_worst_ms"],
                          "bs": r["decode_bs"]} for r in recs
                         if "host_ms" in r and r.get("measured_decode_ms") is not None]).fillna(0.0)


def weighted_p99(x: pd.Series, w: pd.Series) -> float:
    o = np.argsort(x.values)
    cw = np.cumsum(w.values[o])
    return float(x.values[o][np.searchsorted(cw, 0.99 * cw[-1])])


for rate in ("3.5", "4"):
    df = rows(rate)
    pre = df[PRE].sum(axis=1)
    for name, launch in (("as run", df.prefill_launch), ("capped", np.minimum(df.prefill_launch, 0.5 * df.worst))):
        gap = pre + np.maximum(launch, df.meas) + df.result
        print(f"{rate} req/s, {name}: P99 gap {weighted_p99(gap, df.bs):.1f} ms, "
              f"share of gap weight over 50 ms {100 * df.bs[gap > 50].sum() / df.bs.sum():.2f} %")
