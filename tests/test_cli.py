"""sglang_mux.cli: the one error line, exit status 2, defaults in --help, a closed pipe."""

import subprocess
import sys

import pytest

from sglang_mux import cli


def _main(argv=None):
    ap = cli.ArgumentParser(prog="tool")
    ap.add_argument("--rate", type=cli.positive(float), default=4.0, help="requests per second")
    ap.add_argument("--file")
    a = ap.parse_args(argv)
    if a.file:
        open(a.file).read()
    if a.rate > 100:
        raise cli.UsageError("--rate above 100 is not served; pass at most 100")
    print(a.rate)
    return 0


@pytest.mark.parametrize("argv, want", [
    (["--rate", "0"], "error: argument --rate: must be > 0, got 0"),
    (["--rate", "x"], "error: argument --rate: 'x' is not a number"),
    (["--bogus"], "error: unrecognized arguments: --bogus"),
    (["--rate", "500"], "error: --rate above 100 is not served; pass at most 100"),
    (["--file", "/no/such/file"], "error: no such file or directory: /no/such/file"),
])
def test_user_errors_are_one_line_and_exit_2(argv, want, capsys):
    with pytest.raises(SystemExit) as e:
        cli.run(_main, argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(want) and err.count("\n") == 1


def test_help_shows_defaults(capsys):
    with pytest.raises(SystemExit) as e:
        cli.run(_main, ["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "requests per second (default: 4.0)" in out
    assert "(default: None)" not in out  # --file has no default to show


def test_ok_exits_with_mains_status(capsys):
    with pytest.raises(SystemExit) as e:
        cli.run(_main, ["--rate", "2"])
    assert e.value.code == 0 and capsys.readouterr().out == "2.0\n"


def test_closed_pipe_is_quiet():
    code = ("import sys; from sglang_mux import cli\n"
            "def main(argv=None):\n"
            "    for i in range(200000): print('line', i)\n"
            "    return 0\n"
            "cli.run(main)\n")
    p = subprocess.run(f"{sys.executable} -c \"{code}\" | head -3", shell=True, capture_output=True, text=True,
                       timeout=60)
    assert p.stdout.splitlines() == ["line 0", "line 1", "line 2"]
    assert "Traceback" not in p.stderr and "BrokenPipe" not in p.stderr
