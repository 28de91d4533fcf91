"""The teaching policy, and the holder of a kernel's policy and its lock.

``Refine.mode`` picks how nbrefine answers a failing cell:

- ``fix``: the normal repair loop (the default);
- ``hint``: an explanation and a nudge, never code that solves it;
- ``explain``: what the error means and where, nothing more;
- ``graduated``: hint 1, 2, 3 of increasing detail on request; after the last hint, the full
  fix only when the instructor's policy allows it.

An instructor sets a :class:`TeachingPolicy` with a setup cell
(``%refine policy --mode hint --max-hints 3 --lock``) or in the notebook metadata
(``"nbrefine": {"mode": "hint", "max_hints": 3, "allow_solution": false, "lock": true}``).
A :class:`PolicyHolder` holds it (the kernel's own holder is kept by :mod:`nbrefine.engine.kernel_state`);
once locked, ``%config`` and per-cell options can only tighten it. That lock stops accidental and
casual loosening; it is no security boundary: anyone with access to the kernel can restart it
without the setup cell or reach into this module.

May import: the standard library, :mod:`nbrefine._errors`, :mod:`nbrefine._argparse` and the
engine's :mod:`~nbrefine.engine.modes` (the names of the modes).
"""

from __future__ import annotations

import argparse
import json
import shlex
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

from ..._argparse import StrictParser
from ..._errors import PolicyLockedError
from ..modes import MODES

GRADUATED_LEVELS = 3  # hints in graduated mode when max_hints is not set
_MODE_RANK = {"fix": 0, "graduated": 1, "hint": 2, "explain": 3}  # higher: stricter
_META_KEYS = ("mode", "max_hints", "allow_solution", "lock", "locked")


@dataclass(frozen=True)
class TeachingPolicy:
    """How nbrefine answers failing cells in this kernel, as an instructor set it.

    ``max_hints``: hints (explanations in explain mode) per failing cell; ``None``: no cap
    (graduated: :data:`GRADUATED_LEVELS`). ``allow_solution``: graduated only, whether the
    request after the last hint runs the normal repair loop. ``source`` says where the policy
    came from ("default", "setup cell", "notebook metadata", "config", "cell options")."""

    mode: str = "fix"
    max_hints: int | None = None
    allow_solution: bool = False
    locked: bool = False
    source: str = field(default="default", compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.mode, str) or self.mode not in MODES:
            raise ValueError(f"the teaching mode must be one of {', '.join(MODES)}, not {self.mode!r}")
        hints = self.max_hints
        if hints is not None and (isinstance(hints, bool) or not isinstance(hints, int) or hints < 1):
            raise ValueError(f"max_hints must be a whole number of at least 1 (or none), not {hints!r}")
        for name in ("allow_solution", "locked"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be true or false, not {getattr(self, name)!r}")
        if self.allow_solution and self.mode in ("hint", "explain"):
            raise ValueError(
                f"allow_solution only applies to graduated mode; {self.mode} mode never shows the solution"
            )

    # ------------------------------------------------------------------ building

    @classmethod
    def from_metadata(cls, meta: Mapping[str, Any], *, source: str = "notebook metadata") -> TeachingPolicy:
        """The policy in a notebook's ``metadata["nbrefine"]`` object; ``ValueError`` (one line)
        for unknown keys or bad values."""
        if not isinstance(meta, Mapping):
            raise ValueError(
                f"nbrefine metadata: expected an object such as {{'mode': 'hint'}}, not {meta!r}"
            )
        unknown = sorted(str(key) for key in meta if key not in _META_KEYS)
        if unknown:
            known = ", ".join(k for k in _META_KEYS if k != "locked")
            raise ValueError(f"nbrefine metadata: unknown key {unknown[0]!r} (known keys: {known})")
        mode = meta.get("mode", "fix")
        if isinstance(mode, str):
            mode = mode.strip().lower()
        lock = meta.get("lock", meta.get("locked", False))
        try:
            return cls(mode, meta.get("max_hints"), meta.get("allow_solution", False), lock, source)
        except ValueError as err:
            raise ValueError(f"nbrefine metadata: {err}") from None

    def to_metadata(self) -> dict[str, Any]:
        """The notebook-metadata form (``from_metadata`` reads it back)."""
        return {
            "mode": self.mode,
            "max_hints": self.max_hints,
            "allow_solution": self.allow_solution,
            "lock": self.locked,
        }

    def with_options(
        self,
        *,
        mode: str | None = None,
        max_hints: int | None = None,
        no_hint_cap: bool = False,
        allow_solution: bool | None = None,
        locked: bool | None = None,
        source: str | None = None,
    ) -> TeachingPolicy:
        """This policy with some settings changed (``None``: keep). A new mode keeps the current
        hint cap; ``allow_solution`` is dropped when the mode is not graduated any more."""
        new_mode = self.mode if mode is None else mode
        if no_hint_cap:
            hints = None
        elif max_hints is not None:
            hints = max_hints
        elif new_mode == self.mode or self.mode == "fix":
            hints = self.max_hints
        else:
            hints = self.hint_cap
        if allow_solution is None:
            allow_solution = self.allow_solution and new_mode == "graduated"
        return TeachingPolicy(
            new_mode,
            hints,
            allow_solution,
            self.locked if locked is None else locked,
            self.source if source is None else source,
        )

    # ------------------------------------------------------------------ reading

    @property
    def teaching(self) -> bool:
        return self.mode != "fix"

    @property
    def solution_shown(self) -> bool:
        """Whether a student can get the full fix (fix mode, or graduated with allow_solution)."""
        return self.mode == "fix" or (self.mode == "graduated" and self.allow_solution)

    @property
    def hint_cap(self) -> int | None:
        """Most hints (or explanations) per failing cell; ``None``: no cap."""
        if self.mode == "fix":
            return None
        if self.mode == "graduated":
            return self.max_hints or GRADUATED_LEVELS
        return self.max_hints

    def strictness(self) -> tuple[int, int, int, int]:
        """A sort key, higher is stricter: explain > hint > graduated > graduated with the
        solution > fix; then fewer hints; then locked. (:meth:`allows` compares each part.)"""
        cap = self.hint_cap
        return (
            _MODE_RANK[self.mode],
            0 if self.solution_shown else 1,
            -(cap if cap is not None else 10**9),
            int(self.locked),
        )

    def loosening(self, other: TeachingPolicy) -> str | None:
        """What switching to ``other`` would loosen while this policy is locked, in words for
        the student; ``None`` when nothing (or when this policy is not locked)."""
        if not self.locked:
            return None
        if not other.locked:
            return "unlocking these settings"
        if _MODE_RANK[other.mode] < _MODE_RANK[self.mode]:
            return f"{_MODE_NAMES[other.mode]}"
        if other.solution_shown and not self.solution_shown:
            return "showing the full solution"
        mine, theirs = self.hint_cap, other.hint_cap
        if mine is not None and (theirs is None or theirs > mine):
            return f"more than {_count(mine, 'hint')} per cell"
        return None

    def allows(self, other: TeachingPolicy) -> bool:
        """Whether switching to ``other`` does not loosen this policy (always, when unlocked)."""
        return self.loosening(other) is None

    def describe(self) -> str:
        """The policy in a few words: "hint mode, up to 3 hints per cell, locked"."""
        cap = self.hint_cap
        if self.mode == "fix":
            text = "fix mode (verified fixes)"
        elif self.mode == "graduated":
            then = "then the full solution" if self.allow_solution else "no full solution"
            text = f"graduated hints ({_count(cap or GRADUATED_LEVELS, 'hint')} per cell, {then})"
        else:
            noun = "explanation" if self.mode == "explain" else "hint"
            text = _MODE_NAMES[self.mode] + (f", up to {_count(cap, noun)} per cell" if cap else "")
        return text + (", locked" if self.locked else "")


_MODE_NAMES = {
    "fix": "fix mode",
    "hint": "hint mode",
    "explain": "explain mode",
    "graduated": "graduated mode",
}


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def policy_from_notebook(metadata: Mapping[str, Any]) -> TeachingPolicy | None:
    """The policy in a whole notebook's metadata (its ``"nbrefine"`` object), or ``None``."""
    meta = metadata.get("nbrefine")
    if meta is None:
        return None
    return TeachingPolicy.from_metadata(meta, source="notebook metadata")


def notebook_policy(metadata: Mapping[str, Any]) -> dict[str, Any] | None:
    """The policy object of a notebook's metadata (``metadata["nbrefine"]``) as plain JSON, for
    a driver outside the kernel to install there (the in-kernel ``setup_run``); ``None`` without
    an ``nbrefine`` object. The metadata is validated here first, so a bad value fails before any
    kernel starts (``ValueError``)."""
    meta = metadata.get("nbrefine")
    if meta is None:
        return None
    TeachingPolicy.from_metadata(meta)
    plain: dict[str, Any] = json.loads(json.dumps(dict(meta), sort_keys=True))
    return plain


def _locked_message(current: TeachingPolicy, what: str) -> str:
    return (
        f"Your instructor has set this notebook to {current.describe().removesuffix(', locked')}, "
        f"so {what} isn't available here. Keep going: you can work it out!"
    )


class PolicyHolder:
    """The kernel-wide teaching policy. :meth:`set` refuses to loosen a locked policy."""

    def __init__(self, policy: TeachingPolicy | None = None) -> None:
        self._policy = policy or TeachingPolicy()
        self._lock = threading.RLock()

    @property
    def policy(self) -> TeachingPolicy:
        return self._policy

    def set(self, policy: TeachingPolicy) -> None:
        """Make ``policy`` the kernel's; :class:`PolicyLockedError` if it loosens a locked one."""
        with self._lock:
            what = self._policy.loosening(policy)
            if what is not None:
                raise PolicyLockedError(_locked_message(self._policy, what))
            self._policy = policy

    def configure(
        self,
        *,
        mode: str | None = None,
        max_hints: int | None = None,
        no_hint_cap: bool = False,
        allow_solution: bool | None = None,
        source: str = "config",
    ) -> TeachingPolicy:
        """Change some settings (``%config Refine.mode = ...``; ``None``: keep, ``no_hint_cap``:
        no cap). Same refusal as :meth:`set`; ``ValueError`` for an impossible combination."""
        with self._lock:
            policy = self._policy.with_options(
                mode=mode,
                max_hints=max_hints,
                no_hint_cap=no_hint_cap,
                allow_solution=allow_solution,
                source=source,
            )
            self.set(policy)
        return policy

    def install(self, meta: Mapping[str, Any]) -> TeachingPolicy:
        """Set the policy of a notebook's ``metadata["nbrefine"]`` object (see
        :func:`notebook_policy`). ``ValueError`` / :class:`PolicyLockedError`."""
        policy = TeachingPolicy.from_metadata(meta, source="notebook metadata")
        self.set(policy)
        return policy

    def apply_line(self, line: str, *, source: str = "setup cell") -> TeachingPolicy:
        """``%refine policy ARGS``: parse ``ARGS`` on top of this holder's policy and set it.
        ``ValueError`` for bad options, :class:`PolicyLockedError` for a loosening."""
        try:
            words = shlex.split(line)
        except ValueError as err:
            raise ValueError(f"%refine policy: cannot parse the options: {err}") from None
        policy = parse_policy_args(words, base=self.policy, source=source)
        self.set(policy)
        return policy

    def effective(
        self,
        requested_mode: str | None = None,
        max_hints: int | None = None,
        allow_solution: bool | None = None,
    ) -> TeachingPolicy:
        """The policy for one cell, with its options applied on top of the kernel's (which does
        not change). A locked policy may only be tightened: :class:`PolicyLockedError`."""
        current = self._policy
        if requested_mode is None and max_hints is None and allow_solution is None:
            return current
        wanted = current.with_options(
            mode=requested_mode, max_hints=max_hints, allow_solution=allow_solution, source="cell options"
        )
        what = current.loosening(wanted)
        if what is not None:
            raise PolicyLockedError(_locked_message(current, what))
        return wanted


class _PolicyParser(StrictParser):
    def error(self, message: str) -> NoReturn:
        raise ValueError(f"%refine policy: {message}")


def _hint_count(text: str) -> int:
    if text.strip().lower() in ("none", "unlimited"):
        return 0
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number or 'none', not {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError("use at least 1 (or 'none' for no cap)")
    return value


def parse_policy_args(
    words: Sequence[str], *, base: TeachingPolicy | None = None, source: str = "setup cell"
) -> TeachingPolicy:
    """The policy ``%refine policy --mode hint --max-hints 3 [--allow-solution|--no-solution]
    [--lock]`` asks for, on top of ``base``. ``ValueError`` (one line) for bad options."""
    parser = _PolicyParser(prog="%refine policy", add_help=False)
    parser.add_argument("--mode", choices=MODES)
    parser.add_argument("--max-hints", dest="max_hints", type=_hint_count)
    parser.add_argument("--allow-solution", dest="allow_solution", action="store_true", default=None)
    parser.add_argument("--no-solution", dest="allow_solution", action="store_false")
    parser.add_argument("--lock", action="store_true")
    opts = parser.parse_args(list(words))
    try:
        return (base or TeachingPolicy()).with_options(
            mode=opts.mode,
            max_hints=opts.max_hints or None,
            no_hint_cap=opts.max_hints == 0,
            allow_solution=opts.allow_solution,
            locked=True if opts.lock else None,
            source=source,
        )
    except ValueError as err:
        raise ValueError(f"%refine policy: {err}") from None
