"""The table directory a profiling run writes, one cell at a time (resumable).

- ``solo_prefill.csv`` / ``solo_decode.csv`` / ``contention.csv``: exactly the columns of
  docs/design.md ("Table format"); a row is appended (flushed, fsynced) after each cell, so a
  run stopped at any point keeps every finished cell;
- ``cells.jsonl``: one line per measured cell (raw samples, spread, re-measure, wall time);
- ``skipped.jsonl``: cells not measured and why (KV pool, OOM, too little overlap, errors);
  a resumed run does not retry them unless asked (``--retry-skipped``);
- ``meta.json``: written by run.py (GPU, model shape, versions, date, command, granularity).

A resumed run reads the CSVs, repairs a torn last line (a crash mid-write), and skips every
cell whose key columns are present. ``--remeasure-noisy`` measures cells whose logged spread is
high once more and keeps the steadier of the two measurements in the CSV (``replace``); both
stay in cells.jsonl. No torch here.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import os
from pathlib import Path
from typing import Iterable

from profiling.grid import KIND_CONTENTION, KIND_SOLO_DECODE, KIND_SOLO_PREFILL, Cell
from sglang_mux.tables import CELLS_LOG, tp_of

logger = logging.getLogger(__name__)

# docs/design.md "Table format" (same as sglang_mux.tables.*_COLS)
COLUMNS = {
    KIND_SOLO_PREFILL: ["prefill_sms", "bs", "sum_new_sq", "sum_new_reused", "sum_new", "latency_ms"],
    KIND_SOLO_DECODE: ["decode_sms", "bs", "sum_reused", "latency_ms"],
    KIND_CONTENTION: ["decode_sms", "prefill_new", "prefill_reused", "decode_bs", "decode_reused_per_req",
                      "decode_solo_ms", "decode_corun_ms"],
}
FILES = {KIND_SOLO_PREFILL: "solo_prefill.csv", KIND_SOLO_DECODE: "solo_decode.csv",
         KIND_CONTENTION: "contention.csv"}
N_KEY = {KIND_SOLO_PREFILL: 5, KIND_SOLO_DECODE: 3, KIND_CONTENTION: 5}
SKIPPED_LOG = "skipped.jsonl"
META = "meta.json"


def cell_id(cell: Cell) -> tuple:
    """(kind, key) of a cell as the store keys it (ints: CSV and JSON give back floats/lists)."""
    return cell.kind, tuple(int(k) for k in cell.key)


def _row_key(kind: str, vals) -> tuple:
    """The key columns of a CSV row (strings or numbers) as ints."""
    return tuple(int(round(float(v))) for v in vals[: N_KEY[kind]])


def _spread(log: dict) -> float:
    """A cells.jsonl entry's sample spread (%): solo samples for contention cells."""
    return float(log.get("spread_pct", log.get("solo_spread_pct", 0.0)))


def row_for(cell: Cell, values: Iterable[float]) -> list:
    """The CSV row of a measured cell: its key columns, then the latency column(s)."""
    vals = [round(float(v), 4) for v in values]
    want = len(COLUMNS[cell.kind]) - N_KEY[cell.kind]
    if len(vals) != want:
        raise ValueError(f"{cell.kind} needs {want} latency value(s), got {vals}")
    return [int(k) for k in cell.key] + vals


class TableStore:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self._done: dict[str, set] = {k: set() for k in COLUMNS}
        self._skipped: set = set()
        for kind in COLUMNS:
            self._load(kind)
        self._load_skipped()

    # ------------------------------------------------------------------ reading / repair
    def _load(self, kind: str) -> None:
        file = self.path / FILES[kind]
        if not file.exists():
            return
        text = file.read_text()
        cols = COLUMNS[kind]
        lines = text.splitlines()
        if not lines:
            file.unlink()  # empty file: rewritten with a header on the first append
            return
        header = next(csv.reader([lines[0]]))
        if header != cols:
            raise ValueError(
                f"{file}: header {header} differs from the table format {cols} (docs/design.md); "
                "move the file away or use another --out")
        good, bad = [lines[0]], 0
        for i, line in enumerate(lines[1:], start=2):
            try:
                vals = next(csv.reader([line]))
                if len(vals) != len(cols):
                    raise ValueError("field count")
                nums = [float(v) for v in vals]
            except (ValueError, StopIteration):
                bad += 1
                logger.warning("%s line %d is torn or malformed (%r); dropping it", file, i, line[:80])
                continue
            self._done[kind].add(_row_key(kind, nums))
            good.append(line)
        if bad or not text.endswith("\n"):
            tmp = file.with_suffix(".csv.tmp")
            tmp.write_text("\n".join(good) + "\n")
            tmp.replace(file)

    def _load_skipped(self) -> None:
        file = self.path / SKIPPED_LOG
        if not file.exists():
            return
        for line in file.read_text().splitlines():
            try:
                d = json.loads(line)
                if d.get("blocking", True):
                    self._skipped.add((d["kind"], tuple(d["key"])))
            except (ValueError, KeyError, TypeError):
                continue  # a torn line: the cell is simply tried again

    # ------------------------------------------------------------------ queries
    def done(self, cell: Cell) -> bool:
        return cell_id(cell)[1] in self._done[cell.kind]

    def was_skipped(self, cell: Cell) -> bool:
        return cell_id(cell) in self._skipped

    def logged_skips(self) -> set:
        """(kind, key) of every cell in skipped.jsonl, blocking or not."""
        file = self.path / SKIPPED_LOG
        out = set()
        if file.exists():
            for line in file.read_text().splitlines():
                try:
                    d = json.loads(line)
                    out.add((d["kind"], tuple(d["key"])))
                except (ValueError, KeyError, TypeError):
                    continue
        return out

    def done_keys(self) -> set:
        return {(k, key) for k, keys in self._done.items() for key in keys}

    def count(self, kind: str) -> int:
        return len(self._done[kind])

    def complete_for_fit(self) -> list[str]:
        """CSV files that are still missing or empty (estimator fit needs all three)."""
        return [FILES[k] for k in COLUMNS if not self._done[k]]

    def noisy(self, pct: float) -> dict[tuple, float]:
        """{(kind, key): spread %} of measured cells whose row in the CSV came from a
        measurement with a sample spread above ``pct`` (the last cells.jsonl line of a key
        that is in the CSV; contention cells: the solo samples' spread)."""
        file = self.path / CELLS_LOG
        last: dict[tuple, float] = {}
        if file.exists():
            for line in file.read_text().splitlines():
                try:
                    d = json.loads(line)
                    k = (d["kind"], tuple(int(x) for x in d["key"]))
                    if d.get("kept") == "old":
                        continue  # a re-measurement that lost: the CSV row is the earlier one
                    last[k] = _spread(d)
                except (ValueError, KeyError, TypeError):
                    continue
        return {k: v for k, v in last.items() if v > pct and k[1] in self._done.get(k[0], ())}

    # ------------------------------------------------------------------ writing
    def append(self, cell: Cell, values: Iterable[float], info: dict | None = None) -> None:
        """Append the cell's row (fsynced) and its log line."""
        row = row_for(cell, values)
        file = self.path / FILES[cell.kind]
        new = not file.exists()
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        if new:
            w.writerow(COLUMNS[cell.kind])
        w.writerow(row)
        _append_durable(file, buf.getvalue())
        self._done[cell.kind].add(cell_id(cell)[1])
        self._log(cell, row, info)

    def replace(self, cell: Cell, values: Iterable[float], info: dict, old_spread: float) -> bool:
        """A re-measurement of a measured cell: its row replaces the CSV's when its spread
        (``info["spread_pct"]``/``["solo_spread_pct"]``) is below ``old_spread``; logged
        either way, with ``kept`` = "new" or "old". Returns whether the row was replaced."""
        row = row_for(cell, values)
        keep_new = _spread(info) < old_spread
        file = self.path / FILES[cell.kind]
        key = cell_id(cell)[1]
        old_row = None
        if keep_new:
            buf = io.StringIO()
            csv.writer(buf, lineterminator="").writerow(row)
            lines = file.read_text().splitlines()
            out = [lines[0]]
            for line in lines[1:]:
                vals = next(csv.reader([line]))
                if _row_key(cell.kind, vals) == key:
                    if old_row is None:
                        out.append(buf.getvalue())  # in the old row's place (the CSV keeps its order)
                    old_row = vals  # further rows of the key go too: the cell is one row again
                    continue
                out.append(line)
            if old_row is None:
                out.append(buf.getvalue())
            tmp = file.with_suffix(".csv.tmp")
            tmp.write_text("\n".join(out) + "\n")
            tmp.replace(file)
        extra = {"remeasure_of_spread_pct": old_spread, "kept": "new" if keep_new else "old"}
        if old_row is not None:
            extra["replaced_row"] = old_row
        self._log(cell, row, info, extra)
        return keep_new

    def _log(self, cell: Cell, row: list, info: dict | None, extra: dict | None = None) -> None:
        log = {"kind": cell.kind, "key": list(cell.key), "cell": cell.to_json(), "row": row, **(extra or {})}
        log.update(info or {})
        _append_durable(self.path / CELLS_LOG, json.dumps(log) + "\n")

    def skip(self, cell: Cell, reason: str, info: dict | None = None, blocking: bool = True) -> None:
        """Log a cell that was not measured. ``blocking``: a resumed run does not retry it
        (False for plan caps, which the next plan re-evaluates)."""
        d = {"kind": cell.kind, "key": [int(k) for k in cell.key], "cell": cell.to_json(), "reason": reason,
             "blocking": blocking}
        d.update(info or {})
        _append_durable(self.path / SKIPPED_LOG, json.dumps(d) + "\n")
        if blocking:
            self._skipped.add(cell_id(cell))

    # ------------------------------------------------------------------ merging
    def merge(self, other: "TableStore") -> dict[str, int]:
        """Add ``other``'s measured cells whose keys this table lacks (rows, their cells.jsonl
        lines and its skip records), and its runs to this meta: a table measured in parts on
        several GPUs of one host (``--what``, one kind per GPU) made whole. A key both tables
        hold keeps this table's row. Returns the rows added per CSV file.

        Raises ValueError when the two metas are incompatible (check_meta_compatible)."""
        mine, theirs = self.read_meta(), other.read_meta()
        if mine and theirs:
            problems = check_meta_compatible(mine, theirs)
            if problems:
                raise ValueError(f"cannot merge {other.path} into {self.path}: {'; '.join(problems)}")
        added: dict[str, int] = {}
        new_keys: set = set()
        for kind, name in FILES.items():
            src = other.path / name
            if not src.exists():
                continue
            lines = []
            for line in src.read_text().splitlines()[1:]:
                key = _row_key(kind, next(csv.reader([line])))
                if key not in self._done[kind]:
                    self._done[kind].add(key)
                    new_keys.add((kind, key))
                    lines.append(line + "\n")
            if lines:
                dst = self.path / name
                _append_durable(dst, ("" if dst.exists() else ",".join(COLUMNS[kind]) + "\n") + "".join(lines))
            added[name] = len(lines)
        logs = other.path / CELLS_LOG
        if logs.exists():
            keep = [line + "\n" for line in logs.read_text().splitlines()
                    if _log_id(line) in new_keys]
            if keep:
                _append_durable(self.path / CELLS_LOG, "".join(keep))
        skips = other.path / SKIPPED_LOG
        if skips.exists():
            have = self.logged_skips()
            keep = []
            for line in skips.read_text().splitlines():
                kind, key = _log_id(line)
                if kind in self._done and (kind, key) not in have and key not in self._done[kind]:
                    keep.append(line + "\n")
            if keep:
                _append_durable(self.path / SKIPPED_LOG, "".join(keep))
            self._load_skipped()
        if theirs:
            meta = dict(mine or theirs)
            if mine:
                meta["runs"] = list(mine.get("runs", [])) + list(theirs.get("runs", []))
            self.write_meta(meta)
        return added

    # ------------------------------------------------------------------ meta
    def read_meta(self) -> dict | None:
        file = self.path / META
        if not file.exists():
            return None
        return json.loads(file.read_text())

    def write_meta(self, meta: dict) -> None:
        file = self.path / META
        tmp = file.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(meta, indent=1) + "\n")
        tmp.replace(file)


def _log_id(line: str) -> tuple:
    """(kind, key) of a cells.jsonl / skipped.jsonl line; ("", ()) for a torn one."""
    try:
        d = json.loads(line)
        return d["kind"], tuple(int(k) for k in d["key"])
    except (ValueError, KeyError, TypeError):
        return "", ()


def _append_durable(file: Path, text: str) -> None:
    with open(file, "a", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


def check_meta_compatible(old: dict, new: dict) -> list[str]:
    """Why a resumed run cannot add rows to a table made elsewhere (empty list: compatible)."""
    problems = []
    for k in ("gpu_name", "sm_count", "granularity"):
        if k in old and k in new and old[k] != new[k]:
            problems.append(f"{k}: table has {old[k]!r}, this run {new[k]!r}")
    if tp_of(old) != tp_of(new):
        problems.append(f"tp_size: table has {tp_of(old)!r}, this run {tp_of(new)!r}")
    if "model" in old and "model" in new and old["model"] != new["model"]:
        diff = [k for k in new["model"] if old["model"].get(k) != new["model"][k]]
        problems.append(f"model shape differs in {diff}")
    return problems
