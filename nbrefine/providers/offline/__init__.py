"""Quick fixes without a model: deterministic candidates grounded in the live kernel state.

:class:`OfflineProvider` reads the structured :class:`~nbrefine.providers.base.RepairContext`
(the code, how it failed, the objects it saw) and proposes the smallest edit that a precise
error message pins down: a misspelt name, attribute, column or module, a missing import,
a missing ``global``, a str/int mix-up, and the common syntax slips. Every edit is made on
exact token/AST positions, so everything else in the cell (comments, quotes, indentation)
stays as it was. Candidates are ranked; when one fails its trial the next one is offered,
and when nothing is left the provider declines with a one-line reason.

Nothing here executes user code: objects are only inspected through cheap, side-effect-free
reads (module dictionaries, static class attributes, ``DataFrame.columns``, dict keys).

This module holds the provider (its memory of ranked candidates per code and error) and
:func:`propose_fixes`, which hands the failure to the fixer for its error type: ``undefined_names``
(NameError), ``attributes``, ``keys``, ``imports`` (ModuleNotFoundError, ImportError),
``unbound`` (UnboundLocalError), ``coercions`` (TypeError), ``syntax`` (SyntaxError and
indentation). What the fixers share: ``source`` (positions and edits, :class:`Fix`), ``magic_lines``
(IPython magic lines), ``failure_site`` (what a fixer works with), ``lookups`` (safe reads of kernel
objects), ``scopes`` (where a name is assigned, every use of one binding), ``spelling`` (close
matches) and ``importable`` (which modules exist).

May import: the standard library, ``nbrefine.providers.base``, :mod:`nbrefine.grounding` and the
modules of this package; never the sandbox, the engine, IPython or the CLI (the offline tier only
reads what the failure context gives it)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..base import DECLINED, ProviderReply, ProviderRequest, RepairContext, TextCallback
from .attributes import _fix_attribute
from .coercions import _fix_type
from .failure_site import _FailureSite
from .importable import _top_modules as _top_modules
from .imports import _fix_module
from .keys import _fix_key
from .source import Fix, _NoFix, _Source
from .syntax import _fix_syntax
from .unbound import _fix_unbound
from .undefined_names import _fix_name

__all__ = ["Fix", "OfflineProvider", "propose_fixes"]
# Code outside this package also takes private names from here: bench_offline's ``_top_modules``
# (the ``x as x`` import above); the tests patch ``_FIXERS``. (The engine's tutor reads close
# spellings from ``.spelling`` itself.)


_MODEL = "quick-fixes"
_MAX_MEMORY = 256  # (code, error) entries kept per provider instance


@dataclass(eq=False)
class _Entry:
    """The ranked candidates for one (code, error), and where they came from."""

    fixes: list[Fix]
    reason: str
    failure_type: str
    failure_message: str
    parent: _Entry | None = None
    next_index: int = 0

    def take(self, proposed: set[str]) -> Fix | None:
        while self.next_index < len(self.fixes):
            fix = self.fixes[self.next_index]
            self.next_index += 1
            if fix.code not in proposed:
                return fix
        return None


class OfflineProvider:
    """Proposes deterministic quick fixes; declines (``stop_reason == DECLINED``) otherwise.

    It remembers what it proposed for each (code, error): asked again about the same pair,
    or about a candidate of its own that failed the same way, it offers the next candidate
    of the ranked list."""

    name = "offline"

    def __init__(self) -> None:
        self.model = _MODEL
        self._memory: dict[tuple[str, str], _Entry] = {}
        self._origin: dict[str, _Entry] = {}  # candidate code -> the entry it was taken from
        self._proposed: set[str] = set()

    def complete(self, request: ProviderRequest, on_text: TextCallback | None = None) -> ProviderReply:
        context = request.context
        if context is None:
            return _declined("the offline provider needs the failure context")
        if context.failure is None:
            return _declined(_no_error(request.user))
        try:
            reply = self._complete(context)
        except Exception:  # never let a quick-fix bug escape into the loop
            reply = _declined(f"no quick fix for {_describe(context)}")
        if on_text is not None:
            on_text(reply.text)
        return reply

    def _complete(self, context: RepairContext) -> ProviderReply:
        failure = context.failure
        assert failure is not None
        key = (context.code, _failure_key(failure))
        entry = self._memory.get(key)
        if entry is None:
            fixes, reason = propose_fixes(context)
            parent = self._origin.get(context.code)
            entry = _Entry(fixes, reason, failure.error_type, failure.message.strip(), parent)
            if len(self._memory) >= _MAX_MEMORY:
                self._memory.clear()
            self._memory[key] = entry
            self._proposed.update((context.code, context.original_code))
            if parent is not None and _prefer_sibling(parent, context, fixes):
                fix = self._take_from_ancestors(parent)
                if fix is not None:
                    return self._offer(fix, parent)
        self._proposed.update((context.code, context.original_code))
        fix = entry.take(self._proposed)
        if fix is not None:
            return self._offer(fix, entry)
        if entry.parent is not None:
            fix = self._take_from_ancestors(entry.parent)
            if fix is not None:
                return self._offer(fix, entry.parent)
        return _declined(entry.reason)

    def _take_from_ancestors(self, entry: _Entry | None) -> Fix | None:
        while entry is not None:
            fix = entry.take(self._proposed)
            if fix is not None:
                return fix
            entry = entry.parent
        return None

    def _offer(self, fix: Fix, entry: _Entry) -> ProviderReply:
        # ``entry`` may be an ancestor: find the entry that actually holds ``fix``.
        holder: _Entry | None = entry
        while holder is not None and fix not in holder.fixes:
            holder = holder.parent
        self._origin[fix.code] = holder or entry
        self._proposed.add(fix.code)
        text = f"{fix.explanation}\n\n```python\n{fix.code.rstrip()}\n```"
        return ProviderReply(text=text, model=_MODEL, stop_reason="end_turn")


def _declined(reason: str) -> ProviderReply:
    return ProviderReply(text=" ".join(reason.split()), model=_MODEL, stop_reason=DECLINED)


#: How the latest candidate's outcome reads in the request (see ``TrialOutcome.render``).
_OUTCOME = re.compile(r"^## What happened when attempt (\d+) ran\nOutcome: (\w+)(?: \((.*)\))?$", re.M)
_OUTCOME_WORDS = {
    "timeout": "timed out",
    "cpu_limit": "hit the CPU time limit",
    "memory_limit": "hit the memory limit",
    "output_limit": "printed more than the output limit",
    "refused": "did something the sandbox refuses",
    "crashed": "crashed",
    "exited": "exited",
    "interrupted": "was interrupted",
    "sandbox_error": "could not be run by the sandbox",
    "passed": "passed",
}


def _no_error(user: str) -> str:
    """Why there is nothing to repair when the code under repair did not fail with an error:
    the latest candidate's outcome (a timeout, a limit), read from the request."""
    found = list(_OUTCOME.finditer(user))
    if not found:
        return (
            "no quick fix: the code to repair did not fail with an error (no exception or failed "
            "assert to work from), and the offline tier repairs only errors"
        )
    number, status, detail = found[-1].groups()
    what = _OUTCOME_WORDS.get(status, status.replace("_", " "))
    detail = f" ({detail})" if detail else ""
    return (
        f"no quick fix: the candidate of attempt {number} {what}{detail}, so there is no error to "
        "repair (the offline tier repairs only errors: a model is needed to go on)"
    )


def _failure_key(failure: Any) -> str:
    return f"{failure.error_type}|{failure.message.strip()[:300]}|{failure.lineno}"


def _prefer_sibling(parent: _Entry, context: RepairContext, fixes: Sequence[Fix]) -> bool:
    """Whether a candidate of ours that failed is better replaced than built upon.

    The same error again, or a type error on the very line we edited, says the substitution
    itself was wrong; a different lookup error (another name, key, attribute) is a second slip."""
    failure = context.failure
    if failure is None or not fixes:
        return True
    if failure.error_type == parent.failure_type and failure.message.strip() == parent.failure_message:
        return True
    fix = next((f for f in parent.fixes if f.code == context.code), None)
    on_edited_line = fix is not None and failure.lineno in fix.lines
    return failure.error_type in ("TypeError", "ValueError") and on_edited_line


def _describe(context: RepairContext) -> str:
    failure = context.failure
    if failure is None:
        return "this failure"
    first = failure.message.strip().splitlines()[0] if failure.message.strip() else ""
    if not first and failure.assertion:
        first = failure.assertion.splitlines()[0]
    return f"{failure.error_type}: {first}"[:200].rstrip(": ")


def propose_fixes(context: RepairContext) -> tuple[list[Fix], str]:
    """The ranked candidates for ``context``, and the reason to give when there are none."""
    failure = context.failure
    if failure is None:
        return [], "the offline provider needs the failure context"
    default = f"no quick fix for {_describe(context)}"
    if failure.where.startswith("check"):
        return [], f"{default} (it failed in an extra check, not in the cell)"
    fixer = _FIXERS.get(failure.error_type.rsplit(".", 1)[-1])
    if fixer is None:
        return [], default
    src = _Source(context.code)
    state = _FailureSite(context, src)
    try:
        fixes, reason = fixer(state)
    except _NoFix as why:
        fixes, reason = [], str(why) or default
    except Exception:  # a quick fix must never break the loop: no candidate is a safe answer
        fixes, reason = [], default
    unique: list[Fix] = []
    seen = {context.code}
    for fix in fixes:
        if fix.code not in seen:
            seen.add(fix.code)
            unique.append(fix)
    return unique, reason or default


_Fixer = Callable[[_FailureSite], tuple[list[Fix], str]]
_FIXERS: dict[str, _Fixer] = {
    "NameError": _fix_name,
    "AttributeError": _fix_attribute,
    "KeyError": _fix_key,
    "ModuleNotFoundError": _fix_module,
    "ImportError": _fix_module,
    "UnboundLocalError": _fix_unbound,
    "TypeError": _fix_type,
    "SyntaxError": _fix_syntax,
    "IndentationError": _fix_syntax,
    "TabError": _fix_syntax,
}
