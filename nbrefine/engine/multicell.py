"""Candidates that change several cells: what a trial runs, and what "verified" means for them.

When the cause of a failure is another cell (:mod:`nbrefine.engine.cause`), the model is shown
the cells the fix may change and the checks that may not change, and may answer with several
blocks. :class:`CellsRepair` turns each reply into the edits of those cells
(:func:`nbrefine.engine.reply.split_reply`), keeps them by the candidate text the loop sees
(never decoded from that text: a candidate cannot forge an edit by writing a label), composes
the trial in notebook order (the changed cells, then the failing cell, its checks and every
passing cell that uses a changed definition) and verifies every changed cell against its own
original.

May import: the standard library, :mod:`nbrefine.sandbox`, :mod:`nbrefine.grounding.capture` (the
failure a cell left) and the engine's cells, cause, prompt, reply and verify.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from ..grounding.capture import Failure
from ..sandbox import TrialOutcome, TrialSpec
from .cause import Cause
from .cells import CellRef
from .prompt import ParsedReply
from .reply import split_reply
from .verify import ChecksVerifier

__all__ = ["CellsRepair"]

_MAX_REASONS = 3


def _as_is(code: str) -> str:
    return code


def _same_text(a: str, b: str) -> bool:
    return a.strip() == b.strip()


class CellsRepair:
    """The cells of one repair that spans several, and its candidates' edits."""

    def __init__(
        self,
        cause: Cause,
        failures: Sequence[Failure] = (),
        transform: Callable[[str], str] = _as_is,
    ) -> None:
        self.cause = cause
        self.failures = tuple(failures)
        self.transform = transform
        self.by_key = {cell.key: cell for cell in (*cause.cells, *cause.dependents)}
        self._changes: dict[str, dict[str, str]] = {}  # candidate text -> key -> new source
        self._touched: dict[str, tuple[str, ...]] = {}  # candidate text -> read-only keys it changed

    @property
    def cells(self) -> tuple[CellRef, ...]:
        """The cells the prompt shows, in the order a trial runs them."""
        return self.cause.cells

    @property
    def failing(self) -> CellRef:
        return self.cause.failing

    # ------------------------------------------------------------------ candidates

    def render(self, changes: Mapping[str, str]) -> str:
        """The candidate as the loop, the prompt and the attempts' diffs show it: each changed
        cell under its label."""
        parts = [
            f"# {cell.label}\n{changes[cell.key].rstrip()}" for cell in self.cells if cell.key in changes
        ]
        return "\n\n".join(parts)

    def candidate(self, changes: Mapping[str, str], touched: Sequence[str] = ()) -> str:
        """Register a candidate made of ``changes``; returns its text."""
        kept = {k: v for k, v in changes.items() if k in self.by_key}
        code = self.render(kept)
        self._changes[code] = kept
        # The latest reading of a text wins, as for its changes: a reply read while it streamed
        # (nbrefine.engine.early) must not leave its readonly changes on the whole reply's candidate.
        if touched:
            self._touched[code] = tuple(touched)
        else:
            self._touched.pop(code, None)
        return code

    def parse(self, text: str) -> ParsedReply:
        """The loop's reply parser for this repair."""
        edits = split_reply(text, self.cells)
        if self.cause.kind == "below":  # the cell below runs first, whatever else the reply changes
            moved = self.cause.causes[0]
            edits = replace(edits, changes={moved.key: moved.source, **edits.changes})
        if edits.empty:
            if edits.touched_readonly:
                labels = ", ".join(self.by_key[k].label for k in edits.touched_readonly if k in self.by_key)
                return ParsedReply(
                    None, edits.explanation, f"the reply only changed read-only checks ({labels})"
                )
            reason = edits.reason or "the reply changed none of the cells the fix may change"
            if edits.declined:
                reason = "the model declined: " + (edits.explanation.splitlines() or [reason])[0][:300]
            return ParsedReply(None, edits.explanation, reason)
        code = self.candidate(edits.changes, edits.touched_readonly)
        return ParsedReply(code, edits.explanation, edits=tuple(sorted(self._changes[code].items())))

    def changes_of(self, code: str) -> dict[str, str]:
        """The edits of a candidate: those registered for it, else (a whole cell from a provider
        that knows nothing of cells, such as the offline tier) the failing cell replaced."""
        if code in self._changes:
            return dict(self._changes[code])
        return {self.failing.key: code}

    # ------------------------------------------------------------------ trials

    def trial_spec(self, spec: TrialSpec) -> TrialSpec:
        """The trial of a candidate, in notebook order: the changed (or moved) cells, then the
        failing cell as the first check, the user's checks, and the cells that use what changed."""
        changes = self.changes_of(spec.code)
        failing = changes.get(self.failing.key, self.failing.source)
        before = [self.transform(changes[c.key]) for c in self.cause.causes if c.key in changes]
        if not before:
            return replace(spec, code=self.transform(failing))
        dependents = tuple(self.transform(d.source) for d in self.dependents_of(changes))
        return replace(
            spec,
            code="\n\n".join(before),
            checks=(self.transform(failing), *spec.checks, *dependents),
        )

    def trial_legend(self, user_checks: int) -> str:
        """How a trial's checks are numbered when the fix changes another cell, for the prompt."""
        parts = [f"check 1 is {self.failing.label}, the failing cell"]
        if user_checks:
            parts.append(f"checks 2-{user_checks + 1} are the extra checks")
        for number, cell in enumerate(self.cause.dependents, start=user_checks + 2):
            parts.append(f"check {number} is {cell.label}, which uses what the fix changes")
        return (
            "A candidate that changes another cell is trial-run in notebook order: the changed cells, "
            "then " + "; ".join(parts) + "."
        )

    def dependents_of(self, changes: Mapping[str, str]) -> tuple[CellRef, ...]:
        """The passing cells that use a definition the candidate changes."""
        if not any(c.key in changes for c in self.cause.causes):
            return ()
        return self.cause.dependents

    def expected_checks(self, code: str, user_checks: int) -> int:
        spec = self.trial_spec(TrialSpec(code, ("",) * user_checks, 1.0))
        return len(spec.checks)

    def verify(self, code: str, outcome: TrialOutcome, user_checks: int) -> str:
        """Why a passed trial of ``code`` does not count as verified ("" when it does)."""
        changes = self.changes_of(code)
        reasons = [
            f"it changes {self.by_key[key].label}, {self.by_key[key].readonly}"
            for key in self._touched.get(code, ())
            if key in self.by_key
        ]
        for key, new in changes.items():
            cell = self.by_key[key]
            if cell.readonly and not _same_text(new, cell.source):
                reasons.append(f"it changes {cell.label}, {cell.readonly}")
                continue
            reasons += [f"{why} in {cell.label}" for why in self._verifier(cell).static_reasons(new)]
        if outcome.suspect:
            reasons.append(f"the trial flagged its pass: {outcome.suspect}")
        expected = self.expected_checks(code, user_checks)
        if outcome.checks_total < expected:
            reasons.append(f"the trial ran {outcome.checks_total} of its {expected} checks")
        return "; ".join(list(dict.fromkeys(reasons))[:_MAX_REASONS])

    def _verifier(self, cell: CellRef) -> ChecksVerifier:
        if cell.key == self.failing.key:
            return ChecksVerifier.for_failures(cell.source, self.failures, 0, transform=self.transform)
        return ChecksVerifier(cell.source, 0, transform=self.transform)
