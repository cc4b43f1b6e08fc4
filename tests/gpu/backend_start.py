"""Which attention backend and table a server picks when started as the README says, and the
refusal of a table made with another backend (issue 16's start-up must-shows).

    python tests/gpu/backend_start.py --out bench/results/fa3_h100/backend_start_h100.json

1. ``launch/serve.sh llama-3.1-8b`` with no backend flag: SGLang's default backend (FA3 on
   Hopper) and the table of that backend; one /generate must answer.
2. The same with ``--mux-contention-table`` naming a table of another backend: the server must
   exit before serving, with an error that names both backends.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_util import ROOT, Server, post, tail  # noqa: E402


def serve(extra: list[str], port: int, log_path: str) -> Server:
    """``launch/serve.sh llama-3.1-8b EXTRA`` as a user starts it (serve_util.Server runs it)."""
    srv = Server([], port, log_path, env={"SGLANG_MUX_NO_INSTALL": "1", "PORT": str(port)})
    srv.cmd = ["bash", "launch/serve.sh", "llama-3.1-8b", *extra]
    return srv


def start(srv: Server) -> bool:
    """Whether it became healthy; a server that exits or never answers is stopped."""
    try:
        srv.start(400)
        return True
    except (RuntimeError, TimeoutError):
        return False


def grep(path: str, pattern: str) -> list[str]:
    with open(path, errors="replace") as f:
        return [ln.rstrip() for ln in f if re.search(pattern, ln)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--other-table", default=None,
                    help="a table of another backend (default: the triton table of this GPU's Llama shape)")
    ap.add_argument("--port", type=int, default=31500)
    ap.add_argument("--logdir", default="/tmp")
    a = ap.parse_args()
    import torch
    gpu = torch.cuda.get_device_name(0)
    res = {"device": gpu, "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "command": " ".join(["python", *sys.argv])}

    log1 = os.path.join(a.logdir, "backend_start_default.log")
    t0 = time.time()
    p = serve([], a.port, log1)
    ok = start(p)
    gen = post(p.url + "/generate", {"text": "Hello", "sampling_params": {"max_new_tokens": 8, "temperature": 0}}) \
        if ok else None
    p.stop()
    res["default_start"] = {
        "healthy": ok, "start_s": round(time.time() - t0, 1),
        "generate_ok": bool(gen and "text" in gen),
        "sglang_backend_lines": grep(log1, r"backend by default|attention_backend='")[:2],
        "mux_line": grep(log1, r"sglang_mux: \d+ partitions")[:1],
    }
    if not ok:
        res["default_start"]["log_tail"] = tail(log1)

    other = a.other_table
    if other is None:
        import glob
        cands = sorted(glob.glob(os.path.join(ROOT, "contention_tables", "llama-3.1-8b__*__triton")))
        other = cands[0] if cands else None
    if other:
        log2 = os.path.join(a.logdir, "backend_start_other.log")
        t0 = time.time()
        p = serve(["--mux-contention-table", other], a.port, log2)
        ok2 = start(p)
        p.stop()
        res["other_backend_table"] = {
            "table": os.path.relpath(other, ROOT), "refused": not ok2, "exit_code": p.proc.returncode,
            "seconds_to_exit": round(time.time() - t0, 1),
            "error_lines": grep(log2, r"MuxArgError|another attention backend|attention backend")[-4:],
        }
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1)
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
