"""The results page, docs/results.md and its picture docs/slo_map.png, generated from bench/results/.

    python -m bench.results_page            # write docs/results.md and docs/slo_map.png
    python -m bench.results_page --check    # exit 1, printing the diff, when docs/results.md differs

Every run kept under ``bench/results/`` is a folder with a ``README.md`` (device, date, the
command, what it shows) and a ``summary.json``, which is one of:

- a ``bench.run`` summary: the folder is one served cell (a multiplexed system against chunked
  prefill), its goodputs recomputed here from its points by bench's goodput rule;
- a record, ``{"record": "results-page", "what", "device", "date", "command", ...}``, whose
  ``cells`` name the folder's bench.run runs (``{"runs": ["a", "b"], "mux": NAME, "note": TEXT}``:
  rounds of one cell on one host, joined as ``bench.slo_map.merged_runs`` joins them) and whose
  ``rows`` hold the other figures (``{"section", "what", "result", "files", "values"}``:
  ``values`` maps a name in ``result`` to ``FILE:key.key`` in the folder, read from that file),
  and, for the simulator's map of record, ``sim_maps`` ({GPU: JSON file}).

Loose ``*.json`` files beside the folders are probe records that tools and tests read by path;
each names its device (or machine), date and command. ``pruned.json`` lists the runs that left
the tree, each with the commit that still has it. Nothing else is read: the page is a function
of those files.
"""
from __future__ import annotations

import difflib
import json
import lzma
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from sglang_mux import cli

from . import metrics, slo_map, systems

ROOT = Path(__file__).resolve().parents[1]
RECORD = "results-page"
SECTIONS = {  # row section -> the page's heading for it, in page order
    "served": "Served points that are not a whole cell",
    "tp": "Past one GPU: tensor parallelism",
    "dp": "Past one GPU: data parallelism",
    "reliability": "Reliability",
    "correctness": "Greedy outputs against plain SGLang",
    "estimator": "The latency model and the engine in serving",
    "sim": "Simulated on the CPU: what-ifs and bounds",
}
RECORD_FIELDS = ("what", "device", "date", "command")
ROW_FIELDS = ("section", "what", "result")
PRUNED_FIELDS = ("name", "what", "commit")
GREEN_AT = 0.95  # the "level": the hybrid at >= 0.95 of the best chunked configuration


class PageError(cli.UsageError):
    """A results folder the page cannot be made from; the message names the folder and field."""


def _need(obj: dict, keys, where: str) -> None:
    for k in keys:
        if obj.get(k) in (None, ""):
            raise PageError(f"{where}: no '{k}'")


def _read(path: Path):
    data = path.read_bytes()
    return json.loads(lzma.decompress(data) if path.name.endswith(".xz") else data)


def _lookup(obj, dotted: str):
    for part in dotted.split("."):
        obj = obj[int(part)] if isinstance(obj, list) else obj[part]
    return obj


# ---- served cells -----------------------------------------------------------------------------

def side(summary: dict, name: str) -> tuple[str, float]:
    """One system's goodput in a run judged by its own SLOs: ("=", the highest passing rate) where
    a rate above it failed, ("≥", it) where it passed every rate it ran, ("<", the lowest rate)
    where it passed none."""
    slo = summary.get("slo") or {}
    tbt, ttft = float(slo.get("tbt_ms", metrics.DEFAULT_TBT_SLO_MS)), float(slo.get("ttft_ms", metrics.DEFAULT_TTFT_SLO_MS))
    pts = summary["systems"][name].get("points") or []
    rates = [float(p["rate"]) for p in pts]
    passing = [float(p["rate"]) for p in pts if metrics.check_point(p["summary"], tbt, ttft)[0]]
    if not rates:
        raise PageError(f"{name} has no points")
    if not passing:
        return "<", min(rates)
    return ("≥" if max(passing) == max(rates) else "="), max(passing)


def ratio(mux: tuple[str, float], base: tuple[str, float]) -> tuple[str, float | None]:
    """mux / best chunked from two goodputs as `side` gives them: (relation, value); relation ""
    for a measured ratio, "≥" "≤" ">" "<" for a bound, "?" where neither side bounds it."""
    (ms, m), (bs, b) = mux, base
    rel = {("=", "="): "", ("≥", "="): "≥", ("=", "≥"): "≤", ("<", "="): "<", ("<", "≥"): "<",
           ("=", "<"): ">", ("≥", "<"): ">"}.get((ms, bs), "?")
    return rel, (None if rel == "?" else round(m / b, 3))


def ratio_text(rel: str, value: float | None) -> str:
    if value is None:
        return "not bracketed"
    return f"{rel + ' ' if rel else ''}{value:.2f}"


def _gpu(device: str) -> str:
    m = re.search(r"\b([HAB]\d{2,3})\b", device or "")
    return m.group(1) if m else (device or "?")


def _flag(cmd, name: str):
    return systems.flag_value(list(cmd or []), name)


def bench_run_command(summaries: list[dict], out: str) -> str:
    """The bench.run command that serves a cell's points again: the last run's recorded
    arguments, with every system and every rate of the cell, and the folder as ``--out``."""
    last = summaries[-1]
    args = shlex.split(last["command"])
    args = args[args.index("bench.run") + 1:] if "bench.run" in args else args
    drop = {"--systems": 1, "--rates": 1, "--search": 1, "--time-budget-s": 1, "--out": 1, "--no-progress": 0}
    kept, i = [], 0
    while i < len(args):
        flag = args[i].split("=")[0]
        if flag in drop:
            i += 1 + (drop[flag] if "=" not in args[i] else 0)
            continue
        kept.append(args[i])
        i += 1
    names = list(dict.fromkeys(n for s in summaries for n in s["systems"]))
    rates = sorted({float(p["rate"]) for s in summaries for d in s["systems"].values() for p in d.get("points") or []})
    return shlex.join(["python", "-m", "bench.run", "--systems", ",".join(names),
                       "--rates", ",".join(f"{r:g}" for r in rates), *kept, "--out", out])


@dataclass
class Cell:
    folder: str
    runs: list[str]
    workload: str
    seed: int
    tbt_ms: float
    gpu: str
    device: str
    model: str
    tp: int
    policy: str
    date: str
    when: str
    mux_name: str
    mux: tuple[str, float]
    best: str
    base: tuple[str, float]
    rel: str
    value: float | None
    command: str
    note: str = ""
    predicted: float | None = None
    of_record: bool = False

    @property
    def key(self):
        return (self.policy, self.model, self.tp, self.gpu, self.workload, self.tbt_ms, self.seed)

    @property
    def path(self) -> str:
        runs = [r for r in self.runs if r != "."]
        return f"{self.folder}/" + ("" if not runs else "+".join(f"{r}/" for r in runs))


def cell(results: Path, folder: str, spec: dict, where: str) -> Cell:
    runs = spec.get("runs") or ["."]
    summaries = []
    for r in runs:
        p = results / folder / r / "summary.json"
        if not p.exists():
            raise PageError(f"{where}: cell run '{r}' has no summary.json")
        s = _read(p)
        _need(s, ("systems", "slo", "device", "date", "command", "workload"), f"{folder}/{r}/summary.json")
        summaries.append(s)
    try:
        s = slo_map.merged_runs(summaries) if len(summaries) > 1 else summaries[0]
        c = slo_map.map_cell(s, spec.get("mux"))
    except cli.UsageError as e:
        raise PageError(f"{where}: {e}") from None
    mux = side(s, c["mux"])
    chunked = [n for n in s["systems"] if n.startswith(slo_map.CHUNKED)]
    order = {"=": 1, "≥": 2, "<": 0}
    best = max(chunked, key=lambda n: (side(s, n)[1] if side(s, n)[0] != "<" else 0.0, order[side(s, n)[0]]))
    base = side(s, best)
    rel, value = ratio(mux, base)
    start = s["systems"][c["mux"]].get("start") or {}
    cmd = start.get("command") or []
    model = Path(_flag(cmd, "--model-path") or "?").name
    return Cell(folder=folder, runs=runs, workload=c["workload"], seed=int((s.get("workload") or {}).get("seed") or 0),
                tbt_ms=float(c["tbt_ms"]), gpu=_gpu(s["device"]), device=s["device"], model=model,
                tp=int(_flag(cmd, "--tp-size") or 1), policy=_flag(cmd, "--mux-policy") or "dispatcher",
                date=max(x["date"] for x in summaries)[:10], when=max(x["date"] for x in summaries), mux_name=c["mux"],
                mux=mux, best=best.removeprefix("sglang-"), base=base, rel=rel, value=value,
                command=bench_run_command(summaries, "/".join(["bench/results", folder, *[r for r in runs[-1:] if r != "."]])),
                note=spec.get("note", ""))


# ---- loading ------------------------------------------------------------------------------------

@dataclass
class Folder:
    name: str
    what: str
    device: str
    date: str
    command: str
    kind: str  # "sweep" or "record"
    cells: list[Cell] = field(default_factory=list)
    rows: list[dict] = field(default_factory=list)
    sim_maps: dict = field(default_factory=dict)


@dataclass
class Results:
    folders: list[Folder]
    probes: list[dict]
    pruned: list[dict]

    @property
    def cells(self) -> list[Cell]:
        return [c for f in self.folders for c in f.cells]


def _row(results: Path, folder: Folder, row: dict, i: int) -> dict:
    where = f"{folder.name}/summary.json rows[{i}]"
    _need(row, ROW_FIELDS, where)
    if row["section"] not in SECTIONS:
        raise PageError(f"{where}: section '{row['section']}' is none of {sorted(SECTIONS)}")
    for f in row.get("files") or []:
        if not (results / folder.name / f).exists():
            raise PageError(f"{where}: file '{f}' is not in the folder")
    values = {}
    for name, ref in (row.get("values") or {}).items():
        path, _, key = ref.partition(":")
        p = results / folder.name / path
        if not p.exists():
            raise PageError(f"{where}: value '{name}' reads '{path}', which is not in the folder")
        try:
            values[name] = _lookup(_read(p), key)
        except (KeyError, IndexError, ValueError, TypeError):
            raise PageError(f"{where}: value '{name}': '{path}' has no '{key}'") from None
    try:
        result = row["result"].format(**values)
    except (KeyError, ValueError) as e:
        raise PageError(f"{where}: result names a value it does not read ({e})") from None
    return {**row, "result": result, "folder": folder.name, "device": row.get("device", folder.device),
            "date": row.get("date", folder.date), "command": row.get("command", folder.command)}


def load_folder(results: Path, name: str) -> Folder:
    d = results / name
    if not (d / "README.md").exists():
        raise PageError(f"{name}: no README.md (device, date, command and what the run shows)")
    if not (d / "summary.json").exists():
        raise PageError(f"{name}: no summary.json")
    s = _read(d / "summary.json")
    if "systems" in s:  # a bench.run sweep: one served cell
        _need(s, ("device", "date", "command", "workload", "slo"), f"{name}/summary.json")
        muxes = [n for n, d in s["systems"].items()
                 if systems.mux_settings((d.get("start") or {}).get("command")) is not None]
        cells = [cell(results, name, {"mux": m}, f"{name}/summary.json") for m in muxes or [None]]
        c = cells[0]
        return Folder(name, f"One bench.run sweep: {c.workload} at TBT {c.tbt_ms:g} ms, {', '.join(s['systems'])}.",
                      s["device"], s["date"][:10], c.command, "sweep", cells=cells)
    if s.get("record") != RECORD:
        raise PageError(f"{name}/summary.json: neither a bench.run summary nor a record ('record': '{RECORD}')")
    _need(s, RECORD_FIELDS, f"{name}/summary.json")
    f = Folder(name, s["what"], s["device"], s["date"], s["command"], "record")
    f.cells = [cell(results, name, spec, f"{name}/summary.json cells[{i}]") for i, spec in enumerate(s.get("cells") or [])]
    f.rows = [_row(results, f, r, i) for i, r in enumerate(s.get("rows") or [])]
    for gpu, path in (s.get("sim_maps") or {}).items():
        if not (d / path).exists():
            raise PageError(f"{name}/summary.json sim_maps: '{path}' is not in the folder")
        f.sim_maps[gpu] = _read(d / path)
    return f


def load(results: Path) -> Results:
    folders, probes, pruned = [], [], []
    for p in sorted(results.iterdir()):
        if p.is_dir():
            folders.append(load_folder(results, p.name))
        elif p.name == "pruned.json":
            pruned = _read(p)
            for i, e in enumerate(pruned):
                _need(e, PRUNED_FIELDS, f"pruned.json[{i}]")
                if (results / e["name"]).exists():
                    raise PageError(f"pruned.json[{i}]: '{e['name']}' is still in {results}")
                if not re.fullmatch(r"[0-9a-f]{7,40}", e["commit"]):
                    raise PageError(f"pruned.json[{i}]: commit '{e['commit']}' is not a commit hash")
        elif p.suffix == ".json":
            d = _read(p)
            if not isinstance(d, dict) or not (d.get("device") or d.get("machine")):
                raise PageError(f"{p.name}: no 'device' (a loose probe record names its device or machine)")
            _need(d, ("date", "command"), p.name)
            dev = d.get("device") or d["machine"]
            if isinstance(dev, dict):  # a CPU-only probe names its machine
                dev = f"CPU, {dev.get('cpu_count', '?')} cores ({dev.get('platform', '?')})"
            probes.append({"name": p.name, "device": dev, "date": str(d["date"]),
                           "command": d["command"]})
        elif p.name != "README.md":
            raise PageError(f"{p.name}: a loose file in {results} (a run is a folder with README.md and summary.json)")
    maps = [f for f in folders if f.sim_maps]
    if len(maps) > 1:
        raise PageError(f"more than one simulator map of record: {[f.name for f in maps]}")
    names = {f.name for f in folders}
    for i, e in enumerate(pruned):
        if e.get("superseded_by") and e["superseded_by"].split("/")[0] not in names:
            raise PageError(f"pruned.json[{i}]: superseded_by '{e['superseded_by']}' is not a kept folder")
    r = Results(folders, probes, pruned)
    _mark(r)
    return r


def sim_map(r: Results) -> Folder | None:
    return next((f for f in r.folders if f.sim_maps), None)


def _mark(r: Results) -> None:
    """The cell of record per policy, model, GPU, workload, TBT and seed: the latest whose ratio is
    bracketed or bounded; and the simulator's prediction beside the hybrid's 8B cells."""
    latest: dict = {}
    for c in r.cells:  # ties (two multiplexed systems of one run): the shorter name, the plain policy
        if c.value is not None and (c.key not in latest or (c.when, -len(c.mux_name)) > (latest[c.key].when, -len(latest[c.key].mux_name))):
            latest[c.key] = c
    for c in latest.values():
        c.of_record = True
    m = sim_map(r)
    for c in r.cells:
        if m and c.policy == "hybrid" and c.tp == 1 and c.seed == 0 and c.gpu in m.sim_maps:
            c.predicted = slo_map.predicted_cell(m.sim_maps[c.gpu], c.workload, c.tbt_ms)


# ---- rendering ----------------------------------------------------------------------------------

def _g(side_: tuple[str, float]) -> str:
    s, v = side_
    return f"{'' if s == '=' else s + ' '}{v:g}"


def _code(text: str) -> str:
    return "`" + text.replace("`", "'") + "`"


def _cell_table(cells: list[Cell], n0: int, predicted: bool) -> tuple[list[str], list[str]]:
    head = "| # | GPU | TBT (ms) | workload | seed | mux | best chunked | mux / best chunked |"
    head += " predicted |" if predicted else ""
    head += " of record | folder | date | device |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    cmds = []
    for i, c in enumerate(cells, n0):
        gpu = c.gpu if c.tp == 1 else f"{c.tp} × {c.gpu} (TP {c.tp})"
        row = (f"| {i} | {gpu} | {c.tbt_ms:g} | {c.workload} | {c.seed} | {c.mux_name} {_g(c.mux)} | {c.best} {_g(c.base)} | "
               f"**{ratio_text(c.rel, c.value)}** |")
        if predicted:
            row += f" {'—' if c.predicted is None else f'{c.predicted:.2f}'} |"
        row += f" {'yes' if c.of_record else ''} | `{c.path}` | {c.date} | {c.device} |"
        lines.append(row)
        cmds.append(f"{i}. {_code(c.command)}" + (f" {c.note}" if c.note else ""))
    return lines, cmds


def _cells_order(c: Cell):
    return (c.gpu, -c.tbt_ms, c.workload, c.seed, c.when, c.path, c.mux_name)


def _sim_table(f: Folder) -> list[str]:
    lines = []
    for gpu, m in sorted(f.sim_maps.items()):
        fused = f"drawn from `{m['fused_jitter']}`" if m.get("fused_jitter") else "at their price"
        lines += [f"**{gpu}** (table `{Path(str(m.get('table', '?'))).name}`; fused iterations {fused}; host times "
                  f"and decode jitter from `{m.get('timeline', '?')}`):", "",
                  "| TBT (ms) | workload | hybrid | dispatcher | chunked 512 + mixed | chunked 1024 + mixed | hybrid / best chunked |",
                  "|---|---|---|---|---|---|---|"]
        for c in m["cells"]:
            g = c["goodput"]
            best = max((g[k] for k in g if k.startswith("chunked") and g[k]), default=None)
            r = "—" if not (g.get("hybrid") and best) else f"{g['hybrid'] / best:.2f}"

            def v(k):
                return "< lowest" if g.get(k) is None else f"{g[k]:g}"
            lines.append(f"| {float(c['tbt_slo_ms']):g} | {c['workload']} | {v('hybrid')} | {v('dispatcher')} | "
                         f"{v('chunked 512 + mixed')} | {v('chunked 1024 + mixed')} | {r} |")
        lines.append("")
    return lines


def render(r: Results, png: str = "slo_map.png") -> str:
    out = ["# Results", "",
           "<!-- Generated by `python -m bench.results_page` from bench/results/*/summary.json; do not edit. -->", "",
           "Every figure measured so far, each with its device, date, the command that reproduces it and the folder "
           "under `bench/results/` that holds its files. This page is generated from those folders' `summary.json` "
           "(`python -m bench.results_page`; `--check` fails when this page is stale). Served runs: the Llama-3.1-8B "
           "shape unless a row says otherwise, dummy weights, SGLang 0.5.16, FA3 for every system. **Goodput**: the "
           "highest rate tested that meets both P99 SLOs with no failed request and no TTFT drift (`bench/README.md`). "
           "**Chunked prefill** is SGLang's, tuned over budgets 256-2048 with and without mixed chunks; "
           "\"best chunked\" is the best configuration served beside the mux on the same host.", "",
           "How a ratio is read: `=` sides give a ratio; a side that passed every rate it ran is a lower bound (≥), "
           "one that passed none is below its lowest rate (<), and the ratio is then a bound; where both sides are "
           "bounds the same way the cell is not bracketed. The cell **of record** for a policy, GPU, workload, TBT "
           "and seed is the latest with a ratio or a bound. Commands are bench.run's, with every system and rate "
           "of the cell (the folder's README has the plan that ran it).", ""]
    hybrid = sorted((c for c in r.cells if c.policy == "hybrid" and c.tp == 1), key=_cells_order)
    tp = sorted((c for c in r.cells if c.tp > 1), key=_cells_order)
    disp = sorted((c for c in r.cells if c.policy != "hybrid" and c.tp == 1), key=_cells_order)
    m = sim_map(r)
    out += ["## The hybrid (the default policy) against tuned chunked prefill", "",
            f"![mux / best chunked prefill per cell of record, served and predicted]({png})", "",
            "The picture: the cells of record at seed 0, green at ≥ 0.95, red below, amber a bound on either side "
            "of it or not bracketed, grey where only the simulator has the cell (its prediction in brackets). "
            f"\"predicted\": the simulator's map of record ({'`bench/results/' + m.name + '/`' if m else 'none'}, "
            "below) for the same cell; it predicts a lone host.", ""]
    lines, cmds = _cell_table(hybrid, 1, predicted=True)
    out += lines + ["", "Commands and notes, by row:", ""] + cmds + [""]
    if m:
        out += ["## The simulator's map of record (CPU)", "",
                f"{m.what} Device: {m.device}. Date: {m.date}. Folder: `bench/results/{m.name}/`. Command: "
                f"{_code(m.command)}", ""] + _sim_table(m)
    n = len(hybrid) + 1
    if tp:
        out += ["## The 70B shape at TP 2: served cells", ""]
        lines, cmds = _cell_table(tp, n, predicted=False)
        out += lines + ["", "Commands and notes, by row:", ""] + cmds + [""]
        n += len(tp)
    if disp:
        out += ["## The earlier policy (`--mux-policy dispatcher`, partitions only) against chunked prefill", "",
                "Served before the hybrid became the default; the \"mux\" of those runs.", ""]
        lines, cmds = _cell_table(disp, n, predicted=False)
        out += lines + ["", "Commands and notes, by row:", ""] + cmds + [""]
        n += len(disp)
    rows = [row for f in r.folders for row in f.rows]
    for sec, title in SECTIONS.items():
        these = [row for row in rows if row["section"] == sec]
        if not these:
            continue
        out += [f"## {title}", "", "| # | what | result | device | date | folder |", "|---|---|---|---|---|---|"]
        cmds = []
        for i, row in enumerate(these, n):
            files = ", ".join(f"`{x}`" for x in row.get("files") or [])
            out.append(f"| {i} | {row['what']} | {row['result']} | {row['device']} | {row['date']} | "
                       f"`{row['folder']}/`{' (' + files + ')' if files else ''} |")
            cmds.append(f"{i}. {_code(row['command'])}")
        out += ["", "Commands, by row:", ""] + cmds + [""]
        n += len(these)
    out += ["## Every folder under bench/results", ""]
    for f in r.folders:
        out.append(f"- `{f.name}/`: {f.what} Device: {f.device}. Date: {f.date}. Command: {_code(f.command)}")
    out.append("")
    if r.probes:
        out += ["Probe records beside them, read by tools and tests by path:", ""]
        for p in r.probes:
            out.append(f"- `{p['name']}`: {p['device']}; {p['date']}; {_code(p['command'])}")
        out.append("")
    if r.pruned:
        out += ["## Runs no longer in the tree", "",
                "Superseded or older runs, each in git history: `git checkout COMMIT -- bench/results/NAME`.", "",
                "| name | what | superseded by | commit |", "|---|---|---|---|"]
        for e in r.pruned:
            by = e.get("superseded_by")
            out.append(f"| `{e['name']}` | {e['what']} | {'`' + by + '`' if by else '—'} | `{e['commit']}` |")
        out.append("")
    return "\n".join(out)


# ---- the picture --------------------------------------------------------------------------------

def _colour(c: Cell | None) -> str:
    if c is None:
        return "#e6e6e6"
    if c.value is None:
        return "#f6ddb0"
    if c.rel in ("", "≥", ">") and c.value >= GREEN_AT:
        return "#cfe8cf"
    if c.rel in ("", "<", "≤") and c.value < GREEN_AT:
        return "#f3c9c9"
    return "#f6ddb0"


def plot(r: Results, path: Path) -> Path:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rec = {(c.gpu, c.tbt_ms, c.workload): c for c in r.cells
           if c.of_record and c.policy == "hybrid" and c.tp == 1 and c.seed == 0}
    m = sim_map(r)
    pred = {}
    for gpu, sm in (m.sim_maps.items() if m else []):
        for pc in sm["cells"]:
            w = pc["workload"].split(" (")[0]
            pred[(gpu, float(pc["tbt_slo_ms"]), w)] = slo_map.predicted_cell(sm, w, float(pc["tbt_slo_ms"]))
    cols = sorted({k[:2] for k in (*rec, *pred)}, key=lambda k: (k[0], -k[1]))
    order = {w: i for i, w in enumerate(dict.fromkeys(k[2] for k in (*pred, *rec)))}  # the simulator's order first
    loads = sorted({k[2] for k in (*rec, *pred)}, key=lambda w: order[w])
    fig, ax = plt.subplots(figsize=(11, 0.55 * len(loads) + 1.3))
    for x, col in enumerate(cols):
        for y, w in enumerate(loads):
            c, p = rec.get((*col, w)), pred.get((*col, w))
            ax.add_patch(plt.Rectangle((x, y), 1, 1, facecolor=_colour(c), edgecolor="white", linewidth=2))
            txt = ("no served cell" if c is None else ratio_text(c.rel, c.value)) + ("" if p is None else f"  ({p:.2f})")
            ax.text(x + 0.5, y + 0.5, txt, ha="center", va="center", fontsize=8)
    ax.set_xlim(0, len(cols))
    ax.set_ylim(0, len(loads))
    ax.set_xticks([i + 0.5 for i in range(len(cols))], [f"{g}, P99 TBT {t:g} ms" for g, t in cols], fontsize=8)
    ax.set_yticks([i + 0.5 for i in range(len(loads))], loads, fontsize=8)
    ax.invert_yaxis()
    ax.tick_params(length=0)
    for s in ax.spines.values():
        s.set_visible(False)
    ax.set_title("hybrid / best chunked prefill, served cells of record (simulator's prediction)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100, metadata={"Software": None})
    plt.close(fig)
    return path


def main(argv=None) -> int:
    ap = cli.ArgumentParser(prog="python -m bench.results_page", description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", type=Path, default=ROOT / "bench/results", help="the results folders")
    ap.add_argument("--out", type=Path, default=ROOT / "docs/results.md", help="the page")
    ap.add_argument("--png", type=Path, default=ROOT / "docs/slo_map.png", help="its picture of the SLO map")
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 with a diff when --out differs")
    a = ap.parse_args(argv)
    if not a.results.is_dir():
        ap.error(f"--results {a.results}: not a directory")
    page = render(load(a.results), png=a.png.name) + "\n"
    if a.check:
        old = a.out.read_text() if a.out.exists() else ""
        if old != page or not a.png.exists():
            diff = difflib.unified_diff(old.splitlines(True), page.splitlines(True), str(a.out), "generated")
            print("".join(diff) or f"{a.png} is missing", end="")
            print(f"\n{a.out} is stale: run python -m bench.results_page")
            return 1
        return 0
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(page)
    plot(load(a.results), a.png)
    print(f"wrote {a.out} and {a.png}")
    return 0


if __name__ == "__main__":
    cli.run(main)
