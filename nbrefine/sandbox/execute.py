"""What runs inside a trial process (a fork, or the spawn worker): private streams, hardening,
the candidate statement by statement, the extra checks, the suspect-operand check, and the
report written back to the kernel. nbrefine's own modules are hidden from the candidate while
it runs (it may not patch the checks it is judged by).

The candidate runs in this very process, so it is treated as an attacker that has read this
file: it can patch any module, class or builtin, walk the frames of the thread it runs on
(``sys._getframe``, a traceback's ``tb_frame``: libraries need them, so they stay), and write
into any file descriptor. What holds all the same:

* **The verdict is observed, not reported.** Everything the trusted part runs is compiled
  before the candidate runs. :func:`_run` runs the candidate's statements, its top-level asserts
  and the ``-t`` checks, then the operand checks, calling only what it was handed before the
  candidate ran (it looks up no global or builtin name; a test reads its bytecode), and ends on
  the line of ``return 4`` (verified) or ``return 3`` (passed, but suspect) only when every one
  of them ran and none raised. A *reporter thread*, started before the candidate, holds the only
  copy of the report token (the copy its callers keep in this process is overwritten), reads
  that line off :func:`_run`'s frame and decides the status itself. The rest of the report
  (failures, output) comes from the main thread and cannot turn a failure into a pass. The
  reporter calls nothing the candidate can reach, triggers no audit event and, once the
  candidate runs, makes no object the garbage collector tracks.
* **Asserts are interpreted, operands checked before they are compared.** A top-level
  ``assert`` (of the candidate or of a check) is evaluated piece by piece (comparisons, ``and``/
  ``or``/``not``, arithmetic, calls), and every operand, and every name the test reads, is
  checked *before* the operation that uses it runs (:func:`_vet`): its class's comparison,
  truth, container, arithmetic and conversion methods must be the built-in ones of a C type, or
  those of a trusted library class as it was when the trial started (numpy, pandas,
  ``Fraction``, ``Counter``, a dataclass the namespace held), with what it holds checked the same
  way. Anything else (``unittest.mock.ANY``, ``class Total(float): __eq__ = float.__ne__``, a
  dataclass the candidate defined, a patched ``pd.Series.__eq__`` or ``np.array_equal``) makes
  the pass *suspect*: never verified.
* **An audit hook** refuses what would reach the reporter thread or rewrite the runner's frames
  and code (``sys._current_frames``, ``gc.get_objects``/``get_referrers``/``get_referents``,
  ``sys.settrace``/``setprofile``, new audit hooks, setting a function's ``__code__``, reading
  the process's own memory), and makes a pass suspect when an object's class is changed.
* ``sys.stdout``/``sys.stderr`` are C-level text streams on files (output past the trial's file
  size limit ends it as ``output_limit``); no runner object hangs off them, nor off ``input``
  or the import blocker (functions with globals of their own).

What does not hold: native code (ctypes, which the gate refuses by name but not under a computed
one, or an extension module written to the scratch folder) can read and write this process's
memory; on Python 3.13+ ``frame.f_locals`` writes through (PEP 667), so a candidate that walks
up to :func:`_run`'s frame can rebind its locals; asserts inside functions, loops or branches,
and comparisons a comprehension or a called function makes, are checked only through the names
the assert reads; library code is trusted to be what it was (a class changed is seen, a module
function patched that a library method calls is not).

May import the standard library, the sibling modules of this package and the grounding
modules (failure capture, value summaries, redaction).
"""

from __future__ import annotations

import _thread
import ast
import asyncio
import builtins
import collections
import contextlib
import dataclasses
import dis
import errno
import faulthandler
import gc
import io
import itertools
import linecache
import operator
import os
import pickle
import re
import signal
import sys
import tempfile
import time
import types
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from ..grounding import Failure, Redactor, capture_failure, summarize_value
from .hardening import PolicyRefusal, Prepared, TrialPolicy, harden, limit_cpu_seconds
from .trial import TRIAL_STATUSES, SandboxOptions, TrialOutcome, TrialSpec, TrialStatus
from .wire import HEADER, read_msg

try:  # to overwrite the caller's copy of the report token in this process (never elsewhere)
    import ctypes

    _MEMMOVE: Any = ctypes.memmove
except (ImportError, AttributeError):  # pragma: no cover - a Python without ctypes
    _MEMMOVE = None

__all__ = ["enter_child", "execute_trial", "run_checks", "spare_child", "spare_order", "trial_child"]

R = TypeVar("R")

_FLAGS = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
_HEAP = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made by a class statement (or type()), not by C


def enter_child(own_group: bool = True) -> None:
    """First thing in every forked child: own process group, private streams."""
    if own_group:
        with contextlib.suppress(OSError):  # already a group (or session) leader
            os.setpgid(0, 0)
    faulthandler.disable()  # a crashing candidate must not dump onto the kernel's stderr
    sys.stdout = io.StringIO()
    sys.stderr = io.StringIO()
    sys.stdin = io.StringIO("")
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _text_stream(fd: int) -> io.TextIOWrapper:
    """``sys.stdout``/``sys.stderr`` of a trial: written straight through to ``fd`` (a file the
    reporter reads), C-level all the way down: nothing of the runner is reachable from it."""
    raw = io.FileIO(fd, "w", closefd=False)
    return io.TextIOWrapper(raw, encoding="utf-8", errors="backslashreplace", write_through=True)


def _isolated(source: str, name: str) -> Any:
    """A function compiled with globals of its own (just the builtins): what the candidate can
    reach through it (``input``, the import blocker) leads to nothing of the runner."""
    scope: dict[str, Any] = {"__builtins__": builtins}
    exec(compile(source, f"<nbrefine {name}>", "exec", dont_inherit=True), scope)
    return scope[name]


_NO_INPUT = _isolated(
    "def no_input(*args, **kwargs):\n    raise RuntimeError('input() is not available in a trial run')\n",
    "no_input",
)
_NoNbrefineInTrials: type = _isolated(
    "import importlib.abc\n"
    "class NoNbrefineInTrials(importlib.abc.MetaPathFinder):\n"
    "    '''Candidate code may not import nbrefine (to patch the checks it is judged by).'''\n"
    "    def find_spec(self, fullname, path=None, target=None):\n"
    "        if fullname == 'nbrefine' or fullname.startswith('nbrefine.'):\n"
    "            raise ImportError(f'{fullname} cannot be imported in a trial run')\n"
    "        return None\n",
    "NoNbrefineInTrials",
)


def _register_source(filename: str, code: str) -> None:
    linecache.cache[filename] = (len(code), None, code.splitlines(keepends=True), filename)


def _direct(fn: Callable[[], R]) -> R:
    return fn()


def run_checks(
    checks: Sequence[str],
    namespace: dict[str, Any],
    redactor: Redactor,
    *,
    run_unsafe: Callable[[Callable[[], list[str]]], list[str]] | None = None,
) -> list[Failure]:
    """Run every extra check (statements such as ``assert f(2) == 4``); return all failures.
    In the kernel (a cell's own ``-t`` checks); trials run theirs through :func:`_run`."""
    failures = []
    for number, check in enumerate(checks, start=1):
        label = f"check {number}"
        filename = f"<{label}>"
        _register_source(filename, check)
        try:
            exec(compile(check, filename, "exec", dont_inherit=True), namespace)
        except Exception as err:
            failures.append(
                capture_failure(
                    err,
                    code=check,
                    code_filename=filename,
                    user_globals=namespace,
                    label=label,
                    redactor=redactor,
                    run_unsafe=run_unsafe,
                )
            )
    return failures


def _classify(err: BaseException) -> tuple[TrialStatus, str]:
    """A typed status for an exception, looking through wrapping (``raise X from refusal``)."""
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, PolicyRefusal):
            return "refused", current.action
        if isinstance(current, MemoryError):
            return "memory_limit", "the trial's memory limit was reached"
        if isinstance(current, OSError) and current.errno == errno.EFBIG:
            return "output_limit", "the trial's output was too large (past its file size limit); stopped"
        current = current.__cause__ or current.__context__
    return "failed", ""


# --------------------------------------------------------------------------- the plan
#
# Everything the trusted part runs is compiled before the candidate runs: its statements, the
# pieces of its top-level asserts and of the checks' (a tree of tuples, below), and what a call
# in an assert must still be. Nothing in a plan can be changed afterwards.
#
# Assert pieces: (0, code) a leaf expression; (1, left, ((op, swapped, negated, right), ...)) a
# comparison; (2, is_and, pieces) and/or; (3, piece) not; (4, op, piece) -x, +x, ~x; (5, op,
# left, right) arithmetic; (6, callee, args, ((name, piece), ...), expected, shown) a call, whose
# callee is a piece or (7, base, attribute name). Steps: (0, code) a statement; (1, test,
# failing, shown) a top-level assert; (2, error) a check that does not compile.

_ANYTHING = object()  # a call whose callee is not pinned
_COMPARE = {
    ast.Eq: (operator.eq, False, False),
    ast.NotEq: (operator.ne, False, False),
    ast.Lt: (operator.lt, False, False),
    ast.LtE: (operator.le, False, False),
    ast.Gt: (operator.gt, False, False),
    ast.GtE: (operator.ge, False, False),
    ast.Is: (operator.is_, False, False),
    ast.IsNot: (operator.is_not, False, False),
    ast.In: (operator.contains, True, False),
    ast.NotIn: (operator.contains, True, True),
}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Invert: operator.invert}
_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.MatMult: operator.matmul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.LShift: operator.lshift,
    ast.RShift: operator.rshift,
    ast.BitAnd: operator.and_,
    ast.BitOr: operator.or_,
    ast.BitXor: operator.xor,
}


class _Planner:
    """Compiles the candidate and its checks into a plan (before it runs)."""

    def __init__(self, namespace: dict[str, Any], modules: dict[str, Any]) -> None:
        self.namespace = namespace
        self.modules = modules  # alias -> module, for the imports the code and its checks make
        self.notes: list[str] = []
        self.methods: set[str] = set()  # the methods asserts call (``s.equals(t)``)

    def expression(self, node: ast.expr, filename: str) -> Any:
        return compile(ast.Expression(node), filename, "eval", dont_inherit=True, optimize=0)

    def piece(self, node: ast.expr, filename: str, predicate: bool = False) -> tuple[Any, ...]:
        if isinstance(node, ast.Compare):
            ops = tuple(
                (*_COMPARE[type(op)], self.piece(right, filename))
                for op, right in zip(node.ops, node.comparators, strict=True)
            )
            return (1, self.piece(node.left, filename), ops)
        if isinstance(node, ast.BoolOp):
            return (2, isinstance(node.op, ast.And), tuple(self.piece(v, filename) for v in node.values))
        if isinstance(node, ast.UnaryOp):
            if isinstance(node.op, ast.Not):
                return (3, self.piece(node.operand, filename))
            return (4, _UNARY[type(node.op)], self.piece(node.operand, filename))
        if isinstance(node, ast.BinOp):
            op = _BINARY[type(node.op)]
            return (5, op, self.piece(node.left, filename), self.piece(node.right, filename))
        if isinstance(node, ast.Call) and self.plain_call(node):
            func = node.func
            callee = (
                (7, self.piece(func.value, filename), func.attr)
                if isinstance(func, ast.Attribute)
                else self.piece(func, filename)
            )
            args = tuple(self.piece(arg, filename) for arg in node.args)
            named = tuple((kw.arg, self.piece(kw.value, filename)) for kw in node.keywords)
            shown = ast.unparse(func)[:80]
            if isinstance(func, ast.Attribute):
                self.methods.add(func.attr)
            return (6, callee, args, named, self.expected(func, predicate), shown)
        return (0, self.expression(node, filename))

    @staticmethod
    def plain_call(node: ast.Call) -> bool:
        return not any(isinstance(a, ast.Starred) for a in node.args) and all(kw.arg for kw in node.keywords)

    def expected(self, func: ast.expr, predicate: bool) -> Any:
        """What the callee must still be when the assert runs: a library function (``np.isclose``,
        pinned wherever the assert is), or a builtin the assert's own test calls (``all``)."""
        path: list[str] = []
        while isinstance(func, ast.Attribute):
            path.insert(0, func.attr)
            func = func.value
        if not isinstance(func, ast.Name):
            return _ANYTHING
        root = self.namespace.get(func.id, self.modules.get(func.id, _ANYTHING))
        if not path:
            if predicate and func.id not in self.namespace and hasattr(builtins, func.id):
                return getattr(builtins, func.id)
            return _ANYTHING
        if not isinstance(root, types.ModuleType):
            return _ANYTHING
        value: Any = root
        for attr in path:
            if not isinstance(value, types.ModuleType):
                return _ANYTHING
            try:
                value = getattr(value, attr)
            except Exception:
                return _ANYTHING
        return value

    def steps(self, statements: Sequence[ast.stmt], filename: str, last_value: bool) -> tuple[Any, ...]:
        out: list[tuple[Any, ...]] = []
        for index, node in enumerate(statements):
            awaits = any(isinstance(n, ast.Await | ast.AsyncFor | ast.AsyncWith) for n in ast.walk(node))
            if isinstance(node, ast.Assert) and not awaits:
                shown = ast.unparse(node)[:120]
                failing = ast.Raise(
                    exc=ast.Call(ast.Name("AssertionError", ast.Load()), [node.msg] if node.msg else [], [])
                )
                raise_code = ast.fix_missing_locations(ast.copy_location(failing, node))
                code = compile(ast.Module([raise_code], []), filename, "exec", dont_inherit=True, optimize=0)
                read = tuple(
                    self.expression(ast.copy_location(ast.Name(name, ast.Load()), node), filename)
                    for name in _names_read(node.test)
                )
                hidden = any(isinstance(n, ast.Lambda | ast.comprehension) for n in ast.walk(node.test))
                test = self.piece(node.test, filename, predicate=True)
                out.append((1, test, code, f"`{shown}`: ", read, not hidden))
                continue
            if isinstance(node, ast.Assert):
                self.notes.append(f"`{ast.unparse(node)[:120]}` awaits: its operands cannot be checked")
            if last_value and index == len(statements) - 1 and isinstance(node, ast.Expr):
                code = compile(ast.Expression(node.value), filename, "eval", flags=_FLAGS, dont_inherit=True)
            else:
                module = ast.Module(body=[node], type_ignores=[])
                code = compile(module, filename, "exec", flags=_FLAGS, dont_inherit=True, optimize=0)
            out.append((0, code))
        return tuple(out)

    def nested(self, statements: Sequence[ast.stmt], filename: str) -> list[tuple[Any, str]]:
        """The operands of asserts inside blocks (``if``, ``for``, ``with``...), not in functions:
        checked again once everything passed (best effort: they are evaluated a second time)."""
        found: list[tuple[Any, str]] = []

        def visit(node: ast.AST, top: bool) -> None:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
                return
            if isinstance(node, ast.Assert) and not top:
                test = node.test
                operands = [test]
                if isinstance(test, ast.Compare):
                    operands += [test.left, *test.comparators]
                elif isinstance(test, ast.UnaryOp):
                    operands.append(test.operand)
                shown = f"`{ast.unparse(node)[:120]}`: "
                for operand in operands:
                    if not isinstance(operand, ast.Constant):
                        with contextlib.suppress(SyntaxError, ValueError):
                            found.append((self.expression(operand, filename), shown))
            for child in ast.iter_child_nodes(node):
                visit(child, False)

        for statement in statements:
            visit(statement, True)
        return found


def _names_read(test: ast.expr) -> list[str]:
    """The names an assert's test reads (not those its comprehensions and lambdas bind, nor the
    functions it calls by name): checked before it runs, for the operands a comprehension, a
    lambda, an f-string or a subscript keeps out of sight (``all(x == 6 for x in [total])``)."""
    bound = {n.id for n in ast.walk(test) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
    for node in ast.walk(test):
        if isinstance(node, ast.Lambda):
            bound.update(a.arg for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs))
            bound.update(a.arg for a in (node.args.vararg, node.args.kwarg) if a is not None)
    called = {id(n.func) for n in ast.walk(test) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    names = [
        n.id
        for n in ast.walk(test)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and id(n) not in called
    ]
    return [name for name in dict.fromkeys(names) if name not in bound]


def _module_aliases(trees: Sequence[ast.Module]) -> dict[str, Any]:
    """Names the code binds to modules by importing them, with the modules as loaded now."""
    found: dict[str, Any] = {}
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    name = alias.name if alias.asname else alias.name.split(".")[0]
                    if name in sys.modules:
                        found[alias.asname or name] = sys.modules[name]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    module = sys.modules.get(f"{node.module}.{alias.name}")
                    if module is not None:
                        found[alias.asname or alias.name] = module
    return found


def _plan(spec: TrialSpec, namespace: dict[str, Any], filename: str) -> tuple[Any, ...]:
    """(steps, checks, nested operands, a note) for ``spec``; raises the candidate's SyntaxError."""
    tree = ast.parse(spec.code, filename)
    check_trees: list[tuple[int, ast.Module | SyntaxError]] = []
    for number, check in enumerate(spec.checks, start=1):
        label = f"<check {number}>"
        _register_source(label, check)
        try:
            check_trees.append((number, ast.parse(check, label)))
        except SyntaxError as err:
            check_trees.append((number, err))
    planner = _Planner(
        namespace, _module_aliases([tree, *(t for _, t in check_trees if isinstance(t, ast.Module))])
    )
    steps = planner.steps(tree.body, filename, last_value=True)
    nested = planner.nested(tree.body, filename)
    checks: list[tuple[int, tuple[Any, ...]]] = []
    for number, check_tree in check_trees:
        if isinstance(check_tree, SyntaxError):
            checks.append((number, ((2, check_tree),)))
            continue
        label = f"<check {number}>"
        try:
            checks.append((number, planner.steps(check_tree.body, label, last_value=False)))
        except (SyntaxError, ValueError) as err:  # compiles in pieces what does not compile whole
            checks.append((number, ((2, err),)))
        nested += planner.nested(check_tree.body, label)
    note = "; ".join(planner.notes)
    return (steps, tuple(checks), tuple(nested), note, frozenset(planner.methods))


# --------------------------------------------------------------------------- what is trusted

_TRUTH = ("__bool__", "__len__")
_EQUALITY = ("__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__")
_HOLDING = ("__contains__", "__iter__", "__getitem__", "__len__")
_ARITHMETIC = (
    *(f"__{prefix}{name}__" for name in ("add", "sub", "mul", "matmul", "truediv", "floordiv", "mod", "pow",
                                         "lshift", "rshift", "and", "or", "xor") for prefix in ("", "r")),
    "__neg__", "__pos__", "__invert__", "__abs__",
)  # fmt: skip
_CONVERSION = ("__float__", "__int__", "__index__", "__complex__", "__round__", "__array__",
               "__array_ufunc__", "__array_function__", "__getattr__", "__getattribute__")  # fmt: skip
_COMPARING = _EQUALITY + _TRUTH + _ARITHMETIC + _CONVERSION  # what an operand is compared through
_CONTAINING = _COMPARING + _HOLDING
_ARGUMENT = _CONTAINING
_CALLING = ("__call__", "__getattr__", "__getattribute__")
_READING = (*_CONTAINING, "__format__", "__hash__")  # for the names an assert reads
_NAMES = frozenset((*_READING, *_CALLING, "__get__", "__dict__", "__class__"))

#: Library classes written in Python that an assert may compare, trusted as they were when the
#: trial started (a change to one during the trial makes the pass suspect); with their bases.
_TRUSTED_ROOTS = (
    ("fractions", "Fraction"), ("collections", "Counter"), ("collections", "UserDict"),
    ("collections", "UserList"), ("collections", "UserString"), ("decimal", "Decimal"),
    ("pathlib", "PurePosixPath"), ("pathlib", "PosixPath"), ("pathlib", "PureWindowsPath"),
    ("enum", "IntEnum"), ("enum", "IntFlag"), ("enum", "StrEnum"), ("uuid", "UUID"),
    ("ipaddress", "IPv4Address"), ("ipaddress", "IPv6Address"),
    ("numpy", "matrix"), ("numpy", "recarray"), ("numpy.ma", "MaskedArray"),
    ("pandas", "Series"), ("pandas", "DataFrame"), ("pandas", "Index"), ("pandas", "RangeIndex"),
    ("pandas", "MultiIndex"), ("pandas", "DatetimeIndex"), ("pandas", "TimedeltaIndex"),
    ("pandas", "PeriodIndex"), ("pandas", "CategoricalIndex"), ("pandas", "IntervalIndex"),
    ("pandas", "Categorical"), ("pandas", "Timestamp"), ("pandas", "Timedelta"), ("pandas", "Period"),
    ("pandas", "Interval"), ("pandas", "NA"), ("pandas", "NaT"), ("pandas", "CategoricalDtype"),
    ("pandas", "Int64Dtype"), ("pandas", "Float64Dtype"), ("pandas", "BooleanDtype"),
    ("pandas", "StringDtype"), ("pandas", "DatetimeTZDtype"), ("pandas", "PeriodDtype"),
    ("pandas", "IntervalDtype"),
    ("pandas", "SparseDtype"), ("pandas.arrays", "IntegerArray"), ("pandas.arrays", "FloatingArray"),
    ("pandas.arrays", "BooleanArray"), ("pandas.arrays", "StringArray"), ("pandas.arrays", "DatetimeArray"),
    ("pandas.arrays", "TimedeltaArray"), ("pandas.arrays", "PeriodArray"), ("pandas.arrays", "IntervalArray"),
    ("pandas.arrays", "NumpyExtensionArray"),
)  # fmt: skip
_ATOMIC = (int, float, complex, bool, str, bytes, type(None), type(NotImplemented), type(Ellipsis))
_MRO = type.__dict__["__mro__"].__get__
_DICT = type.__dict__["__dict__"].__get__
_FLAGS_OF = type.__dict__["__flags__"].__get__
_QUALNAME = type.__dict__["__qualname__"].__get__
_GETSET = type(type.__dict__["__dict__"])


def _trusted_classes(namespace: dict[str, Any], names: frozenset[str]) -> tuple[frozenset[int], Any, Any]:
    """The trusted Python-level classes as they are now (before the candidate runs): the library
    classes of :data:`_TRUSTED_ROOTS` with their bases, and the dataclasses the namespace holds.
    Returns their ids; for each, its own entries for ``names`` (what an assert may use: copies,
    seen through read-only proxies, for :func:`_vet` to tell a class changed since); and the
    dataclasses' field names."""
    classes: dict[int, type] = {}
    for module_name, name in _TRUSTED_ROOTS:
        module = sys.modules.get(module_name)
        root = vars(module).get(name) if module is not None else None
        if root is not None:
            root = root if isinstance(root, type) else type(root)  # pd.NA: its class
            classes.update((id(k), k) for k in _MRO(root) if _FLAGS_OF(k) & _HEAP)
    fields: dict[int, tuple[str, ...]] = {}
    plain = getattr(sys.modules.get("dataclasses"), "_FIELD", None)
    for value in list(namespace.values()):
        if type(value) is type and "__dataclass_fields__" in _DICT(value):
            try:
                own = _DICT(value)["__dataclass_fields__"]
                fields[id(value)] = tuple(n for n, f in own.items() if f._field_type is plain)
            except Exception:
                continue
            classes[id(value)] = value
    entries = {}
    for key, klass in classes.items():
        own = _DICT(klass)
        entries[key] = types.MappingProxyType({name: own[name] for name in own.keys() & names})
    return frozenset(classes), types.MappingProxyType(entries), types.MappingProxyType(fields)


def _vet_kit(trusted: frozenset[int], entries: Any, fields: Any) -> tuple[Any, ...]:
    """Everything :func:`_vet` uses, bound now (before the candidate runs); immutable."""
    keys: Any = type({}.keys())
    items: Any = type({}.items())
    iterables = (
        (list, list.__iter__), (tuple, tuple.__iter__), (set, set.__iter__),
        (frozenset, frozenset.__iter__), (collections.deque, collections.deque.__iter__),
        (keys, keys.__iter__), (items, items.__iter__),
    )  # fmt: skip
    numpy: Any = sys.modules.get("numpy")
    array: Any = None
    with contextlib.suppress(Exception):
        if numpy is not None and type(numpy.ndarray) is type:
            dtype, hasobject = vars(numpy.ndarray)["dtype"].__get__, vars(numpy.dtype)["hasobject"].__get__
            array = (numpy.ndarray, dtype, hasobject, vars(numpy.ndarray)["tolist"])
    mock = sys.modules.get("unittest.mock")
    anything = vars(mock).get("ANY", _ANYTHING) if mock is not None else _ANYTHING
    with_fields = frozenset({id(types.SimpleNamespace), *fields})
    return (
        type, id, _MRO, _DICT, _FLAGS_OF, _QUALNAME, str, dict, _GETSET, frozenset(id(t) for t in _ATOMIC),
        trusted, fields, iterables, (dict, dict.keys, dict.values), array, with_fields, operator.eq,
        object, BaseException, anything, _EQUALITY, _HEAP, 2_000_000, 40, entries,
    )  # fmt: skip


# The trusted part: _vet, _evaluate, _step, _run. They run after the candidate and look up no
# global or builtin name (a test checks their bytecode): every callable they use comes in a kit.


def _vet(kv: tuple[Any, ...], value: Any, names: tuple[str, ...], shallow: bool = False) -> str:
    """Why ``value`` cannot be trusted as an operand of an assert ("" when it can): one of the
    methods ``names`` of its class, or of what it holds (not looked at when ``shallow``), is
    neither the built-in one of a C type nor that of a trusted library class. Calls no code of
    the value's own."""
    (type_, id_, mro_of, dict_of, flags_of, name_of, str_, dict_, getset, atomic, trusted, fields,
     iterables, mapping, array, with_fields, eq, object_, BaseException_, anything, equality, heap,
     budget, deepest, entries) = kv  # fmt: skip
    work = [(value, names, 0)]
    seen: dict[Any, str] = {}
    while work:
        current, wanted, depth = work.pop()
        klass = type_(current)
        if id_(klass) in atomic:
            continue
        if current is anything:
            return "it is unittest.mock.ANY, which is equal to anything"
        mro = mro_of(klass)
        key = (id_(klass), id_(wanted))
        why = seen.get(key)
        if why is None:
            why = ""
            for base in mro:
                if flags_of(base) & heap and id_(base) not in trusted:
                    for attribute in dict_of(base):
                        if type_(attribute) is not str_:
                            why = f"its class {name_of(klass)} has an attribute not named by a string"
            for name in wanted:
                if why:
                    break
                for base in mro:
                    own = dict_of(base)
                    if name in own:
                        if flags_of(base) & heap and id_(base) not in trusted:
                            why = (
                                f"it is a {name_of(klass)}, whose `{name}` is {name_of(base)}'s own, "
                                "not the built-in one of a trusted type"
                            )
                            if name_of(klass) == "_ANY":
                                why = "it is unittest.mock.ANY (or made like it), which is equal to anything"
                        elif (
                            flags_of(base) & heap and entries[id_(base)].get(name, anything) is not own[name]
                        ):
                            changed = f"{name_of(base)}.{name}"
                            why = f"it is a {name_of(klass)}, and {changed} changed while the trial ran"
                        break
            seen[key] = why
        if why:
            return why
        if (
            (wanted is equality or "__eq__" in wanted)
            and flags_of(klass) & heap
            and id_(klass) not in trusted
        ):
            try:
                probe = eq(current, object_())
            except BaseException_:
                probe = None
            if probe is True:
                return f"it is a {name_of(klass)}, which is equal to anything (even a new object())"
        if shallow:
            continue
        if depth > deepest:
            return "it is nested too deeply to be checked"
        held: Any = None
        for base in mro:
            for container, iterate in iterables:
                if base is container:
                    held = iterate(current)
                    break
            if held is not None:
                break
            if base is mapping[0]:
                for item in mapping[1](current):
                    work.append((item, equality, depth + 1))
                held = mapping[2](current)
                break
            if array is not None and base is array[0]:
                held = (array[3](current),) if array[2](array[1](current)) else ()
                break
            if id_(base) in with_fields:
                inner: Any = None
                for owner in mro:
                    held_by = dict_of(owner)
                    if "__dict__" in held_by:
                        descriptor = held_by["__dict__"]
                        if type_(descriptor) is getset:
                            inner = descriptor.__get__(current, klass)
                        break
                if type_(inner) is not dict_:
                    return f"the fields of its {name_of(klass)} cannot be read to be checked"
                for attribute in dict_.keys(inner):
                    if type_(attribute) is not str_:
                        return f"its {name_of(klass)} has a field not named by a string"
                names_of_fields = fields.get(id_(base))
                if names_of_fields is None:
                    held = dict_.values(inner)
                    break
                held = ()
                for field in names_of_fields:
                    for owner in mro:
                        held_by = dict_of(owner)
                        if field in held_by:
                            for meta in mro_of(type_(held_by[field])):
                                if "__get__" in dict_of(meta):
                                    return f"its field `{field}` is a {name_of(type_(held_by[field]))}"
                    if field not in inner:
                        return f"its field `{field}` is not set"
                    work.append((inner[field], equality, depth + 1))
                break
        if held is not None:
            for item in held:
                budget = budget - 1
                if budget < 0:
                    return "it holds too many values to be checked"
                work.append((item, equality, depth + 1))
    return ""


def _evaluate(ke: tuple[Any, ...], node: tuple[Any, ...], ns: dict[str, Any]) -> tuple[Any, str]:
    """The value of one piece of an assert, and why it cannot be trusted ("" : it can). Every
    operand is checked before the operation that uses it runs."""
    (eval_, vet, kv, evaluate, getattr_, type_, dict_of, flags_of, heap, truth, comparing, containing,
     arithmetic, argument, calling, anything, mro_of, id_, trusted, entries, outward) = ke  # fmt: skip
    kind = node[0]
    if kind == 0:
        return eval_(node[1], ns), ""
    if kind == 1:
        left, why = evaluate(ke, node[1], ns)
        result: Any = True
        last = node[2][-1]
        for link in node[2]:
            op, swapped, negated, right_node = link
            right, also = evaluate(ke, right_node, ns)
            why = (
                why
                or also
                or vet(kv, left, comparing)
                or vet(kv, right, containing if swapped else comparing)
            )
            result = op(right, left) if swapped else op(left, right)
            if negated:
                result = not result
            if link is last:
                return result, why
            why = why or vet(kv, result, truth)  # a chain (a < b < c) goes on only while true
            if not result:
                return result, why
            left = right
        return result, why
    if kind == 2:
        why = ""
        value: Any = None
        for sub in node[2]:
            value, also = evaluate(ke, sub, ns)
            why = why or also or vet(kv, value, truth)
            if node[1] and not value:
                return value, why
            if not node[1] and value:
                return value, why
        return value, why
    if kind == 3:
        value, why = evaluate(ke, node[1], ns)
        why = why or vet(kv, value, truth)
        return not value, why
    if kind == 4:
        value, why = evaluate(ke, node[2], ns)
        why = why or vet(kv, value, arithmetic)
        return node[1](value), why
    if kind == 5:
        left, why = evaluate(ke, node[2], ns)
        right, also = evaluate(ke, node[3], ns)
        why = why or also or vet(kv, left, arithmetic) or vet(kv, right, arithmetic)
        return node[1](left, right), why
    callee = node[1]
    if callee[0] == 7:
        base, why = evaluate(ke, callee[1], ns)
        why = why or vet(kv, base, argument)
        for klass in mro_of(type_(base)):
            own = dict_of(klass)
            if callee[2] in own:
                changed = flags_of(klass) & heap and id_(klass) in trusted
                if changed and entries[id_(klass)].get(callee[2], anything) is not own[callee[2]]:
                    why = why or f"`{node[5]}` changed while the trial ran"
                break
        func = getattr_(base, callee[2])
    else:
        func, why = evaluate(ke, callee, ns)
        why = why or vet(kv, func, calling)
        entries = dict_of(type_(func))
        if not flags_of(type_(func)) & heap and "__self__" in entries:
            why = why or vet(kv, entries["__self__"].__get__(func), argument)
    if node[4] is not anything and func is not node[4]:
        why = why or f"`{node[5]}` is not what it was before the candidate ran"
    shallow = False
    for builtin in outward:  # len(rows), isinstance(x, T): what rows holds does not matter
        if func is builtin:
            shallow = True
    args = []
    for sub in node[2]:
        value, also = evaluate(ke, sub, ns)
        why = why or also or vet(kv, value, argument, shallow)
        args.append(value)
    named = {}
    for name, sub in node[3]:
        value, also = evaluate(ke, sub, ns)
        why = why or also or vet(kv, value, argument, shallow)
        named[name] = value
    return func(*args, **named), why


def _step(ks: tuple[Any, ...], step: tuple[Any, ...], ns: dict[str, Any]) -> tuple[Any, str]:
    """Run one statement of the candidate or of a check: (its value, why a pass would be suspect)."""
    eval_, type_, coroutine, drive, evaluate, ke, vet, kv, truth, reading, BaseException_ = ks
    if step[0] == 0:
        value = eval_(step[1], ns)
        if type_(value) is coroutine:
            value = drive(value)
        return value, ""
    if step[0] == 2:
        raise step[1]
    why = ""
    for name in step[4]:  # what the test reads, checked before it runs
        try:
            value = eval_(name, ns)
        except BaseException_:
            continue  # unbound: the test raises itself
        why = why or vet(kv, value, reading, step[5])
    value, also = evaluate(ke, step[1], ns)
    why = why or also or vet(kv, value, truth)
    if not value:
        eval_(step[2], ns)  # raises AssertionError(msg) at the assert's own line
    return None, step[3] + why if why else ""


def _run(kr: tuple[Any, ...], plan: tuple[Any, ...], ns: dict[str, Any], out: list[Any]) -> int:
    """The trusted control flow of a trial. Returns 1 (a statement raised), 2 (a check failed),
    3 (everything passed, but suspect) or 4 (verified), each from a line of its own: the reporter
    reads the line this frame ended on, and nothing but running everything reaches 3 or 4."""
    step_, ks, getframe, register, ready, wait, eval_, vet, kv, comparing, BaseException_ = kr
    steps, checks, nested, note, _ = plan
    register(getframe())
    ready()
    wait()  # the reporter holds this frame now
    suspect = note
    done = 0
    for step in steps:
        try:
            value, why = step_(ks, step, ns)
        except BaseException_ as err:
            out.append(("error", err, done))
            return 1
        suspect = suspect or why
        done = done + 1
        out.append(("value", value))
    failed = 0
    for number, check_steps in checks:
        for step in check_steps:
            try:
                value, why = step_(ks, step, ns)
            except BaseException_ as err:
                out.append(("check", number, err))
                failed = failed + 1
                break
            suspect = suspect or why
    if failed:
        return 2
    for code, shown in nested:
        try:
            why = vet(kv, eval_(code, ns), comparing)
        except BaseException_:
            why = "it could not be evaluated again to be checked"
        if why and not suspect:
            suspect = shown + why
    if suspect:
        out.append(("suspect", suspect))
        return 3
    return 4


def _marker_lines() -> tuple[int, int]:
    """The lines of ``return 3`` and ``return 4`` in :func:`_run`."""
    lines: dict[int, int] = {}
    previous: Any = None
    for instruction in dis.get_instructions(_run):
        line = instruction.positions.lineno if instruction.positions else None
        value = None
        if instruction.opname == "RETURN_CONST":  # 3.12+
            value = instruction.argval
        elif (
            instruction.opname == "RETURN_VALUE" and previous is not None and previous.opname == "LOAD_CONST"
        ):
            value = previous.argval
        if value in (3, 4) and line:
            lines[value] = line
        previous = instruction
    return lines[3], lines[4]


_SUSPECT_LINE, _VERIFIED_LINE = _marker_lines()


# --------------------------------------------------------------------------- the audit guard

_MEMORY = re.compile(r"(^|/)(mem|pagemap)$")
_REFUSED = frozenset({
    "sys._current_frames", "sys._current_exceptions", "gc.get_objects", "gc.get_referrers",
    "gc.get_referents", "sys.settrace", "sys.setprofile", "sys.addaudithook",
})  # fmt: skip
_WATCHED = _REFUSED | {"object.__setattr__", "open"}


def _guard(taint: Any, notes: list[str]) -> Any:
    """The trial's own audit hook (added after the hardening's): refuses what would reach the
    reporter thread or rewrite the runner's frames and code, and counts (``taint`` only goes up)
    objects whose class is changed (an operand checked, then swapped). Calls no method of what
    it is given. (Setting a class attribute raises no audit event: :func:`_vet` compares the
    trusted classes with what they were when the trial started instead.)"""
    refused, watched, refusal, type_, str_, bytes_ = _REFUSED, _WATCHED, PolicyRefusal, type, str, bytes
    advance, note, module_type, memory = taint.__next__, notes.append, types.ModuleType, _MEMORY.search

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event not in watched:
            return
        if event in refused:
            raise refusal(event, "it would reach into the trial's runner")
        if event == "object.__setattr__":
            name = args[1]
            if type_(name) is not str_:
                return
            if name == "__code__":
                raise refusal("changing a function's __code__", "it would rewrite code the trial runs")
            if name == "__class__" and type_(args[0]) is not module_type:
                advance()
                note("the candidate changed the class of an object")
        elif event == "open":
            path: Any = args[0] if args else None
            if type_(path) is bytes_:
                path = path.decode("utf-8", "replace")
            if type_(path) is str_ and memory(path):
                raise refusal(f"reading {path}", "the trial's own memory is not readable")

    return hook


# --------------------------------------------------------------------------- the reporter thread

_OUTCOME_CLASS = f"{TrialOutcome.__module__}\n{TrialOutcome.__qualname__}\n".encode()
#: The pickle opcodes a report of the main thread may use (protocol 3, what pickle writes for an
#: outcome), with their arguments: that many bytes, -1/-4 a 1/4-byte length and as many bytes, -2
#: two lines. No STOP, no stack or memo tricks, no REDUCE.
_PICKLE_ARGS = {
    ord("("): 0, ord(")"): 0, ord("]"): 0, ord("}"): 0, ord("N"): 0, 0x88: 0, 0x89: 0, 0x85: 0, 0x86: 0,
    0x87: 0, ord("t"): 0, ord("l"): 0, ord("a"): 0, ord("e"): 0, ord("s"): 0, ord("u"): 0, ord("b"): 0,
    0x81: 0, ord("K"): 1, ord("M"): 2, ord("J"): 4, ord("G"): 8, ord("q"): 1, ord("r"): 4, ord("h"): 1,
    ord("j"): 4, ord("X"): -4, ord("B"): -4, ord("C"): -1, 0x8A: -1, ord("c"): -2,
}  # fmt: skip
_INBOX_LIMIT = 32 << 20
_REPORTER_STACK = 1 << 20  # bytes: it calls a few C functions, on bytes
_DUMPS = pickle.dumps  # the main thread's own reference: the candidate may patch the module's


def _reporter(box: list[Any]) -> None:
    """The reporter thread. Holds the only copy of the report token; decides the status from the
    line :func:`_run`'s frame ended on; writes the report and ends the process. Looks up no global
    name; once the candidate runs it calls only C functions, on bytes it read itself, and makes no
    object the garbage collector tracks (a collection here could run a finalizer of the
    candidate's on this thread, next to the token): no tuple, list, slice or iterator."""
    (token, write_fd, inbox, out_fd, err_fd, cap, counts, slot, registered, ack, copied, taint,
     suspect_line, verified_line, run_code, statuses, args_of, outcome_class, limit, read, write, pread,
     lseek, exit_, pack, from_bytes, len_, next_, gc_disable, gc_freeze,
     BaseException_) = box.pop()  # fmt: skip
    code = 70
    try:
        secret = token[:1] + token[1:]  # a copy of its own: the caller's is overwritten
        token = None
        copied.release()
        registered.acquire()
        checks_total = counts[0] if len_(counts) else 0  # given with the candidate, before it runs
        frame = slot[1] if len_(slot) > 1 else None
        if frame is not None and frame.f_code is not run_code:  # read before the candidate runs
            frame = None
        opcode = args_of.get

        def take(data: bytes, size: int) -> bytes:
            while len_(data) < size:
                chunk = read(inbox, size - len_(data))
                if not chunk:
                    exit_(70)
                data = data + chunk
            return data

        def text(value: str) -> Any:
            data = value.encode("utf-8", "surrogatepass")
            return b"X" + len_(data).to_bytes(4, "little") + data

        def output(fd: int) -> Any:
            size = lseek(fd, 0, 2)
            kept = pread(fd, cap, 0).decode("utf-8", "replace")
            return kept + (f"\n[... {size - cap} more characters of output dropped]" if size > cap else "")

        layers = text("layers") + b"("
        for layer in slot[0] if len_(slot) else ():
            layers = layers + text(layer)
        layers = layers + b"t"
        ack.release()  # the candidate runs from now on

        head = read(inbox, 16)
        gc_disable()
        gc_freeze()  # and no collection of what is already there
        head = take(head, 16)
        number = from_bytes(head, "little")
        if number & 0xFFFFFFFF != 0x4D52424E:  # b"NBRM"
            exit_(70)
        status_size, suspect_size, body_size = (
            number >> 32 & 0xFFFFFFFF,
            number >> 64 & 0xFFFFFFFF,
            number >> 96,
        )
        if status_size + suspect_size + body_size > limit:
            exit_(70)
        said_status = take(b"", status_size).decode("utf-8", "replace")
        said_suspect = take(b"", suspect_size).decode("utf-8", "replace")
        body = take(b"", body_size)
        end = len_(body) - 1
        valid = end > 2 and body[0] == 0x80 and body[1] == 3 and body[end] == 46  # PROTO 3 ... STOP
        at = 2
        while valid and at < end:
            argument = opcode(body[at])
            at = at + 1
            if argument is None:
                valid = False
            elif argument > 0:
                at = at + argument
            elif argument == -1:
                at = at + 1 + body[at] if at < end else end + 1
            elif argument == -4:
                at = (
                    at
                    + 4
                    + (
                        body[at] | body[at + 1] << 8 | body[at + 2] << 16 | body[at + 3] << 24
                        if at + 3 < end
                        else end
                    )
                )
            elif argument == -2:
                first = body.find(b"\n", at, end)
                second = body.find(b"\n", first + 1, end) if first >= 0 else -1
                at = second + 1 if second >= 0 else end + 1
            valid = valid and at <= end
        inner = (
            body.removeprefix(b"\x80\x03").removesuffix(b".") if valid else b"c" + outcome_class + b")\x81"
        )
        line = frame.f_lineno if frame is not None else -1
        fields = b""
        if line == verified_line or line == suspect_line:  # noqa: SIM109 - `in (...)` would build a tuple
            status = "passed"
            suspect = ""
            if line == suspect_line:
                suspect = said_suspect or "a check compared an object that cannot be trusted"
            if next_(taint):
                suspect = said_suspect or "the candidate changed a class a check is judged by"
            fields = text("failure") + b"N" + text("check_failures") + b")"
        else:
            status = said_status if said_status in statuses and said_status != "passed" else "refused"
            if status == "refused" and said_status != "refused":
                fields = text("detail") + text(
                    "the trial's runner did not finish, and its report was not its own"
                )
            suspect = ""
        if not valid:
            fields = fields + text("detail") + text("the trial's runner sent a report that could not be read")
        fields = fields + text("status") + text(status) + text("suspect") + text(suspect) + layers
        fields = fields + text("checks_total") + b"J" + checks_total.to_bytes(4, "little", signed=True)
        fields = fields + text("stdout") + text(output(out_fd)) + text("stderr") + text(output(err_fd))
        message = (
            b"\x80\x03C" + len_(secret).to_bytes(1, "little") + secret + inner + b"}(" + fields + b"ub\x86."
        )
        secret = b""
        message = pack(len_(message)) + message
        while message:
            written = write(write_fd, message)
            message = message[written:] if written < len_(message) else b""  # (only if interrupted)
        code = 0
    except BaseException_:
        code = 70
    finally:
        exit_(code)


def _scrub(secret: object) -> None:
    """Overwrite the report token where the callers of :func:`trial_child` keep it in this process
    (their frames, a partial's arguments); the reporter thread has its own copy, out of reach."""
    if _MEMMOVE is not None and type(secret) is bytes and secret:
        _MEMMOVE(id(secret) + sys.getsizeof(b"") - 1, bytes(len(secret)), len(secret))


# --------------------------------------------------------------------------- the main thread


def trusted_kit(namespace: dict[str, Any], methods: frozenset[str] = frozenset()) -> tuple[Any, ...]:
    """What :func:`_vet` trusts, taken now: the trusted classes with their entries for the names an
    assert uses (and ``methods``), and the kit that vets against them. Taken before any candidate
    code runs in this process: a spare trial takes it while it waits for its candidate (see
    :func:`spare_child`), every other trial just before its candidate runs."""
    trusted, entries, fields = _trusted_classes(namespace, _NAMES | methods)
    return trusted, entries, _vet_kit(trusted, entries, fields), methods


def _kits(
    namespace: dict[str, Any], hand: tuple[Any, ...], methods: frozenset[str], ready: tuple[Any, ...] | None
) -> tuple[Any, ...]:
    """The kit :func:`_run` gets (holding those of the functions it calls), made before the candidate
    runs: the trusted classes as they were before it (``ready``, when it covers ``methods``; else
    taken now), and everything the trusted part calls."""
    slot, registered, ack = hand[:3]
    if ready is None or not methods <= (_NAMES | ready[3]):
        ready = trusted_kit(namespace, methods)
    trusted, entries, kv = ready[:3]
    new_loop = asyncio.new_event_loop

    def drive(coroutine: Any) -> Any:  # top-level await (its event loop is the candidate's to break)
        return new_loop().run_until_complete(coroutine)

    ke = (eval, _vet, kv, _evaluate, getattr, type, _DICT, _FLAGS_OF, _HEAP, _TRUTH, _COMPARING,
          _CONTAINING, _ARITHMETIC, _ARGUMENT, _CALLING, _ANYTHING, _MRO, id, trusted, entries,
          (len, isinstance, issubclass, type, id, callable, hasattr))  # fmt: skip
    ks = (eval, type, types.CoroutineType, drive, _evaluate, ke, _vet, kv, _TRUTH, _READING, BaseException)
    kr = (_step, ks, sys._getframe, slot.append, registered.release, ack.acquire, eval, _vet, kv,
          _COMPARING, BaseException)  # fmt: skip
    return kr


def _standalone() -> tuple[Any, ...]:
    """(slot, registered, ack, taint, notes) for a trial without a reporter thread."""
    registered = _thread.allocate_lock()
    registered.acquire()
    return ([()], registered, _thread.allocate_lock(), itertools.count(), [])


def execute_trial(
    spec: TrialSpec,
    namespace: dict[str, Any],
    redactor: Redactor,
    *,
    hand: tuple[Any, ...] | None = None,
    ready: tuple[Any, ...] | None = None,
) -> TrialOutcome:
    """Run ``spec`` in *this* process (only ever inside a trial child) and say what the main thread
    saw. ``hand``: what :func:`trial_child` shares with the reporter thread, which decides the status
    the kernel gets; without one, the outcome is what :func:`_run` returned (nothing checks it).
    ``ready``: this process's :func:`trusted_kit`, taken before anything of the candidate ran."""
    started = time.monotonic()
    code, checks, label = spec.code, tuple(spec.checks), spec.label  # as they are before it runs
    filename = f"<{label}>"
    _register_source(filename, code)
    saved_builtins = dict(vars(builtins))
    hand = hand or _standalone()
    slot, registered, _, taint, notes = hand
    layers = tuple(slot[0]) if slot else ()

    def restore_builtins() -> None:
        # The candidate may have rebound or deleted builtins that capturing and reporting use.
        vars(builtins).update(saved_builtins)

    def finish(status: TrialStatus, done: int, total: int, **fields: Any) -> TrialOutcome:
        restore_builtins()
        return TrialOutcome(
            status,
            checks_total=len(checks),
            started_at=started,
            statements_done=done,
            statements_total=total,
            duration_s=time.monotonic() - started,
            layers=layers,
            **fields,
        )

    try:
        plan = _plan(spec, namespace, filename)
    except SyntaxError as err:
        registered.release()  # no frame: the reporter takes no pass from this trial
        failure = capture_failure(err, code=code, label=label, redactor=redactor)
        return finish("failed", 0, 0, failure=failure)
    total = len(plan[0])
    kr = _kits(namespace, hand, plan[4], ready)
    sys.settrace(None)  # a debugger's trace function could rewrite the runner's frames
    sys.setprofile(None)
    sys.addaudithook(_guard(taint, notes))
    out: list[Any] = []
    ended = _run(kr, plan, namespace, out)
    restore_builtins()
    if ended == 1:
        _, error, done = next(entry for entry in out if entry[0] == "error")
        if isinstance(error, SystemExit):
            return finish("exited", done, total, detail=f"sys.exit({error.code!r}) was called")
        if isinstance(error, KeyboardInterrupt):
            return finish("interrupted", done, total, detail="KeyboardInterrupt")
        failure = capture_failure(
            error,
            code=code,
            code_filename=filename,
            user_globals=namespace,
            label=label,
            redactor=redactor,
            run_unsafe=_direct,
        )
        status, detail = _classify(error)
        return finish(status, done, total, failure=replace(failure, statements_done=done), detail=detail)
    values = [entry[1] for entry in out if entry[0] == "value"]
    if values and values[-1] is not None:
        with contextlib.suppress(Exception):
            print(f"Out: {summarize_value(values[-1], max_chars=500)}")
    if ended == 2:
        failures = []
        for entry in out:
            if entry[0] != "check":
                continue
            where = f"check {entry[1]}"
            failures.append(
                capture_failure(
                    entry[2],
                    code=checks[entry[1] - 1],
                    code_filename=f"<{where}>",
                    user_globals=namespace,
                    label=where,
                    redactor=redactor,
                    run_unsafe=_direct,
                )
            )
        return finish("failed", total, total, check_failures=tuple(failures))
    suspect = next((entry[1] for entry in out if entry[0] == "suspect"), "") if ended == 3 else ""
    if notes:  # objects whose class the candidate changed (the audit guard saw it)
        suspect = "; ".join(dict.fromkeys([*([suspect] if suspect else []), *notes]))
    return finish("passed", total, total, suspect=suspect)


def _hide_nbrefine() -> dict[str, Any]:
    """Take nbrefine's modules out of ``sys.modules`` (this process keeps its own references)
    and refuse new imports of them; returns what was taken, for :func:`_unhide_nbrefine`."""
    hidden = {
        name: module
        for name, module in sys.modules.items()
        if name.startswith("nbrefine.") or name == "nbrefine"
    }
    for name in hidden:
        del sys.modules[name]
    sys.meta_path.insert(0, _NoNbrefineInTrials())
    return hidden


def _unhide_nbrefine(hidden: dict[str, Any]) -> None:
    # Pickling the report looks its classes up by module name.
    sys.meta_path[:] = [finder for finder in sys.meta_path if not isinstance(finder, _NoNbrefineInTrials)]
    sys.modules.update(hidden)


def _message(outcome: TrialOutcome | None, detail: str = "") -> bytes:
    """What the main thread tells the reporter: its status, why a pass is suspect, its outcome
    pickled (none, or an unreadable one: the reporter then sends a bare outcome with its status)."""
    body = b""
    status, suspect = "failed", detail
    if outcome is not None:
        status, suspect = outcome.status, outcome.suspect
        with contextlib.suppress(Exception):
            body = _DUMPS(outcome, protocol=3)
    if len(body) > _INBOX_LIMIT // 2:
        body = b""
    said, why = str(status).encode()[:64], str(suspect).encode("utf-8", "replace")[:8000]
    sizes = b"".join(len(part).to_bytes(4, "little") for part in (said, why, body))
    return b"NBRM" + sizes + said + why + body


_Streams = tuple[Any, Any, int, int]  # the output and error files, the reporter's inbox and outbox
_Hand = tuple[Any, Any, Any, Any, list[int]]  # shared with the reporter: slot, locks, taint, checks' count


def _private_streams(scratch: str) -> _Streams:
    """The trial's own streams (files in its scratch folder), input refused, temp files in scratch."""
    enter_child()
    capture = open(os.path.join(scratch, ".trial-output"), "w+b")  # noqa: SIM115 - lives until os._exit
    os.dup2(capture.fileno(), 1)
    os.dup2(capture.fileno(), 2)
    errors = open(os.path.join(scratch, ".trial-stderr"), "w+b")  # noqa: SIM115 - likewise
    sys.stdout, sys.stderr = _text_stream(capture.fileno()), _text_stream(errors.fileno())
    builtins.input = _NO_INPUT
    sys.dont_write_bytecode = True
    os.environ["TMPDIR"] = scratch
    tempfile.tempdir = scratch
    inbox, outbox = os.pipe()
    return capture, errors, inbox, outbox


def _harden_trial(
    policy: TrialPolicy,
    timeout_s: float | None,
    redactor: Redactor,
    options: SandboxOptions,
    scratch: str,
    keep: set[int],
    prepared: Prepared | None,
) -> list[str]:
    return harden(
        policy,
        scratch,
        timeout_s=timeout_s,
        keep_fds=keep,
        hidden_paths=options.hidden_paths,
        is_secret_env=redactor.is_secret_env,
        prepared=prepared,
    )


def _keep(write_fd: int, streams: _Streams) -> set[int]:
    """The descriptors a trial keeps through fd hygiene."""
    capture, errors, inbox, outbox = streams
    return {write_fd, capture.fileno(), errors.fileno(), inbox, outbox}


def trial_child(
    write_fd: int,
    spec: TrialSpec,
    namespace: dict[str, Any],
    redactor: Redactor,
    options: SandboxOptions,
    scratch: str,
    token: bytes,
    prepared: Prepared | None = None,
) -> None:
    streams = _private_streams(scratch)
    layers: list[str] = []
    hidden: dict[str, Any] = {}
    if options.harden:
        keep = _keep(write_fd, streams)
        layers = _harden_trial(spec.policy, spec.timeout_s, redactor, options, scratch, keep, prepared)
        hidden = _hide_nbrefine()
    hand = _start_reporter(write_fd, options, token, streams)
    _run_reported(spec, namespace, redactor, streams, hand, tuple(layers), hidden)


def spare_child(
    write_fd: int,
    spec_fd: int,
    policy: TrialPolicy,
    namespace: dict[str, Any],
    redactor: Redactor,
    options: SandboxOptions,
    scratch: str,
    token: bytes,
    prepared: Prepared | None,
) -> None:
    """A trial made ahead of its candidate (the snapshot process keeps one, where trials are
    hardened): the streams, every layer :func:`trial_child` applies for ``policy`` in the same
    order, nbrefine hidden, the reporter thread started and what an assert may trust taken
    (:func:`trusted_kit`); only the CPU seconds wait for the
    candidate (they depend on its timeout, and must not count the wait). Then it waits for its
    spec on ``spec_fd`` (see :func:`spare_order`) and goes on exactly as :func:`trial_child` does.
    Returns, having run nothing, when the snapshot closes first."""
    streams = _private_streams(scratch)
    keep = {*_keep(write_fd, streams), spec_fd}
    layers = _harden_trial(policy, None, redactor, options, scratch, keep, prepared)
    hidden = _hide_nbrefine()
    hand = _start_reporter(write_fd, options, token, streams)
    ready = trusted_kit(namespace)  # (~2 ms a trial no longer waits for: nothing has run here yet)
    spec = _spec_for(spec_fd, policy)
    if spec is not None:
        layers = limit_cpu_seconds(spec.policy, spec.timeout_s, layers)
        _run_reported(spec, namespace, redactor, streams, hand, tuple(layers), hidden, ready)


def spare_order(spec: TrialSpec) -> dict[str, Any]:
    """What the snapshot sends its spare: the spec's fields but the policy (the spare runs its
    own, the one it was hardened for; the snapshot hands it only specs of that policy). Plain
    values only, so that the spare unpickles them with no class at all."""
    order = {field.name: getattr(spec, field.name) for field in dataclasses.fields(spec)}
    del order["policy"]
    return order


def _spec_for(spec_fd: int, policy: TrialPolicy) -> TrialSpec | None:
    """The spare's spec, read whole before any of it runs; None when the pipe closed first.

    Only the snapshot writes this pipe (it closes its end once the order is written; a trial
    forked meanwhile has its copy replaced by /dev/null before its candidate runs, a fork pickling
    values closes it); even so, the order is unpickled as untrusted (no class, no callable), and a
    malformed one ends the spare."""
    try:
        order = read_msg(spec_fd, None)
    except (EOFError, OSError):
        return None
    except Exception:
        os._exit(70)
    finally:
        os.close(spec_fd)  # the candidate holds nothing a trial forked on demand does not
    try:
        return TrialSpec(**order, policy=policy)
    except TypeError:
        os._exit(70)


def _start_reporter(write_fd: int, options: SandboxOptions, token: bytes, streams: _Streams) -> _Hand:
    """Start the reporter thread, once the hardening is done (a process that has started a thread
    can enter no user namespace of its own, and seccomp and Landlock confine the thread that
    installs them and the threads it starts), and before anything of the candidate is known: it
    needs only the checks' count, given with the candidate. It takes the token; the copy its
    callers keep is overwritten here."""
    capture, errors, inbox, _ = streams
    slot: list[Any] = []
    registered, ack, copied = _thread.allocate_lock(), _thread.allocate_lock(), _thread.allocate_lock()
    for lock in (registered, ack, copied):
        lock.acquire()
    taint = itertools.count()
    counts: list[int] = []
    box = [(
        token, write_fd, inbox, capture.fileno(), errors.fileno(), options.output_cap, counts,
        slot, registered, ack, copied, taint, _SUSPECT_LINE, _VERIFIED_LINE, _run.__code__, TRIAL_STATUSES,
        dict(_PICKLE_ARGS), _OUTCOME_CLASS, _INBOX_LIMIT, os.read, os.write, os.pread, os.lseek, os._exit,
        HEADER.pack, int.from_bytes, len, next, gc.disable, gc.freeze, BaseException,
    )]  # fmt: skip
    _thread.stack_size(_REPORTER_STACK)  # within the address space the hardening left
    _thread.start_new_thread(_reporter, (box,))
    _thread.stack_size(0)
    copied.acquire()  # the reporter has its own copy of the token now
    _scrub(token)
    return slot, registered, ack, taint, counts


def _run_reported(
    spec: TrialSpec,
    namespace: dict[str, Any],
    redactor: Redactor,
    streams: _Streams,
    hand: _Hand,
    layers: tuple[str, ...],
    hidden: dict[str, Any],
    ready: tuple[Any, ...] | None = None,
) -> None:
    """The candidate, and its report through the reporter thread; ends the process."""
    slot, registered, ack, taint, counts = hand
    counts.append(len(spec.checks))  # read by the reporter before the candidate runs, as the layers are
    slot.append(layers)
    message = b""
    try:
        outcome = execute_trial(
            spec, namespace, redactor, hand=(slot, registered, ack, taint, []), ready=ready
        )
        _unhide_nbrefine(hidden)
        message = _message(outcome)
    except BaseException as err:  # the runner broke, or the candidate broke what it uses
        message = _message(None, f"the trial's runner failed: {type(err).__name__}")
    finally:
        if registered.locked():  # it broke before it ran anything: the reporter must not wait
            registered.release()
    outbox = streams[3]
    while message:
        message = message[os.write(outbox, message) :]
    stop = _thread.allocate_lock()
    stop.acquire()
    stop.acquire()  # the reporter ends the process
