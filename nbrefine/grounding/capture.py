"""Turn a live exception into a :class:`Failure`: plain, picklable data for the prompt.

Works the same in the kernel (the user's cell) and in a trial child (a candidate): the
frames that belong to the code under repair are recognised by their file name, the
frames of other notebook cells by their globals being the user namespace, and library
frames are folded into a count. No IPython import.

May import: the standard library, pure_eval and the grounding modules below it (summaries,
redaction).
"""

from __future__ import annotations

import ast
import linecache
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from types import FrameType, TracebackType
from typing import Any, TypeVar

import pure_eval

from .redaction import Redactor
from .summaries import ValueSummary

__all__ = ["Failure", "FrameInfo", "capture_failure", "statement_index", "top_level_statements"]

R = TypeVar("R")
#: Runs a callable somewhere it may have side effects (a throwaway fork); used to
#: evaluate assert operands that call code. ``None``: such operands are not evaluated.
UnsafeRunner = Callable[[Callable[[], R]], R]

_OPERAND_CHARS = 200
_VALUE_CHARS = 240
_MAX_VALUES = 12
_MESSAGE_CHARS = 2000


@dataclass(frozen=True)
class FrameInfo:
    """One traceback frame, reduced to what a prompt needs."""

    label: str  # "cell", "candidate", "check 1", "another cell", or a library file path
    lineno: int
    function: str
    line: str
    in_code: bool  # part of the code under repair

    def render(self) -> str:
        where = f"{self.label}, line {self.lineno}"
        if self.function not in ("<module>", ""):
            where += f", in {self.function}"
        return f"  {where}\n    {self.line.strip()}" if self.line.strip() else f"  {where}"


@dataclass(frozen=True)
class Failure:
    """What went wrong, where, and with which values."""

    error_type: str
    message: str
    where: str = "cell"  # the label of the code under repair, or "check N"
    lineno: int | None = None  # failing line inside the code under repair (1-based)
    line: str = ""
    frames: tuple[FrameInfo, ...] = ()
    library_frames_hidden: int = 0
    values: tuple[ValueSummary, ...] = ()
    assertion: str | None = None  # pytest-style operands of a failed assert
    statements_done: int = 0  # top-level statements of the code that completed before the failure
    notes: tuple[str, ...] = field(default_factory=tuple)

    def signature(self) -> str:
        """Identifies "the same error again" across candidates (ignores line numbers)."""
        return f"{self.error_type}|{self.message.strip()[:200]}|{self.line.strip()}"

    def one_line(self) -> str:
        place = f" at {self.where} line {self.lineno}" if self.lineno else f" in {self.where}"
        detail = self.message.strip().splitlines()[0] if self.message.strip() else ""
        if not detail and self.assertion:
            lines = self.assertion.splitlines()
            wheres = [line.strip() for line in lines[1:] if line.strip().startswith("where ")]
            detail = lines[0] + (f" ({wheres[0]})" if wheres else "")
        return f"{self.error_type}{place}: {detail}"[:300] if detail else f"{self.error_type}{place}"

    def render(self) -> str:
        """The labelled text block used in prompts and terminal output."""
        parts = [f"{self.error_type}: {self.message}".rstrip(": ")]
        if self.lineno:
            parts.append(f"Failing line ({self.where} line {self.lineno}): {self.line.strip()}")
        if self.assertion:
            parts.append("Assertion operands:\n" + self.assertion)
        if self.frames:
            tb = "\n".join(frame.render() for frame in self.frames)
            hidden = self.library_frames_hidden
            if hidden:
                tb += f"\n  [... {hidden} library frame(s) not shown]"
            parts.append("Traceback (most recent call last):\n" + tb)
        if self.values:
            rendered = "\n".join(f"  {v.name} = {_indent(v.text)}" for v in self.values)
            parts.append("Values at the failing line:\n" + rendered)
        parts.extend(self.notes)
        return "\n".join(parts)


def _indent(text: str) -> str:
    return text.replace("\n", "\n    ")


def top_level_statements(code: str) -> list[ast.stmt]:
    """The top-level statements of ``code`` (empty when it does not parse)."""
    try:
        return list(ast.parse(code).body)
    except (SyntaxError, ValueError):
        return []


def statement_index(code: str, lineno: int | None) -> int:
    """How many top-level statements of ``code`` come before the one holding ``lineno``."""
    if lineno is None:
        return 0
    for index, node in enumerate(top_level_statements(code)):
        if node.lineno <= lineno <= (node.end_lineno or node.lineno):
            return index
    return 0


def capture_failure(
    exc: BaseException,
    *,
    code: str,
    code_filename: str | None = None,
    user_globals: Mapping[str, Any] | None = None,
    label: str = "cell",
    redactor: Redactor | None = None,
    run_unsafe: UnsafeRunner[list[str]] | None = None,
) -> Failure:
    """Describe ``exc`` raised by ``code``.

    ``code_filename`` is the file name the code was compiled under; when ``None`` the first
    module-level frame whose globals are ``user_globals`` is taken as the code (that is how
    IPython runs a cell). ``run_unsafe`` evaluates assert operands that call functions.
    """
    redactor = redactor or Redactor(environ={})
    if user_globals is not None:
        redactor.learn_namespace(user_globals)
    error_type = _type_name(exc)
    message = _message(exc, redactor)
    if isinstance(exc, SyntaxError):
        return _syntax_failure(exc, error_type, code, label, message)

    tb_items = list(traceback.walk_tb(exc.__traceback__))
    tbs = _tracebacks(exc.__traceback__)
    if code_filename is None:
        code_filename = _guess_code_filename(tbs, user_globals)
    frames: list[FrameInfo] = []
    hidden = 0
    last_user: TracebackType | None = None
    last_code_line: int | None = None
    for tb, (frame, lineno) in zip(tbs, tb_items, strict=True):
        filename = frame.f_code.co_filename
        in_code = filename == code_filename
        is_user = in_code or (user_globals is not None and frame.f_globals is user_globals)
        if not is_user:
            hidden += bool(frames)  # frames before the first user frame are the shell's own
            continue
        if hidden and frames:
            frames.append(FrameInfo(f"[{hidden} library frame(s)]", 0, "", "", False))
            hidden = 0
        line = linecache.getline(filename, lineno)
        frames.append(
            FrameInfo(label if in_code else "another cell", lineno, frame.f_code.co_name, line, in_code)
        )
        last_user = tb
        if in_code:
            last_code_line = lineno

    failing_line = (
        linecache.getline(code_filename, last_code_line) if code_filename and last_code_line else ""
    )
    if not failing_line and last_code_line:
        failing_line = _nth_line(code, last_code_line)
    values: tuple[ValueSummary, ...] = ()
    assertion = None
    if last_user is not None:
        stmt = _statement_at(last_user.tb_frame.f_code.co_filename, last_user.tb_lineno)
        if stmt is not None:
            values = _values_of(stmt, last_user.tb_frame, redactor)
            if isinstance(exc, AssertionError) and isinstance(stmt, ast.Assert):
                assertion = _explain_assert(stmt, last_user.tb_frame, redactor, run_unsafe)
    return Failure(
        error_type=error_type,
        message=message,
        where=label,
        lineno=last_code_line,
        line=failing_line.rstrip("\n"),
        frames=tuple(frames),
        library_frames_hidden=hidden,
        values=values,
        assertion=assertion,
        statements_done=statement_index(code, last_code_line),
    )


def _type_name(exc: BaseException) -> str:
    cls = type(exc)
    module = cls.__module__
    return cls.__qualname__ if module in ("builtins", "__main__") else f"{module}.{cls.__qualname__}"


def _message(exc: BaseException, redactor: Redactor) -> str:
    """The exception's message, redacted before it is cut (a secret across the cut is not shown
    in part). A message is often built from a secret: ``"login failed: password=" + pw``."""
    try:
        text = str(exc)
    except Exception as err:  # an exception whose __str__ raises must not break capture
        text = f"<str() failed: {type(err).__name__}>"
    redacted = redactor.redact_text(text[: _MESSAGE_CHARS + 4096])
    if len(redacted) <= _MESSAGE_CHARS:
        return redacted
    return redactor.guard_cut(redacted[:_MESSAGE_CHARS])


def _syntax_failure(exc: SyntaxError, error_type: str, code: str, label: str, message: str) -> Failure:
    lineno = exc.lineno
    line = exc.text or (_nth_line(code, lineno) if lineno else "")
    # A SyntaxError from inside an imported module is not a line of this code.
    if lineno and exc.text and _nth_line(code, lineno).strip() != exc.text.strip():
        lineno = None
    pointer = ""
    if line and exc.offset:
        pointer = "\n    " + " " * max(exc.offset - 1 - (len(line) - len(line.lstrip())), 0) + "^"
    frame = FrameInfo(label, lineno or 0, "", line.rstrip("\n") + pointer, True)
    return Failure(
        error_type=error_type,
        message=exc.msg or message,
        where=label,
        lineno=lineno,
        line=line.rstrip("\n"),
        frames=(frame,) if lineno else (),
    )


def _tracebacks(tb: TracebackType | None) -> list[TracebackType]:
    items = []
    while tb is not None:
        items.append(tb)
        tb = tb.tb_next
    return items


def _guess_code_filename(tbs: list[TracebackType], user_globals: Mapping[str, Any] | None) -> str | None:
    for tb in tbs:
        frame = tb.tb_frame
        if frame.f_code.co_name == "<module>" and (user_globals is None or frame.f_globals is user_globals):
            return frame.f_code.co_filename
    return None


def _nth_line(code: str, lineno: int | None) -> str:
    lines = code.splitlines()
    return lines[lineno - 1] if lineno and 0 < lineno <= len(lines) else ""


def _statement_at(filename: str, lineno: int) -> ast.stmt | None:
    """The innermost statement of ``filename`` (as linecache has it) whose header holds ``lineno``."""
    source = "".join(linecache.getlines(filename))
    if not source:
        return None
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    best: ast.stmt | None = None
    for node in ast.walk(tree):
        if not isinstance(node, ast.stmt):
            continue
        end = node.end_lineno or node.lineno
        body = getattr(node, "body", None)
        if isinstance(body, list) and body:
            end = max(body[0].lineno - 1, node.lineno)  # a compound statement: its header only
        if node.lineno <= lineno <= end and (best is None or node.lineno >= best.lineno):
            best = node
    return best


def _values_of(stmt: ast.stmt, frame: FrameType, redactor: Redactor) -> tuple[ValueSummary, ...]:
    """Safely evaluable names, attributes and subscripts on the failing statement (pure_eval)."""
    root: ast.AST = stmt
    if isinstance(stmt, (ast.If, ast.While)):
        root = stmt.test
    elif isinstance(stmt, (ast.For, ast.AsyncFor)):
        root = stmt.iter
    elif isinstance(stmt, (ast.With, ast.AsyncWith)):
        root = ast.Tuple(elts=[item.context_expr for item in stmt.items], ctx=ast.Load())
    elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return ()
    try:
        evaluator = pure_eval.Evaluator.from_frame(frame)
        grouped = evaluator.interesting_expressions_grouped(root)
    except Exception:  # pure_eval is best effort; a failure here must not hide the real error
        return ()
    summaries = []
    for nodes, value in sorted(grouped, key=lambda pair: (pair[0][0].lineno, pair[0][0].col_offset))[
        :_MAX_VALUES
    ]:
        name = ast.unparse(nodes[0])
        if callable(value) and not hasattr(value, "shape"):
            continue  # functions and classes say little; their names are in the source already
        summaries.append(redactor.summarize(name, value, max_chars=_VALUE_CHARS))
    return tuple(summaries)


def _explain_assert(
    stmt: ast.Assert, frame: FrameType, redactor: Redactor, run_unsafe: UnsafeRunner[list[str]] | None
) -> str:
    """``assert total == 10`` / ``  where total = 7``, like pytest."""
    operands = _assert_operands(stmt.test)
    lines = [f"assert {ast.unparse(stmt.test)}"]
    evaluator = pure_eval.Evaluator.from_frame(frame)
    pending: list[ast.expr] = []
    rendered: dict[int, str] = {}
    for node in operands:
        try:
            rendered[id(node)] = _render_operand(ast.unparse(node), _cheap_value(node, evaluator), redactor)
        except pure_eval.CannotEval:
            pending.append(node)
        except Exception as err:
            rendered[id(node)] = f"<error: {type(err).__name__}>"
    if pending:
        texts = _evaluate_with_calls(pending, frame, redactor, run_unsafe)
        rendered.update({id(node): text for node, text in zip(pending, texts, strict=True)})
    for node in operands:
        expr = ast.unparse(node)
        text = rendered[id(node)]
        if text != expr:
            lines.append(f"  where {expr} = {text}")
    if stmt.msg is not None:
        lines.append(f"  message: {ast.unparse(stmt.msg)}")
    return "\n".join(lines)


# Read-only, O(1) attributes of numpy/pandas objects: safe to read in the live kernel, and
# reading them avoids forking the kernel just to show ``arr.shape`` or ``df.columns``.
_CHEAP_ATTRIBUTES = frozenset(
    {"shape", "size", "ndim", "dtype", "dtypes", "columns", "index", "name", "nbytes"}
)
_CHEAP_MODULES = ("numpy", "pandas")


def _is_array_like(value: object) -> bool:
    return type(value).__module__.split(".")[0] in _CHEAP_MODULES


def _cheap_value(node: ast.expr, evaluator: pure_eval.Evaluator) -> object:
    """pure_eval's value, or a cheap read-only attribute / ``len()`` of a numpy/pandas object."""
    try:
        return evaluator[node]
    except pure_eval.CannotEval:
        pass
    if isinstance(node, ast.Attribute) and node.attr in _CHEAP_ATTRIBUTES:
        base = _cheap_value(node.value, evaluator)
        if _is_array_like(base):
            return getattr(base, node.attr)
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        base = _cheap_value(node.value, evaluator)
        if _is_array_like(base):
            return base[node.slice.value]  # type: ignore[index]
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "len"
        and len(node.args) == 1
        and not node.keywords
    ):
        arg = _cheap_value(node.args[0], evaluator)
        if _is_array_like(arg) or isinstance(arg, (list, tuple, dict, set, str, bytes)):
            return len(arg)  # type: ignore[arg-type]
    raise pure_eval.CannotEval


def _assert_operands(test: ast.expr) -> list[ast.expr]:
    """The sub-expressions worth showing: both sides of each comparison, through and/or/not."""
    if isinstance(test, ast.Compare):
        nodes = [test.left, *test.comparators]
    elif isinstance(test, ast.BoolOp):
        nodes = [operand for value in test.values for operand in _assert_operands(value)]
    elif isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        nodes = _assert_operands(test.operand)
    else:
        nodes = [test]
    return [node for node in nodes if not _is_literal(node)]


def _is_literal(node: ast.expr) -> bool:
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


def _render_operand(expr: str, value: object, redactor: Redactor) -> str:
    return redactor.summarize(expr, value, max_chars=_OPERAND_CHARS).text


def _evaluate_with_calls(
    nodes: list[ast.expr], frame: FrameType, redactor: Redactor, run_unsafe: UnsafeRunner[list[str]] | None
) -> list[str]:
    if run_unsafe is None:
        return ["<not re-evaluated: it calls code>" for _ in nodes]
    sources = [ast.unparse(node) for node in nodes]
    f_globals, f_locals = frame.f_globals, dict(frame.f_locals)

    def evaluate() -> list[str]:
        out = []
        for source in sources:
            try:
                value = eval(source, f_globals, f_locals)  # in a throwaway fork or a trial child only
            except Exception as err:
                out.append(f"<raised {type(err).__name__}: {err}>"[:_OPERAND_CHARS])
            else:
                out.append(_render_operand(source, value, redactor))
        return out

    try:
        return run_unsafe(evaluate)
    except Exception as err:
        return [f"<could not evaluate: {err}>"[:_OPERAND_CHARS] for _ in nodes]


def with_notes(failure: Failure, *notes: str) -> Failure:
    """A copy of ``failure`` with extra lines appended to its rendering."""
    return replace(failure, notes=failure.notes + tuple(notes))
