"""The KeyError fixer: a misspelt dict key, DataFrame column or row label in a string literal.

The keys come from the failing frame's summary of the container, the namespace value and the
keys the cell itself sets.

May import: the standard library, the shared modules of this package (``source``, ``failure_site``,
``lookups``, ``scopes``, ``spelling``), never another fixer; never the sandbox, the engine, IPython
or the CLI (the offline tier only reads what the failure context gives it)."""

from __future__ import annotations

import ast
import contextlib
import io
import re
import tokenize

from .failure_site import _FailureSite
from .lookups import _MISSING, _is_dataframe, _keys_of
from .scopes import _assigned_plainly
from .source import Fix, _NoFix, _Source
from .spelling import _close_matches

_PANDAS_KEY_MESSAGES = (
    re.compile(r"not in index$"),
    re.compile(r"^None of \["),
    re.compile(r"not found in axis$"),
    re.compile(r"^(Column|Label)\(s\) \["),
    re.compile(r"do not exist$"),
    re.compile(r"are in the \[?columns\]?$"),
    re.compile(r"^Columns not found: "),
    re.compile(r"^Index\(\["),
    re.compile(r"not found in columns\.?$"),
)
_QUOTED = re.compile(r"'((?:[^'\\]|\\.)*)'|\"((?:[^\"\\]|\\.)*)\"")


def _missing_keys(message: str) -> list[str]:
    try:
        value = ast.literal_eval(message)
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        value = message
    if isinstance(value, (list, tuple)):
        return [item for item in value if isinstance(item, str)]
    if not isinstance(value, str):
        return []
    single = re.match(r"^Column not found: (.+)$", value)
    if single:
        return [single.group(1)]
    if any(pattern.search(value) for pattern in _PANDAS_KEY_MESSAGES):
        keys = []
        for match in _QUOTED.finditer(value):
            raw = match.group(1) if match.group(1) is not None else match.group(2)
            try:
                keys.append(ast.literal_eval(f"'{raw}'") if match.group(1) is not None else raw)
            except (ValueError, SyntaxError):
                keys.append(raw)
        return keys
    return [value]


def _string_literal_edit(src: _Source, node: ast.Constant, new: str) -> tuple[int, int, str] | None:
    """An edit replacing the content of a plain string literal, keeping its prefix and quotes."""
    start, end = src.span(node)
    token = src.code[start:end]
    match = re.fullmatch(r"([rRuU]?)('''|\"\"\"|'|\")(.*)\2", token, re.S)
    if match is None:
        return None
    prefix, quote, body = match.groups()
    if body != node.value or "\\" in new or quote[0] in new or "\n" in new:
        return None
    inner = start + len(prefix) + len(quote)
    return inner, inner + len(body), new


def _root_name(node: ast.expr) -> ast.Name | None:
    """``df`` for ``df.groupby(...)["x"].mean()``: down through calls, attributes, subscripts."""
    while not isinstance(node, ast.Name):
        if isinstance(node, ast.Call):
            node = node.func
        elif isinstance(node, (ast.Attribute, ast.Subscript)):
            node = node.value
        else:
            return None
    return node


def _containers_for(state: _FailureSite, literal: ast.Constant) -> list[tuple[ast.expr, str]]:
    """Expressions whose keys ``literal`` should be one of, with the kind of keys."""
    parents = state.src.parents
    child: ast.AST = literal
    parent = parents.get(child)
    while isinstance(parent, (ast.List, ast.Tuple, ast.Set, ast.Dict, ast.keyword, ast.Starred)):
        child, parent = parent, parents.get(parent)
    if isinstance(parent, ast.Subscript) and child is parent.slice:
        container = parent.value
        if isinstance(container, ast.Attribute) and container.attr in ("loc", "at"):
            frame = container.value
            if isinstance(parent.slice, ast.Tuple) and len(parent.slice.elts) == 2:
                in_columns = _is_inside(parents, literal, parent.slice.elts[1])
                return [(frame, "columns" if in_columns else "index")]
            return [(frame, "index")]
        return [(container, "keys")]
    if isinstance(parent, ast.Call):
        frames: list[tuple[ast.expr, str]] = []
        if isinstance(parent.func, ast.Attribute):
            frames.append((parent.func.value, "columns"))
        frames += [(arg, "columns") for arg in parent.args if isinstance(arg, ast.Name)]
        frames += [(kw.value, "columns") for kw in parent.keywords if isinstance(kw.value, ast.Name)]
        return frames
    return []


def _is_inside(parents: dict[ast.AST, ast.AST], node: ast.AST, ancestor: ast.AST) -> bool:
    current: ast.AST | None = node
    while current is not None:
        if current is ancestor:
            return True
        current = parents.get(current)
    return False


def _pool_for(state: _FailureSite, container: ast.expr, kind: str) -> tuple[list[str] | None, str]:
    """The keys (or columns, or row labels) ``container`` has, and what to call them.

    What the failing frame held comes first: the failure's summary of the container (an
    object the cell itself made or rebound is only there). The namespace value fills in keys a
    long summary left out, unless the cell rebinds the name (then it is an older object)."""
    root = container if isinstance(container, ast.Name) else _root_name(container)
    stale = root is not None and _rebound(state, root.id)
    value = _MISSING if stale else state.try_evaluate(container)
    if value is _MISSING and root is not None and root is not container and not stale:
        value = state.try_evaluate(root)
        if value is not _MISSING and not _is_dataframe(value):
            value = _MISSING
        else:
            container = root
    seen, seen_label = _keys_seen(state, container)
    if seen is None and root is not None and root is not container:
        seen, seen_label = _keys_seen(state, root)
        seen = seen if seen_label == "column" else None
    if kind == "index":
        index = getattr(value, "index", None) if _is_dataframe(value) else None
        keys = _keys_of(index) if index is not None else None
        return keys, "row label"
    keys = _keys_of(value) if value is not _MISSING else None
    made = _keys_set_in_cell(state, container)
    if keys is None and seen is None and not made:
        return None, ""
    label = ("column" if _is_dataframe(value) else "key") if keys is not None else seen_label or "key"
    return (seen or []) + (keys or []) + made, label


def _rebound(state: _FailureSite, name: str) -> bool:
    """Whether the cell binds ``name`` itself (at its top level, or as a local where it failed)."""
    tree = state.src.tree
    return name in state.local_names() or (tree is not None and _assigned_plainly(tree, name))


#: ``columns: a: int64, b c: datetime64[ns, UTC], … (+3 more)`` in a DataFrame's summary.
_COLUMN_ENTRY = re.compile(r"(?:^|, )(.+?): ([A-Za-z]\w*(?:\[[^\]]*\])?)(?=, |$)")
_MAPPING_TYPES = frozenset({"dict", "defaultdict", "OrderedDict", "Counter"})


def _keys_seen(state: _FailureSite, container: ast.expr) -> tuple[list[str] | None, str]:
    """String keys of ``container`` read from its summary in the failure (the failing frame's
    object), and what to call them; (None, "") when the failure has no usable summary."""
    try:
        name = ast.unparse(container)
    except Exception:
        return None, ""
    for summary in state.failure.values:
        if summary.name != name:
            continue
        text = summary.text
        if summary.type_name == "DataFrame":
            for line in text.splitlines():
                if line.startswith("columns: "):
                    body = re.sub(r",? ?… \(\+\d+ more\)$", "", line[len("columns: ") :])
                    return [match.group(1) for match in _COLUMN_ENTRY.finditer(body)], "column"
        elif summary.type_name in _MAPPING_TYPES:
            sample = text.find("keys sample: [")
            if sample >= 0:
                return _literal_strings(text[sample + len("keys sample: ") :], ","), "key"
            brace = text.find("{")
            if brace >= 0:
                return _literal_strings(text[brace:], ":"), "key"
    return None, ""


def _literal_strings(text: str, follower: str) -> list[str]:
    """The string literals directly inside the bracket ``text`` opens, each followed by
    ``follower`` (``:`` for a dict's keys) or by the closing bracket; a cut-off rest is ignored."""
    found: list[str] = []
    depth = 0
    previous: tokenize.TokenInfo | None = None
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.OP and token.string in "([{":
                depth += 1
            elif token.type == tokenize.OP and token.string in ")]}":
                depth -= 1
                if depth <= 0:
                    if previous is not None and previous.type == tokenize.STRING and follower == ",":
                        found.append(previous.string)
                    break
            elif (
                depth == 1
                and previous is not None
                and previous.type == tokenize.STRING
                and token.type == tokenize.OP
                and token.string == follower
            ):
                found.append(previous.string)
            previous = token
    except (tokenize.TokenError, SyntaxError, IndentationError):
        pass
    keys = []
    for literal in found:
        with contextlib.suppress(ValueError, SyntaxError, MemoryError, RecursionError):
            value = ast.literal_eval(literal)
            if isinstance(value, str):
                keys.append(value)
    return keys


def _keys_set_in_cell(state: _FailureSite, container: ast.expr) -> list[str]:
    """String keys the cell itself gives ``container``: ``df["new"] = ...``, and the literal
    keys of ``d = {...}``, ``d = dict(a=...)`` or ``df = pd.DataFrame({...})``."""
    tree = state.src.tree
    if tree is None:
        return []
    text = state.src.text(container)
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.ctx, ast.Store)
            and isinstance(node.slice, ast.Constant)
            and isinstance(node.slice.value, str)
            and state.src.text(node.value) == text
        ):
            found.append(node.slice.value)
        elif isinstance(node, ast.Assign) and any(state.src.text(t) == text for t in node.targets):
            found += _literal_keys(node.value)
    return found


_MAKERS = frozenset({"dict", "OrderedDict", "defaultdict", "DataFrame"})


def _literal_keys(value: ast.expr) -> list[str]:
    """The string keys written in a dict display, or in a ``dict``/``DataFrame`` call's first
    argument or keywords."""
    if isinstance(value, ast.Call):
        func = value.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if name not in _MAKERS:
            return []
        keys = [kw.arg for kw in value.keywords if kw.arg is not None] if name != "DataFrame" else []
        dicts = [arg for arg in value.args[:2] if isinstance(arg, ast.Dict)]
        return keys + [key for display in dicts for key in _literal_keys(display)]
    if isinstance(value, ast.Dict):
        return [k.value for k in value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
    return []


def _fix_key(state: _FailureSite) -> tuple[list[Fix], str]:
    keys = _missing_keys(state.message)
    if not keys:
        raise _NoFix("no quick fix for KeyError: the missing key is not a string")
    src = state.src
    tree = src.need_tree()
    in_statement = [
        n
        for n in state.failing_nodes()
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in keys
    ]
    literals = in_statement
    if not literals:
        everywhere = [
            n
            for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in keys
        ]
        if len(everywhere) != len(keys):
            raise _NoFix(f"no quick fix for KeyError: {keys[0]!r} is not written as a literal in the cell")
        literals = everywhere
    # For each missing key: the ranked replacements, from the keys its container has.
    per_key: dict[str, list[tuple[str, str]]] = {}
    fallback = [n for n in state.failing_nodes() if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)]
    for literal in literals:
        key = literal.value
        assert isinstance(key, str)
        if key in per_key:
            continue
        containers = _containers_for(state, literal) if literal in in_statement else []
        if not containers:
            containers = [(name, "keys") for name in fallback]
        pool: list[str] = []
        label = "key"
        for container, kind in containers:
            keys_found, found_label = _pool_for(state, container, kind)
            if keys_found:
                pool += keys_found
                label = found_label
        if not pool:  # the container could not be read: the containers named on the line
            for name in fallback:
                keys_found, found_label = _pool_for(state, name, "keys")
                if keys_found:
                    pool += keys_found
                    label = found_label
        if key in pool:
            continue  # that container has it: the error came from elsewhere
        matches = _close_matches(key, pool, normalize=True, prefix=True)
        per_key[key] = [(m, f"there is no {label} {key!r}; the closest one is {m!r}.") for m in matches]
    if not any(per_key.values()):
        shown = ", ".join(repr(k) for k in keys[:3])
        raise _NoFix(f"no quick fix for KeyError: no key close to {shown}")
    # Candidate i uses the i-th choice for each key (the best for all keys first).
    fixes = []
    depth = max(len(options) for options in per_key.values())
    for rank in range(depth):
        edits = []
        whys = []
        for literal in literals:
            options = per_key.get(str(literal.value)) or []
            if not options:
                continue
            new, why = options[min(rank, len(options) - 1)]
            edit = _string_literal_edit(src, literal, new)
            if edit is not None:
                edits.append(edit)
                if why not in whys:
                    whys.append(why)
        if edits:
            text = " ".join(whys)
            fixes.append(src.fix(edits, text[:1].upper() + text[1:]))
    return fixes, ""
