"""The bad-number matrix: every command-line tool of the project against ``nan``, ``inf``, ``0``, a
negative value and a missing input file.

Each row is one tool and one numeric flag of it (the flag's value is ``{v}`` in its command
line). Every cell must be the project's answer to a user's mistake: exit status 2, exactly one
stderr line ``error: ...`` that names the flag (or the missing path), no traceback, and within a
time limit, so that a tool that hangs on ``nan`` fails its case instead of the suite. A cell in
``accepts`` is a value that is right for that flag; it must run to exit status 0. 

Run as a script, it prints the table of what each cell answers now (markdown): the exit status
and the first 60 characters of the error line (less ``error: argument`` and the ``--help``
pointer), or "accepted: <why>" (a cell that fails says **FAILS**)::

    python tests/cli_matrix.py

Mains run in-process through ``cli.run`` (as ``python -m`` runs them), a tool whose
``__main__`` does something else in a subprocess.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import io
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # as a script: the checkout's code, as pytest's pythonpath gives it
    sys.path.insert(0, str(ROOT))

TABLE = "llama-3.1-8b__nvidia-h100-80gb-hbm3__fa3"  # shipped
LLAMA = str(ROOT / "launch/models/llama-3.1-8b/config.json")
TINY = str(ROOT / "launch/models/tiny-llama/config.json")  # what a tool that accepts writes stays small

#: the columns: the text each value cell passes (``--flag=VALUE``, so that ``-inf`` is a value)
VALUES = {"nan": "nan", "inf": "inf", "0": "0", "negative": "-5"}
MISSING = "missing file"
COLUMNS = (*VALUES, MISSING)
TIMEOUT_S = 10.0


@dataclass
class Row:
    """One tool and one of its numeric flags.

    ``argv``: its command line with ``{v}`` where the value goes, ``{tmp}`` a scratch directory
    (each run from there). ``missing``: a command line naming ``{missing}``, a path that does not
    exist (None: the tool reads no input file, or another row of the tool shows it)."""

    tool: str
    flag: str | None
    argv: tuple = ()
    missing: tuple | None = None
    accepts: dict = field(default_factory=dict)  # column -> why that value is right for the flag
    unrun: dict = field(default_factory=dict)  # column -> a right value whose run is too long to make here
    note: str = ""  # a row without a flag: why
    main: str = "main"  # the function cli.run calls (module attribute; "a:b" for a partial)
    subprocess: bool = False  # its __main__ is not cli.run(main): run python -m
    timeout_s: float = TIMEOUT_S
    from_root: bool = False  # run from the checkout (a tool that reads its paths relative to it), not {tmp}

    @property
    def module(self) -> str:
        return self.tool.split()[0]

    @property
    def id(self) -> str:
        return f"{self.tool.replace(' ', '-')}[{self.flag or 'file'}]"

    def cells(self) -> list[str]:
        """The columns this row has a case for."""
        out = [c for c in VALUES if self.flag and c not in self.unrun]
        return out + [MISSING] if self.missing is not None else out


ROWS: list[Row] = [
    # ---- sglang_mux: the simulators, the dispatcher, the estimator, the server -----------------
    Row("sglang_mux.sim", "--rate", ("--table", TABLE, "--limit", "5", "--rate={v}"),
        missing=("--table", TABLE, "--limit", "5", "--trace", "{missing}")),
    Row("sglang_mux.sim", "--time-scale", ("--table", TABLE, "--limit", "5", "--time-scale={v}")),
    Row("sglang_mux.sim", "--tbt-slo-ms", ("--table", TABLE, "--limit", "5", "--rate", "1", "--tbt-slo-ms={v}")),
    Row("sglang_mux.sim", "--session-sample", ("--table", TABLE, "--limit", "5", "--session-sample={v}")),
    Row("sglang_mux.sim", "--seed", ("--table", TABLE, "--limit", "5", "--rate", "1", "--arrival", "poisson",
                                     "--seed={v}"),
        accepts={"0": "the default seed"}),
    Row("sglang_mux.sim", "--prefill-slowdown", ("--table", TABLE, "--limit", "5", "--prefill-slowdown={v}")),
    Row("sglang_mux.sim", "--fused-price", ("--table", TABLE, "--limit", "5", "--rate", "1", "--policy", "hybrid",
                                            "--fused-price=15,{v}"), note="its SLOPE"),
    Row("sglang_mux.sim", None, missing=("--table", "{missing}", "--limit", "5"), note="a missing --table"),
    Row("sglang_mux.sim_chunked", "--rate", ("--table", TABLE, "--limit", "5", "--rate={v}"),
        missing=("--table", TABLE, "--limit", "5", "--trace", "{missing}")),
    Row("sglang_mux.sim_chunked", "--budget", ("--table", TABLE, "--limit", "5", "--budget={v}")),
    Row("sglang_mux.dispatch plan", "--tbt-slo-ms", ("plan", "--table", TABLE, "--decode-bs", "8", "--prefill-new",
                                                      "1024", "--tbt-slo-ms={v}"),
        missing=("plan", "--table", "{missing}", "--decode-bs", "8", "--prefill-new", "1024")),
    Row("sglang_mux.dispatch plan", "--ttft-slo-ms", ("plan", "--table", TABLE, "--decode-bs", "8",
                                                       "--prefill-new", "1024", "--ttft-slo-ms={v}")),
    Row("sglang_mux.estimator predict", "--decode-sms", ("predict", TABLE, "--prefill-new", "1024", "--decode-bs",
                                                          "8", "--decode-sms={v}"),
        missing=("predict", "{missing}", "--prefill-new", "1024", "--decode-bs", "8", "--decode-sms", "64")),
    Row("sglang_mux.estimator check", None, missing=("check", "{missing}"), note="no numeric flag"),
    Row("sglang_mux.estimator fit", None, missing=("fit", "{missing}"), note="no numeric flag"),
    Row("sglang_mux.estimator add-fused", None, missing=("add-fused", "{missing}", "{missing}.json"),
        note="no numeric flag"),
    # launch_server as on a machine without SGLang: what passes our checks meets the install hint
    # (an error line that names no --mux flag, so the case fails).
    Row("sglang_mux.launch_server", "--mux-tbt-slo-ms", ("--mux-tbt-slo-ms={v}",), main="_run:no_sglang",
        missing=("--mux-contention-table", "{missing}")),
    Row("sglang_mux.launch_server", "--mux-ttft-slo-ms", ("--mux-ttft-slo-ms={v}",), main="_run:no_sglang"),
    Row("sglang_mux.launch_server", "--mux-timeline-max-mb", ("--mux-timeline-max-mb={v}",), main="_run:no_sglang"),
    Row("sglang_mux.launch_server", "--mux-fused-host-quantile", ("--mux-fused-host-quantile={v}",),
        main="_run:no_sglang"),
    Row("sglang_mux.launch_server", "--mux-ttft-ms-per-token", ("--mux-ttft-ms-per-token={v}",),
        main="_run:no_sglang", accepts={"0": "a flat TTFT SLO, the default"}),
    Row("sglang_mux.launch_server", "--mux-sm-granularity", ("--mux-sm-granularity={v}",), main="_run:no_sglang"),
    Row("sglang_mux.launch_server", "--mux-layerwise-max-tokens", ("--mux-layerwise-max-tokens={v}",),
        main="_run:no_sglang", accepts={"0": "what memory holds, the default"}),
    Row("sglang_mux.mux_args", None, note="no numeric flag, no input file: it prints the --mux-* flags, whose "
        "values the launch_server rows check"),
    Row("sglang_mux.testing.checkpoint", "--std", ("--config", TINY, "--out", "{tmp}/ckpt", "--std={v}"),
        missing=("--config", "{missing}", "--out", "{tmp}/ckpt"), subprocess=True),
    Row("sglang_mux.testing.tokenizer_fixture", None, note="no flags: its one argument is an output directory"),

    # ---- bench ----------------------------------------------------------------------------------
    Row("bench.run", "--rates", ("--systems", "stub", "--out", "{tmp}/o", "--dry-run", "--rates={v}"),
        missing=("--systems", "stub", "--out", "{tmp}/o", "--dry-run", "--rates", "1", "--trace-path", "{missing}")),
    Row("bench.run", "--duration-s", ("--systems", "stub", "--out", "{tmp}/o", "--dry-run", "--rates", "1",
                                      "--duration-s={v}")),
    Row("bench.run", "--search", ("--systems", "stub", "--out", "{tmp}/o", "--dry-run", "--search=2,{v}")),
    Row("bench.run", "--seed", ("--systems", "stub", "--out", "{tmp}/o", "--dry-run", "--rates", "1", "--seed={v}"),
        accepts={"0": "the default seed"}),
    Row("bench.report", None, missing=("{missing}",), note="no numeric flag"),
    Row("bench.slo_map", "--tbt", ("{tmp}", "--tbt={v}"), missing=("{missing}",)),
    Row("bench.slo_map", "--ttft-per-token", ("{tmp}", "--ttft-per-token={v}"),
        accepts={"0": "a flat TTFT SLO (its check then reads the run)"}),
    Row("bench.soak", "--rate", ("--out", "{tmp}/o", "--rate={v}"), missing=("--out", "{missing}", "--report")),
    Row("bench.soak", "--chat-share", ("--out", "{tmp}/o", "--report", "--chat-share={v}"),
        accepts={"0": "no chat sessions, the trace alone (--report then needs its pieces)"}),
    Row("bench.fuzz", "--n", ("--n={v}",), note="no input file"),
    Row("bench.fuzz", "--seed", ("--seed={v}",), accepts={"0": "the default seed (it then needs a server)"}),
    Row("bench.fuzz", "--budget-s", ("--budget-s={v}",), accepts={"0": "no time limit (it then needs a server)"}),
    Row("bench.fuzz", "--rare-every", ("--rare-every={v}",), accepts={"0": "no rare case (it then needs a server)"}),
    Row("bench.fuzz", "--huge-mb", ("--huge-mb={v}",)),
    Row("bench.faults", "--repeat", ("--repeat={v}",)),
    Row("bench.auth_probe", "--timeout-s", ("--api-key", "k", "--routes", "{tmp}/r.json", "--timeout-s={v}"),
        missing=("--api-key", "k", "--routes", "{missing}")),
    Row("bench.client_capacity", "--point-s", ("--point-s={v}",)),
    Row("bench.capped_prefill", "--long-prefill-token-threshold",
        ("--chunked-prefill-size", "2048", "--long-prefill-token-threshold={v}"), note="no input file"),
    Row("bench.cpu_split", "--cells", ("--cell", "0", "--cells={v}"),
        missing=("--cells", "2", "--cell", "0", "--sysfs", "{missing}")),
    Row("bench.cpu_split", "--cell", ("--cells", "2", "--sysfs", "{tmp}", "--cell={v}"),
        accepts={"0": "the first cell (0-based; the empty --sysfs then has no topology)"}),
    Row("bench.prefill_mixed", "--batches", ("--batches={v}",), missing=("--rescore", "{missing}")),
    Row("bench.prefill_mixed", "--seed", ("--seed={v}", "--table", TABLE),
        accepts={"0": "the default seed (it then needs --model-config)"}),
    Row("bench.record", "--rate", ("--run", "{tmp}", "--system", "mux", "--into", "{tmp}/f.json", "--key", "k",
                                   "--rate={v}"),
        missing=("--run", "{missing}", "--system", "mux", "--rate", "2", "--into", "{tmp}/f.json", "--key", "k")),
    Row("bench.ttft_floor", "--limit", ("--table", TABLE, "--limit={v}"),
        missing=("--table", TABLE, "--trace", "{missing}")),
    Row("bench.ttft_floor", "--slos-s", ("--table", TABLE, "--limit", "5", "--slos-s={v}")),
    Row("bench.ttft_floor", "--session-sample", ("--table", TABLE, "--limit", "5", "--session-sample={v}")),
    Row("bench.work_bound", "--rates", ("--table", TABLE, "--limit", "5", "--rates={v}"),
        missing=("--table", TABLE, "--rates", "3", "--trace", "{missing}")),
    Row("bench.work_bound", "--tbt-slo-ms", ("--table", TABLE, "--limit", "5", "--rates", "3", "--tbt-slo-ms={v}")),
    Row("bench.timeline_profile", "--rate", ("{tmp}", "--rate={v}"), missing=("{missing}", "--rate", "2")),
    Row("bench.plots", None, missing=("--timeline", "{missing}"), note="no numeric flag"),
    Row("bench.stub_server", "--chunk-tokens", ("--port", "0", "--chunk-tokens={v}"), note="no input file"),
    Row("bench.claims", "--factor", ("{tmp}", "--factor={v}"), missing=("{missing}",)),
    Row("bench.results_page", None, ("--check",), missing=("--results", "{missing}", "--check"),
        note="no numeric flag"),
    Row("bench.workloads", "--rate", ("--out", "{tmp}/w.jsonl", "code", "--rate={v}"), note="no input file"),
    Row("bench.workloads", "--seed", ("--out", "{tmp}/w.jsonl", "code", "--rate", "1", "--num-requests", "2",
                                      "--seed={v}"),
        accepts={"0": "the default seed"}),

    # ---- bench.analysis -------------------------------------------------------------------------
    Row("bench.analysis.fused_price_fit", None, missing=("{missing}",), note="no numeric flag"),
    Row("bench.analysis.kv_bound", "--n", ("--n={v}",)),
    Row("bench.analysis.kv_bound", "--seed", ("--n=1", "--gaps=15", "--pools=1000", "--seed={v}"),
        accepts={"0": "the default seed"}),
    Row("bench.analysis.fused_price_replay", None, missing=("{missing}",), note="no numeric flag"),
    Row("bench.analysis.fused_sizes", "--over", ("{tmp}", "--rates", "2", "--over={v}"),
        missing=("{missing}", "--rates", "2")),
    Row("bench.analysis.fused_sizes", "--rates", ("{tmp}", "--rates={v}")),
    Row("bench.analysis.launch_laps", "--tbt", ("{tmp}/t.jsonl", "--tbt={v}"), missing=("{missing}",)),
    Row("bench.analysis.muxoff_ratio", None, missing=("{missing}",), note="no numeric flag"),
    Row("bench.analysis.startup_split", None, missing=("{missing}",), note="no numeric flag"),
    Row("bench.analysis.predict_synthetic", "mux_pool", (TABLE, "{v}", "358800"),
        missing=("{missing}", "358800", "358800")),
    Row("bench.analysis.predict_uncapped_conv", None, note="no arguments"),
    Row("bench.analysis.prefill_wall", None, missing=("{missing}",), note="no numeric flag"),
    Row("bench.analysis.profile_summary", "--top", ("{tmp}/t.json", "--top={v}"), missing=("{missing}",)),
    Row("bench.analysis.replay_estimator", "rates", (str(ROOT / "contention_tables" / TABLE), "{tmp}", "{v}"),
        missing=("{missing}", "{tmp}", "2")),
    Row("bench.analysis.sim_chunked_check", "--host-ms", ("--host-ms={v}",), timeout_s=2.0, from_root=True,
        unrun={"0": "no host time, the first of its defaults 0,1,2 (it replays every served point)"}),
    Row("bench.analysis.sim_hybrid_map", "--tbt", ("--tbt={v}",)),
    Row("bench.analysis.sim_hybrid_map", "--span", ("--span={v}",)),
    Row("bench.analysis.sim_hybrid_map", "--seed", ("--fused-jitter", "{missing}", "--seed={v}"),
        missing=("--fused-jitter", "{missing}"), accepts={"0": "the default seed"}),
    Row("bench.analysis.tbt_tail", "--tbt", ("{tmp}/t.jsonl", "--tbt={v}"), missing=("{missing}", "--tbt", "30")),
    Row("bench.analysis.tbt_tail", "--from", ("{tmp}/t.jsonl", "--tbt", "30", "--from={v}"),
        accepts={"0": "from the server's start"}),
    Row("bench.analysis.trace_reuse_windows", None, missing=("--trace", "{missing}"), note="no numeric flag"),
    Row("bench.analysis.ttft_parts", "--bin-s", ("{tmp}", "--rate", "2", "--bin-s={v}"),
        missing=("{missing}", "--rate", "2"), subprocess=True),
    Row("bench.analysis.whatif_fused_tail", "--span", ("--overruns-from", "{missing}", "--span={v}"),
        missing=("--overruns-from", "{missing}")),
    Row("bench.analysis.whatif_fused_tail", "--quantiles", ("--overruns-from", "{missing}", "--quantiles={v}")),
    Row("bench.analysis.whatif_host_time", None, note="no arguments"),

    # ---- profiling (each checks its arguments before it needs a GPU) ---------------------------
    Row("profiling.allreduce", "--repeats", ("--tp-size", "2", "--out", "{tmp}/o", "--repeats={v}"),
        missing=("--tp-size", "2", "--out", "{tmp}/o", "--model-config", "{missing}")),
    Row("profiling.allreduce", "--tp-size", ("--out", "{tmp}/o", "--tp-size={v}")),
    Row("profiling.corun_shapes", "--decode-sms", ("--model-config", LLAMA, "--prefill", "8192+0",
                                                   "--decode-sms={v}"),
        missing=("--model-config", "{missing}", "--prefill", "8192+0")),
    Row("profiling.decode_kernel", None, missing=("--model-config", "{missing}"), note="no numeric flag"),
    Row("profiling.engine_bench", "--repeats", ("--model-config", LLAMA, "--repeats={v}"),
        missing=("--model-config", "{missing}")),
    Row("profiling.engine_bench", "--mem-fraction-static", ("--model-config", LLAMA, "--mem-fraction-static={v}")),
    Row("profiling.gemm_curve", "--repeats", ("--model-config", LLAMA, "--out", "{tmp}/o", "--repeats={v}"),
        missing=("--model-config", "{missing}", "--out", "{tmp}/o")),
    Row("profiling.gemm_waves", "--repeats", ("--model-config", LLAMA, "--repeats={v}"),
        missing=("--model-config", "{missing}")),
    Row("profiling.h2d_block", None, note="no arguments"),
    Row("profiling.host_floor", "--rounds", ("--model-config", LLAMA, "--rounds={v}"),
        missing=("--model-config", "{missing}")),
    Row("profiling.merge", None, missing=("{missing}", "{tmp}"), note="no numeric flag"),
    Row("profiling.partitions_bench", "--granularity", ("--granularity={v}",), note="no input file"),
    Row("profiling.run", "--time-budget-s", ("--model-config", LLAMA, "--plan-only", "--time-budget-s={v}"),
        missing=("--model-config", "{missing}", "--plan-only")),
    Row("profiling.run", "--gpu-mem-gib", ("--model-config", LLAMA, "--plan-only", "--gpu-mem-gib={v}")),
    Row("profiling.run", "--seed", ("--model-config", LLAMA, "--plan-only", "--seed={v}"),
        accepts={"0": "the default seed"}),
]


# ---- running one cell ---------------------------------------------------------------------------

@dataclass
class Outcome:
    status: int | None  # None: timed out
    err: str
    out: str = ""
    exception: str = ""  # in-process: an exception that escaped cli.run (a traceback for the user)
    seconds: float = 0.0

    @property
    def lines(self) -> list[str]:
        return self.err.splitlines()


class Hang(BaseException):
    """A case ran past its time limit (BaseException: no tool's ``except Exception`` swallows it)."""


@contextlib.contextmanager
def deadline(seconds: float):
    def ring(signum, frame):
        raise Hang(f"no answer within {seconds:g} s")

    old = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def argv_of(row: Row, column: str, tmp: Path) -> list[str]:
    missing = str(tmp / "no_such_input")
    if column == MISSING:
        template = row.missing
        value = ""
    else:
        template, value = row.argv, VALUES[column]
    return [a.format(v=value, tmp=tmp, missing=missing) for a in template]


def _main(row: Row):
    from sglang_mux import cli  # noqa: F401  (the module's own import of it comes first otherwise)

    mod = importlib.import_module(row.module)
    name, _, how = row.main.partition(":")
    fn = getattr(mod, name, None)
    if fn is None and hasattr(mod, "__path__"):  # a package: the main its __main__.py runs, as python -m does
        src = (Path(mod.__path__[0]) / "__main__.py").read_text()
        m = re.search(r"^from ([\w.]+) import (?:.*\b)?main\b", src, re.M)
        fn = getattr(importlib.import_module(m.group(1)), name) if m else None
    if fn is None:
        raise AttributeError(f"{row.module} has no {name} (nor a package __main__.py that imports one)")
    if how == "no_sglang":
        fn = functools.partial(fn, have_sglang=False)
    return fn


def run_case(row: Row, column: str, tmp: Path) -> Outcome:
    """Run one cell from ``tmp`` (relative paths in it name nothing of the checkout)."""
    argv = argv_of(row, column, tmp)
    t0 = time.monotonic()
    if row.subprocess:
        try:
            p = subprocess.run([sys.executable, "-m", row.module, *argv], cwd=ROOT if row.from_root else tmp, capture_output=True, text=True,
                               timeout=row.timeout_s, env={**os.environ, "PYTHONPATH": str(ROOT)})
        except subprocess.TimeoutExpired as e:
            return Outcome(None, (e.stderr or b"").decode(errors="replace") if isinstance(e.stderr, bytes)
                           else (e.stderr or ""), seconds=time.monotonic() - t0)
        return Outcome(p.returncode, p.stderr, p.stdout, seconds=time.monotonic() - t0)
    from sglang_mux import cli

    main = _main(row)
    out, err = io.StringIO(), io.StringIO()
    status, exc = None, ""
    here = os.getcwd()
    os.chdir(ROOT if row.from_root else tmp)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), deadline(row.timeout_s):
            cli.run(main, argv)
    except SystemExit as e:
        status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except Hang:
        status = None
    except Exception as e:  # escaped cli.run: the user would see a traceback
        status, exc = 1, f"{type(e).__name__}: {e}"
    finally:
        os.chdir(here)
    return Outcome(status, err.getvalue(), out.getvalue(), exc, time.monotonic() - t0)


def named(row: Row, column: str, tmp: Path) -> str:
    """What the error line must name: the flag, or the missing path."""
    if column == MISSING:
        return "no_such_input"
    return row.flag


def problems(row: Row, column: str, o: Outcome, tmp: Path) -> list[str]:
    """What is wrong with an outcome (empty: the cell answers as it should)."""
    bad = []
    if column in row.accepts:  # past the flag's check: it runs, or stops at something else, in one line
        if o.status is None:
            bad.append(f"no answer within {row.timeout_s:g} s (hangs?)")
        elif o.status == 2 and o.lines and row.flag in o.lines[0]:
            bad.append(f"refused ({o.lines[0]}), but {row.accepts[column]}")
        elif o.status not in (0, 2) or (o.status == 2 and len(o.lines) != 1):
            bad.append(f"exit status {o.status} with {len(o.lines)} stderr lines")
        if o.exception or "Traceback" in o.err:
            bad.append("a traceback: " + (o.exception or o.err.strip().splitlines()[-1]))
        return bad
    if o.status is None:
        bad.append(f"no answer within {row.timeout_s:g} s (hangs?)")
    elif o.status != 2:
        bad.append(f"exit status {o.status}, expected 2")
    if o.exception or "Traceback" in o.err:
        bad.append("a traceback: " + (o.exception or o.err.strip().splitlines()[-1]))
    if len(o.lines) != 1 or not o.err.startswith("error: "):
        bad.append(f"{len(o.lines)} stderr lines, expected one 'error: ...' line")
    elif named(row, column, tmp) not in o.lines[0]:
        bad.append(f"the error line does not name {named(row, column, tmp)}")
    return bad


# ---- the table ----------------------------------------------------------------------------------

def cell_text(row: Row, column: str, o: Outcome, tmp: Path) -> str:
    if column in row.accepts and not problems(row, column, o, tmp):
        return f"accepted: {row.accepts[column]}"
    if o.status is None:
        return f"no answer in {row.timeout_s:g} s — **FAILS**"
    first = o.lines[0] if o.lines else (o.exception or "(nothing on stderr)")
    first = re.sub(r" \(see [\w. -]+ --help\)$", "", first.replace(str(tmp), "…"))
    first = first.removeprefix("error: argument ").removeprefix("error: ")
    if len(first) > 60:
        first = first[:59] + "…"
    bad = problems(row, column, o, tmp)
    mark = " — **FAILS**" if bad else ""
    if o.status == 2 and len(o.lines) == 1 and not bad:
        return f"2 `{first}`".replace("|", "\\|")
    return (f"{o.status} `{first}`{mark}" + (f" ({len(o.lines)} lines)" if len(o.lines) > 1 else "")
            ).replace("|", "\\|")


def table() -> str:
    head = "| tool | flag | " + " | ".join(COLUMNS) + " |"
    lines = [head, "|" + "---|" * (len(COLUMNS) + 2)]
    with tempfile.TemporaryDirectory() as d:
        for row in ROWS:
            cells = []
            for c in COLUMNS:
                if c in row.unrun:
                    cells.append(f"accepted: {row.unrun[c]} (not run here)")
                    continue
                if c not in row.cells():
                    cells.append("—" if c == MISSING or not row.flag else "")
                    continue
                tmp = Path(d) / f"{len(lines)}-{c.replace(' ', '_')}"
                tmp.mkdir()
                cells.append(cell_text(row, c, run_case(row, c, tmp), tmp))
            flag = f"`{row.flag}`" if row.flag else f"({row.note})" if row.note else ""
            if row.flag and row.note:
                flag += f" ({row.note})"
            lines.append(f"| `{row.tool}` | {flag} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(table())
