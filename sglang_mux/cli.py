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
    """An argparse ``type`` that accepts numbers > 0 (or >= 0 with ``allow_zero``)."""

    def parse(text: str):
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if v < 0 or (v == 0 and not allow_zero):
            raise argparse.ArgumentTypeError(f"must be {'>= 0' if allow_zero else '> 0'}, got {text}")
        return v

    parse.__name__ = kind.__name__  # argparse names the type in its messages
    return parse


def run(main: Callable[..., int | None], argv: Sequence[str] | None = None) -> NoReturn:
    """Run a tool's ``main`` and exit with its status; user errors become the one ``error:`` line.

    UsageError, a missing or unreadable file and malformed JSON are the user's; anything else is
    a bug and keeps its traceback."""
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
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    raise SystemExit(rc or 0)
