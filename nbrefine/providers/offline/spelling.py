"""Close spellings: an edit distance and ranked close matches that never guess loosely.

May import: the standard library, nothing else of this package; never the sandbox, the engine,
IPython or the CLI (the offline tier only reads what the failure context gives it)."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass

_CUTOFF = 0.7  # difflib ratio below which a name is never proposed


def _distance(a: str, b: str, limit: int) -> int:
    """Optimal string alignment distance (a transposition counts 1), capped at ``limit + 1``."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    previous2: list[int] = []
    previous = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        current = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            value = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                value = min(value, previous2[j - 2] + 1)
            current[j] = value
        if min(current) > limit:
            return limit + 1
        previous2, previous = previous, current
    return previous[len(b)]


_SEPARATORS = re.compile(r"[\s_\-]+")
_DIGITS = re.compile(r"\d")


def _close_matches(
    word: str,
    pool: Iterable[str],
    *,
    normalize: bool = False,
    limit: int = 4,
    prefix: bool = False,
    two_edits: bool = True,
) -> list[str]:
    """Close spellings of ``word`` in ``pool``, best first; never loose guesses.

    Equal ignoring case (and, with ``normalize``, surrounding space and ``_``/`` ``/``-``) comes
    first; then a small edit distance with a difflib ratio of at least 0.7 (a swap of two
    neighbouring letters needs no ratio: ``ptl`` -> ``plt``). Spellings that differ only in
    digits (``df2``/``df``) are not close: they name different things. When nothing is that
    close, one spelling two edits away is offered if it is the only one (``sqroot`` ->
    ``sqrt``; two such spellings tie and none is offered; not with ``two_edits=False``). With
    ``prefix``, a single candidate that extends ``word`` by whole words (``salary`` ->
    ``salary_usd``) comes last."""
    scored = _scored_matches(word, pool, normalize=normalize, prefix=prefix)
    found = [candidate for _, _, candidate in scored.close]
    if not found and two_edits and len(scored.two_edits) == 1:
        found = list(scored.two_edits)
    if len(scored.extended) == 1 and scored.extended[0] not in found:
        found.append(scored.extended[0])
    return found[:limit]


@dataclass
class _Scored:
    close: list[tuple[int, float, str]]  # (edits, -ratio, candidate), best first; edits 0: same ignoring case
    two_edits: list[str]  # two edits away where the word allows only one
    extended: list[str]  # ``word`` extended by whole words


def _scored_matches(
    word: str, pool: Iterable[str], *, normalize: bool = False, prefix: bool = False
) -> _Scored:
    def norm(text: str) -> str:
        text = text.lower()
        return _SEPARATORS.sub("_", text.strip()) if normalize else text

    target = norm(word)
    digits = _DIGITS.sub("", word)
    exact: list[str] = []
    scored: list[tuple[int, float, str]] = []
    two_edits: list[str] = []
    extended: list[str] = []
    max_edits = max(1, len(target) // 4)
    # Two edits in a word of five letters or more are still a typo, never in a shorter one.
    reach = max(max_edits, 2) if len(target) >= 5 else max_edits
    matcher = difflib.SequenceMatcher(None)
    matcher.set_seq2(target)
    for candidate in dict.fromkeys(pool):
        if candidate == word or not candidate:
            continue
        normed = norm(candidate)
        if normed == target:
            exact.append(candidate)
            continue
        if prefix and len(target) >= 3 and (normed.startswith(target + "_") or normed.endswith("_" + target)):
            extended.append(candidate)
        if abs(len(normed) - len(target)) > reach:
            continue
        matcher.set_seq1(normed)
        if matcher.real_quick_ratio() < _CUTOFF or matcher.quick_ratio() < _CUTOFF:
            continue
        if _DIGITS.sub("", candidate) == digits:
            continue
        edits = _distance(target, normed, reach)
        if edits > reach:
            continue
        ratio = matcher.ratio()
        if ratio < _CUTOFF and not (edits == 1 and len(target) >= 3 and _is_swap(target, normed)):
            continue
        if edits <= max_edits:
            scored.append((edits, -ratio, candidate))
        else:
            two_edits.append(candidate)
    exact.sort(key=lambda c: (c.strip() != c, c.lower() != c.lower().strip(), c))
    scored.sort()
    return _Scored([(0, -1.0, c) for c in exact] + scored, two_edits, extended)


def _is_swap(a: str, b: str) -> bool:
    """Whether ``b`` is ``a`` with two neighbouring characters swapped."""
    if len(a) != len(b):
        return False
    diff = [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]
    return len(diff) == 2 and diff[1] == diff[0] + 1 and a[diff[0]] == b[diff[1]] and a[diff[1]] == b[diff[0]]
