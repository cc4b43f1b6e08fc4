"""What every command-line tool of the project shares: one way to fail and one way to show help.

A bad argument or input file is a user's mistake, not a bug: the tool prints one line,
``error: <what is wrong and what to do>``, to stderr and exits with status 2, never a traceback.
``--help`` shows each option's default. Output cut short by a closed pipe (``| head``) ends
quietly.

Use::

    ap = cli.ArgumentParser(prog="python -m sglang_mux.sim", description=...)
    ...
    if __name__ == "__main__":
        cli.run(main)          # main(argv=None) -> int

and inside ``main`` raise :class:`UsageError` (or call ``ap.error``) for what the user got wrong.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from typing import Callable, NoReturn, Sequence

EXIT_USAGE = 2


class UsageError(ValueError):
    """A bad argument or input file; the message says what is wrong and what to do."""


def print_error(message: str) -> int:
    """Print ``error: message`` on one line (whatever the message held) to stderr; returns 2,
    for a main that returns its status rather than exiting."""
    print("error: " + " ".join(str(message).split()), file=sys.stderr)
    return EXIT_USAGE


def fail(message: str) -> NoReturn:
    """Print ``error: message`` on one line to stderr and exit with status 2."""
    raise SystemExit(print_error(message))


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Defaults shown (``(default: …)``), descriptions kept as written. No default is shown where
    there is none (None, a switch that is off) or where the help already says it."""

    def _get_help_string(self, action):
        if action.default in (None, False) or "default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


class ArgumentParser(argparse.ArgumentParser):
    """argparse with the project's error line and defaults in ``--help``."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:  # argparse's: usage + "prog: error: …", two lines
        fail(f"{message} (see {self.prog} --help)")


def positive(kind: Callable[[str], float] = float, allow_zero: bool = False) -> Callable[[str], float]:
    """An argparse ``type`` that accepts finite numbers > 0 (or >= 0 with ``allow_zero``).

    ``nan``, ``inf`` and ``-inf`` parse as floats but are never a count, a rate or a time: they are
    refused, saying what to give (``nan`` passes every ``<`` test, so a check written as
    ``v < 0`` lets it through). No flag of the project takes ``inf`` for "no limit": where there
    is none, the flag is left out."""

    whole = kind is int
    bound = ">= 0" if allow_zero else "> 0"

    def parse(text: str):
        try:
            v = kind(text)
        except (ValueError, OverflowError):
            raise argparse.ArgumentTypeError(f"{text!r} is not a {'whole ' if whole else ''}number; "
                                             f"give one {bound}") from None
        if not math.isfinite(v):
            raise argparse.ArgumentTypeError(f"must be a finite number {bound}, got {text}")
        if v < 0 or (v == 0 and not allow_zero):
            raise argparse.ArgumentTypeError(f"must be {bound}, got {text}")
        return v

    parse.__name__ = kind.__name__  # argparse names the type in its messages
    return parse


def finite(kind: Callable[[str], float] = float) -> Callable[[str], float]:
    """An argparse ``type`` for a number of any sign that must be finite (a time on a clock, an
    offset): ``nan``, ``inf`` and ``-inf`` are refused."""

    def parse(text: str):
        try:
            v = kind(text)
        except (ValueError, OverflowError):
            raise argparse.ArgumentTypeError(f"{text!r} is not a {'whole ' if kind is int else ''}number") from None
        if not math.isfinite(v):
            raise argparse.ArgumentTypeError(f"must be a finite number, got {text}")
        return v

    parse.__name__ = kind.__name__
    return parse


def seed(text: str) -> int:
    """An argparse ``type`` for a random seed: a whole number >= 0 (numpy refuses a negative one)."""
    return positive(int, allow_zero=True)(text)


def run(main: Callable[..., int | None], argv: Sequence[str] | None = None) -> NoReturn:
    """Run a tool's ``main`` and exit with its status; user errors become the one ``error:`` line.

    UsageError, a missing or unreadable file, malformed JSON and a missing or malformed contention
    table (``tables.TableError``) are the user's; anything else is a bug and keeps its traceback."""
    try:
        rc = main(argv) if argv is not None else main()
    except UsageError as e:
        fail(str(e))
    except FileNotFoundError as e:
        fail(f"no such file or directory: {e.filename or e}")
    except IsADirectoryError as e:
        fail(f"expected a file, got a directory: {e.filename or e}")
    except json.JSONDecodeError as e:
        fail(f"malformed JSON: {e}")
    except BrokenPipeError:
        # The reader went away (``| head``): not an error. Point stdout at devnull so that the
        # interpreter's final flush does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise SystemExit(0)
    except KeyboardInterrupt:
        raise SystemExit(130)
    except ValueError as e:
        tables = sys.modules.get("sglang_mux.tables")  # loaded if it raised one; not imported here (pandas)
        if tables is not None and isinstance(e, tables.TableError):
            fail(f"{e} (give a contention table directory, or a shipped table's name)")
        raise
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    raise SystemExit(rc or 0)
