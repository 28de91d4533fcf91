"""The one scope analysis: which names a piece of code reads from outside, and which it binds.

Every part of nbrefine that asks "what does this cell need, what does it define" asks here:
the notebook history (what a failing cell needs from earlier cells, which cell last defined a
name), the spawn sandbox (which values a trial needs copied), the offline tier (the names in
scope at a line) and the magics (which values to summarise). Python's scoping rules are followed:
function and lambda bodies (run later, when called), class bodies (seen only by themselves, not
by their methods), comprehensions (their targets are their own; a ``:=`` inside binds outside),
``global``/``nonlocal``, ``except ... as`` names, ``match`` captures (``case Point(x=a)``, ``*rest``,
``**rest``, ``as name``), ``type X = ...`` statements and PEP 695 type parameters (Python 3.12+),
``from m import *`` (reported, since it may bind anything). IPython-transformed code is read
through: the Python inside ``get_ipython().run_line_magic('time', '...')`` and
``run_cell_magic('time' | 'timeit' | 'prun' | 'capture' | 'refine', ...)`` is analysed in place.

API (a ``code`` argument is source text or an already parsed tree):

- :func:`parse` -> ``ast.Module | None``; :func:`parse_cell`: a notebook cell's source with
  IPython syntax (``%magic``, ``!cmd``, ``x = !cmd``, ``obj?``) read as Python, line numbers kept
  (:func:`light_transform` is that rewriting, :func:`is_ipython_syntax` tells such a line).
- :func:`free_names` -> the names the code reads before (or without) binding them, in first-use
  order: what it needs from outside. Reads inside function bodies come last (they run when
  called). ``strict=True`` gives a superset for copying state: a name counts as bound only once a
  top-level statement that always binds it has run (``x = ...``, ``import``, ``def``, ``class``;
  not inside ``if``/``for``/``try``/``with``/``match``), and function bodies are checked where they
  are defined. ``strings=True`` also finds names read through strings where that is cheap to
  see: ``df.query("a > @limit")``, ``eval("x + 1")``, ``globals()["x"]``.
- :func:`global_names` -> every global name the code reads or binds, in order of first appearance
  in the text (a function's parameters and a comprehension's variables are not global).
- :func:`scan` -> :class:`Names`: all of the above from one walk, plus ``effects`` (what running
  the code does to its namespace: the last effect on each name, bound or deleted, in order),
  ``lines`` (the top-level statement that last bound each name) and ``star_imports``.
- :func:`bound_names` -> the names a scope (module, function, lambda, class, comprehension)
  binds itself; :func:`scope_nodes` -> the nodes of a scope's own body (nested scopes' bodies
  left out, the parts of them evaluated in this scope kept); :func:`surely_bound`.

Builtins and IPython's own names (:mod:`nbrefine.grounding.ipython_names`) are reported like any
other name: callers filter what they do not want.

May import: the standard library only.
"""

from __future__ import annotations

import ast
import contextlib
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

__all__ = [
    "Names",
    "bound_names",
    "free_names",
    "global_names",
    "is_ipython_syntax",
    "light_transform",
    "parse",
    "parse_cell",
    "scan",
    "scope_nodes",
    "surely_bound",
]

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_SCOPES = (*_FUNCTIONS, ast.ClassDef, *_COMPREHENSIONS)
# Expression nodes the fast expression walk hands back to the visitor (they open a scope or bind).
_DISPATCHED = (*_FUNCTIONS, *_COMPREHENSIONS, ast.NamedExpr)
_PARSE_ERRORS = (SyntaxError, ValueError, RecursionError, MemoryError)

# Magics whose argument or body is Python run in the user namespace ("timeit": in a function of
# its own, so it reads the namespace but binds nothing there).
_LINE_MAGICS = frozenset({"time", "timeit", "prun"})
_CELL_MAGICS = frozenset({"time", "timeit", "prun", "capture", "refine"})
_MAGIC_RUNNERS = frozenset({"run_line_magic", "run_cell_magic"})
_MAGIC_OPTIONS = re.compile(r"\s*(?:-[nrp]\s*\d+\s+|-[a-zA-Z]\s+)*")  # %timeit -n 10 -r 3 stmt
_AT_NAME = re.compile(r"(?<![\w@])@([A-Za-z_]\w*)")  # pandas query/eval strings: "a > @limit"

# IPython syntax, line by line (parse_cell).
_MAGIC_LINE = re.compile(r"^(\s*)(%|!|\?)")
_MAGIC_ASSIGN = re.compile(r"^(\s*[\w.,\s()\[\]*]+?)\s*=\s*[%!]")
_HELP_LINE = re.compile(r"^(\s*)[\w.\[\]()]+\?\??\s*$")


# --------------------------------------------------------------------------- parsing


def parse(code: str) -> ast.Module | None:
    """``code`` parsed, or ``None`` when it is not Python."""
    try:
        return ast.parse(code)
    except _PARSE_ERRORS:
        return None


def parse_cell(source: str) -> ast.Module | None:
    """A notebook cell parsed without IPython: as it is, or else with IPython's syntax made Python
    line for line (``%magic``, ``!cmd`` and ``obj?`` lines read as ``pass``, ``x = !cmd`` as
    ``x = None``), so line numbers stay those of the source. ``None`` when neither parses."""
    tree = parse(source)
    if tree is None and any(ch in source for ch in "%!?"):
        tree = parse(light_transform(source))
    return tree


def is_ipython_syntax(line: str) -> bool:
    """Whether a line of a cell is IPython syntax (``%magic``, ``!cmd``, ``x = !cmd``, ``obj?``)."""
    return bool(_MAGIC_LINE.match(line) or _MAGIC_ASSIGN.match(line) or _HELP_LINE.match(line))


def light_transform(source: str) -> str:
    """IPython syntax made parseable without IPython, line for line (enough to find bindings)."""
    if not any(ch in source for ch in "%!?"):
        return source
    out = []
    for line in source.split("\n"):
        if _MAGIC_ASSIGN.match(line):
            line = _MAGIC_ASSIGN.sub(lambda m: f"{m.group(1)} = None  #", line, count=1)
        elif _MAGIC_LINE.match(line) or _HELP_LINE.match(line):
            indent = len(line) - len(line.lstrip())
            line = " " * indent + "pass"
        out.append(line)
    return "\n".join(out)


def _tree(code: str | ast.AST) -> ast.AST | None:
    return parse(code) if isinstance(code, str) else code


# --------------------------------------------------------------------------- what a scope binds


def _arguments(args: ast.arguments) -> list[ast.arg]:
    extra = [a for a in (args.vararg, args.kwarg) if a is not None]
    return [*args.posonlyargs, *args.args, *args.kwonlyargs, *extra]


def _type_params(node: ast.AST) -> list[str]:
    """PEP 695 type parameters (``def f[T]``, ``class C[T]``, ``type X[T] = ...``; Python 3.12+)."""
    return [
        name for param in getattr(node, "type_params", None) or () if (name := getattr(param, "name", None))
    ]


def _outer_parts(node: ast.AST) -> list[ast.AST]:
    """The parts of a scope-opening node that are evaluated in the enclosing scope."""
    if isinstance(node, _FUNCTIONS):
        args = node.args
        parts: list[ast.AST] = [*args.defaults, *(d for d in args.kw_defaults if d is not None)]
        if not isinstance(node, ast.Lambda):
            parts[:0] = node.decorator_list
            parts += [a.annotation for a in _arguments(args) if a.annotation is not None]
            parts += [node.returns] if node.returns is not None else []
        return parts
    if isinstance(node, ast.ClassDef):
        return [*node.decorator_list, *node.bases, *(k.value for k in node.keywords)]
    if isinstance(node, _COMPREHENSIONS):
        return [node.generators[0].iter]
    return []


def _own_body(scope: ast.AST) -> list[ast.AST]:
    """The parts of a scope that run in the scope itself."""
    if isinstance(scope, ast.Lambda):
        return [scope.body]
    if isinstance(scope, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return list(scope.body)
    if isinstance(scope, _COMPREHENSIONS):
        first, *rest = scope.generators
        parts: list[ast.AST] = [first.target, *first.ifs]
        for generator in rest:
            parts += [generator.iter, generator.target, *generator.ifs]
        return parts + ([scope.key, scope.value] if isinstance(scope, ast.DictComp) else [scope.elt])
    return list(ast.iter_child_nodes(scope))


def scope_nodes(scope: ast.AST) -> Iterator[ast.AST]:
    """Every node of ``scope``'s own body, depth first. A nested scope (function, lambda, class,
    comprehension) is yielded itself and for the parts of it evaluated here (decorators, defaults,
    annotations, bases, a comprehension's first iterable), not for its body."""
    stack = list(reversed(_own_body(scope)))
    while stack:
        node = stack.pop()
        yield node
        children = _outer_parts(node) if isinstance(node, _SCOPES) else list(ast.iter_child_nodes(node))
        stack.extend(reversed(children))


def _walrus_targets(comprehension: ast.AST) -> Iterator[str]:
    """``:=`` targets inside a comprehension (and the comprehensions nested in it): they bind in
    the first enclosing scope that is not a comprehension."""
    for node in scope_nodes(comprehension):
        if isinstance(node, ast.NamedExpr) and isinstance(node.target, ast.Name):
            yield node.target.id
        elif isinstance(node, _COMPREHENSIONS) and node is not comprehension:
            yield from _walrus_targets(node)


def bound_names(scope: ast.AST) -> set[str]:
    """The names ``scope`` binds itself: parameters; assignment, ``del``, ``for``, ``with``, ``except``
    and ``match`` targets; ``:=`` targets (also those inside its comprehensions); ``def``, ``class``
    and ``type`` names; imports (the first part of ``import a.b``). Names it declares ``global`` or
    ``nonlocal`` are not its own. A comprehension binds its targets only."""
    names: set[str] = set()
    declared: set[str] = set()
    if isinstance(scope, _FUNCTIONS):
        names.update(a.arg for a in _arguments(scope.args))
    if isinstance(scope, _COMPREHENSIONS):
        for generator in scope.generators:
            names.update(n.id for n in ast.walk(generator.target) if isinstance(n, ast.Name))
        return names
    for node in scope_nodes(scope):
        if isinstance(node, ast.Name):
            if not isinstance(node.ctx, ast.Load):
                names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update(_imported(node))
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)):
            if node.name:
                names.add(node.name)
        elif isinstance(node, ast.MatchMapping):
            if node.rest:
                names.add(node.rest)
        elif isinstance(node, _COMPREHENSIONS):
            names.update(_walrus_targets(node))
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            declared.update(node.names)
    return names if isinstance(scope, ast.Module) else names - declared


def _imported(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.asname or alias.name.split(".")[0] for alias in node.names]
    return [alias.asname or alias.name for alias in node.names if alias.name != "*"]


def _stored(nodes: Iterable[ast.AST]) -> set[str]:
    """Names stored by assignment targets (not descending into nested scopes)."""
    names: set[str] = set()
    for top in nodes:
        for node in [top, *scope_nodes(top)]:
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
    return names


def surely_bound(statement: ast.stmt) -> frozenset[str]:
    """The names a statement binds whenever it completes: an assignment's targets, an annotated
    assignment with a value, imports, ``def``, ``class``, ``type``. Not the targets of ``for``,
    ``with``, ``except`` or ``match``, nor anything inside a branch or a loop."""
    if isinstance(statement, ast.Assign):
        return frozenset(_stored(statement.targets))
    if isinstance(statement, ast.AnnAssign) and statement.value is not None:
        return frozenset(_stored([statement.target]))
    if isinstance(statement, (ast.Import, ast.ImportFrom)):
        return frozenset(_imported(statement))
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return frozenset({statement.name})
    name = getattr(statement, "name", None)  # `type X = ...` (ast.TypeAlias, Python 3.12+)
    if type(statement).__name__ == "TypeAlias" and isinstance(name, ast.Name):
        return frozenset({name.id})
    return frozenset()


# --------------------------------------------------------------------------- the walk


@dataclass(frozen=True)
class Names:
    """What one piece of code does with names (see the module docstring)."""

    free: tuple[str, ...]
    mentioned: tuple[str, ...]
    effects: tuple[tuple[str, bool], ...]  # (name, bound?) the last effect on each name, in order
    lines: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    star_imports: tuple[str, ...] = ()


def scan(code: str | ast.AST, *, strict: bool = False, strings: bool = False) -> Names:
    """Everything this module knows about ``code``'s names, from one walk (empty if it does not parse)."""
    tree = _tree(code)
    if tree is None:
        return Names((), (), ())
    walker = _Walker(strict, strings)
    with contextlib.suppress(RecursionError):  # absurdly deep code: what was found so far
        walker.visit(tree)
    return walker.result()


def free_names(code: str | ast.AST, *, strict: bool = False, strings: bool = False) -> list[str]:
    """The names ``code`` reads before (or without) binding them, in first-use order (see the module
    docstring for ``strict`` and ``strings``). Empty when it does not parse."""
    return list(scan(code, strict=strict, strings=strings).free)


def global_names(code: str | ast.AST) -> list[str]:
    """Every global name ``code`` reads or binds, in order of first appearance in the text."""
    return list(scan(code).mentioned)


class _Frame:
    """A scope inside the code's global scope, while the walk is in it."""

    __slots__ = ("declared_global", "declared_nonlocal", "kind", "names", "pending")

    def __init__(self, kind: str, names: set[str]) -> None:
        self.kind = kind  # "function" (runs when called), "class", "comprehension", "annotation"
        # comprehension/annotation: its names, known up front; class: the names bound so far
        # (its body runs top to bottom); function: the names bound so far, and since Python
        # decides a function's locals from its whole body, its reads wait in ``pending`` until
        # the body has been walked.
        self.names = names
        self.pending: list[tuple[str, ast.AST]] = []
        self.declared_global: set[str] = set()
        self.declared_nonlocal: set[str] = set()


class _Walker(ast.NodeVisitor):
    """Walks code in evaluation order (values before targets), keeping a stack of scopes."""

    def __init__(self, strict: bool, strings: bool) -> None:
        self.strict = strict
        self.strings = strings
        self.frames: list[_Frame] = []
        self.bound: set[str] = set()  # global names bound so far (strict: surely bound)
        self.free: dict[str, None] = {}
        self.deferred: dict[str, None] = {}  # read by function bodies: free unless bound anywhere
        self.mentioned: dict[str, tuple[int, int]] = {}  # global name -> first position
        self.effects: dict[str, bool] = {}
        self.lines: dict[str, tuple[int, int]] = {}
        self.star: list[str] = []
        self._top: ast.stmt | None = None
        self._anchor: tuple[int, int] | None = None  # position of the string code is read from

    def result(self) -> Names:
        free = dict(self.free)
        for name in self.deferred:
            if name not in self.bound:
                free.setdefault(name, None)
        mentioned = sorted(self.mentioned, key=self.mentioned.__getitem__)
        return Names(tuple(free), tuple(mentioned), tuple(self.effects.items()), self.lines, tuple(self.star))

    # ---- names

    def _mention(self, name: str, node: ast.AST) -> None:
        if name not in self.mentioned:
            where = self._anchor or (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))
            self.mentioned[name] = where

    def _read(self, name: str, node: ast.AST) -> None:
        self._resolve(name, node, len(self.frames) - 1, direct=True, deferred=False)

    def _resolve(self, name: str, node: ast.AST, i: int, *, direct: bool, deferred: bool) -> None:
        """Where a read of ``name`` from scope ``i`` goes; ``direct``: read in that scope's own
        code (a class body's names are seen by the body itself only)."""
        while i >= 0:
            frame = self.frames[i]
            if frame.kind == "function":
                frame.pending.append((name, node))
                return
            if name in frame.names and (direct or frame.kind != "class"):
                return
            direct = False
            i -= 1
        self._global_read(name, node, deferred)

    def _global_read(self, name: str, node: ast.AST, deferred: bool) -> None:
        self._mention(name, node)
        if deferred and not self.strict:
            self.deferred.setdefault(name, None)
        elif name not in self.bound:
            self.free.setdefault(name, None)

    def _close_function(self, frame: _Frame) -> None:
        """The function's body has been walked: its reads that are not its own go outward."""
        own = frame.names | frame.declared_nonlocal
        for name, node in frame.pending:
            if name in frame.declared_global:
                self._global_read(name, node, deferred=True)
            elif name not in own:
                self._resolve(name, node, len(self.frames) - 1, direct=False, deferred=True)

    def _bind(self, name: str, node: ast.AST, *, bound: bool = True, walrus: bool = False) -> None:
        """``name`` bound (or deleted) in the current scope; ``walrus``: in the first enclosing
        scope that is not a comprehension."""
        i = len(self.frames) - 1
        while walrus and i >= 0 and self.frames[i].kind == "comprehension":
            i -= 1
        if i >= 0:
            frame = self.frames[i]
            if frame.kind == "class":
                if bound:
                    frame.names.add(name)
                return
            if frame.kind != "function":
                return  # a comprehension's target (known up front)
            if name not in frame.declared_global:
                frame.names.add(name)  # `del x` makes x local too
                return
        self._mention(name, node)
        if bound and not self.strict:
            self.bound.add(name)
        self._effect(name, bound)

    def _effect(self, name: str, bound: bool) -> None:
        self.effects.pop(name, None)  # keep the order of the last effects
        self.effects[name] = bound
        top = self._top
        if bound and top is not None:
            self.lines[name] = (top.lineno, top.end_lineno or top.lineno)
        elif not bound:
            self.lines.pop(name, None)

    def _in_scopes(self, frames: list[_Frame], nodes: Iterable[ast.AST]) -> None:
        self.frames.extend(frames)
        try:
            for node in nodes:
                self.visit(node)
        finally:
            del self.frames[len(self.frames) - len(frames) :]
        for frame in reversed(frames):
            if frame.kind == "function":
                self._close_function(frame)

    # ---- statements

    def visit_Module(self, node: ast.Module) -> None:
        for statement in node.body:
            if not self.frames and self._anchor is None:
                self._top = statement
            self.visit(statement)
            if self.strict and not self.frames and self._anchor is None:
                self.bound |= surely_bound(statement)

    def visit_Assign(self, node: ast.Assign) -> None:
        self.visit(node.value)
        for target in node.targets:
            self.visit(target)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self.visit(node.annotation)
        if node.value is not None:
            self.visit(node.value)
            self.visit(node.target)
        elif not isinstance(node.target, ast.Name):
            self.visit(node.target)  # `x.attr: int` reads x; `x: int` alone binds nothing

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if isinstance(node.target, ast.Name):
            self._read(node.target.id, node.target)  # `x += 1` reads x first
        self.visit(node.value)
        self.visit(node.target)

    def visit_For(self, node: ast.For | ast.AsyncFor) -> None:
        self.visit(node.iter)
        self.visit(node.target)
        for statement in [*node.body, *node.orelse]:
            self.visit(statement)

    visit_AsyncFor = visit_For

    def visit_Import(self, node: ast.Import | ast.ImportFrom) -> None:
        for name in _imported(node):
            self._bind(name, node)
        if isinstance(node, ast.ImportFrom) and not self.frames and any(a.name == "*" for a in node.names):
            self.star.append(f"from {'.' * node.level}{node.module or ''} import *")

    visit_ImportFrom = visit_Import

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.type is not None:
            self.visit(node.type)
        if node.name:
            # Unbound again when the handler ends: visible in it, no lasting effect.
            effects, lines = dict(self.effects), dict(self.lines)
            self._bind(node.name, node)
            self.effects, self.lines = effects, lines
        for statement in node.body:
            self.visit(statement)

    def visit_Global(self, node: ast.Global) -> None:
        if self.frames and self.frames[-1].kind == "function":
            self.frames[-1].declared_global.update(node.names)

    def visit_Nonlocal(self, node: ast.Nonlocal) -> None:
        if self.frames and self.frames[-1].kind == "function":
            self.frames[-1].declared_nonlocal.update(node.names)

    # ---- scopes

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        params = set(_type_params(node))
        annotations: list[ast.AST] = []
        if isinstance(node, ast.Lambda):
            outside = _outer_parts(node)
        else:
            args = node.args
            outside = [*node.decorator_list, *args.defaults, *(d for d in args.kw_defaults if d is not None)]
            annotations = [a.annotation for a in _arguments(args) if a.annotation is not None]
            annotations += [node.returns] if node.returns is not None else []
        for part in outside:
            self.visit(part)
        # PEP 695: annotations and the body see the type parameters.
        self._in_scopes([_Frame("annotation", params)] if params else [], annotations)
        if not isinstance(node, ast.Lambda):
            self._bind(node.name, node)
        names = {a.arg for a in _arguments(node.args)} | params
        body: list[ast.AST] = [node.body] if isinstance(node, ast.Lambda) else list(node.body)
        self._in_scopes([_Frame("function", names)], body)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._function(node)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._function(node)

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self._function(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for part in node.decorator_list:
            self.visit(part)
        params = set(_type_params(node))
        scopes = [_Frame("annotation", params)] if params else []  # PEP 695: bases and body see them
        self._in_scopes(scopes, [*node.bases, *(k.value for k in node.keywords)])
        self._in_scopes([*scopes, _Frame("class", set())], node.body)
        self._bind(node.name, node)

    def _comprehension(self, node: ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp) -> None:
        self.visit(node.generators[0].iter)  # evaluated in the enclosing scope
        self._in_scopes([_Frame("comprehension", bound_names(node))], _own_body(node))

    def visit_ListComp(self, node: ast.ListComp) -> None:
        self._comprehension(node)

    def visit_SetComp(self, node: ast.SetComp) -> None:
        self._comprehension(node)

    def visit_DictComp(self, node: ast.DictComp) -> None:
        self._comprehension(node)

    def visit_GeneratorExp(self, node: ast.GeneratorExp) -> None:
        self._comprehension(node)

    def visit_TypeAlias(self, node: ast.AST) -> None:  # `type X[T] = value` (Python 3.12+)
        name = getattr(node, "name", None)
        if isinstance(name, ast.Name):
            self._bind(name.id, name)
        value = getattr(node, "value", None)
        if value is not None:  # evaluated lazily, in a scope of its own
            self._in_scopes([_Frame("function", set(_type_params(node)))], [value])

    # ---- match captures

    def visit_MatchAs(self, node: ast.MatchAs) -> None:
        if node.pattern is not None:
            self.visit(node.pattern)
        if node.name:
            self._bind(node.name, node)

    def visit_MatchStar(self, node: ast.MatchStar) -> None:
        if node.name:
            self._bind(node.name, node)

    def visit_MatchMapping(self, node: ast.MatchMapping) -> None:
        self.generic_visit(node)
        if node.rest:
            self._bind(node.rest, node)

    # ---- expressions

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Store):
            self._bind(node.id, node)
        elif isinstance(node.ctx, ast.Del):
            self._read(node.id, node)  # `del x` needs x
            self._bind(node.id, node, bound=False)
        else:
            self._read(node.id, node)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.visit(node.value)
        if isinstance(node.target, ast.Name):
            self._bind(node.target.id, node.target, walrus=True)

    def visit_Constant(self, node: ast.Constant) -> None:
        if self.strings and isinstance(node.value, str) and "@" in node.value:
            for name in _AT_NAME.findall(node.value):
                self._read(name, node)

    def generic_visit(self, node: ast.AST) -> None:
        if not isinstance(node, ast.expr):
            super().generic_visit(node)
            return
        # Expressions are most of the nodes: walk them without NodeVisitor's per-node dispatch,
        # depth first in field order, handing the nodes that open a scope or bind back to it.
        stack: list[ast.AST] = list(reversed(list(ast.iter_child_nodes(node))))
        while stack:
            child = stack.pop()
            kind = type(child)
            if kind is ast.Name:
                self.visit_Name(child)  # type: ignore[arg-type]
            elif kind is ast.Constant:
                if self.strings:
                    self.visit_Constant(child)  # type: ignore[arg-type]
            elif isinstance(child, _DISPATCHED):
                self.visit(child)
            elif kind is ast.Call:
                self.visit_Call(child)  # type: ignore[arg-type]
            elif kind is ast.Subscript and self.strings:
                self.visit_Subscript(child)  # type: ignore[arg-type]
            else:
                stack.extend(reversed(list(ast.iter_child_nodes(child))))

    def visit_Call(self, node: ast.Call) -> None:
        self.generic_visit(node)
        self._call(node)  # the code a call runs from a string runs after its arguments

    def visit_Subscript(self, node: ast.Subscript) -> None:
        self.generic_visit(node)
        if self.strings:
            self._subscript(node)

    # ---- code in strings

    def _call(self, node: ast.Call) -> None:
        """Code a call runs from a string: IPython's magics (always), eval/exec (``strings``)."""
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in _MAGIC_RUNNERS and _is_get_ipython(func.value):
            self._magic(node, func.attr == "run_cell_magic")
        elif self.strings and isinstance(func, ast.Name) and func.id in ("eval", "exec") and node.args:
            source = _text(node.args[0])
            if source is not None:
                self._code_in(source, node)

    def _magic(self, node: ast.Call, cell: bool) -> None:
        texts = [_text(arg) for arg in node.args]
        if len(texts) < (3 if cell else 2) or texts[0] not in (_CELL_MAGICS if cell else _LINE_MAGICS):
            return
        magic, source = texts[0], texts[2 if cell else 1]
        if source is None:
            return
        if not cell and parse(source) is None:  # `%timeit -n 10 f(x)`: the options first
            source = source[_MAGIC_OPTIONS.match(source).end() :]  # type: ignore[union-attr]
        if cell and magic == "capture" and texts[1]:  # `%%capture [options] name` binds name
            words = [w for w in texts[1].split() if not w.startswith("-")]
            if words and words[-1].isidentifier():
                self._bind(words[-1], node)
        if magic == "timeit":
            tree = parse(source)
            if tree is not None:
                self._in_scopes([_Frame("comprehension", bound_names(tree))], tree.body)
            return
        self._code_in(source, node)

    def _code_in(self, source: str, node: ast.AST) -> None:
        tree = parse(source)
        if tree is None:
            return
        anchor, self._anchor = self._anchor, (node.lineno, node.col_offset)  # type: ignore[attr-defined]
        try:
            self.visit(tree)
        finally:
            self._anchor = anchor

    def _subscript(self, node: ast.Subscript) -> None:
        """``globals()["x"]`` reads the global x."""
        value = node.value
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "globals":
            key = _text(node.slice)
            if key is not None and key.isidentifier():
                self._global_read(key, node, deferred=False)


def _is_get_ipython(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "get_ipython"


def _text(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None
