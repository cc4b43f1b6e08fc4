"""Where a point's TTFT went: the server's part (its receipt to the end of the request's prefill)
and the rest (the request's way in, the first token's way out), over the run in time bins.

    python -m bench.analysis.ttft_parts RUN_DIR --system mux-hybrid --rate 50 [--bin-s 5]

Reads the per-request records' ``server`` stamps (`bench.client.SERVER_STAMPS`: SGLang 0.5.16 puts
them in the final chunk's meta_info with ``--enable-metrics``, which bench.run's servers get).
Per bin of send times: requests, and the medians and P90s of TTFT, the server's part, its queue
time and the rest (TTFT less the server's part). A backlog the scheduler never saw shows in the
rest: on session 47's 4-GPU host the hybrid's scheduler held at most 15 waiting requests while
its sharegpt TTFT drifted to 2.5 s. CPU, seconds.
"""
from __future__ import annotations

from pathlib import Path

from sglang_mux import cli


def parts(records) -> "pd.DataFrame":
    """One row per finished request with stamps: send (s), ttft_ms, server_ms, queue_ms, rest_ms."""
    import pandas as pd
    rows = []
    for r in records:
        st, tok = r.get("server") or {}, r.get("tok_ms") or []
        if not (r.get("ok") and tok and "request_received_ts" in st and "prefill_finished_time" in st):
            continue
        server_ms = (st["prefill_finished_time"] - st["request_received_ts"]) * 1e3
        rows.append(dict(send=r["send"], ttft_ms=tok[0], server_ms=server_ms,
                         queue_ms=1e3 * st["queue_time"] if st.get("queue_time") is not None else float("nan"),
                         rest_ms=tok[0] - server_ms))
    return pd.DataFrame(rows, columns=["send", "ttft_ms", "server_ms", "queue_ms", "rest_ms"])


def by_bin(df, bin_s: float = 5.0) -> "pd.DataFrame":
    """Per ``bin_s`` of send time: n and the P50 / P90 of each part (ms)."""
    g = df.groupby((df.send // bin_s * bin_s).rename("send_s"))
    cols = ["ttft_ms", "server_ms", "queue_ms", "rest_ms"]
    out = g[cols].quantile(0.5).add_suffix("_p50").join(g[cols].quantile(0.9).add_suffix("_p90"))
    out.insert(0, "n", g.size())
    return out.round(1)


def main(argv=None) -> int:
    from bench.metrics import load_jsonl
    p = cli.ArgumentParser(prog="python -m bench.analysis.ttft_parts", description=__doc__.splitlines()[0])
    p.add_argument("run_dir", type=Path)
    p.add_argument("--system", default="mux-hybrid")
    p.add_argument("--rate", required=True, help="the point's rate as in its file name, e.g. 50 or 3.45")
    p.add_argument("--bin-s", type=float, default=5.0)
    a = p.parse_args(argv)
    path = a.run_dir / f"{a.system}__{a.rate}.jsonl"
    try:
        recs = load_jsonl(path)  # or its .xz, as results keep it
    except FileNotFoundError:
        return cli.print_error(f"{path}: no such point (nor {path.name}.xz): give the rate as in the file name")
    df = parts(recs)
    if df.empty:
        return cli.print_error(f"{path}: no finished request has server stamps (SGLang gives them with "
                               "--enable-metrics; records from before session 47's client have none)")
    print(f"{len(df)} of {len(recs)} requests with server stamps")
    print(by_bin(df, a.bin_s).to_string())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
