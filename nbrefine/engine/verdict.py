"""Whether a fix that passed repaired the cell mechanically or changed what the cell computes.

A pass proves the cell runs, not that it computes what the user meant. In a cell with no check,
``message[17]`` → ``message[16]`` and ``A[len(A)]`` → ``A[len(A) - 1]`` make the IndexError go away
by guessing the intent: nothing says 16 was meant rather than 0 or -1. :func:`judge` reads the
candidate next to the original cell and says what kind of edit it is. A *mechanical* fix (a
misspelt name, attribute, keyword argument or key, an import, a syntax repair, a missing ``self.``,
a call of what was only referenced, a type conversion at a call, ``.copy()``, a deprecated API's
successor) is verified by running. An edit that *computes* something else (a literal, an index,
an operator, a comparison, a slice, an argument, a new statement) is verified only when a check
pins the result it changes; otherwise it is a proposal, "runs, but nothing checks the result"
(:attr:`Verdict.unchecked`).

The cells are compared as ASTs, statement by statement, or as token streams when one of them
does not parse (a SyntaxError is what is being fixed). Whatever the rules do not recognise is
"computes": it is the honest side.

May import: the standard library only.
"""

from __future__ import annotations

import ast
import builtins
import io
import keyword
import re
import tokenize
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, replace
from difflib import SequenceMatcher
from typing import Any, Literal

__all__ = ["Verdict", "judge"]

Kind = Literal["mechanical", "computes"]


@dataclass(frozen=True)
class Verdict:
    """What a candidate's edit is, and whether a check pins the result it changes."""

    kind: Kind  # "mechanical": verified by running; "computes": it changes what the cell computes
    pinned: bool  # some check (a -t check, the assert that failed, a kept assert) pins the result
    what: str  # for "computes", the first changes and their lines, "the index 17 → 16 (line 2)"

    @property
    def unchecked(self) -> bool:
        """It runs, but nothing checks the result: a proposal, not a verified fix."""
        return self.kind == "computes" and not self.pinned


def judge(
    original: str,
    candidate: str,
    *,
    checks: Sequence[str] = (),
    failed_assert: bool = False,
    known_names: Collection[str] = (),
) -> Verdict:
    """The verdict on ``candidate`` as a fix of ``original``.

    ``checks`` are the code of the checks that run after the cell (``-t`` checks, cells of
    asserts); ``failed_assert`` says the failure was an assert; ``known_names`` are the names,
    attributes, keys and columns known to exist (a rename to one of them is a misspelling fixed).
    """
    known = frozenset(known_names)
    old_tree, new_tree = _parse(original), _parse(candidate)
    if old_tree is None or new_tree is None:
        changes = _token_changes(original, candidate, known, new_tree)
    else:
        start = _Context(known=known, line=1, binds=frozenset())
        changes = list(_statement_changes(old_tree.body, new_tree.body, start, top=True))
    computing = [change for change in changes if change.kind == "computes"]
    pinned = (
        failed_assert
        or any(_asserts_something(check) for check in checks)
        or _a_kept_assert_pins(changes, original, old_tree, candidate, new_tree)
    )
    return Verdict("computes" if computing else "mechanical", pinned, _describe(computing))


# --------------------------------------------------------------------------- spelling

#: How alike two spellings must be (difflib's ratio, case-insensitive) for the new one to correct
#: the old; the looser bar applies when the new spelling is known to exist.
_CLOSE = 0.75
_CLOSE_TO_KNOWN = 0.6

#: Close spellings of different things: swapping one for the other changes what is computed
#: (``idxmax`` → ``idxmin``, ``lstrip`` → ``rstrip``, ``x_train`` → ``y_train``).
_OPPOSITES: tuple[tuple[str, str], ...] = tuple(
    re.findall(
        r"(\w+)/(\w+)",
        "max/min start/end first/last head/tail upper/lower left/right mean/median prev/next "
        "before/after inner/outer asc/desc floor/ceil ffill/bfill true/false x/y l/r i/j h/v",
    )
)

#: Prefixes that make another function of the same name (``nanmean``, ``cumsum``, ``iloc``).
_AFFIXES = ("nan", "cum", "arg", "idx", "i", "n", "r", "a")

#: Deprecated or removed APIs and their successors (numpy 1.20-2.0, pandas 1.x-2.x).
_SUCCESSORS: dict[str, frozenset[str]] = {
    "float": frozenset({"float64", "float_"}),
    "int": frozenset({"int64", "int_"}),
    "bool": frozenset({"bool_"}),
    "object": frozenset({"object_"}),
    "str": frozenset({"str_"}),
    "complex": frozenset({"complex128", "complex_"}),
    "NaN": frozenset({"nan"}),
    "NAN": frozenset({"nan"}),
    "Inf": frozenset({"inf"}),
    "PINF": frozenset({"inf"}),
    "product": frozenset({"prod"}),
    "cumproduct": frozenset({"cumprod"}),
    "sometrue": frozenset({"any"}),
    "alltrue": frozenset({"all"}),
    "in1d": frozenset({"isin"}),
    "row_stack": frozenset({"vstack"}),
    "trapz": frozenset({"trapezoid"}),
    "iteritems": frozenset({"items"}),
    "as_matrix": frozenset({"to_numpy", "values"}),
    "ix": frozenset({"loc", "iloc"}),
    "get_value": frozenset({"at"}),
    "set_value": frozenset({"at"}),
    "applymap": frozenset({"map"}),
    "is_monotonic": frozenset({"is_monotonic_increasing"}),
    "distplot": frozenset({"histplot", "displot"}),
}

#: Calls that convert a value to fix a TypeError (``str(x)``, ``np.asarray(x)``).
_CONVERTERS = frozenset(
    {"str", "int", "float", "list", "tuple", "set", "dict", "asarray", "array", "to_numeric", "to_datetime"}
)
#: Methods that convert or copy their object (``x.astype(float)``, ``df[mask].copy()``).
_CONVERTING_METHODS = frozenset({"copy", "astype", "tolist", "to_list", "to_numpy"})

#: numpy's aliases of builtins, removed in 1.24 (``np.float`` → ``float``).
_REMOVED_ALIASES = frozenset({"float", "int", "bool", "object", "str", "complex", "long", "unicode"})

_BUILTIN_NAMES = frozenset(dir(builtins))
_KEYWORDS = frozenset(keyword.kwlist) | frozenset(keyword.softkwlist)


def _is_misspelling(old: str, new: str, known: Collection[str]) -> bool:
    """Whether ``new`` plausibly corrects a misspelt ``old``, rather than naming something else."""
    if (old in known and new in known) or _swaps_meaning(old, new):
        return False  # both exist: choosing the other one is a choice of meaning
    if old.lower() == new.lower():
        return True
    bar = _CLOSE_TO_KNOWN if new in known else _CLOSE
    return SequenceMatcher(None, old.lower(), new.lower()).ratio() >= bar


def _swaps_meaning(old: str, new: str) -> bool:
    """Whether two close spellings differ in a number, an opposite or a prefix that means something."""
    a, b = old.lower(), new.lower()
    if re.findall(r"\d+", a) != re.findall(r"\d+", b):
        return True
    for one, other in (*_OPPOSITES, *((y, x) for x, y in _OPPOSITES)):
        if one in a and a.replace(one, other, 1) == b:
            return True
    return any(a == affix + b or b == affix + a for affix in _AFFIXES)


def _is_successor(old: str, new: str) -> bool:
    return new in _SUCCESSORS.get(old, frozenset())


# --------------------------------------------------------------------------- changes


@dataclass(frozen=True)
class _Change:
    kind: Kind
    phrase: str  # what changed, without its line: "the index 17 → 16"
    line: int  # in the candidate
    binds: frozenset[str]  # the names bound by the top-level statement the change is in


@dataclass(frozen=True)
class _Role:
    """What a reader calls the expression a change sits in: "the index", "the argument"."""

    noun: str
    old: str
    new: str


@dataclass(frozen=True)
class _Context:
    known: frozenset[str]
    line: int
    binds: frozenset[str]
    role: _Role | None = None


def _mechanical(ctx: _Context, phrase: str) -> _Change:
    return _Change("mechanical", phrase, ctx.line, ctx.binds)


def _computes(ctx: _Context, phrase: str) -> _Change:
    """A change of what is computed, named by the index or argument it is in when that is short."""
    role = ctx.role
    if role is not None and len(role.old) <= 40 and len(role.new) <= 40:
        phrase = f"{role.noun} {role.old} → {role.new}"
    return _Change("computes", phrase, ctx.line, ctx.binds)


def _describe(changes: Sequence[_Change]) -> str:
    """The first two changes with their lines, and how many more there are."""
    phrases = list(dict.fromkeys(f"{change.phrase} (line {change.line})" for change in changes))
    if len(phrases) > 2:
        return f"{phrases[0]}, {phrases[1]} and {len(phrases) - 2} more"
    return " and ".join(phrases)


# --------------------------------------------------------------------------- the AST side


def _parse(source: str) -> ast.Module | None:
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError):  # ValueError: a NUL byte
        return None


def _statement_changes(
    old: Sequence[ast.stmt], new: Sequence[ast.stmt], ctx: _Context, *, top: bool
) -> Iterator[_Change]:
    """The changes between two statement lists (a cell, a body), aligned statement by statement."""
    for before, after, line in _align(old, new, ctx.line):
        here = replace(ctx, line=line, role=None)
        if top:
            here = replace(here, binds=_bound_names(after if after is not None else before))
        if before is None:
            yield _added_statement(after, here)
        elif after is None:
            yield _removed_statement(before, here)
        else:
            yield from _node_changes(before, after, here)


def _align(old: Sequence[Any], new: Sequence[Any], line: int) -> Iterator[tuple[Any, Any, int]]:
    """The elements that differ, paired: (old, new) edited, (None, new) added, (old, None) removed.

    The third item is the candidate's line where the pair is (for a removal, the line of the
    element now in its place).
    """
    outer = SequenceMatcher(None, [_dump(n) for n in old], [_dump(n) for n in new], autojunk=False)
    for tag, i1, i2, j1, j2 in outer.get_opcodes():
        if tag == "equal":
            continue
        removed_at = _line(new[j1], line) if j1 < len(new) else _end_line(new[j1 - 1], line) if new else line
        for before, after in _pair_by_shape(old[i1:i2], new[j1:j2]):
            yield before, after, _line(after, removed_at) if after is not None else removed_at


def _pair_by_shape(old: Sequence[Any], new: Sequence[Any]) -> Iterator[tuple[Any, Any]]:
    """Within a block of differing elements, pair those of the same shape; the rest are added or removed."""
    inner = SequenceMatcher(None, [_shape(n) for n in old], [_shape(n) for n in new], autojunk=False)
    for _tag, i1, i2, j1, j2 in inner.get_opcodes():
        paired = min(i2 - i1, j2 - j1)
        yield from zip(old[i1 : i1 + paired], new[j1 : j1 + paired], strict=True)
        yield from ((before, None) for before in old[i1 + paired : i2])
        yield from ((None, after) for after in new[j1 + paired : j2])


def _shape(node: object) -> str:
    """What makes two statements the same statement edited: the kind, and what an assignment binds."""
    if isinstance(node, ast.Assign):
        return "= " + ", ".join(ast.unparse(target) for target in node.targets)
    if isinstance(node, ast.AugAssign | ast.AnnAssign):
        return "= " + ast.unparse(node.target)
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return "def " + node.name
    return type(node).__name__


def _added_statement(node: ast.stmt, ctx: _Context) -> _Change:
    if isinstance(node, ast.Import | ast.ImportFrom):
        return _mechanical(ctx, f"the import {_code(node)}")
    if isinstance(node, ast.Pass | ast.Global | ast.Nonlocal | ast.Assert) or _is_docstring(node):
        return _mechanical(ctx, f"the new statement {_code(node)}")  # binds or computes nothing
    if _only_shows(node):
        return _mechanical(ctx, f"the new statement {_code(node)}")  # it shows a value, changes none
    return _computes(ctx, f"the new statement {_code(node)}")


#: Calls that only show what the cell computed: adding one changes what is displayed, not the result.
_SHOWING = frozenset({"print", "display", "pprint", "pp"})


def _only_shows(node: ast.stmt) -> bool:
    """A statement that shows a value and binds nothing: ``print(x)``, ``display(df)``, a bare name
    or attribute (the cell's displayed result), whose arguments call nothing."""
    if not isinstance(node, ast.Expr):
        return False
    value = node.value
    if isinstance(value, ast.Name | ast.Attribute):
        return True
    if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in _SHOWING):
        return False
    inner = [*value.args, *(k.value for k in value.keywords)]
    return not any(isinstance(n, ast.Call | ast.NamedExpr) for arg in inner for n in ast.walk(arg))


def _removed_statement(node: ast.stmt, ctx: _Context) -> _Change:
    if isinstance(node, ast.Import | ast.ImportFrom | ast.Pass) or _is_docstring(node):
        return _mechanical(ctx, f"the statement {_code(node)} removed")
    return _computes(ctx, f"the statement {_code(node)} removed")


def _node_changes(old: ast.AST, new: ast.AST, ctx: _Context) -> Iterator[_Change]:
    """The changes between two nodes that stand in the same place, walked in parallel."""
    if _same(old, new):
        return
    ctx = replace(ctx, line=_line(new, ctx.line))
    if type(old) is not type(new) or _wraps(new, old) or _wraps(old, new) or _converts(old, new):
        yield _reshaped(old, new, ctx)
    elif isinstance(old, ast.Import | ast.ImportFrom):
        yield _mechanical(ctx, f"the import {_code(new)}")
    elif _is_docstring(old) and _is_docstring(new):
        yield _mechanical(ctx, "the docstring")
    elif isinstance(old, ast.Constant) and isinstance(new, ast.Constant):
        yield _constant_changed(old, new, ctx)
    elif isinstance(old, ast.Call) and isinstance(new, ast.Call) and _is_successor_call(old, new):
        yield _mechanical(ctx, f"the call {_code(old)} → {_code(new)}")
    else:
        for field, value in ast.iter_fields(old):
            yield from _field_changes(old, new, field, value, getattr(new, field, None), ctx)


def _wraps(outer: ast.AST, inner: ast.AST) -> bool:
    """Whether ``inner`` is a part of ``outer`` as it stands: ``x * 100`` wraps ``x``."""
    return any(_same(child, inner) for child in ast.iter_child_nodes(outer))


def _field_changes(
    old: ast.AST, new: ast.AST, field: str, before: object, after: object, ctx: _Context
) -> Iterator[_Change]:
    if isinstance(before, list) and isinstance(after, list):
        yield from _list_changes(old, field, before, after, ctx)
    elif isinstance(before, ast.AST) and isinstance(after, ast.AST):
        yield from _node_changes(before, after, _with_role(old, field, before, after, ctx))
    elif isinstance(before, str) and isinstance(after, str) and before != after:
        yield _renamed(old, before, after, ctx)
    elif before != after:
        yield _computes(ctx, f"{_noun(new)} {_code(old)} → {_code(new)}")


def _list_changes(
    parent: ast.AST, field: str, old: list[Any], new: list[Any], ctx: _Context
) -> Iterator[_Change]:
    """The changes between two lists of a node: a body of statements, arguments, elements."""
    if all(isinstance(node, ast.stmt) for node in (*old, *new)):
        yield from _statement_changes(old, new, ctx, top=False)
        return
    noun = "the argument" if field in ("args", "keywords") else "the element"
    dumps = [list(map(_dump, side)) for side in (old, new)]
    if dumps[0] != dumps[1] and sorted(dumps[0]) == sorted(dumps[1]):
        shown = [", ".join(map(_unparse, side)) for side in (old, new)]
        yield _computes(ctx, f"the order of {noun}s {_clip(shown[0])} → {_clip(shown[1])}")
        return
    for before, after, line in _align(old, new, ctx.line):
        here = replace(ctx, line=line)
        if isinstance(before, ast.AST) and isinstance(after, ast.AST):
            yield from _node_changes(before, after, _with_role(parent, field, before, after, here))
        elif before is None or after is None:
            gone = before is not None
            yield _computes(
                here, f"{noun} {_code(before if gone else after)} {'removed' if gone else 'added'}"
            )
        else:
            yield _computes(here, f"{_noun(parent)} {_code(before)} → {_code(after)}")


def _with_role(parent: ast.AST, field: str, old: ast.AST, new: ast.AST, ctx: _Context) -> _Context:
    """The context of a child that readers name by its role: an index, a slice, an argument."""
    prefix = ""
    if isinstance(parent, ast.Subscript) and field == "slice":
        noun = "the slice" if isinstance(old, ast.Slice) or isinstance(new, ast.Slice) else "the index"
    elif isinstance(parent, ast.Call) and field == "args":
        noun = "the argument"
    elif isinstance(parent, ast.keyword) and field == "value":
        noun, prefix = "the argument", f"{parent.arg}=" if parent.arg else "**"
    else:
        return ctx
    return replace(ctx, role=_Role(noun, prefix + _unparse(old), prefix + _unparse(new)))


def _constant_changed(old: ast.Constant, new: ast.Constant, ctx: _Context) -> _Change:
    if type(old.value) is type(new.value) and old.value == new.value:
        return _mechanical(ctx, "the spelling of a literal")  # u"x" → "x"
    if (
        isinstance(old.value, str)
        and isinstance(new.value, str)
        and new.value in ctx.known
        and _is_misspelling(old.value, new.value, ctx.known)
    ):
        return _mechanical(ctx, f"the key {old.value!r} → {new.value!r}")
    return _computes(ctx, f"the literal {_code(old)} → {_code(new)}")


def _renamed(node: ast.AST, old: str, new: str, ctx: _Context) -> _Change:
    """An identifier of ``node`` spelt otherwise: a misspelling fixed, a successor, or another name."""
    if isinstance(node, ast.Attribute):
        phrase = f"the attribute .{old} → .{new}"
    elif isinstance(node, ast.keyword):
        phrase = f"the keyword {old}= → {new}="
    else:
        phrase = f"the name {old} → {new}"
    known = ctx.known | _BUILTIN_NAMES if isinstance(node, ast.Name) else ctx.known
    if _is_successor(old, new) or _is_misspelling(old, new, known):
        return _mechanical(ctx, phrase)
    return _computes(ctx, phrase)


def _reshaped(old: ast.AST, new: ast.AST, ctx: _Context) -> _Change:
    """A node replaced by one of another kind: an operator, a wrapping call, or another expression."""
    if _is_operator(old) and _is_operator(new):
        noun = "the comparison" if isinstance(new, ast.cmpop) else "the operator"
        return _computes(ctx, f"{noun} {_code(old)} → {_code(new)}")
    if (
        _converts(old, new)
        or _calls(old, new)
        or _calls(new, old)
        or _adds_self(old, new, ctx.known)
        or _is_successor_name(old, new)
        or _is_key_for_attribute(old, new, ctx.known)
        or _is_key_for_attribute(new, old, ctx.known)
    ):
        return _mechanical(ctx, f"{_code(old)} → {_code(new)}")
    return _computes(ctx, f"{_noun(new)} {_code(old)} → {_code(new)}")


def _converts(old: ast.AST, new: ast.AST) -> bool:
    """``x`` → ``str(x)``, ``np.asarray(x)``, ``x.astype(float)``, ``x.copy()``: the value, converted."""
    if not isinstance(new, ast.Call):
        return False
    if isinstance(new.func, ast.Attribute) and _same(new.func.value, old):
        return new.func.attr in _CONVERTING_METHODS
    return (
        len(new.args) == 1
        and not new.keywords
        and _same(new.args[0], old)
        and _called_name(new) in _CONVERTERS
    )


def _calls(old: ast.AST, new: ast.AST) -> bool:
    """``df.head`` → ``df.head()``: what was referenced is now called, with no argument guessed."""
    return isinstance(new, ast.Call) and not new.args and not new.keywords and _same(new.func, old)


def _adds_self(old: ast.AST, new: ast.AST, known: Collection[str]) -> bool:
    """``x`` → ``self.x``: the missing ``self.`` of an attribute."""
    return (
        isinstance(old, ast.Name)
        and isinstance(new, ast.Attribute)
        and isinstance(new.value, ast.Name)
        and new.value.id in ("self", "cls")
        and (new.attr == old.id or _is_misspelling(old.id, new.attr, known))
    )


def _is_successor_name(old: ast.AST, new: ast.AST) -> bool:
    """``np.float`` → ``float``: a removed alias replaced by what it aliased."""
    if not (isinstance(old, ast.Attribute) and isinstance(new, ast.Name)):
        return False
    return (new.id == old.attr and new.id in _REMOVED_ALIASES) or _is_successor(old.attr, new.id)


def _is_key_for_attribute(old: ast.AST, new: ast.AST, known: Collection[str]) -> bool:
    """``df.price`` → ``df["price"]``: the same column, read by key instead of by attribute."""
    if not (isinstance(old, ast.Attribute) and isinstance(new, ast.Subscript)):
        return False
    key = new.slice
    if not (isinstance(key, ast.Constant) and isinstance(key.value, str)) or not _same(old.value, new.value):
        return False
    return key.value == old.attr or (key.value in known and _is_misspelling(old.attr, key.value, known))


def _is_successor_call(old: ast.Call, new: ast.Call) -> bool:
    """``df.append(row)`` → ``pd.concat([df, row])``: pandas 2 removed ``append``; ``concat`` follows it."""
    if not (
        isinstance(old.func, ast.Attribute) and old.func.attr == "append" and _called_name(new) == "concat"
    ):
        return False
    if len(old.args) != 1 or len(new.args) != 1 or not isinstance(new.args[0], ast.List | ast.Tuple):
        return False
    parts = new.args[0].elts
    return (
        len(parts) == 2
        and _same(parts[0], old.func.value)
        and _holds(parts[1], old.args[0])
        and sorted(map(_dump, old.keywords)) == sorted(map(_dump, new.keywords))
    )


def _holds(wrapper: ast.AST, value: ast.AST) -> bool:
    """``row``, ``pd.DataFrame(row)`` or ``pd.DataFrame([row])``: ``value`` as a frame to concatenate."""
    if _same(wrapper, value):
        return True
    if not (
        isinstance(wrapper, ast.Call) and _called_name(wrapper) in ("DataFrame", "Series") and wrapper.args
    ):
        return False
    first = wrapper.args[0]
    return _same(first, value) or (
        isinstance(first, ast.List) and len(first.elts) == 1 and _same(first.elts[0], value)
    )


# --------------------------------------------------------------------------- the token side


@dataclass(frozen=True)
class _Token:
    kind: str  # tokenize's name for it: NAME, NUMBER, STRING, OP, ERRORTOKEN
    text: str
    line: int


@dataclass(frozen=True)
class _TokenEdit:
    old: tuple[_Token, ...]
    new: tuple[_Token, ...]
    before: _Token | None  # the candidate's token just before the edit
    after: _Token | None  # the candidate's token just after it
    old_after: _Token | None  # the original's token just after it

    @property
    def line(self) -> int:
        for token in (*self.new, self.after, self.before, *self.old):
            if token is not None:
                return token.line
        return 1


#: Tokens that lay the code out and compute nothing.
_LAYOUT = frozenset(
    {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT}
    | {tokenize.ENCODING, tokenize.ENDMARKER}
)
_PUNCTUATION = frozenset(":,;()[]{}")
_OPENERS, _CLOSERS = frozenset("([{"), frozenset(")]}")


def _token_changes(
    original: str, candidate: str, known: frozenset[str], tree: ast.Module | None
) -> list[_Change]:
    """The changes between two cells one of which does not parse, edit by edit of their tokens."""
    old, new = _tokens(original), _tokens(candidate)
    import_lines = _import_lines(tree)
    outer = SequenceMatcher(
        None, [(t.kind, t.text) for t in old], [(t.kind, t.text) for t in new], autojunk=False
    )
    changes = []
    for tag, i1, i2, j1, j2 in outer.get_opcodes():
        if tag == "equal":
            continue
        before = new[j1 - 1] if j1 > 0 else None
        after, old_after = (new[j2] if j2 < len(new) else None), (old[i2] if i2 < len(old) else None)
        edit = _TokenEdit(tuple(old[i1:i2]), tuple(new[j1:j2]), before, after, old_after)
        kind: Kind = "mechanical" if _is_mechanical_edit(edit, known, import_lines) else "computes"
        changes.append(_Change(kind, _token_phrase(edit), edit.line, _binds_at(tree, edit.line)))
    return changes


def _tokens(source: str, first_line: int = 1) -> list[_Token]:
    """The tokens of ``source`` that compute, past the places where tokenize gives up."""
    found: list[_Token] = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type not in _LAYOUT and token.string.strip():
                found.append(
                    _Token(tokenize.tok_name[token.type], token.string, token.start[0] + first_line - 1)
                )
    except tokenize.TokenError as error:  # EOF in a multi-line statement or string
        found.extend(_unterminated_string(error, source, first_line))
    except SyntaxError as error:  # IndentationError: go on from its line (layout is dropped anyway)
        stopped = error.lineno or 0
        rest = source.splitlines(keepends=True)[stopped - 1 :]
        if stopped > 1 and rest:
            found = [token for token in found if token.line < first_line + stopped - 1]
            found.extend(_tokens("".join(rest), first_line + stopped - 1))
    return found


def _unterminated_string(error: tokenize.TokenError, source: str, first_line: int) -> list[_Token]:
    """The rest of the cell from where tokenize gave up, as one token: an unterminated string."""
    where = error.args[1] if len(error.args) > 1 else None
    if not isinstance(where, tuple):
        return []
    line, column = where
    rest = "".join(source.splitlines(keepends=True)[line - 1 :])[column:].strip()
    return [_Token("ERRORTOKEN", rest, line + first_line - 1)] if rest else []


def _is_mechanical_edit(edit: _TokenEdit, known: frozenset[str], import_lines: frozenset[int]) -> bool:
    if _repairs_a_quote(edit) or _is_self_added(edit):
        return True
    if all(token.text in _PUNCTUATION for token in (*edit.old, *edit.new)):
        return _keeps_grouping(edit)
    if len(edit.old) == len(edit.new) == 1 and _is_token_fix(edit.old[0], edit.new[0], known):
        return True
    return bool(edit.new) and all(token.line in import_lines for token in edit.new)


def _repairs_a_quote(edit: _TokenEdit) -> bool:
    """``"hello`` → ``"hello"``: an unterminated string closed, nothing else changed."""
    if not any(
        token.kind == "ERRORTOKEN" and token.text.lstrip("rbfuRBFU")[:1] in ("'", '"') for token in edit.old
    ):
        return False
    unquoted = [
        re.sub(r"['\"\s]", "", "".join(token.text for token in side)) for side in (edit.old, edit.new)
    ]
    return unquoted[0] == unquoted[1]


def _is_self_added(edit: _TokenEdit) -> bool:
    return not edit.old and [token.text for token in edit.new] == ["self", "."]


def _keeps_grouping(edit: _TokenEdit) -> bool:
    """Punctuation added, dropped or changed without regrouping: a bracket closed at the end of a
    line, the ``(`` of a call, a colon, a comma."""
    if any(token.text == ":" and not _last_on_its_line(token, edit.old_after) for token in edit.old):
        return False  # a slice's colon dropped
    closers_replaced = any(token.text in _CLOSERS for token in edit.old)
    for token in edit.new:
        if token.text == ":" and not _last_on_its_line(token, edit.after):
            return False  # a slice made of an index, a dict's colon
        if token.text in _OPENERS and not (
            token.text == "(" and edit.before is not None and edit.before.kind == "NAME"
        ):
            return False
        if token.text in _CLOSERS and not closers_replaced and not _ends_a_line(token, edit.after):
            return False
    return True


def _ends_a_line(token: _Token, after: _Token | None) -> bool:
    """Whether only closing punctuation follows ``token`` on its line."""
    return after is None or after.line > token.line or after.text in _CLOSERS or after.text == ":"


def _last_on_its_line(token: _Token, after: _Token | None) -> bool:
    return after is None or after.line > token.line


def _is_token_fix(old: _Token, new: _Token, known: frozenset[str]) -> bool:
    """One token corrected: a misspelt name or keyword, ``=`` in a condition, a misspelt key."""
    if old.kind == new.kind == "NAME":
        return _is_misspelling(old.text, new.text, known | _BUILTIN_NAMES | _KEYWORDS)
    if old.text == "=" and new.text == "==":
        return True
    if old.kind == new.kind == "STRING":
        before, after = _literal(old.text), _literal(new.text)
        return (
            isinstance(before, str)
            and isinstance(after, str)
            and after in known
            and _is_misspelling(before, after, known)
        )
    return False


def _literal(text: str) -> object:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return None


def _token_phrase(edit: _TokenEdit) -> str:
    old, new = " ".join(t.text for t in edit.old), " ".join(t.text for t in edit.new)
    if len(edit.old) == len(edit.new) == 1:
        kind = edit.new[0].kind
        noun = {"NUMBER": "the literal", "STRING": "the literal", "NAME": "the name", "OP": "the operator"}
        return f"{noun.get(kind, 'the code')} {_clip(old)} → {_clip(new)}"
    if not edit.old:
        return f"`{_clip(new)}` added"
    if not edit.new:
        return f"`{_clip(old)}` removed"
    return f"the code `{_clip(old)}` → `{_clip(new)}`"


def _import_lines(tree: ast.Module | None) -> frozenset[int]:
    if tree is None:
        return frozenset()
    statements = (node for node in ast.walk(tree) if isinstance(node, ast.Import | ast.ImportFrom))
    return frozenset(
        line for node in statements for line in range(node.lineno, _end_line(node, node.lineno) + 1)
    )


def _binds_at(tree: ast.Module | None, line: int) -> frozenset[str]:
    """The names bound by the candidate's top-level statement at ``line``."""
    for statement in tree.body if tree is not None else ():
        if statement.lineno <= line <= _end_line(statement, statement.lineno):
            return _bound_names(statement)
    return frozenset()


# --------------------------------------------------------------------------- pinned


def _asserts_something(code: str) -> bool:
    """Whether a check asserts: an ``assert``, or a call of ``assert_frame_equal``, ``assertEqual``…"""
    tree = _parse(code)
    if tree is None:
        return re.search(r"\bassert", code) is not None
    return any(
        isinstance(node, ast.Assert)
        or (isinstance(node, ast.Call) and _called_name(node).startswith("assert"))
        for node in ast.walk(tree)
    )


def _a_kept_assert_pins(
    changes: Sequence[_Change],
    original: str,
    old_tree: ast.Module | None,
    candidate: str,
    new_tree: ast.Module | None,
) -> bool:
    """Whether an assert of the original, kept by the candidate, reads a name bound where a change is.

    An assert the candidate added pins nothing: the candidate wrote it.
    """
    if new_tree is None:
        return False
    kept = [
        node
        for node in ast.walk(new_tree)
        if isinstance(node, ast.Assert) and _was_in_original(node, original, old_tree, candidate)
    ]
    return any(
        change.line < check.lineno and change.binds & _names_read(check.test)
        for change in changes
        for check in kept
    )


def _was_in_original(check: ast.Assert, original: str, old_tree: ast.Module | None, candidate: str) -> bool:
    if old_tree is not None:
        return any(isinstance(node, ast.Assert) and _same(node, check) for node in ast.walk(old_tree))
    text = ast.get_source_segment(candidate, check) or ""
    return bool(text) and _squeezed(text) in _squeezed(original)


def _squeezed(text: str) -> str:
    return re.sub(r"\s+", "", text)


def _bound_names(node: ast.AST) -> frozenset[str]:
    """The names a statement binds, or changes in place (``df["x"] = …``, ``rows.append(…)``)."""
    names: set[str] = set()
    for child in ast.walk(node):
        if isinstance(child, ast.Name | ast.Subscript | ast.Attribute) and isinstance(
            child.ctx, ast.Store | ast.Del
        ):
            names.add(_base_name(child))
        elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(child.name)
        elif isinstance(child, ast.alias):
            names.add((child.asname or child.name).split(".")[0])
        elif isinstance(child, ast.Expr):
            names.add(_receiver(child.value))
    names.discard("")
    return frozenset(names)


def _receiver(node: ast.expr) -> str:
    """``rows`` for ``rows.append(x)``: what a method call may change in place ("" if none)."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return _base_name(node.func.value)
    return ""


def _names_read(node: ast.AST) -> frozenset[str]:
    return frozenset(n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load))


def _base_name(node: ast.AST) -> str:
    """``df`` for ``df.loc["a", "b"]`` and ``df.x.y``: the name an expression starts from ("" if none)."""
    while isinstance(node, ast.Attribute | ast.Subscript | ast.Call):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else ""


# --------------------------------------------------------------------------- small helpers

_SYMBOLS: dict[type[ast.AST], str] = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.MatMult: "@",
    ast.Div: "/",
    ast.Mod: "%",
    ast.Pow: "**",
    ast.LShift: "<<",
    ast.RShift: ">>",
    ast.BitOr: "|",
    ast.BitXor: "^",
    ast.BitAnd: "&",
    ast.FloorDiv: "//",
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.Is: "is",
    ast.IsNot: "is not",
    ast.In: "in",
    ast.NotIn: "not in",
    ast.And: "and",
    ast.Or: "or",
    ast.Invert: "~",
    ast.Not: "not",
    ast.UAdd: "+",
    ast.USub: "-",
}


def _is_operator(node: object) -> bool:
    return isinstance(node, ast.operator | ast.cmpop | ast.boolop | ast.unaryop)


def _is_docstring(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def _called_name(call: ast.Call) -> str:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def _noun(node: object) -> str:
    return "the statement" if isinstance(node, ast.stmt) else "the expression"


def _dump(node: object) -> str:
    return ast.dump(node) if isinstance(node, ast.AST) else repr(node)


def _same(a: object, b: object) -> bool:
    return _dump(a) == _dump(b)


def _line(node: object, default: int) -> int:
    line = getattr(node, "lineno", None)
    return line if isinstance(line, int) else default


def _end_line(node: object, default: int) -> int:
    line = getattr(node, "end_lineno", None)
    return line if isinstance(line, int) else _line(node, default)


def _unparse(node: object) -> str:
    """The code of a node on one line (an operator's symbol, a value's repr)."""
    if isinstance(node, ast.AST) and type(node) in _SYMBOLS:
        return _SYMBOLS[type(node)]
    text = ast.unparse(node) if isinstance(node, ast.AST) else repr(node)
    return " ".join(text.split())


def _code(node: object) -> str:
    return _clip(_unparse(node))


def _clip(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
