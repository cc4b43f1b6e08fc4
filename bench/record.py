"""Copy one measured point of a ``bench.run`` directory into a figures file under a key.

    python -m bench.record --run bench/results/conv_cap8k_h200 --system mux --rate 2 \\
        --into bench/results/dispatcher.json --key conversation_cap8k_r2

The issue files (``dispatcher.json``, ``engine.json``) hold a few headline points; the run
directory keeps everything. The entry carries what makes the figure reproducible and
checkable: device, date and command of the run, the workload options, the point's summary
(TTFT, TBT, failures, attainment), and for mux systems the partitions the dispatcher chose
(decisions per (decode SMs, prefill SMs) from the timeline bytes of that point) and the
``sglang_mux`` metrics scraped after it, when the server had ``--enable-metrics``.
"""
from __future__ import annotations

import json
from pathlib import Path

from sglang_mux import cli
from sglang_mux.cli import UsageError

from sglang_mux import cli_io as _cli_io
from . import run as runmod


def timeline_partitions(path: Path, byte_range) -> dict[str, int] | None:
    """Decisions per "D<decode>/P<prefill>" in bytes [start, end) of a timeline (None: none)."""
    recs = runmod.timeline_records(path, byte_range)
    if recs is None:
        return None
    out: dict[str, int] = {}
    for r in recs:
        if r.get("decode_sms") or r.get("prefill_sms"):
            k = f"D{r['decode_sms']}/P{r['prefill_sms']}"
            out[k] = out.get(k, 0) + 1
    return dict(sorted(out.items(), key=lambda kv: int(kv[0].split("/")[0][1:])))


def metrics_samples(path: Path) -> dict[str, float] | None:
    """Sample lines of a scraped ``.metrics.prom`` file, histogram buckets left out."""
    if not path.exists():
        return None
    out = {}
    for ln in path.read_text().splitlines():
        if ln.startswith("#") or "_bucket{" in ln or not ln.strip():
            continue
        name, _, val = ln.rpartition(" ")
        out[name] = float(val)
    return out


def point_entry(run_dir: Path, system: str, rate: float) -> dict:
    run_dir, summ = _cli_io.run_summary(run_dir)
    sysd = summ["systems"].get(system)
    if sysd is None:
        raise UsageError(f"{run_dir}/summary.json has no system {system!r} "
                         f"(has {sorted(summ['systems'])}); run bench.run first")
    pts = [p for p in sysd["points"] if float(p["rate"]) == float(rate)]
    if not pts:
        raise UsageError(f"{system} has no point at rate {rate:g} in {run_dir} "
                         f"(rates {[p['rate'] for p in sysd['points']]})")
    p = pts[0]
    meta_path = runmod.point_file(run_dir, system, rate, ".meta.json")
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    s = p["summary"]
    entry = {
        "device": summ.get("device"), "date": meta.get("started") or summ.get("date"),
        # the invocation that ran this point (older meta files lack it: the run's last one)
        "command": meta.get("command") or summ.get("command"), "run_dir": str(run_dir), "system": system, "rate": rate,
        "server_command": meta.get("server_command"), "workload": p.get("workload"),
        "slo": summ.get("slo"),
        "summary": {k: s.get(k) for k in ("n", "n_ok", "n_failed", "failures", "ttft_ms",
                                          "ttft_ms_per_token", "tbt_ms", "slo_attainment",
                                          "output_tok_s", "total_tok_s", "makespan_s")},
    }
    tl = timeline_partitions(run_dir / f"{system}.timeline.jsonl", meta.get("timeline_bytes"))
    if tl is not None:
        entry["decisions_by_partition"] = tl
        entry["n_multiplexed_configs_used"] = sum(
            1 for k in tl if not (k.startswith("D0/") or k.endswith("/P0")))
    m = metrics_samples(runmod.point_file(run_dir, system, rate, ".metrics.prom"))
    if m is not None:
        entry["metrics_after_point"] = m
    return entry


def main(argv=None) -> int:
    ap = cli.ArgumentParser(prog="python -m bench.record", description=__doc__.splitlines()[0])
    ap.add_argument("--run", required=True, type=Path, help="a bench.run output directory")
    ap.add_argument("--system", required=True, help="a system label of that run, e.g. mux")
    ap.add_argument("--rate", required=True, type=cli.positive(float), help="the point's rate")
    ap.add_argument("--into", required=True, type=Path, help="figures JSON file (created/merged)")
    ap.add_argument("--key", required=True, help="name of the entry in that file")
    ap.add_argument("--note", default=None, help="one line saying what the point shows")
    ap.add_argument("--command", default=None,
                    help="the bench.run command that measured the point, when its meta file "
                         "predates the runner recording it")
    a = ap.parse_args(argv)
    doc = _cli_io.read_json(a.into, "figures file (a JSON object)") if a.into.exists() else {}
    if not isinstance(doc, dict) or not isinstance(doc.get("points", {}), dict):
        raise UsageError(f"{a.into} is not a figures file (a JSON object with a 'points' object): "
                         "give a new file name or one bench.record wrote")
    entry = point_entry(a.run, a.system, a.rate)
    if a.note:
        entry["note"] = a.note
    if a.command:
        entry["command"] = a.command
    doc.setdefault("points", {})[a.key] = entry
    a.into.write_text(json.dumps(doc, indent=1) + "\n")
    print(json.dumps({k: entry[k] for k in ("system", "rate", "device", "date")}))
    return 0


if __name__ == "__main__":
    cli.run(main)
