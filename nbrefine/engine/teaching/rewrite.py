"""A guarded reply that still reads whole once the withheld code is taken out of it.

A placeholder where the code was ("so [code withheld] is `False`", "For example:" over a notice)
points at nothing, and a cut in the middle of a sentence leaves a clause that starts nowhere or a
bracket that was never opened. So withholding works on whole sentences:

- a withheld block (or code filling its lines) takes its lines, and the sentence that leads into
  it with a colon ("For example:");
- withheld code inside a sentence is, in this order: taken out with the brackets around it ("Look
  at line 2 (`...`)." keeps "Look at line 2."); taken out of "the assignment `...`"; replaced, when
  it is a quoted fragment of the student's own line, by neutral words the guard gives ("part of
  line 2", "the start of line 2"), where the sentence only says what the line does; taken out
  with the last clause it is in ("Python compares letters exactly, so `...` is `True`." keeps
  "Python compares letters exactly."; "Look at line 2: `...` is ..." keeps "Look at line 2.");
  or the sentence goes.

Every edited sentence must read whole (:func:`reads_whole`), or the next way is tried; the last
one, the sentence going, always does. One note at the end says that code was withheld, and why.

May import: the standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NamedTuple


class Withheld(NamedTuple):
    """One piece of withheld code: where it is in the reply, whether it fills its lines, and
    neutral words that may stand in for it ("" when none may: see the module docstring)."""

    start: int
    end: int
    whole: bool
    phrase: str = ""


_CODE_SPAN = re.compile(r"(`+)[^`\n]+?\1(?!`)")
_MASK = "\x00"  # what code is blanked out with: no letter, space or punctuation
_FENCE_LINE = re.compile(r"^[ \t]*(`{3,}|~{3,})")
# A sentence's end: . ! ? (and closing quotes or brackets) before a space and a word that does not
# go on in lower case, or before the end. "e.g." and "i.e." end nothing.
_END = re.compile(r"(?<!\be\.g)(?<!\bi\.e)[.!?]+[\"'”’)\]]*(?=\s*$|\s+(?![a-z]))")
# Where a sentence starts besides after another one: a paragraph, after a list item's marker, a
# heading.
_UNIT_START = re.compile(r"(?:^|\n)[ \t]*(?:[-*+]|\d+[.)])[ \t]+|\n[ \t]*(?=\n)|(?:^|\n)[ \t]*#[^\n]*\n")
_EMPTY_ITEM = re.compile(r"^[ \t]*(?:[-*+]|\d+[.)])?[ \t]*$")
_QUOTES = {"`": "`", "'": "'", '"': '"', "“": "”", "‘": "’"}
_OPENING = {"(": ")", "[": "]", "{": "}"}
_CLOSING = {v: k for k, v in _OPENING.items()}

# A first clause that cannot stand on its own once the rest of its sentence is gone.
_DEPENDENT = re.compile(
    r"(?:if|when|whenever|because|since|although|though|while|as|once|unless|until|instead of|"
    r"for example|e\.g\.|like|with|without|using|by|after|before|so that|in order to)\b",
    re.I,
)
# Where a clause that can go starts: after a colon, a semicolon or a dash, or a comma and a word
# that joins a clause on.
_CLAUSE = re.compile(
    r"(?P<mark>[:;])(?=\s)|\s(?P<dash>[—–-])(?=\s)|"
    r",(?=\s+(?:so|and|but|which|because|since|while|whereas|then|yet|or|meaning|as)\b)"
)
# Words before a colon that lead into the code itself ("change it to this: `...`").
_LEAD_IN_WORDS = re.compile(
    r"\b(?:this|these|following|like|below|here|example|instead|to|with|as|is|are|be|write|use|try)\s*$",
    re.I,
)
# A noun a quote may follow in apposition ("the assignment `...`": the quote can go).
_APPOSITIVE = re.compile(
    r"\b(?:the|your|this|that)\s+(?:line|assignment|expression|statement|call|condition|comparison|"
    r"check|part|code)\s+$",
    re.I,
)
# Words before a quote that only say what the student's line is or does: the start of the sentence
# or of a clause, or a verb of seeing or writing.
_OBSERVED = re.compile(
    r"(?:^|[:;]|,\s*(?:so|and|but|because|since|while|where|when))\s*$|"
    r"^\s*(?:(?:on|in|at)\s+(?:line\s+\d+|your\s+cell)|right now|now|here|so|but|and|then|there),?\s+$|"
    r"\b(?:you(?:'ve| have)?\s+(?:wrote|written|typed|have)|reads|says|contains|starts with|"
    r"begins with|look at|notice|see|spot)\s+$",
    re.I,
)
# Words that make a sentence about a quote propose it as the fix.
_PROPOSED = re.compile(
    r"\b(?:instead|would|will|should|could|works?|fix(?:es|ed)?|pass(?:es)?|solves?|correct|right(?!\s+now)|"
    r"try|use|write|change|replace|put|type|make)\b",
    re.I,
)


def withheld_note(count: int) -> str:
    """The one note at the end of a reply that had code withheld."""
    if count == 1:
        return "One example was withheld because it would give away the solution."
    return f"{count} examples were withheld because they would give away the solution."


# --------------------------------------------------------------------------- reading whole


def _layout(text: str) -> list[tuple[str, str]]:
    """The units of ``text`` in order, as (kind, words): kind "text" (a paragraph), "item" (a list
    item, without its marker), "heading" or "fence" (a fenced block, its code not kept)."""
    units: list[list[str]] = []
    fence = ""
    for line in text.split("\n"):
        match = _FENCE_LINE.match(line)
        if fence:
            if match and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence):
                fence = ""
            continue
        if match:
            fence = match.group(1)
            units.append(["fence", ""])
        elif not line.strip():
            units.append(["blank", ""])
        elif item := re.match(r"[ \t]*(?:[-*+]|\d+[.)])[ \t]+", line):
            units.append(["item", line[item.end() :]])
        elif re.match(r"[ \t]*#", line):
            units.append(["heading", line.strip().lstrip("#")])
        elif units and units[-1][0] in ("text", "item"):
            units[-1][1] += " " + line.strip()
        else:
            units.append(["text", line.strip()])
    return [(kind, words.strip()) for kind, words in units if kind != "blank"]


def _sentences_of(unit: str) -> list[str]:
    """The sentences of one unit, split at every ., ! and ? before a space (not "e.g.", "...")."""
    pieces = re.split(
        r"(?:(?<=[.!?])|(?<=[.!?][\"'”’)\]]))(?<!\be\.g\.)(?<!\bi\.e\.)(?<!\betc\.)(?<!\bvs\.)(?<!\.\.)\s+",
        unit,
    )
    return [p for p in pieces if p.strip()]


def _single_quotes_open(text: str) -> bool:
    """Whether a quote opened with ' is left open (apostrophes, "students'", never count)."""
    opened = 0
    for match in re.finditer(r"'", text):
        i = match.start()
        before = text[i - 1] if i else " "
        after = text[i + 1] if i + 1 < len(text) else " "
        if (before.isspace() or before in "([{") and not after.isspace():
            opened += 1
        elif opened and not before.isspace() and (after.isspace() or after in ".,;:!?)]}"):
            opened -= 1
    return opened > 0


_DOUBLED = (
    (re.compile(r"\S[ \t]{2,}\S"), "doubled spaces"),
    (re.compile(r"[ \t][.,;:!?](?![\w.])"), "a space before punctuation"),
    (
        re.compile(r"[,;:][ \t]*[.,;:!?]|(?<!\.)\.\.(?!\.)|(?<!\be\.g)(?<!\bi\.e)\.[ \t]*[,;:]"),
        "doubled punctuation",
    ),
    # "line 2 () and": what cutting code out of brackets leaves ("[]", "was ()" are values)
    (re.compile(r"(?<=\s)(?<!\) )(?<!was )(?<!\bis )\(\)|\([ \t]+\)"), "empty brackets"),
)


def wholeness_faults(text: str) -> list[str]:
    """What keeps ``text`` from reading whole ([] when it does): unpaired brackets, backticks or
    quotes; a sentence that starts in lower case or with punctuation, or ends with a colon
    (unless a list or a block follows), a comma, a dash or a word such as "and"; doubled spaces
    or punctuation; empty brackets. Code (fenced blocks, `inline`) is not read."""
    faults: list[str] = []
    units = [(kind, _CODE_SPAN.sub("CODE", words)) for kind, words in _layout(text)]
    body = "\n".join(words for _, words in units)
    if "`" in body:
        faults.append("an unpaired backtick")
    stack: list[str] = []
    for char in body:
        if char in _OPENING:
            stack.append(char)
        elif char in _CLOSING:
            if not stack or stack[-1] != _CLOSING[char]:
                faults.append(f"a {char} that closes nothing")
                break
            stack.pop()
    else:
        if stack:
            faults.append(f"a {stack[-1]} never closed")
    if body.count('"') % 2:
        faults.append('an unpaired "')
    if body.count("“") != body.count("”"):
        faults.append("an unpaired “")
    if _single_quotes_open(body):
        faults.append("an unpaired '")
    faults += [what for pattern, what in _DOUBLED if pattern.search(body)]
    for i, (kind, unit) in enumerate(units):
        if kind == "fence":
            continue
        for sentence in _sentences_of(unit):
            first = sentence.lstrip("\"'“‘([*_ ")[:1]
            if first.isalpha() and first.islower():
                faults.append(f"a sentence that starts in lower case ({sentence[:40]!r})")
            elif sentence[:1] in tuple(".,;:!?)]}—–"):
                faults.append(f"a sentence that starts with punctuation ({sentence[:40]!r})")
        end = unit[-1:]
        follows = units[i + 1][0] if i + 1 < len(units) else ""
        if end in (",", ";", "—", "–", "-") or (end == ":" and follows not in ("item", "fence")):
            faults.append(f"a sentence that ends with {end!r} ({unit[-40:]!r})")
        elif re.search(r"\b(?:and|or|but|so|because|the|a|an)$", unit, re.I):
            faults.append(f"a sentence cut off after its last word ({unit[-40:]!r})")
    return faults


def reads_whole(text: str) -> bool:
    """Whether ``text`` reads whole: balanced (), [], {}, backticks and quotes; every sentence
    starts with a capital (or code) and none ends with ':' (unless a list or a block follows it),
    ',' or a dash; no doubled spaces or punctuation (see :func:`wholeness_faults`)."""
    return not wholeness_faults(text)


def prose_words(text: str) -> int:
    """Words of the prose of ``text`` (an inline code span counts as one; blocks as none)."""
    return sum(len(_CODE_SPAN.sub("CODE", words).split()) for _, words in _layout(text))


def complete_sentences(text: str) -> int:
    """Sentences of ``text`` of three words or more that end with '.', '!' or '?' and read whole."""
    return sum(
        1
        for kind, words in _layout(text)
        if kind != "fence"
        for sentence in _sentences_of(_CODE_SPAN.sub("CODE", words))
        if len(sentence.split()) >= 3 and sentence.rstrip("\"'”’)")[-1:] in ".!?" and reads_whole(sentence)
    )


# --------------------------------------------------------------------------- taking code out


def take_out(text: str, spans: Sequence[Withheld | tuple[int, int, bool]]) -> str:
    """``text`` without the withheld code at ``spans`` and what depends on it (see the module
    docstring): every sentence it was in is edited so that it reads whole, or goes."""
    pieces = [Withheld(*span) for span in spans]
    masked = _mask(text, [(p.start, p.end) for p in pieces])
    cuts: list[tuple[int, int, str]] = []
    by_sentence: dict[tuple[int, int], list[Withheld]] = {}
    for piece in pieces:
        if piece.whole:
            first = text.rfind("\n", 0, piece.start) + 1
            last = text.find("\n", piece.end)
            cut = (first, len(text) if last < 0 else last + 1)
            cuts.append((*cut, ""))
            if _ends_with_colon(masked, cut[0]):
                cuts.append((*_lead_in(masked, cut[0]), ""))
        else:
            by_sentence.setdefault(_sentence(masked, piece.start, piece.end), []).append(piece)
    for (start, end), inside in _merged(by_sentence):
        new = _rewrite_sentence(text[start:end], masked[start:end], [
            p._replace(start=p.start - start, end=p.end - start) for p in inside
        ])  # fmt: skip
        if new:
            cuts.append((start, end, new))
            continue
        last = end
        while last < len(masked) and masked[last] in " \t":
            last += 1
        cuts.append((start, last, ""))
        if _ends_with_colon(masked, start):
            cuts.append((*_lead_in(masked, start), ""))
    out = _tidy(_apply(text, cuts))
    # A lead-in whose list went with the code goes too (one the reply was written with stays).
    already = {text.split("\n")[line].strip() for line, _ in _dangling(text)}
    for line, colon in reversed(_dangling(out)):
        lines = out.split("\n")
        if lines[line].strip() in already:
            continue  # the reply was written so: the rewrite leaves it
        body = lines[line][: colon + 1]
        ends = [m.end() for m in _END.finditer(_mask(body, []))]
        lines[line] = lines[line][: max(ends, default=0)].rstrip()
        out = _tidy("\n".join(lines))
    return out


def _dangling(text: str) -> list[tuple[int, int]]:
    """(line, column of the colon) of each line that ends with a colon and leads into nothing: no
    list item or fenced block follows it."""
    lines = text.split("\n")
    found, fence = [], ""
    for i, line in enumerate(lines):
        match = _FENCE_LINE.match(line)
        if match is not None:
            fence = "" if fence else match.group(1)
            continue
        if fence or not line.rstrip().endswith(":"):
            continue
        after = next((other for other in lines[i + 1 :] if other.strip()), "")
        if not re.match(r"[ \t]*(?:(?:[-*+]|\d+[.)])[ \t]|`{3}|~{3})", after):
            found.append((i, len(line.rstrip()) - 1))
    return found


def _merged(groups: dict[tuple[int, int], list[Withheld]]) -> list[tuple[tuple[int, int], list[Withheld]]]:
    """The sentences holding withheld code, as one where two overlap."""
    merged: list[tuple[tuple[int, int], list[Withheld]]] = []
    for (start, end), inside in sorted(groups.items()):
        if merged and start < merged[-1][0][1]:
            (first, last), before = merged.pop()
            merged.append(((first, max(last, end)), before + inside))
        else:
            merged.append(((start, end), list(inside)))
    return merged


def _mask(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with the inside of code (spans, and every `...`) blanked out, so that the dots and
    commas in code are not taken for the ends of sentences or clauses."""
    chars = list(text)
    for start, end in [*spans, *(m.span() for m in _CODE_SPAN.finditer(text))]:
        for i in range(start, end):
            if chars[i] != "\n":
                chars[i] = _MASK
    return "".join(chars)


def _unit_bounds(masked: str, start: int, end: int) -> tuple[int, int]:
    first = max([0, *(m.end() for m in _UNIT_START.finditer(masked, 0, start))])
    stop = _UNIT_START.search(masked, end)
    return first, len(masked) if stop is None else stop.start()


def _sentence(masked: str, start: int, end: int) -> tuple[int, int]:
    """The sentence holding ``masked[start:end]``: from its first word to its end punctuation."""
    unit_start, unit_end = _unit_bounds(masked, start, end)
    first = max([unit_start, *(m.end() for m in _END.finditer(masked, unit_start, start))])
    while first < start and masked[first].isspace():
        first += 1
    stop = _END.search(masked, end, unit_end)
    last = stop.end() if stop is not None else len(masked[:unit_end].rstrip())
    return first, max(last, end)


def _quoted(sentence: str, start: int, end: int) -> bool:
    opening = sentence[start : start + 1]
    return opening in _QUOTES and sentence[end - 1 : end] == _QUOTES[opening] and end - start > 1


def _rewrite_sentence(sentence: str, masked: str, pieces: list[Withheld]) -> str:
    """The sentence without the withheld ``pieces`` (offsets into it), reading whole; '' when
    it must go."""
    edited, edited_mask = sentence, masked
    left: list[int] = []  # where the pieces that no local edit fits start, in ``edited``
    for piece in sorted(pieces, key=lambda p: p.start, reverse=True):
        done = _local_edit(edited, edited_mask, piece)
        if done is None:
            left.append(piece.start)
            continue
        shift = len(done[0]) - len(edited)
        left = [start + shift for start in left]  # pieces on the right moved with the edit
        edited, edited_mask = done
    if left:
        edited = _clause_cut(edited, edited_mask, min(left))
    if _stands(edited):
        return edited
    if not left:  # the local edits do not read whole: the clause, or the sentence, instead
        edited = _clause_cut(sentence, masked, min(p.start for p in pieces))
        if _stands(edited):
            return edited
    return ""


def _stands(sentence: str) -> bool:
    return len(sentence.split()) >= 3 and reads_whole(sentence)


def _local_edit(sentence: str, masked: str, piece: Withheld) -> tuple[str, str] | None:
    """The sentence with one piece taken out in place (with its brackets, or from an apposition)
    or replaced by the piece's neutral words; ``None`` when none of these fits."""
    start, end = piece.start, piece.end
    brackets = _brackets_around(masked, start, end)
    if brackets is not None:
        first, last = brackets
        if first > 0 and sentence[first - 1] == " ":
            first -= 1
        elif last + 1 < len(sentence) and sentence[last + 1] == " ":
            last += 1
        return _splice(sentence, masked, first, last + 1, "")
    if not _quoted(sentence, start, end):
        return None
    before, after = sentence[:start], masked[end:]
    if _APPOSITIVE.search(before) and after[:1] in ("", " ", ".", ",", ";", ":", "!", "?"):
        return _splice(sentence, masked, len(before.rstrip()), end, "")
    proposed = _PROPOSED.search(before) or _PROPOSED.search(after)
    if piece.phrase and _OBSERVED.search(before) and not proposed:
        phrase = piece.phrase
        said = re.search(r"\bline \d+\b", phrase)
        if said is not None and re.search(rf"\b{said.group(0)}\b", before):
            phrase = phrase.replace(said.group(0), "that line")
        if not before.strip():
            phrase = phrase[:1].upper() + phrase[1:]
        return _splice(sentence, masked, start, end, phrase)
    return None


def _splice(sentence: str, masked: str, start: int, end: int, new: str) -> tuple[str, str]:
    return sentence[:start] + new + sentence[end:], masked[:start] + new + masked[end:]


def _brackets_around(masked: str, start: int, end: int) -> tuple[int, int] | None:
    """The ( ... ) of the sentence that holds ``masked[start:end]`` (the innermost), if any."""
    depth = 0
    for first in range(start - 1, -1, -1):
        char = masked[first]
        if char == ")":
            depth += 1
        elif char == "(":
            if depth == 0:
                break
            depth -= 1
    else:
        return None
    depth = 0
    for last in range(end, len(masked)):
        char = masked[last]
        if char == "(":
            depth += 1
        elif char == ")":
            if depth == 0:
                return first, last
            depth -= 1
    return None


def _clause_cut(sentence: str, masked: str, position: int) -> str:
    """The sentence up to the clause that holds ``position`` (its last clause), ending as the
    sentence did; '' when no clause before it stands on its own."""
    if _DEPENDENT.match(masked.lstrip()):
        return ""
    for match in reversed(list(_CLAUSE.finditer(masked, 0, position))):
        head = sentence[: match.start()].rstrip()
        if len(head.split()) < 3 or _open_brackets(masked[: match.start()]):
            continue
        if match.group("mark") == ":":
            rest = masked[match.end() :].replace(_MASK, " ")
            if _LEAD_IN_WORDS.search(head) or len(re.findall(r"[A-Za-z]{2,}", rest)) < 2:
                continue
        stop = _END.search(masked, position)
        return head.rstrip(",;:—–- ") + (stop.group(0)[0] if stop is not None else ".")
    return ""


def _open_brackets(masked: str) -> bool:
    return sum(masked.count(c) for c in _OPENING) != sum(masked.count(c) for c in _CLOSING)


def _ends_with_colon(masked: str, position: int) -> bool:
    return masked[:position].rstrip().endswith(":")


def _lead_in(masked: str, position: int) -> tuple[int, int]:
    """The sentence that ends with the colon before ``position`` (the blank lines after it stay)."""
    colon = len(masked[:position].rstrip()) - 1
    unit_start, _ = _unit_bounds(masked, colon, colon)
    first = max([unit_start, *(m.end() for m in _END.finditer(masked, unit_start, colon))])
    while first < colon and masked[first].isspace():
        first += 1
    return first, colon + 1


def _apply(text: str, cuts: list[tuple[int, int, str]]) -> str:
    pieces, position = [], 0
    for start, end, new in sorted(cuts):
        if start > position:
            pieces.append(text[position:start])
        if start >= position:
            pieces.append(new)
        position = max(position, end)
    pieces.append(text[position:])
    return "".join(pieces)


def _tidy(text: str) -> str:
    lines = [line.rstrip() for line in text.split("\n")]
    kept = [line for line in lines if not line or not _EMPTY_ITEM.match(line)]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(kept)).strip()
