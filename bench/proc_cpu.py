"""How busy each of a server's processes was over a point: CPU time per wall time, by process.

SGLang runs its HTTP server and tokenizer manager in one Python process, its scheduler (and
detokenizer) in others. A single-threaded process near 1.0 core is saturated: on session 48's
H200 the sharegpt points that failed on TTFT drift lost their time after the scheduler's end of
prefill (``bench.analysis.ttft_parts``), which points at that one process. Linux /proc only.

    before = snapshot(server_pid); ...; after = snapshot(server_pid)
    busy(before, after, wall_s) -> {"sglang::scheduler_TP0": 1.0, "http+tokenizer": 0.97, ...}
"""
from __future__ import annotations

import os
import re
from pathlib import Path

_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 0.01


def _stat(pid: int, proc: Path) -> tuple[int, int] | None:
    """(session id, utime + stime in ticks) of a live process, else None."""
    try:
        text = (proc / str(pid) / "stat").read_text()
    except OSError:
        return None
    f = text[text.rindex(")") + 2:].split()  # fields from the 3rd (state) on; comm may hold spaces
    return int(f[3]), int(f[11]) + int(f[12])  # session (6th), utime (14th) + stime (15th)


def _name(pid: int, root: int, proc: Path) -> str:
    """A process's title (SGLang names its children ``sglang::…`` by setproctitle); the root of
    the session is SGLang's HTTP server with its tokenizer manager."""
    if pid == root:
        return "http+tokenizer"
    try:
        argv = (proc / str(pid) / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return "other"
    title = argv[0].decode(errors="replace").strip() if argv else ""
    # "sglang::tokenizer_worker:<pid>" (--tokenizer-worker-num): one name for all of them
    return re.sub(r":\d+$", "", title.split()[0]) if title.startswith("sglang::") else "other"


def snapshot(session: int, proc: Path = Path("/proc")) -> dict[int, tuple[str, int]]:
    """Every live process of ``session`` (the server's: bench.run starts it in a session of its
    own): pid -> (name, CPU ticks so far)."""
    out = {}
    if not proc.is_dir():
        return out
    for d in proc.iterdir():
        if not d.name.isdigit():
            continue
        st = _stat(int(d.name), proc)
        if st is not None and st[0] == session:
            out[int(d.name)] = (_name(int(d.name), session, proc), st[1])
    return out


def busy(before: dict, after: dict, wall_s: float) -> dict[str, float]:
    """CPU cores each process name kept busy between two snapshots (the busiest process of a name
    where several share it), highest first; a process born in between counts from zero."""
    if wall_s <= 0:
        return {}
    out: dict[str, float] = {}
    for pid, (name, ticks) in after.items():
        share = (ticks - before.get(pid, (name, 0))[1]) * _TICK_S / wall_s
        out[name] = max(out.get(name, 0.0), round(share, 3))
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))
