"""What runs inside a trial process (a fork, or the spawn worker): private streams, hardening,
the candidate statement by statement, the extra checks, the suspect-assert check, and the
report written back to the kernel. nbrefine's own modules are hidden from the candidate while
it runs (it may not patch the checks it is judged by).

May import the standard library, the sibling modules of this package and the grounding
modules (failure capture, value summaries, redaction).
"""

from __future__ import annotations

import ast
import asyncio
import builtins
import contextlib
import faulthandler
import importlib.abc
import inspect
import io
import linecache
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from ..grounding import Failure, Redactor, capture_failure, summarize_value
from .hardening import PolicyRefusal, Prepared, harden
from .trial import FLOOD_LIMIT, SandboxOptions, TrialOutcome, TrialSpec, TrialStatus
from .wire import write_msg

__all__ = ["enter_child", "execute_trial", "run_checks", "trial_child"]

R = TypeVar("R")


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


class _CappedText(io.TextIOBase):
    """A text stream that keeps the first ``cap`` characters and counts the rest.

    Past ``flood_limit`` characters it calls ``on_flood`` (which ends the trial)."""

    def __init__(self, cap: int, flood_limit: int = FLOOD_LIMIT, on_flood: Callable[[], None] | None = None):
        self.cap = cap
        self.flood_limit = flood_limit
        self.on_flood = on_flood
        self.parts: list[str] = []
        self.size = 0
        self.dropped = 0

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        room = self.cap - self.size
        if room > 0:
            self.parts.append(text[:room])
            self.size += min(len(text), room)
        self.dropped += max(len(text) - max(room, 0), 0)
        if self.dropped > self.flood_limit and self.on_flood is not None:
            self.on_flood()
        return len(text)

    def getvalue(self) -> str:
        text = "".join(self.parts)
        return text + (f"\n[... {self.dropped} more characters of output dropped]" if self.dropped else "")


def _register_source(filename: str, code: str) -> None:
    linecache.cache[filename] = (len(code), None, code.splitlines(keepends=True), filename)


def _exec_statement(node: ast.stmt, filename: str, namespace: dict[str, Any], is_last: bool) -> object:
    """Run one top-level statement; return the value of a last bare expression."""
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    if is_last and isinstance(node, ast.Expr):
        code = compile(ast.Expression(node.value), filename, "eval", flags=flags, dont_inherit=True)
        value = eval(code, namespace)
    else:
        module = ast.Module(body=[node], type_ignores=[])
        code = compile(module, filename, "exec", flags=flags, dont_inherit=True)
        value = eval(code, namespace)
        if not inspect.iscoroutine(value):
            return None
    if inspect.iscoroutine(value):
        value = asyncio.new_event_loop().run_until_complete(value)
    return value


def _direct(fn: Callable[[], R]) -> R:
    return fn()


def run_checks(
    checks: Sequence[str],
    namespace: dict[str, Any],
    redactor: Redactor,
    *,
    run_unsafe: Callable[[Callable[[], list[str]]], list[str]] | None = None,
) -> list[Failure]:
    """Run every extra check (statements such as ``assert f(2) == 4``); return all failures."""
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
        current = current.__cause__ or current.__context__
    return "failed", ""


def execute_trial(spec: TrialSpec, namespace: dict[str, Any], redactor: Redactor) -> TrialOutcome:
    """Run ``spec`` in *this* process. Only ever called inside a trial child."""
    started = time.monotonic()
    filename = f"<{spec.label}>"
    _register_source(filename, spec.code)
    done, total = 0, 0
    saved_builtins = dict(vars(builtins))

    def restore_builtins() -> None:
        # The candidate may have rebound or deleted builtins that capturing and reporting use.
        vars(builtins).update(saved_builtins)

    def finish(status: TrialStatus, **fields: Any) -> TrialOutcome:
        restore_builtins()
        return TrialOutcome(
            status,
            checks_total=len(spec.checks),
            started_at=started,
            statements_done=done,
            statements_total=total,
            duration_s=time.monotonic() - started,
            **fields,
        )

    try:
        tree = ast.parse(spec.code, filename)
    except SyntaxError as err:
        return finish(
            "failed", failure=capture_failure(err, code=spec.code, label=spec.label, redactor=redactor)
        )
    total = len(tree.body)
    try:
        for index, node in enumerate(tree.body):
            value = _exec_statement(node, filename, namespace, index == total - 1)
            done += 1
            if value is not None:
                print(f"Out: {summarize_value(value, max_chars=500)}")
    except Exception as err:
        restore_builtins()
        failure = capture_failure(
            err,
            code=spec.code,
            code_filename=filename,
            user_globals=namespace,
            label=spec.label,
            redactor=redactor,
            run_unsafe=_direct,
        )
        status, detail = _classify(err)
        return finish(status, failure=replace(failure, statements_done=done), detail=detail)
    except SystemExit as err:
        return finish("exited", detail=f"sys.exit({err.code!r}) was called")
    except KeyboardInterrupt:
        return finish("interrupted", detail="KeyboardInterrupt")
    restore_builtins()
    check_failures = tuple(run_checks(spec.checks, namespace, redactor, run_unsafe=_direct))
    if check_failures:
        return finish("failed", check_failures=check_failures)
    return finish("passed", suspect=_suspect_asserts(tree, spec.checks, namespace, filename))


def _defined_in(value: object, filename: str) -> str | None:
    """The name of ``value``'s class when the candidate (code compiled from ``filename``)
    defined it or any method of it (``float`` subclass whose ``__eq__`` is always True)."""
    for klass in type(value).__mro__:
        for attribute in list(vars(klass).values()):
            function = getattr(attribute, "__func__", attribute)
            code = getattr(function, "__code__", None)
            if code is not None and getattr(code, "co_filename", None) == filename:
                return type(value).__name__
    return None


def _assert_operands(statements: Sequence[ast.stmt]) -> list[tuple[ast.Assert, list[ast.expr]]]:
    """Asserts outside functions and classes, with the expressions they compare."""
    found: list[tuple[ast.Assert, list[ast.expr]]] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            return
        if isinstance(node, ast.Assert):
            test = node.test
            operands = [test]
            if isinstance(test, ast.Compare):
                operands += [test.left, *test.comparators]
            elif isinstance(test, ast.UnaryOp):
                operands.append(test.operand)
            found.append((node, operands))
        for child in ast.iter_child_nodes(node):
            visit(child)

    for statement in statements:
        visit(statement)
    return found


def _suspect_asserts(
    tree: ast.Module, checks: Sequence[str], namespace: dict[str, Any], filename: str
) -> str:
    """Why a pass cannot count as verified: a check whose operands are of a class the candidate
    defined (they can compare equal to anything). Operands are evaluated again in this trial
    process (after the pass), so their side effects stay here."""
    statements: list[ast.stmt] = list(tree.body)
    for check in checks:
        with contextlib.suppress(SyntaxError):
            statements += ast.parse(check).body
    for node, operands in _assert_operands(statements):
        for operand in operands:
            if isinstance(operand, ast.Constant):
                continue
            try:
                expression = compile(ast.Expression(operand), filename, "eval", dont_inherit=True)
                value = eval(expression, namespace)
            except Exception:
                continue
            name = _defined_in(value, filename)
            if name is not None:
                shown = ast.unparse(node)[:120]
                return f"`{shown}` compares an object of class {name}, which the candidate defined"
    return ""


def _no_input(*_args: object, **_kwargs: object) -> str:
    raise RuntimeError("input() is not available in a trial run")


class _NoNbrefineInTrials(importlib.abc.MetaPathFinder):
    """Candidate code may not import nbrefine (to patch the checks it is judged by)."""

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> None:
        if fullname == "nbrefine" or fullname.startswith("nbrefine."):
            raise ImportError(f"{fullname} cannot be imported in a trial run")
        return None


def _hide_nbrefine() -> dict[str, Any]:
    """Take nbrefine's modules out of ``sys.modules`` (this process keeps its own references)
    and refuse new imports of them; returns what was taken, for :func:`_unhide_nbrefine`."""
    hidden = {name: module for name, module in sys.modules.items() if name.split(".")[0] == "nbrefine"}
    for name in hidden:
        del sys.modules[name]
    sys.meta_path.insert(0, _NoNbrefineInTrials())
    return hidden


def _unhide_nbrefine(hidden: dict[str, Any]) -> None:
    # Pickling the report looks its classes up by module name.
    sys.meta_path[:] = [finder for finder in sys.meta_path if not isinstance(finder, _NoNbrefineInTrials)]
    sys.modules.update(hidden)


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
    enter_child()
    capture = open(os.path.join(scratch, ".trial-output"), "w+b")  # noqa: SIM115 - lives until os._exit
    os.dup2(capture.fileno(), 1)
    os.dup2(capture.fileno(), 2)

    saved_builtins = dict(vars(builtins))
    hidden: dict[str, Any] = {}

    def report(outcome: TrialOutcome) -> None:
        vars(builtins).update(saved_builtins)  # see execute_trial: the candidate may have changed them
        _unhide_nbrefine(hidden)
        capture.seek(0)
        raw = capture.read(options.output_cap).decode("utf-8", "replace")
        full = replace(outcome, stdout=stdout.getvalue() + raw, stderr=stderr.getvalue())
        write_msg(write_fd, (token, full))

    def flood() -> None:
        detail = f"more than {options.flood_limit:,} characters of output; stopped"
        report(TrialOutcome("output_limit", detail=detail, checks_total=len(spec.checks), layers=layers))
        os._exit(0)

    layers: tuple[str, ...] = ()
    stdout = _CappedText(options.output_cap, options.flood_limit, flood)
    stderr = _CappedText(options.output_cap, options.flood_limit, flood)
    sys.stdout, sys.stderr = stdout, stderr
    builtins.input = _no_input
    sys.dont_write_bytecode = True
    os.environ["TMPDIR"] = scratch
    tempfile.tempdir = scratch
    if options.harden:
        layers = tuple(
            harden(
                spec.policy,
                scratch,
                timeout_s=spec.timeout_s,
                keep_fds={write_fd, capture.fileno()},
                hidden_paths=options.hidden_paths,
                is_secret_env=redactor.is_secret_env,
                prepared=prepared,
            )
        )
        hidden = _hide_nbrefine()
    report(replace(execute_trial(spec, namespace, redactor), layers=layers))
