"""IPython magic and shell lines seen as Python: masked so the cell parses, timing magics kept.

A ``%timeit f(x)`` line keeps its code (so a typo in it can be fixed); any other ``%``/``!``
line becomes ``pass``. Also: how IPython reports a failure inside a timing magic.

May import: the standard library, nothing else of this package; never the sandbox, the engine,
IPython or the CLI (the offline tier only reads what the failure context gives it)."""

from __future__ import annotations

import ast
import re

_MAGIC = re.compile(r"^[ \t]*[%!]")
#: A timing magic and its options, followed by Python code: ``%timeit -n 10 f(x)``, ``%time
#: y = f(x)``, or the setup statement on the first line of a ``%%timeit`` cell.
_TIMING = re.compile(
    r"^[ \t]*(?:%timeit|%time|%%timeit)"
    r"(?:[ \t]+-[nrp][ \t]*\d+|[ \t]+-[tcqo](?=[ \t])|[ \t]+-v[ \t]*\w+)*"  # timeit's options
    r"[ \t]+(?=\S)"
)
_TIMING_START = re.compile(r"^[ \t]*%%?time(?:it)?(?!\w)")
#: How IPython runs a magic line or cell (the failing line of a failure inside one).
_RUN_MAGIC = re.compile(r"^\s*get_ipython\(\)\.run_(line|cell)_magic\(\s*'(\w+)'")


def _mask_line(line: str) -> str:
    """A magic line as Python with the same length and columns: a timing magic's code stays
    (``%timeit f(x)`` -> ``pass;   f(x)``) so that typos in it can be fixed; any other magic or
    shell line becomes ``pass``."""
    if not _MAGIC.match(line):
        return line
    indent = line[: len(line) - len(line.lstrip())]
    timing = _TIMING.match(line)
    if timing is not None and timing.end() - len(indent) >= len("pass;"):
        code = line[timing.end() :]
        try:
            body = ast.parse(code).body
        except (SyntaxError, ValueError):
            body = []
        if body and not any(hasattr(node, "body") for node in body):  # simple statements only
            return indent + "pass;".ljust(timing.end() - len(indent)) + code
    return indent + "pass"


def _is_timing_line(line: str) -> bool:
    return _TIMING_START.match(line) is not None
