"""Start/stop a server subprocess and talk to it (used by the GPU tests and scripts)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Server:
    def __init__(self, args: list[str], port: int, log_path: str, mux: bool = True, env=None):
        mod = "sglang_mux.launch_server" if mux else "sglang.launch_server"
        self.cmd = [sys.executable, "-m", mod, "--host", "127.0.0.1", "--port", str(port), *args]
        self.url = f"http://127.0.0.1:{port}"
        self.log_path = log_path
        self.env = {**os.environ, **(env or {})}
        self.proc = None

    def start(self, timeout_s: float = 300) -> float:
        _stop_on_sigterm()
        if ROOT not in sys.path:  # bench/ runs from the checkout, not the installed package
            sys.path.insert(0, ROOT)
        from bench.run import port_answers

        if port_answers(int(self.url.rsplit(":", 1)[1])):  # it would answer /health in this one's place
            raise RuntimeError(f"{self.url} already has a server listening (left from an earlier run?): stop it first")
        t0 = time.time()
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(self.cmd, stdout=self.log, stderr=subprocess.STDOUT, env=self.env,
                                     cwd=ROOT, start_new_session=True)
        while time.time() - t0 < timeout_s:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}; see {self.log_path}:\n" + tail(self.log_path))
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as r:
                    if r.status == 200:
                        return time.time() - t0
            except Exception:
                pass
            time.sleep(1)
        self.stop()
        raise TimeoutError(f"server not healthy after {timeout_s}s; see {self.log_path}:\n" + tail(self.log_path))

    def stop(self):
        if self.proc and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(30)
            except Exception:
                os.killpg(self.proc.pid, signal.SIGKILL)
        if getattr(self, "log", None):
            self.log.close()

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()


def _stop_on_sigterm() -> None:
    """SIGTERM (``timeout``, a plan's budget) raises SystemExit, so that the caller's ``finally``
    stops its servers: each runs in its own session, and one left behind (112.8 GB a GPU, from a
    timed-out check) starved every server started after it on that host."""
    import threading

    if threading.current_thread() is threading.main_thread() and \
            signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))


def tail(path: str, n: int = 60) -> str:
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return ""


def post(url: str, payload: dict, timeout: float = 600) -> dict:
    """The JSON response; an HTTP error as {"error": code, "body"}, no answer within ``timeout``
    seconds as {"error": "timeout"} (a hung server must not hang its caller)."""
    req = urllib.request.Request(url, data=json.dumps(payload).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        return {"error": e.code, "body": e.read().decode(errors="replace")[:500]}
    except TimeoutError:
        return {"error": "timeout", "body": f"no answer within {timeout:g} s"}
    except urllib.error.URLError as e:
        if isinstance(e.reason, TimeoutError):
            return {"error": "timeout", "body": f"no answer within {timeout:g} s"}
        raise
