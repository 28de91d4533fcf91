"""Hints per failing cell: how many each cell has had, and what asking again gives.

:class:`HintLedger` counts the hints (and keeps their text, for the next one) per cell;
:func:`next_step` turns a policy and that count into a :class:`TeachingStep`: another hint, an
explanation, the full solution the policy allows, or none left.

May import: the standard library, the engine's prompt and loop, and :mod:`.policy`.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass
from typing import Literal

from ..loop import normalize_code
from ..prompt import RepairTask
from .policy import TeachingPolicy

#: Hint detail levels: 1 a nudge, 2 specific, 3 nearly there.
MAX_LEVEL = 3

#: What the next request for a failing cell gets (see :class:`TeachingStep`).
StepKind = Literal["fix", "explain", "hint", "solution", "exhausted"]


class HintLedger:
    """How many hints each failing cell got in this kernel, and their text (for the next one)."""

    def __init__(self) -> None:
        self._hints: dict[str, list[str]] = {}
        self._lock = threading.Lock()

    @staticmethod
    def key(task: RepairTask, cell_id: str | None = None) -> str:
        """The notebook cell id when known (editing the cell keeps its count); otherwise the
        cell's code, ignoring whitespace and comments."""
        if cell_id:
            return f"cell:{cell_id}"
        return "code:" + hashlib.sha256(normalize_code(task.code).encode()).hexdigest()[:20]

    def used(self, key: str) -> int:
        with self._lock:
            return len(self._hints.get(key, ()))

    def hints(self, key: str) -> tuple[str, ...]:
        with self._lock:
            return tuple(self._hints.get(key, ()))

    def record(self, key: str, text: str) -> int:
        """Count one more hint for ``key``; returns how many it has had."""
        with self._lock:
            hints = self._hints.setdefault(key, [])
            hints.append(text)
            return len(hints)


@dataclass(frozen=True)
class TeachingStep:
    """What the next request for a failing cell gets. ``kind``: ``fix`` (the normal loop),
    ``explain``, ``hint``, ``solution`` (graduated, after the last hint, when allowed: the
    normal loop) or ``exhausted`` (no hints left)."""

    kind: StepKind
    number: int = 0  # which hint or explanation this is, from 1
    level: int = 0  # detail of a hint: 1 nudge, 2 specific, 3 nearly there
    total: int | None = None  # the cap, when there is one

    @property
    def runs_fix_loop(self) -> bool:
        return self.kind in ("fix", "solution")

    def header(self) -> str:
        """ "Hint 2 of 3", "What this error means", ... ('' in fix mode)."""
        of = f" of {self.total}" if self.total else ""
        if self.kind == "hint":
            return f"Hint {self.number}{of}"
        if self.kind == "explain":
            return "What this error means" + (f" ({self.number}{of})" if self.number > 1 else "")
        if self.kind == "solution":
            return "The full solution"
        if self.kind == "exhausted":
            return "No hints left for this cell"
        return ""


def next_step(policy: TeachingPolicy, used: int) -> TeachingStep:
    """The step after ``used`` hints (or explanations) for one failing cell."""
    if policy.mode == "fix":
        return TeachingStep("fix")
    cap = policy.hint_cap
    number = used + 1
    if cap is None or number <= cap:
        kind: StepKind = "explain" if policy.mode == "explain" else "hint"
        return TeachingStep(kind, number, min(number, MAX_LEVEL) if kind == "hint" else 0, cap)
    if policy.mode == "graduated" and policy.allow_solution:
        return TeachingStep("solution", number, 0, cap)
    return TeachingStep("exhausted", number, 0, cap)


def exhausted_text(policy: TeachingPolicy) -> str:
    noun = "explanations" if policy.mode == "explain" else "hints"
    return (
        f"You've used all the {noun} for this cell. Read them again next to your code, try a change "
        "and run the cell again: every run tells you something new. If you're still stuck, your "
        "instructor will be glad to help."
    )
