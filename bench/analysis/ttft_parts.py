"""Where a point's TTFT went, process by process, over the run in time bins.

    python -m bench.analysis.ttft_parts RUN_DIR --system mux-hybrid --rate 50 [--bin-s 5]

Reads the per-request records' ``server`` stamps (`bench.client.SERVER_STAMPS`: SGLang 0.5.16 puts
them in the final chunk's meta_info with ``--enable-metrics``, which bench.run's servers get) and
the point's ``.meta.json`` (the client's wall clock at its start, ``client.t0_wall``). A TTFT is cut
into:
  - ``in``: the client's send to the tokenizer manager's receipt (the HTTP server's way in);
  - ``through``: that receipt to the tokenizer manager handing the first chunk to the stream, which
    the next two split where the scheduler stamps the request:
  - ``server``: the receipt to the scheduler's end of the request's prefill (``queue``: its part
    in the scheduler's waiting queue);
  - ``to_tm``: the end of prefill to the tokenizer manager's hand-off;
  - ``to_client``: that hand-off to the client reading it;
  - ``rest``: the TTFT less ``server`` (``in`` + ``to_tm`` + ``to_client``; records from before
    session 48's client lack the tokenizer manager's hand-off, and old points the client's clock).
With ``--tokenizer-worker-num`` > 1 SGLang 0.5.16 returns no scheduler stamps: ``through`` is what
is left of the server's part.
Printed: the point's P50 / P99 of each part, then per bin of send times the requests and each
part's P50 / P90. On session 48's H200 the sharegpt points that failed on TTFT drift lost their
time after the end of prefill (chunked 1024 at 58.5 req/s: ``rest`` P50 0.8 s, ``server`` 48 ms), a
backlog the scheduler never saw. CPU, seconds.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

from bench.metrics import STAMP_PARTS, load_jsonl, stamp_parts
from sglang_mux import cli


def _known(df) -> list[str]:
    return [c for c in STAMP_PARTS if df[c].notna().any()]


def overall(df) -> "pd.DataFrame":
    """The point's P50 and P99 of each part that has values (ms)."""
    cols = _known(df)
    return df[cols].quantile([0.5, 0.99]).rename(index={0.5: "p50", 0.99: "p99"}).round(1)


def by_bin(df, bin_s: float = 5.0) -> "pd.DataFrame":
    """Per ``bin_s`` of send time: n and the P50 / P90 of each part that has values (ms)."""
    cols = _known(df)
    g = df.groupby((df.send // bin_s * bin_s).rename("send_s"))
    out = g[cols].quantile(0.5).add_suffix("_p50").join(g[cols].quantile(0.9).add_suffix("_p90"))
    out.insert(0, "n", g.size())
    return out.round(1)


def client_t0(meta_path: Path) -> float | None:
    """The client's wall clock at send time 0, from a point's .meta.json (None if it has none)."""
    try:
        t0 = json.loads(meta_path.read_text()).get("client", {}).get("t0_wall")
    except (OSError, ValueError):
        return None
    return t0 if isinstance(t0, (int, float)) and math.isfinite(t0) else None


def main(argv=None) -> int:
    import pandas as pd
    p = cli.ArgumentParser(prog="python -m bench.analysis.ttft_parts", description=__doc__.splitlines()[0])
    p.add_argument("run_dir", type=Path)
    p.add_argument("--system", default="mux-hybrid")
    p.add_argument("--rate", required=True, help="the point's rate as in its file name, e.g. 50 or 3.45")
    p.add_argument("--bin-s", type=cli.positive(float), default=5.0, help="seconds of send time per bin")
    a = p.parse_args(argv)
    path = a.run_dir / f"{a.system}__{a.rate}.jsonl"
    try:
        recs = load_jsonl(path)  # or its .xz, as results keep it
    except FileNotFoundError:
        return cli.print_error(f"{path}: no such point (nor {path.name}.xz): give the rate as in the file name")
    df = stamp_parts(recs, client_t0(a.run_dir / f"{a.system}__{a.rate}.meta.json"))
    if df.empty:
        return cli.print_error(f"{path}: no finished request has the server's receipt stamp (SGLang gives "
                               "it with --enable-metrics; records of clients that did not keep it have none)")
    print(f"{len(df)} of {len(recs)} requests with server stamps")
    with pd.option_context("display.width", 250, "display.max_columns", 30):
        print(overall(df).to_string())
        print(by_bin(df, a.bin_s).to_string())
    return 0


if __name__ == "__main__":
    cli.run(main)
