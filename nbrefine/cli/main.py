"""``nbrefine``, the console script: parse the command line, dispatch to the command, and turn what
went wrong into one line and an exit status (2 bad usage or input, 130 interrupted).

The commands: ``fix`` (:mod:`.fix`) and ``bench`` (:mod:`.bench`).

May import: the rest of this package, :mod:`nbrefine._errors`, :mod:`nbrefine._version`,
:mod:`nbrefine.headless` (its exit codes) and the standard library.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
from collections.abc import Sequence
from types import FrameType

from .._errors import BadInputError, Terminated
from .._version import __version__
from ..headless import EXIT_INTERRUPTED, EXIT_USAGE
from . import bench, fix
from ._argparse import CommandParser

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(prog="nbrefine", description="Execution-feedback repair for Jupyter notebooks.")
    parser.add_argument("--version", action="version", version=f"nbrefine {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    fix.add_parser(commands)
    bench.add_parser(commands)
    return parser


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise Terminated()


def main(argv: Sequence[str] | None = None) -> int:
    """``nbrefine`` command line; returns the exit status."""
    previous = None
    try:
        args = build_parser().parse_args(list(argv) if argv is not None else None)
        if args.command is None:
            raise BadInputError("a command is required: fix or bench (see 'nbrefine --help')")
        with contextlib.suppress(ValueError):  # only the main thread may set handlers
            previous = signal.signal(signal.SIGTERM, _on_sigterm)
        return bench.run(args) if args.command == "bench" else fix.run(args)
    except BadInputError as err:
        print(f"nbrefine: error: {err}", file=sys.stderr, flush=True)
        return EXIT_USAGE
    except SystemExit as exit_:  # --help, --version
        return exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else EXIT_USAGE)
    except (KeyboardInterrupt, Terminated):
        print("nbrefine: interrupted; nothing was written", file=sys.stderr, flush=True)
        return EXIT_INTERRUPTED
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
