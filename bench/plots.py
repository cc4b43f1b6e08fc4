"""Plots of a run (matplotlib, Agg backend).

    python -m bench.plots RUN_DIR     # latency_vs_rate.png + every *.timeline.jsonl
    python -m bench.plots --timeline T.jsonl --out T.png

``latency_vs_rate.png``: P99 TTFT, P99 TBT and SLO attainment vs rate, one line per system,
SLOs dashed. A dispatcher timeline (``--mux-timeline``: JSONL records with ``t`` (or
``time``, as ``sglang_mux.mux_metrics.TimelineWriter`` writes), ``decode_sms``,
``prefill_sms``, ``decode_bs``) is drawn as decode SMs over time (step),
prefill SMs, and the decode batch size on a second axis.
"""
from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from sglang_mux import cli  # noqa: E402

from sglang_mux import cli_io as _cli_io  # noqa: E402


def plot_summary(summary: dict, out_png: str | Path) -> Path:
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    slo = summary["slo"]
    for name, s in summary["systems"].items():
        pts = s["points"]
        if not pts:
            continue
        rates = [p["rate"] for p in pts]
        get = lambda f: [f(p["summary"]) for p in pts]  # noqa: E731
        nan = float("nan")
        axes[0].plot(rates, [x if x is not None else nan
                             for x in get(lambda m: m["ttft_ms"]["p99"])], "o-", label=name)
        axes[1].plot(rates, [x if x is not None else nan
                             for x in get(lambda m: m["tbt_ms"]["p99"])], "o-", label=name)
        axes[2].plot(rates, [100 * x if x is not None else nan
                             for x in get(lambda m: m["slo_attainment"])], "o-", label=name)
    axes[0].axhline(slo["ttft_ms"], ls="--", c="gray")
    axes[1].axhline(slo["tbt_ms"], ls="--", c="gray")
    axes[0].set(ylabel="P99 TTFT (ms)", yscale="log")
    axes[1].set(ylabel="P99 TBT (ms)")
    axes[2].set(ylabel="SLO attainment (%)", ylim=(0, 102))
    unit = summary.get("rate_unit", "requests/s")
    for ax in axes:
        ax.set_xlabel(f"rate ({unit})")
        ax.grid(alpha=0.3)
    axes[2].legend(fontsize=8)
    wl = (summary.get("workload") or {}).get("workload", "")
    fig.suptitle(f"{wl} — {summary.get('device') or ''}")
    fig.tight_layout()
    fig.savefig(out_png, dpi=120)
    plt.close(fig)
    return Path(out_png)


def plot_timeline(path: str | Path, out_png: str | Path) -> Path:
    recs = [json.loads(x) for x in Path(path).read_text().splitlines() if x.strip()]
    key = "t" if recs and "t" in recs[0] else "time"   # sglang_mux.mux_metrics writes "time"
    recs = [r for r in recs if key in r and "decode_sms" in r]
    fig, ax = plt.subplots(figsize=(12, 3.8))
    if recs:
        t0 = recs[0][key]
        t = [r[key] - t0 for r in recs]
        ax.step(t, [r["decode_sms"] for r in recs], where="post", label="decode SMs")
        if all("prefill_sms" in r for r in recs):
            ax.step(t, [r["prefill_sms"] for r in recs], where="post", alpha=0.5,
                    label="prefill SMs")
        if all("decode_bs" in r for r in recs):
            ax2 = ax.twinx()
            ax2.plot(t, [r["decode_bs"] for r in recs], c="gray", lw=0.6, alpha=0.6)
            ax2.set_ylabel("decode batch size", color="gray")
    ax.set(xlabel="time (s)", ylabel="SMs", title=Path(path).name)
    ax.legend(loc="upper left", fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out_png, dpi=120)
    plt.close(fig)
    return Path(out_png)


def plot_run(run_dir: str | Path) -> list[Path]:
    d = Path(run_dir)
    made = []
    if (d / "summary.json").exists():
        made.append(plot_summary(json.loads((d / "summary.json").read_text()),
                                 d / "latency_vs_rate.png"))
    for tl in sorted(d.glob("*.timeline.jsonl")):
        made.append(plot_timeline(tl, tl.parent / (tl.name[:-len(".jsonl")] + ".png")))
    return made


def main(argv: list[str] | None = None) -> int:
    p = cli.ArgumentParser(prog="python -m bench.plots", description=__doc__.splitlines()[0])
    p.add_argument("run_dir", nargs="?", help="a bench.run --out directory: plot its summary and timelines")
    p.add_argument("--timeline", help="one dispatcher timeline (JSONL) to plot")
    p.add_argument("--out", help="the --timeline plot's file (default: next to it, .png)")
    a = p.parse_args(argv)
    if not (a.run_dir or a.timeline):
        p.error("give a bench.run output directory, or --timeline FILE")
    if a.timeline:
        _cli_io.read_jsonl(a.timeline, "dispatcher timeline (JSONL)")
    if a.run_dir:
        d = Path(a.run_dir)
        if not d.is_dir():
            raise cli.UsageError(f"no directory {d}: {_cli_io.RUN_DIR_HINT}")
        if (d / "summary.json").exists():
            _cli_io.run_summary(d)
        elif not any(d.glob("*.timeline.jsonl")):
            raise cli.UsageError(f"{d} holds neither summary.json nor *.timeline.jsonl: nothing to plot")
    if a.timeline:
        print(plot_timeline(a.timeline, a.out or Path(a.timeline).with_suffix(".png")))
    if a.run_dir:
        for f in plot_run(a.run_dir):
            print(f)
    return 0


if __name__ == "__main__":
    cli.run(main)
