"""A guarded reply that still reads well once the withheld code is taken out of it.

A placeholder where the code was ("so [code withheld] is `False`", "For example:" over a notice)
points at nothing. Instead, what depended on the code goes with it: a withheld block takes the
sentence that leads into it ("For example:"); withheld code inside a sentence takes that sentence,
or only the clause it is in when the sentence starts with one that stands on its own ("Python
compares letters exactly, so `...` is `True`." keeps "Python compares letters exactly."). One
note at the end says that code was withheld, and why.

May import: the standard library only.
"""

from __future__ import annotations

import re

_CODE_SPAN = re.compile(r"`+[^`\n]*`+")
_SENTENCE_END = re.compile(r"[.!?:](?=\s|$)")
# Where a sentence starts besides after another one: a paragraph, after a list item's marker, a
# heading.
_UNIT_START = re.compile(r"(?:^|\n)[ \t]*(?:[-*+]|\d+[.)])[ \t]+|\n[ \t]*\n|(?:^|\n)[ \t]*#[^\n]*\n")
_CLAUSE = re.compile(r"[,;](?=\s)|\s[—–-](?=\s)")
# A first clause that cannot stand on its own once the rest of its sentence is gone.
_DEPENDENT = re.compile(
    r"(?:if|when|whenever|because|since|although|though|while|as|once|unless|until|instead of|"
    r"for example|e\.g\.|like|with|without|using|by)\b",
    re.I,
)
_EMPTY_ITEM = re.compile(r"^[ \t]*(?:[-*+]|\d+[.)])?[ \t]*$")


def withheld_note(count: int) -> str:
    """The one note at the end of a reply that had code withheld."""
    if count == 1:
        return "One example was withheld because it would give away the solution."
    return f"{count} examples were withheld because they would give away the solution."


def take_out(text: str, spans: list[tuple[int, int, bool]]) -> str:
    """``text`` without the code at ``spans`` (start, end, whether it fills its lines) and what
    depends on it: the sentence leading into it with a colon, the sentence or clause it is in."""
    masked = _mask(text, [(start, end) for start, end, _ in spans])
    cuts: list[tuple[int, int]] = []
    for start, end, whole in spans:
        if whole:
            first = text.rfind("\n", 0, start) + 1
            last = text.find("\n", end)
            cut = (first, len(text) if last < 0 else last + 1)
        else:
            cut = _sentence_or_clause(masked, start, end)
        cuts.append(cut)
        if _ends_with_colon(masked, cut[0]):
            cuts.append(_lead_in(masked, cut[0]))
    return _tidy(_apply(text, cuts))


def _mask(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with the inside of code (spans, and every `...`) blanked out, so that the dots and
    commas in code are not taken for the ends of sentences or clauses."""
    chars = list(text)
    for start, end in [*spans, *(m.span() for m in _CODE_SPAN.finditer(text))]:
        for i in range(start, end):
            if chars[i] != "\n":
                chars[i] = "x"
    return "".join(chars)


def _sentence_start(masked: str, position: int) -> int:
    starts = [0]
    starts += [m.end() for m in _SENTENCE_END.finditer(masked, 0, position)]
    starts += [m.end() for m in _UNIT_START.finditer(masked, 0, position)]
    start = max(starts)
    while start < position and masked[start].isspace():
        start += 1
    return start


def _sentence_end(masked: str, position: int) -> tuple[int, int]:
    """Where the sentence holding ``position`` ends: (its last word's end, after its punctuation)."""
    ends = [len(masked)]
    unit = _UNIT_START.search(masked, position)
    if unit is not None:
        ends.append(unit.start())
    stop = _SENTENCE_END.search(masked, position)
    if stop is not None and stop.start() < min(ends):
        return stop.start(), stop.end()
    end = min(ends)
    return end, end


def _sentence_or_clause(masked: str, start: int, end: int) -> tuple[int, int]:
    first = _sentence_start(masked, start)
    words_end, last = _sentence_end(masked, end)
    separators = list(_CLAUSE.finditer(masked, first, start))
    if separators and not _DEPENDENT.match(masked, first):
        return separators[-1].start(), words_end  # keeps the sentence's own punctuation
    while last < len(masked) and masked[last] in " \t":
        last += 1
    return first, last


def _ends_with_colon(masked: str, position: int) -> bool:
    return masked[:position].rstrip().endswith(":")


def _lead_in(masked: str, position: int) -> tuple[int, int]:
    """The sentence that ends with the colon before ``position`` (the blank lines after it stay)."""
    colon = len(masked[:position].rstrip()) - 1
    return _sentence_start(masked, colon), colon + 1


def _apply(text: str, cuts: list[tuple[int, int]]) -> str:
    pieces, position = [], 0
    for start, end in sorted(cuts):
        if start > position:
            pieces.append(text[position:start])
        position = max(position, end)
    pieces.append(text[position:])
    return "".join(pieces)


def _tidy(text: str) -> str:
    lines = [line.rstrip() for line in text.split("\n")]
    kept = [line for line in lines if not line or not _EMPTY_ITEM.match(line)]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(kept)).strip()
