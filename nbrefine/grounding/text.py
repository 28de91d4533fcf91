"""Text cut to a length: the one clipping helper.

Every place that shortens text for a prompt, a summary, a table row or a one-line message cuts it
here, so a cut is always visible and never longer than asked. What differs between places is only
the marker: a bare ``…``, ``…[+N chars]`` (summaries), ``\\n[... truncated N characters]`` (prompt
sections). ``{dropped}`` in a marker becomes the number of characters cut off.

May import: the standard library only.
"""

from __future__ import annotations

__all__ = ["TRUNCATED", "clip", "one_line"]

#: The marker of a prompt section cut to its budget.
TRUNCATED = "\n[... truncated {dropped} characters]"


def clip(text: str, limit: int, marker: str = "…", *, unbroken: tuple[str, str] | None = None) -> str:
    """``text`` cut to at most ``limit`` characters, ending with ``marker`` when it was cut.

    ``unbroken=(opening, closing)``: never cut between an ``opening`` and its ``closing`` (a
    redaction marker ``<redacted:…>`` is dropped whole rather than cut in half). When not even
    one character fits beside the marker, the text is cut bare."""
    if len(text) <= limit:
        return text
    if limit <= 0:
        return ""
    keep = limit - len(marker.replace("{dropped}", str(len(text))))
    if keep < 1:
        return text[:limit]
    if unbroken is not None:
        start = text.rfind(unbroken[0], 0, keep)
        if start != -1 and text.find(unbroken[1], start) >= keep:
            keep = start
    return text[:keep] + marker.replace("{dropped}", str(len(text) - keep))


def one_line(text: object, limit: int = 200) -> str:
    """``text`` with every run of whitespace folded to one space, cut to ``limit`` with ``…``."""
    return clip(" ".join(str(text).split()), limit)
