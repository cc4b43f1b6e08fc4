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


# ---- the numeric argparse types: finite numbers only ----------------------------------------

@pytest.mark.parametrize("text", ["nan", "NaN", "inf", "-inf", "Infinity", "1e999"])
@pytest.mark.parametrize("allow_zero", [False, True])
def test_positive_refuses_non_finite(text, allow_zero):
    import argparse

    with pytest.raises(argparse.ArgumentTypeError, match="must be a finite number " + (">= 0" if allow_zero else "> 0")):
        cli.positive(float, allow_zero=allow_zero)(text)


@pytest.mark.parametrize("kind, allow_zero, text, ok", [
    (float, False, "0.5", 0.5), (float, True, "0", 0.0), (int, True, "0", 0), (int, False, "7", 7),
])
def test_positive_keeps_its_bounds(kind, allow_zero, text, ok):
    import argparse

    assert cli.positive(kind, allow_zero=allow_zero)(text) == ok
    with pytest.raises(argparse.ArgumentTypeError, match=">= 0" if allow_zero else "> 0"):
        cli.positive(kind, allow_zero=allow_zero)("-1")
    if not allow_zero:
        with pytest.raises(argparse.ArgumentTypeError, match="must be > 0, got 0"):
            cli.positive(kind)("0")


def test_positive_int_says_whole_number():
    import argparse

    with pytest.raises(argparse.ArgumentTypeError, match="'nan' is not a whole number; give one > 0"):
        cli.positive(int)("nan")
    with pytest.raises(argparse.ArgumentTypeError, match="'1.5' is not a whole number"):
        cli.positive(int)("1.5")


def test_finite_and_seed():
    import argparse

    assert cli.finite(float)("-2.5") == -2.5
    for bad in ("nan", "inf", "-inf"):
        with pytest.raises(argparse.ArgumentTypeError, match="must be a finite number"):
            cli.finite(float)(bad)
    assert cli.seed("0") == 0 and cli.seed("12") == 12
    for bad in ("-1", "nan", "1.5"):
        with pytest.raises(argparse.ArgumentTypeError):
            cli.seed(bad)


@pytest.mark.parametrize("text, want", [
    ("1,nan", "--rates takes finite values > 0, e.g. 1,2; got nan"),
    ("inf", "--rates takes finite values > 0, e.g. 1,2; got inf"),
    ("2,-inf", "--rates takes finite values > 0, e.g. 1,2; got -inf"),
    ("2,0", "--rates takes values > 0, got 0"),
])
def test_number_list_refuses_non_finite(text, want):
    from sglang_mux import cli_io

    with pytest.raises(cli.UsageError) as e:
        cli_io.number_list(text, "--rates")
    assert str(e.value) == want
    assert cli_io.number_list("0,2", "--x", allow_zero=True) == [0.0, 2.0]


@pytest.mark.parametrize("check, good, bad", [
    ("fraction", ["1", "0.85", "1e-3"], ["0", "-0.1", "1.01", "nan", "inf", "x"]),
    ("share", ["0", "1", "0.5"], ["-0.1", "1.01", "nan", "inf", "-inf", "x"]),
])
def test_fraction_and_share(check, good, bad):
    import argparse

    from sglang_mux import cli_io

    f = getattr(cli_io, check)
    for text in good:
        assert f(text) == float(text)
    for text in bad:
        with pytest.raises(argparse.ArgumentTypeError, match=r"within [\[(]0, 1\]"):
            f(text)


def test_a_bad_contention_table_is_the_users_mistake(capsys):
    from sglang_mux.tables import TableError

    def main(argv=None):
        raise TableError("/no/table", "missing table directory")

    with pytest.raises(SystemExit) as e:
        cli.run(main, [])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1
    assert err.startswith("error: /no/table: missing table directory (give a contention table directory")


def test_another_value_error_is_a_bug_and_keeps_its_traceback():
    def main(argv=None):
        raise ValueError("a bug")

    with pytest.raises(ValueError, match="a bug"):
        cli.run(main, [])
