"""The options of ``%%refine`` and the ``%refine`` line commands, each declared once.

The cell options are IPython ``magic_arguments`` decorators (:func:`refine_arguments`): IPython
builds the magic's parser *and* its ``%%refine?`` text from them, and ``%refine help``
(:func:`help_text`) prints that same text, so neither can fall behind the parser. The line
commands are one table, :data:`LINE_COMMANDS`, which the help text and the "unknown command"
message both read. (:func:`nbrefine.ipython.repairs.resolve` merges the parsed options with the
``Refine`` settings into a ``CellRun``.)

Declared when ``%load_ext nbrefine`` defines the magic, so nothing heavy is imported here.

May import: IPython (the magic-argument machinery and UsageError), the engine's names of the modes
(:mod:`nbrefine.engine.modes`) and the standard library.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar, cast

from IPython.core import magic_arguments as _ma
from IPython.core.error import UsageError
from IPython.core.magic_arguments import MagicArgumentParser

from ..engine.modes import MODES

__all__ = ["LINE_COMMANDS", "help_text", "line_usage", "refine_arguments"]

_F = TypeVar("_F", bound=Callable[..., Any])
_Declare = Callable[..., Callable[[Any], Any]]

# IPython's decorator factories, typed (IPython leaves them unannotated).
magic_arguments, kwds, argument = cast(
    tuple[_Declare, _Declare, _Declare], (_ma.magic_arguments, _ma.kwds, _ma.argument)
)

# (what to type after %refine, what it does): the help text and the router's error both read it.
LINE_COMMANDS: tuple[tuple[str, str], ...] = (
    ("accept [--anyway]", "apply the latest session's verified fix (--anyway: an unverified one too)"),
    ("reject", "keep the state the failed run left"),
    ("status", "the latest session, as text"),
    ("fix", "repair the cell that failed last, without %%refine"),
    ("hint", "the next hint for the cell that failed last (teaching modes)"),
    ("auto offer|on|off", "offer a repair (offer) or repair at once (on) whenever a cell fails"),
    ("policy [--mode MODE] [--max-hints N] [--lock]", "an instructor's teaching policy for this kernel"),
    ("help", "this text"),
)


def line_usage() -> str:
    """The line commands, one per line, as ``%refine help`` and ``%refine?`` show them."""
    return "\n".join(f"%refine {command}\n    {what}" for command, what in LINE_COMMANDS)


def refine_arguments(magic: _F) -> _F:
    """Every ``%%refine`` option, as IPython magic arguments on ``magic`` (declared here once).

    IPython turns them into ``magic.parser`` and rewrites ``magic.__doc__`` (``%%refine?``)
    from them; the parser is then made strict (:func:`_strict`)."""
    declarations = (
        magic_arguments(name="%refine"),  # IPython prefixes one '%': the usage reads %%refine
        kwds(epilog="Line commands:\n" + line_usage()),
        argument("--mode", choices=MODES, help="teaching mode of this cell (default: the kernel's policy)"),
        argument("--max-hints", type=int, dest="max_hints", metavar="N", help="most hints for this cell"),
        argument("--max-attempts", type=int, dest="max_attempts", metavar="N", help="most candidates to try"),
        argument("--provider", metavar="NAME", help="provider of fixes: auto, anthropic, offline, ..."),
        argument("--model", metavar="NAME", help="model of the provider (default: its own)"),
        argument("--timeout", type=float, metavar="SECONDS", help="wall-clock limit of one trial run"),
        argument(
            "-t",
            "--test",
            action="append",
            default=[],
            dest="checks",
            metavar="CODE",
            help='a check a fix must pass, e.g. "assert len(df) == 3" (repeatable)',
        ),
        argument(
            "--no-snapshot",
            action="store_true",
            dest="no_snapshot",
            help="trials start from the state the failed run left (no copy taken before it)",
        ),
        argument(
            "--no-cache", action="store_true", dest="no_cache", help="ask again, even for a reply paid for"
        ),
        argument("--candidates", type=int, metavar="N", help="candidates per request, 1 to 8"),
        argument(
            "--allow-network", action="store_true", dest="allow_network", help="trials may use the network"
        ),
        argument(
            "--allow-subprocess",
            action="store_true",
            dest="allow_subprocess",
            help="trials may start processes",
        ),
        argument("--allow-writes", action="store_true", dest="allow_writes", help="trials may write files"),
    )
    decorated: Any = magic
    for declare in reversed(declarations):  # the innermost decorator runs first
        decorated = declare(decorated)
    _strict(decorated.parser)  # set by magic_arguments
    return cast(_F, decorated)


class _CellParser(MagicArgumentParser):
    """IPython's magic parser with our one-line errors; abbreviations are off (see _strict)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"%%refine: {message}")


def _strict(parser: argparse.ArgumentParser) -> None:
    """No abbreviated options (``--mode`` must never be read as ``--model``: see
    nbrefine._argparse) and errors prefixed with ``%%refine:``. IPython builds the parser
    itself and takes no parser class, so it gets ours after the fact."""
    parser.allow_abbrev = False
    parser.__class__ = _CellParser


def help_text(magic: Callable[..., Any]) -> str:
    """``%refine help``: the text ``%%refine?`` shows, without IPython's reST code-block marker."""
    return (magic.__doc__ or "").replace("::\n\n  %%refine", "usage: %%refine", 1).strip()
