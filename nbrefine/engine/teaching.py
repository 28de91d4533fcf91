"""Teaching modes: explanations and graduated hints instead of answers.

``Refine.mode`` picks how nbrefine answers a failing cell:

- ``fix``: the normal repair loop (the default);
- ``hint``: an explanation and a nudge, never code that solves it;
- ``explain``: what the error means and where, nothing more;
- ``graduated``: hint 1, 2, 3 of increasing detail on request; after the last hint, the full
  fix only when the instructor's policy allows it.

**The guarantee.** In the teaching modes, whatever the model returns, :func:`guard_reply`
trial-runs every piece of code in the reply, with the same runner and checks the repair loop
uses, and withholds each piece that would make the cell pass (its docstring lists exactly
what is tried). Code whose trials all fail is shown: it cannot solve the exercise.

**The policy.** An instructor sets a :class:`TeachingPolicy` with a setup cell
(``%refine policy --mode hint --max-hints 3 --lock``) or in the notebook metadata
(``"nbrefine": {"mode": "hint", "max_hints": 3, "allow_solution": false, "lock": true}``).
The kernel-wide :class:`PolicyGate` holds it; once locked, ``%config`` and per-cell options
can only tighten it. That lock stops accidental and casual loosening; it is no security
boundary: anyone with access to the kernel can restart it without the setup cell or reach
into this module.

No IPython import: the magic, the panel and the CLI adapt this module.
"""

from __future__ import annotations

import argparse
import ast
import builtins
import difflib
import hashlib
import json
import re
import shlex
import textwrap
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

from .._argparse import StrictParser
from .._errors import NbrefineError, ProviderError
from ..grounding.capture import Failure
from ..grounding.redaction import Redactor
from ..grounding.scope import bound_names
from ..grounding.text import TRUNCATED, clip
from ..providers import offline as _offline
from ..providers.base import DECLINED, Provider, ProviderReply, ProviderRequest, RepairContext, TextCallback
from ..sandbox import TrialPolicy, TrialSpec
from .loop import TrialRunner, normalize_code
from .prompt import RepairTask, build_request

__all__ = [
    "MODES",
    "TEACHING_MODES",
    "TEACHING_SYSTEM_PROMPT",
    "WITHHELD_BLOCK",
    "WITHHELD_INLINE",
    "GuardedReply",
    "HintLedger",
    "OfflineTutor",
    "PolicyGate",
    "PolicyLockedError",
    "SnippetCheck",
    "TeachingPolicy",
    "TeachingResult",
    "TeachingStep",
    "apply_policy_line",
    "guard_reply",
    "hints_counter",
    "install_notebook_policy",
    "kernel_gate",
    "kernel_ledger",
    "next_step",
    "notebook_policy_code",
    "parse_policy_args",
    "policy_from_notebook",
    "teach",
    "teaching_request",
    "tutor_text",
]

MODES: tuple[str, ...] = ("fix", "hint", "explain", "graduated")
TEACHING_MODES: tuple[str, ...] = ("hint", "explain", "graduated")
GRADUATED_LEVELS = 3  # hints in graduated mode when max_hints is not set
_MAX_LEVEL = 3  # hint detail levels: 1 nudge, 2 specific, 3 nearly there
_MODE_RANK = {"fix": 0, "graduated": 1, "hint": 2, "explain": 3}  # higher: stricter
_META_KEYS = ("mode", "max_hints", "allow_solution", "lock", "locked")

WITHHELD_BLOCK = "[a code example was withheld here: it would give away the solution]"
WITHHELD_INLINE = "[code withheld: it would give away the solution]"


# =========================================================================== the policy


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


def install_notebook_policy(meta: Mapping[str, Any], gate: PolicyGate | None = None) -> TeachingPolicy:
    """Set the policy of a notebook's ``metadata["nbrefine"]`` object on the kernel's gate (run in
    the kernel, e.g. through :func:`notebook_policy_code`). ``ValueError`` / :class:`PolicyLockedError`."""
    policy = TeachingPolicy.from_metadata(meta, source="notebook metadata")
    (gate or kernel_gate()).set(policy)
    return policy


def notebook_policy_code(metadata: Mapping[str, Any]) -> str | None:
    """One line of Python that installs the policy of a notebook's metadata in a kernel (for the
    CLI's set-up code, or a front end executing it silently); ``None`` without an ``nbrefine``
    object. The metadata is validated here first, so a bad value fails before any kernel starts."""
    meta = metadata.get("nbrefine")
    if meta is None:
        return None
    TeachingPolicy.from_metadata(meta)
    text = json.dumps(dict(meta), sort_keys=True)
    return (
        "__import__('nbrefine.engine', fromlist=['_']).install_notebook_policy("
        f"__import__('json').loads({text!r}))"
    )


class PolicyLockedError(NbrefineError, PermissionError):
    """A request would loosen a locked teaching policy. ``str(err)`` is one kind line."""


def _locked_message(current: TeachingPolicy, what: str) -> str:
    return (
        f"Your instructor has set this notebook to {current.describe().removesuffix(', locked')}, "
        f"so {what} isn't available here. Keep going: you can work it out!"
    )


class PolicyGate:
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


def apply_policy_line(
    line: str, gate: PolicyGate | None = None, *, source: str = "setup cell"
) -> TeachingPolicy:
    """``%refine policy ARGS``: parse ``ARGS`` on top of the gate's policy and set it.
    ``ValueError`` for bad options, :class:`PolicyLockedError` for a loosening."""
    gate = gate or kernel_gate()
    try:
        words = shlex.split(line)
    except ValueError as err:
        raise ValueError(f"%refine policy: cannot parse the options: {err}") from None
    policy = parse_policy_args(words, base=gate.policy, source=source)
    gate.set(policy)
    return policy


# =========================================================================== hints per cell


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


_KERNEL_GATE = PolicyGate()
_KERNEL_LEDGER = HintLedger()


def kernel_gate() -> PolicyGate:
    """The policy gate of this kernel (process)."""
    return _KERNEL_GATE


def kernel_ledger() -> HintLedger:
    """The hint counts of this kernel (process)."""
    return _KERNEL_LEDGER


def _reset_kernel_state() -> None:
    """For tests only: a fresh gate and ledger (a student could call this too; see the module
    docstring on what the lock is and is not)."""
    global _KERNEL_GATE, _KERNEL_LEDGER
    _KERNEL_GATE, _KERNEL_LEDGER = PolicyGate(), HintLedger()


@dataclass(frozen=True)
class TeachingStep:
    """What the next request for a failing cell gets. ``kind``: ``fix`` (the normal loop),
    ``explain``, ``hint``, ``solution`` (graduated, after the last hint, when allowed: the
    normal loop) or ``exhausted`` (no hints left)."""

    kind: str
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
        kind = "explain" if policy.mode == "explain" else "hint"
        return TeachingStep(kind, number, min(number, _MAX_LEVEL) if kind == "hint" else 0, cap)
    if policy.mode == "graduated" and policy.allow_solution:
        return TeachingStep("solution", number, 0, cap)
    return TeachingStep("exhausted", number, 0, cap)


def hints_counter(policy: TeachingPolicy, used: int) -> str:
    """For the panel: "Hints used: 2 of 3"."""
    noun = "Explanations" if policy.mode == "explain" else "Hints"
    cap = policy.hint_cap
    return f"{noun} used: {min(used, cap) if cap else used}" + (f" of {cap}" if cap else "")


def _exhausted_text(policy: TeachingPolicy) -> str:
    noun = "explanations" if policy.mode == "explain" else "hints"
    return (
        f"You've used all the {noun} for this cell. Read them again next to your code, try a change "
        "and run the cell again: every run tells you something new. If you're still stuck, your "
        "instructor will be glad to help."
    )


# =========================================================================== the prompt

TEACHING_SYSTEM_PROMPT = """\
You are a patient, encouraging programming tutor. A student's cell in a Jupyter notebook failed. \
You are shown the cell, the failure as it happened in the student's live kernel (exception, \
traceback mapped to cell lines, the values on the failing line, the operands of a failed assert) \
and summaries of the variables the cell uses.

Help the student find and fix the mistake themselves:
- Never write the corrected cell, a corrected line or any code that would make the cell work, not \
even disguised as pseudo-code, a diff or "replace X with Y". nbrefine trial-runs any code in your \
reply and removes whatever would solve the exercise, so such code never reaches the student.
- Refer to places by cell line number; quote at most a few words of the student's own code.
- Write plain, kind, encouraging sentences addressed to the student ("you"). Explain any technical \
word you use. Keep it short.
- Reply with text only (Markdown is fine), without fenced code blocks."""

_EXPLAIN_TASK = (
    "Explain the error, nothing more: what this kind of error means in general, where it happened "
    "(the cell line), and why it happened here, in terms of the actual values shown above. Do not "
    "suggest a fix, do not say what to change, and write no code. Two to four sentences."
)

_LEVEL_TASKS = {
    1: "a gentle nudge. Say which line to look at and which concept is involved (for example the "
    "spelling of a name, the type of a value, where a range starts or stops), without saying what "
    "exactly is wrong. One or two sentences. No code.",
    2: "more specific. Say what is wrong with which value or name, using the actual values shown "
    "above, but not how to write the fix. Two or three sentences. No code.",
    3: "nearly there. Describe in words the change to make. You may show one tiny example of how a "
    "function, method or operator is used, on different data and in one line of inline code, but "
    "never the corrected line or cell. Three or four sentences.",
}


def _teaching_task(mode: str, level: int, number: int, total: int | None, has_previous: bool) -> str:
    if mode == "explain":
        text = _EXPLAIN_TASK
    else:
        of = f" of {total}" if total else ""
        text = f"Give hint {number}{of}: {_LEVEL_TASKS[level]}"
    if has_previous:
        text += " Add something new to what was already said above; do not repeat it."
    return text


def teaching_request(
    task: RepairTask,
    redactor: Redactor,
    *,
    mode: str,
    level: int = 1,
    previous_hints: Sequence[str] = (),
    budget: int = 12000,
    max_tokens: int = 800,
    number: int | None = None,
    total: int | None = None,
    user_note: str = "",
) -> ProviderRequest:
    """The request for one explanation (``mode="explain"``) or hint (``"hint"``/``"graduated"``,
    ``level`` 1 to 3). It reuses the repair prompt's labelled sections (cell, failure, values),
    adds the hints already given, and asks for text only. The whole text passes ``redactor``."""
    if mode not in TEACHING_MODES:
        raise ValueError(f"teaching_request needs one of {', '.join(TEACHING_MODES)}, not {mode!r}")
    level = max(1, min(level, _MAX_LEVEL))
    number = number or level
    given = [clip(hint.strip(), 800, TRUNCATED) for hint in previous_hints if hint.strip()][-6:]
    extra = ""
    if given:
        noun = "Explanations" if mode == "explain" else "Hints"
        listed = "\n".join(f"{i}. {textwrap.indent(hint, '   ').lstrip()}" for i, hint in enumerate(given, 1))
        extra += f"## {noun} already given for this cell\n{listed}\n"
    extra += f"\n## Your task\n{_teaching_task(mode, level, number, total, bool(given))}\n"
    base = build_request(
        task, [], redactor, budget=max(budget - len(extra), 2000), max_tokens=max_tokens, user_note=user_note
    )
    body = base.user
    cut = body.rfind("## Your task\n")
    if cut >= 0:
        body = body[:cut]
    text = body.rstrip() + "\n\n" + extra
    return ProviderRequest(
        system=TEACHING_SYSTEM_PROMPT,
        user=redactor.redact_text(text),
        max_tokens=max_tokens,
        context=base.context,
    )


# =========================================================================== the guard


@dataclass(frozen=True)
class SnippetCheck:
    """How one piece of code in a reply was judged."""

    kind: str  # "block" (fenced), "inline" (`...`), "bare" (code lines in the prose)
    code: str
    withheld: bool
    reason: str
    trials: int = 0


@dataclass(frozen=True)
class GuardedReply:
    """A reply with every piece of code that would pass the cell replaced by a placeholder."""

    text: str
    withheld: int
    checked: int
    trials: int = 0
    snippets: tuple[SnippetCheck, ...] = ()


@dataclass(frozen=True)
class _Snippet:
    kind: str
    start: int
    end: int
    code: str


_FENCE_OPEN = re.compile(r"^[ \t]*(`{3,}|~{3,})(.*)$")
_INLINE = re.compile(r"(?<!`)(`+)(?!`)((?:(?!\n[ \t]*\n).)+?)(?<!`)\1(?!`)", re.S)
_CODEISH = re.compile(
    r"[=(\[]|:\s*$|^\s*(def|class|import|from|return|for|while|if|elif|else|with|assert|raise|try|"
    r"except|lambda|print|del|yield|global|nonlocal)\b"
)
_MAX_RUN = 40  # lines of one bare code run
_MAX_LINE_WORDS = 40  # words of one prose line searched for code in it
_RATIO_CHARS = 4000


def _fences(text: str) -> list[_Snippet]:
    """Fenced blocks (``` or ~~~, any info string, also one cut off at the end)."""
    found = []
    lines = text.split("\n")
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line) + 1)
    i = 0
    while i < len(lines):
        match = _FENCE_OPEN.match(lines[i])
        if match is None or (match.group(1)[0] == "`" and "`" in match.group(2)):
            i += 1
            continue
        fence = match.group(1)
        close = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
        j = i + 1
        while j < len(lines) and not close.match(lines[j]):
            j += 1
        end = offsets[j] + len(lines[j]) if j < len(lines) else len(text)
        found.append(_Snippet("block", offsets[i], end, textwrap.dedent("\n".join(lines[i + 1 : j]))))
        i = j + 1
    return found


def _parse(code: str) -> ast.Module | None:
    """``code`` parsed, IPython line magics and shell lines read as ``pass``; ``None`` if not Python."""
    try:
        return ast.parse(code)
    except (SyntaxError, ValueError):
        pass
    blanked = "\n".join(
        re.sub(r"^(\s*)[%!].*$", r"\1pass", line) if line.lstrip()[:1] in ("%", "!") else line
        for line in code.split("\n")
    )
    try:
        return ast.parse(blanked)
    except (SyntaxError, ValueError):
        return None


def _trivial(node: ast.expr) -> bool:
    """A lone name, dotted name or literal (``[1, 2, 3]`` too): it names or shows something,
    it computes nothing."""
    while isinstance(node, ast.Attribute):
        node = node.value
    if isinstance(node, (ast.Name, ast.Constant)):
        return True
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


def _code_like(tree: ast.Module) -> bool:
    for stmt in tree.body:
        if isinstance(stmt, ast.Expr):
            if not _trivial(stmt.value):
                return True
        elif not isinstance(stmt, ast.Pass) and not (isinstance(stmt, ast.AnnAssign) and stmt.value is None):
            return True
    return False


def _looks_like_code(code: str) -> bool:
    tree = _parse(code)
    return tree is not None and bool(tree.body) and _code_like(tree)


def _bare_code(text: str, start: int, end: int) -> list[_Snippet]:
    """Code written into the prose without fences: runs of lines that parse as Python, and the
    longest piece of a prose line that does ("... change it to total = sum(items).")."""
    found: list[_Snippet] = []
    segment = text[start:end]
    lines = segment.split("\n")
    offsets = [start]
    for line in lines:
        offsets.append(offsets[-1] + len(line) + 1)
    i = 0
    while i < len(lines):
        line = lines[i]
        if "`" in line or not line.strip() or not _CODEISH.search(line):
            i += 1
            continue
        limit = i
        while limit < len(lines) and limit - i < _MAX_RUN and "`" not in lines[limit]:
            limit += 1
        run = None
        for j in range(limit, i, -1):
            chunk = lines[i:j]
            while chunk and not chunk[-1].strip():
                chunk = chunk[:-1]
            if not chunk:
                continue
            code = textwrap.dedent("\n".join(chunk))
            if _looks_like_code(code):
                run = (i + len(chunk), code)
                break
        if run is not None:
            stop, code = run
            found.append(_Snippet("bare", offsets[i], offsets[stop] - 1, code))
            i = stop
            continue
        found.extend(_code_in_line(line, offsets[i]))
        i += 1
    return found


_SENTENCE_END = re.compile(r"(?<=[.!?:])\s+(?=[A-Z\"'(*_])")


def _code_in_line(line: str, offset: int) -> list[_Snippet]:
    """The longest code in each sentence of a prose line, searched word by word."""
    found = []
    start = 0
    for boundary in [*(m.start() for m in _SENTENCE_END.finditer(line)), len(line)]:
        found.extend(_code_in_sentence(line[start:boundary], offset + start))
        start = boundary
    return found


def _code_in_sentence(sentence: str, offset: int) -> list[_Snippet]:
    spans = [m.span() for m in re.finditer(r"\S+", sentence)][:_MAX_LINE_WORDS]
    found = []
    position = 0
    for begin, _ in spans:
        if begin < position:
            continue
        for _, stop in reversed(spans):
            if stop <= begin:
                break
            piece = sentence[begin:stop].rstrip(".,;!?")
            if len(piece) < 6 or not _CODEISH.search(piece) or not _looks_like_code(piece):
                continue
            first = (_parse(piece) or ast.Module(body=[], type_ignores=[])).body[:1]
            if first and isinstance(first[0], ast.Expr) and isinstance(first[0].value, ast.Tuple):
                continue  # "moment, sum(xs)": words and commas, not code
            found.append(_Snippet("bare", offset + begin, offset + begin + len(piece), piece))
            position = begin + len(piece)
            break
    return found


def _find_snippets(text: str) -> list[_Snippet]:
    """Every piece of code in ``text``: fenced blocks, inline spans that compute something, and
    code lines in the prose. Disjoint, in text order."""
    fences = _fences(text)
    found = list(fences)
    bounds = [0, *[p for f in fences for p in (f.start, f.end)], len(text)]
    for start, end in zip(bounds[::2], bounds[1::2], strict=True):
        for match in _INLINE.finditer(text, start, end):
            code = match.group(2).strip()
            if _looks_like_code(code):
                found.append(_Snippet("inline", match.start(), match.end(), code))
        found.extend(_bare_code(text, start, end))
    return sorted(found, key=lambda s: s.start)


def _ratio(a: str, b: str) -> float:
    a, b = a.strip()[:_RATIO_CHARS], b.strip()[:_RATIO_CHARS]
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    if matcher.real_quick_ratio() < 0.3:
        return 0.0
    return matcher.ratio()


def _binding_keys(stmt: ast.stmt) -> set[tuple[str, str]]:
    """What a top-level statement defines: names, or assignment targets such as ``df["x"]``."""
    keys: set[tuple[str, str]] = set()
    targets: list[ast.expr] = []
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        keys.add(("name", stmt.name))
    elif isinstance(stmt, ast.Assign):
        targets = list(stmt.targets)
    elif isinstance(stmt, (ast.AugAssign, ast.AnnAssign)):
        targets = [stmt.target]
    elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
        keys.update(("name", alias.asname or alias.name.split(".")[0]) for alias in stmt.names)
    for target in targets:
        if isinstance(target, (ast.Tuple, ast.List)):
            keys.update(("name", n.id) for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(target, ast.Name):
            keys.add(("name", target.id))
        else:
            keys.add(("target", ast.unparse(target)))
    return keys


def _header_end(stmt: ast.stmt) -> int:
    """The last line of ``stmt`` itself (the header line(s) of a compound statement)."""
    body = getattr(stmt, "body", None)
    if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
        return max(stmt.lineno, body[0].lineno - 1)
    return stmt.end_lineno or stmt.lineno


@dataclass
class _Cell:
    """The failing cell, prepared for building candidates from snippets."""

    code: str
    lines: list[str]
    tree: ast.Module | None
    normal: str
    failing: list[int]  # cell lines where it raised, then the call sites
    broken: set[int]  # lines that raised something other than AssertionError
    checks: tuple[str, ...]
    implicit: tuple[str, ...]  # the cell's own top-level asserts, as checks of whole-cell trials
    keys: set[tuple[str, str]]
    own: list[str]
    statements: list[ast.stmt]
    reads: set[str]  # names the cell reads

    @classmethod
    def of(cls, task: RepairTask) -> _Cell:
        code = task.code
        tree = _parse(code)
        failing: list[int] = []
        broken: set[int] = set()
        for failure in task.failures:
            if failure.where == task.label and failure.lineno:
                failing.append(failure.lineno)
                if failure.error_type != "AssertionError":
                    broken.add(failure.lineno)
        for failure in task.failures:
            failing.extend(f.lineno for f in failure.frames if f.in_code and f.label == task.label)
        lines = code.split("\n")
        failing = [n for n in dict.fromkeys(failing) if 1 <= n <= len(lines)]
        implicit: list[str] = []
        keys: set[tuple[str, str]] = set()
        statements: list[ast.stmt] = []
        if tree is not None:
            for stmt in tree.body:
                keys |= _binding_keys(stmt)
                if isinstance(stmt, ast.Assert) and stmt.lineno not in broken:
                    segment = ast.get_source_segment(code, stmt)
                    if segment:
                        implicit.append(segment)
            statements = [n for n in ast.walk(tree) if isinstance(n, ast.stmt)]
        return cls(
            code=code,
            lines=code.split("\n"),
            tree=tree,
            normal=normalize_code(code),
            failing=failing,
            broken=broken,
            checks=tuple(task.checks),
            implicit=tuple(implicit),
            keys=keys,
            own=[line.strip() for line in code.split("\n") if line.strip()],
            statements=statements,
            reads={n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
            if tree is not None
            else set(),
        )

    def is_own(self, code: str) -> bool:
        """Whether ``code`` is lines of the cell itself, as they are (nothing new to see)."""
        lines = [line.strip() for line in code.split("\n") if line.strip()]
        n = len(lines)
        return bool(lines) and any(self.own[i : i + n] == lines for i in range(len(self.own) - n + 1))

    def statement_at(self, lineno: int) -> ast.stmt | None:
        """The innermost statement whose own lines (a compound statement's header) hold ``lineno``."""
        best = None
        for stmt in self.statements:
            holds = stmt.lineno <= lineno <= _header_end(stmt)
            if holds and (best is None or stmt.lineno >= best.lineno):
                best = stmt
        return best

    def replace_lines(self, first: int, last: int, new: str) -> str:
        line = self.lines[first - 1]
        indent = line[: len(line) - len(line.lstrip())]
        body = textwrap.indent(textwrap.dedent(new).strip("\n"), indent)
        return "\n".join([*self.lines[: first - 1], body, *self.lines[last:]])

    def protected(self, stmt: ast.stmt) -> bool:
        """An assert that is not broken itself (it ran, or would run, as a check): the check is
        right, the code it checks is not. Snippets never replace it or a part of it."""
        return isinstance(stmt, ast.Assert) and stmt.lineno not in self.broken


class _Judge:
    """Builds the candidate cells a snippet could stand for, and trial-runs them."""

    def __init__(
        self,
        cell: _Cell,
        runner: TrialRunner,
        timeout_s: float,
        policy: TrialPolicy,
        max_trials: int,
        deadline: float,
    ) -> None:
        self.cell, self.runner, self.timeout_s, self.policy = cell, runner, timeout_s, policy
        self.max_trials, self.deadline = max_trials, deadline
        self.trials = 0
        self.verdicts: dict[tuple[str, tuple[str, ...]], str] = {}

    # ------------------------------------------------------------------ candidates

    def candidates(self, code: str) -> list[tuple[str, tuple[str, ...], str]]:
        cell = self.cell
        tree = _parse(code)
        header = False
        if tree is None and code.strip().endswith(":") and "\n" not in code.strip():
            tree, header = _parse(code.strip() + "\n    pass"), True
        if tree is None or not tree.body:
            return []
        found: list[tuple[str, tuple[str, ...], str]] = []
        if not header:
            keys = set().union(*(_binding_keys(stmt) for stmt in tree.body))
            if keys & cell.keys or _ratio(code, cell.code) >= 0.5:
                own_asserts = any(isinstance(stmt, ast.Assert) for stmt in tree.body)
                checks = cell.checks + (() if own_asserts else cell.implicit)
                found.append((code, checks, "as the whole cell"))
            spliced = self.splice(code, tree)
            if spliced is not None:
                found.append((spliced, cell.checks, "in place of the statements it redefines"))
            # nbgrader's test cell fails on a name the answer cell above was to define: code
            # defining it is that answer, whether or not it looks like the failing cell.
            if any(kind == "name" and name in cell.reads for kind, name in keys - cell.keys):
                found.append((f"{code}\n{cell.code}", cell.checks, "run before the cell"))
        if "\n" not in code.strip() and len(tree.body) == 1:
            found.extend(self.line_swaps(code.strip(), tree.body[0], header))
            if not header and isinstance(tree.body[0], ast.Expr):
                found.extend(self.expression_swaps(code.strip()))
        return found

    def splice(self, code: str, tree: ast.Module) -> str | None:
        """The cell with each top-level statement that the snippet redefines (same function,
        class or assignment target) replaced by the snippet's version."""
        cell = self.cell
        if cell.tree is None:
            return None
        lines = code.split("\n")
        replacements: dict[int, tuple[int, str]] = {}
        for stmt in tree.body:
            keys = _binding_keys(stmt)
            if not keys:
                continue
            for old in cell.tree.body:
                if old.lineno not in replacements and _binding_keys(old) == keys:
                    first = min([old.lineno, *[d.lineno for d in getattr(old, "decorator_list", [])]])
                    start = min([stmt.lineno, *[d.lineno for d in getattr(stmt, "decorator_list", [])]])
                    new = "\n".join(lines[start - 1 : stmt.end_lineno or stmt.lineno])
                    replacements[first] = (old.end_lineno or old.lineno, new)
                    break
        if not replacements:
            return None
        out = list(cell.lines)
        for first in sorted(replacements, reverse=True):
            last, new = replacements[first]
            out[first - 1 : last] = textwrap.dedent(new).split("\n")
        return "\n".join(out)

    def line_swaps(self, line: str, stmt: ast.stmt, header: bool) -> list[tuple[str, tuple[str, ...], str]]:
        """The cell with a one-line snippet in place of a failing line, or of a line it resembles."""
        cell = self.cell
        similar = sorted(
            ((_ratio(line, text), n) for n, text in enumerate(cell.lines, 1) if text.strip()), reverse=True
        )
        targets = [n for n in cell.failing if _ratio(line, cell.lines[n - 1]) >= 0.3]
        targets += [n for ratio, n in similar[:2] if ratio >= 0.6]
        found = []
        for lineno in list(dict.fromkeys(targets))[:4]:
            old = cell.statement_at(lineno)
            if old is None:
                first, last = lineno, lineno
            else:
                if cell.protected(old) or (isinstance(old, ast.Assert) and not isinstance(stmt, ast.Assert)):
                    continue
                if header != (_header_end(old) < (old.end_lineno or old.lineno)):
                    continue  # a compound header stands only for a header, a statement for a statement
                first, last = old.lineno, _header_end(old)
            found.append((cell.replace_lines(first, last, line), cell.checks, f"in place of line {lineno}"))
        return found

    def expression_swaps(self, expr: str) -> list[tuple[str, tuple[str, ...], str]]:
        """The cell with an expression snippet in place of the part of a line it resembles."""
        cell = self.cell
        scored: list[tuple[float, int, int, int]] = []
        failing_values = set()
        for lineno in cell.failing:
            stmt = cell.statement_at(lineno)
            value = getattr(stmt, "value", None) or getattr(stmt, "test", None)
            if isinstance(value, ast.expr):
                failing_values.add((value.lineno, value.col_offset, value.end_col_offset))
        if cell.tree is None:
            return []
        protected = {id(n) for stmt in cell.statements if cell.protected(stmt) for n in ast.walk(stmt)}
        nodes = [
            n
            for n in ast.walk(cell.tree)
            if isinstance(n, ast.expr)
            and id(n) not in protected
            and n.end_lineno == n.lineno
            and n.end_col_offset is not None
            and not _trivial(n)
        ]
        for sub in nodes[:3000]:
            assert sub.end_col_offset is not None
            segment = _segment(cell.lines[sub.lineno - 1], sub.col_offset, sub.end_col_offset)
            ratio = _ratio(expr, segment)
            floor = 0.3 if (sub.lineno, sub.col_offset, sub.end_col_offset) in failing_values else 0.6
            if ratio >= floor and segment.strip() != expr:
                scored.append((ratio, sub.lineno, sub.col_offset, sub.end_col_offset))
        found = []
        for _ratio_value, lineno, start, stop in sorted(set(scored), reverse=True)[:3]:
            line = cell.lines[lineno - 1].encode()
            new_line = (line[:start] + expr.encode() + line[stop:]).decode("utf-8", "replace")
            code = "\n".join([*cell.lines[: lineno - 1], new_line, *cell.lines[lineno:]])
            found.append((code, cell.checks, f"in place of part of line {lineno}"))
        return found

    # ------------------------------------------------------------------ trials

    def check(self, snippet: _Snippet) -> SnippetCheck:
        code = snippet.code

        def verdict(withheld: bool, reason: str, trials: int = 0) -> SnippetCheck:
            return SnippetCheck(snippet.kind, code, withheld, reason, trials)

        if not code.strip():
            return verdict(False, "empty")
        if self.cell.is_own(code):
            return verdict(False, "the student's own code, unchanged")
        candidates = [c for variant in _variants(code) for c in self.candidates(variant)]
        if not candidates:
            return verdict(False, "it cannot stand in for the cell or any line of it")
        trials = 0
        for candidate, checks, how in candidates:
            if normalize_code(candidate) == self.cell.normal:
                continue
            key = (candidate, checks)
            result = self.verdicts.get(key)
            if result is None:
                if self.trials >= self.max_trials or time.monotonic() > self.deadline:
                    return verdict(
                        True, "there was no time left to try it, so it was withheld to be safe", trials
                    )
                result = self.trial(candidate, checks)
                self.verdicts[key] = result
                self.trials += 1
                trials += 1
            if result == "passed":
                return verdict(True, f"it passes {how}", trials)
            if result != "failed":
                return verdict(
                    True, f"its trial {how} ended with {result}, so it was withheld to be safe", trials
                )
        return verdict(False, "no trial of it passed", trials)

    def trial(self, code: str, checks: tuple[str, ...]) -> str:
        spec = TrialSpec(code=code, checks=checks, timeout_s=self.timeout_s, policy=self.policy)
        try:
            outcome = self.runner.run(spec)
        except Exception as err:  # a runner that raises has decided nothing
            return f"sandbox_error ({type(err).__name__})"
        return outcome.status


def _variants(code: str) -> list[str]:
    """``code``, plus what it means when it is a diff (the new side, and a single added line)
    or a console session (the ``>>>`` lines without their prompts)."""
    variants = [code]
    lines = code.split("\n")
    if any(line.startswith(">>> ") for line in lines):
        variants.append("\n".join(line[4:] for line in lines if line.startswith((">>> ", "... "))))
    added = [line for line in lines if line.startswith("+") and not line.startswith("+++")]
    removed = [line for line in lines if line.startswith("-") and not line.startswith("---")]
    if added and removed and _parse(code) is None:
        kept = [line for line in lines if not line.startswith(("-", "@@", "+++"))]
        variants.append("\n".join(line[1:] if line.startswith(("+", " ")) else line for line in kept))
        variants.append("\n".join(line[1:] if line.startswith("+") else line for line in kept))
        if len(added) == 1:
            variants.append(added[0][1:].strip())
    return list(dict.fromkeys(v for v in variants if v.strip()))


def _segment(line: str, start: int, stop: int) -> str:
    """``line[start:stop]`` with the byte offsets ``ast`` uses."""
    return line.encode()[start:stop].decode("utf-8", "replace")


def guard_reply(
    text: str,
    task: RepairTask,
    runner: TrialRunner,
    *,
    timeout_s: float,
    policy: TrialPolicy | None = None,
    max_trials: int = 24,
    budget_s: float | None = None,
) -> GuardedReply:
    """``text`` with every piece of code that would make the cell pass withheld.

    Pieces of code: fenced blocks (any info string or none, also one cut off at the end),
    inline spans that compute something (not a lone name, literal or dotted name such as
    ``total`` or ``df.columns``), and lines of the prose that parse as such Python (a run of
    them, or the longest part of a sentence, as in "change it to total = sum(items)").

    Each piece is tried, with ``runner`` in the sandbox and the cell's checks, as:

    1. the whole cell, when it defines something the cell defines or resembles the cell; with
       the cell's own top-level asserts as extra checks unless the piece has asserts itself;
    2. the cell with the statements the piece redefines (same function, class or assignment
       target) replaced by the piece's versions;
    3. for a one-line piece: the cell with it in place of a failing line (the line that raised
       and each call site in the cell) or of the two lines most like it;
    4. for an expression: the cell with it in place of the part of a line most like it.

    An assert that failed as an assert is never replaced (the check is right, the code before
    it is not); a broken assert (say, a misspelt name in it) is, by an assert only. A piece is
    withheld when a trial passes; also, to be safe, when a trial cannot decide (timeout,
    sandbox error, refused action, ...) or when ``max_trials`` or ``budget_s`` (default: 6
    trial timeouts, at least 30 s) run out. The student's own lines, unchanged, are shown as
    they are. Prose that describes a fix in words is not code and is not checked.
    """
    text = text.replace("\r\n", "\n")
    snippets = _find_snippets(text)
    if not snippets:
        return GuardedReply(text, 0, 0)
    budget = budget_s if budget_s is not None else max(30.0, 6 * timeout_s)
    judge = _Judge(
        _Cell.of(task), runner, timeout_s, policy or TrialPolicy(), max_trials, time.monotonic() + budget
    )
    order = {"block": 0, "inline": 1, "bare": 2}
    checks: dict[int, SnippetCheck] = {}
    for index in sorted(range(len(snippets)), key=lambda i: order[snippets[i].kind]):
        checks[index] = judge.check(snippets[index])
    pieces: list[str] = []
    position = 0
    for index, snippet in enumerate(snippets):
        if checks[index].withheld:
            pieces.append(text[position : snippet.start])
            pieces.append(WITHHELD_BLOCK if _whole_lines(text, snippet) else WITHHELD_INLINE)
            position = snippet.end
    pieces.append(text[position:])
    results = tuple(checks[i] for i in range(len(snippets)))
    return GuardedReply(
        text="".join(pieces),
        withheld=sum(c.withheld for c in results),
        checked=len(results),
        trials=judge.trials,
        snippets=results,
    )


def _whole_lines(text: str, snippet: _Snippet) -> bool:
    """Whether the snippet fills its lines (a block placeholder fits) or sits in a sentence."""
    before = text[: snippet.start].rsplit("\n", 1)[-1]
    after = text[snippet.end :].split("\n", 1)[0]
    return snippet.kind == "block" or not (before.strip() or after.strip())


def _prose_left(text: str) -> str:
    return re.sub(r"\s+", " ", text.replace(WITHHELD_BLOCK, "").replace(WITHHELD_INLINE, "")).strip()


# =========================================================================== the offline tutor

_MEANINGS = {
    "NameError": "Python met a name it doesn't know at that point: it never got a value, it is spelled "
    "differently where it was defined, or it is defined in a cell that hasn't run yet.",
    "UnboundLocalError": "a variable was used inside a function before it got a value there. Assigning "
    "to a name anywhere in a function makes it local to the whole function.",
    "KeyError": "a dictionary or a table was asked for a key (or a column) it doesn't have.",
    "AttributeError": "a value was asked for an attribute or method that its type doesn't have.",
    "TypeError": "an operation or a function got a value of a type it can't work with.",
    "ValueError": "a value had the right type but content that doesn't fit, such as the text 'abc' "
    "turned into a number.",
    "IndexError": "a position outside the list (or string) was asked for. Positions start at 0, so "
    "the last one is the length minus 1.",
    "ZeroDivisionError": "a number was divided by zero.",
    "AssertionError": "an assert check was false: the code ran, but a result is not what the check expects.",
    "SyntaxError": "Python couldn't read the code: something is missing or out of place, such as a "
    "bracket, a colon or a quote.",
    "IndentationError": "the spaces at the start of a line don't match the structure Python expects "
    "(the lines of a block after a colon must be indented alike).",
    "ModuleNotFoundError": "an import named a module that isn't installed, or is spelled differently.",
    "ImportError": "an import asked a module for a name it doesn't have.",
    "FileNotFoundError": "there is no file at that path, seen from the folder the notebook runs in.",
    "RecursionError": "a function kept calling itself without reaching a case that stops.",
}
_GENERIC_MEANING = "an operation could not be done with the values it was given."

_NUDGES = {
    "NameError": "check the spelling of each name there, and where each one gets its value.",
    "UnboundLocalError": "check where that variable first gets a value inside the function.",
    "KeyError": "compare the key or column name you use with the ones that really exist. Spelling "
    "and capital letters matter.",
    "AttributeError": "check what type the value before the dot is, and what that type can do.",
    "TypeError": "check the types of the values involved (type() tells you what each one is).",
    "ValueError": "check what the value really contains at that moment.",
    "IndexError": "check which positions exist and which one is asked for.",
    "ZeroDivisionError": "check what you divide by, and when it can be zero.",
    "AssertionError": "work out by hand what the result should be for the check's input, then "
    "follow your code step by step and compare.",
    "SyntaxError": "look for a missing or extra bracket, colon or quote on that line or the one before.",
    "IndentationError": "check the spaces at the start of the lines around it.",
    "ModuleNotFoundError": "check the module's name and whether it is installed.",
    "ImportError": "check the name you import and the module you import it from.",
    "FileNotFoundError": "check the file's name and the folder it is in.",
    "RecursionError": "check that every call gets closer to the case that stops.",
}
_GENERIC_NUDGE = "check what each value on that line holds at that moment."

_NEARLY = {
    "NameError": "If you meant a name that exists, make both spellings match exactly. If the name "
    "should come from another cell, run that cell first; if it is a module, it needs an import.",
    "UnboundLocalError": "Give the variable a value inside the function before you use it, or pass "
    "it in as an argument.",
    "KeyError": "Use the key exactly as it is written in the data, capital letters included. Listing "
    "the keys (or a table's columns) shows you what is there.",
    "AttributeError": "Use a method the type really has; names are case-sensitive. If the value "
    "isn't the type you expected, look at where it got its value.",
    "TypeError": "Compare the type of each value on that line (type() tells you) with what the "
    "operation needs, and look at where the unexpected one got its value.",
    "ValueError": "Clean or convert the value first, or pick an operation that fits what it holds.",
    "IndexError": "Keep the position between 0 and the length minus 1: look at where your range or "
    "index starts and where it stops.",
    "ZeroDivisionError": "Decide what the answer should be when there is nothing to divide by (an "
    "empty list, say) and handle that case before dividing.",
    "AssertionError": "Run your code on the check's input on its own and print the values in between "
    "(a print inside a loop helps). The first value that differs from what you expect shows the step "
    "to change. Usual suspects: capital letters, the first or last item, a range that stops one too "
    "early, dividing by the wrong count.",
    "SyntaxError": "Read the line character by character: every opening bracket or quote needs its "
    "partner, and a line that starts a block (if, for, def, ...) ends with a colon.",
    "IndentationError": "Indent the lines of one block by the same amount (4 spaces is usual).",
    "ModuleNotFoundError": "Install the package (in a cell: %pip install NAME), or fix the spelling "
    "of the import.",
    "ImportError": "Check the module's documentation for the exact name, capital letters included.",
    "FileNotFoundError": "Compare the path with the files that really exist; a path without a folder "
    "is looked up next to the notebook.",
    "RecursionError": "Make sure the function has a case that returns without calling itself, and "
    "that each call moves towards it.",
}
_GENERIC_NEARLY = (
    "Look at the values on that line one at a time (print them) and compare each with what you expected."
)


# ---- remedies that fit the error seen: the message decides, not only the error type


@dataclass(frozen=True)
class _Rule:
    """What one kind of error message means and what fixes it. ``{got}``, ``{op}``... come from
    the pattern's named groups (``{a_got}``: with its article); ``extra`` adds a sentence for one
    value of ``got``; ``needs`` names what the operation needs of its value (see ``_NEEDS``)."""

    pattern: str
    meaning: str
    remedy: str
    needs: str = ""
    when: Callable[[dict[str, str]], bool] | None = None
    extra: Mapping[str, str] = field(default_factory=dict)


_NUMBER_TYPES = frozenset({"int", "float", "complex", "int64", "int32", "float64", "float32", "bool"})
_COLLECTIONS = frozenset({"list", "tuple", "dict", "set", "frozenset"})


def _str_and_number(groups: dict[str, str]) -> bool:
    kinds = {groups.get("left", ""), groups.get("right", ""), groups.get("got", "str")}
    return "str" in kinds and bool(kinds & _NUMBER_TYPES)


def _collection_involved(groups: dict[str, str]) -> bool:
    return bool({groups.get("left"), groups.get("right")} & _COLLECTIONS)


_NONE_RULE = _Rule(
    r"NoneType",
    'a value was None, Python\'s value for "nothing", where a real value was needed.',
    "Find where that value became None: a function without a return statement gives back None, and so "
    "do methods that change a list in place, such as sort(), append() and reverse(). Use the list "
    "itself after such a method, or make your function return its result.",
)
_MIX_MEANING = "text (a str) and a number were combined, and Python never turns one into the other by itself."
_MIX_REMEDY = (
    "Make the values the same kind before combining them: turn a number into text with str(), or text "
    "that holds a number into a number with int() (whole numbers) or float()."
)
_OTHER_OPERANDS = _Rule(
    r"unsupported operand type\(s\) for (?P<op>\S+?)=?: '(?P<left>[\w.]+)' and '(?P<right>[\w.]+)'",
    "the operator {op} can't work on {a_left} and {a_right}.",
    "Check which of the two values isn't what you expected, and where it got its value: {op} needs two "
    "values it can combine, such as two numbers.",
)

_RULES: dict[str, tuple[_Rule, ...]] = {
    "TypeError": (
        _NONE_RULE,
        _Rule(
            r"object of type '(?P<got>[\w.]+)' has no len\(\)",
            "len() was given {a_got}, which has no length: len() counts the items of a collection such "
            "as a list, a string or a dict.",
            "Give len() the collection whose items you want to count, not a single {got}.",
            needs="sized",
        ),
        _Rule(
            r"'(?P<got>[\w.]+)' object is not iterable",
            "Python tried to go through {a_got} item by item (in a for loop, or in sum(), list(), sorted() "
            "or unpacking), but {a_got} holds no items.",
            "Go through the collection itself, not a single {got}.",
            needs="iterable",
            extra={"int": " To repeat something a number of times, go through range() of that number."},
        ),
        _Rule(
            r"'(?P<got>[\w.]+)' object is not callable",
            "round brackets after a value call it like a function, but {a_got} can't be called.",
            "Either a name that should be a function holds {a_got} here (a variable named like a "
            "function, such as sum, list or max, hides that function until you rename the variable and "
            "restart the kernel), or a * is missing before a bracket: Python never multiplies without it.",
            needs="callable",
        ),
        _Rule(
            r"'(?P<got>[\w.]+)' object is not subscriptable",
            "square brackets ask a value for one of its items, but {a_got} has no items.",
            "Use square brackets on the list, the dict or the text itself, not on a single {got}.",
            needs="subscriptable",
            extra={
                "function": " A function is called with round brackets.",
                "method": " A method is called with round brackets.",
                "builtin_function_or_method": " A function is called with round brackets.",
            },
        ),
        _Rule(r'can only concatenate str \(not "(?P<got>[\w.]+)"\) to str', _MIX_MEANING, _MIX_REMEDY),
        _Rule(_OTHER_OPERANDS.pattern, _MIX_MEANING, _MIX_REMEDY, when=_str_and_number),
        _Rule(
            r"'(?P<op>[<>]=?)' not supported between instances of '(?P<left>[\w.]+)' and '(?P<right>[\w.]+)'",
            _MIX_MEANING,
            _MIX_REMEDY,
            when=_str_and_number,
        ),
        _Rule(
            r"'(?P<op>[<>]=?)' not supported between instances of '(?P<left>[\w.]+)' and '(?P<right>[\w.]+)'",
            "{op} can't compare {a_left} with {a_right}.",
            "Compare values of the same kind: check where the unexpected one got its value.",
        ),
        _Rule(
            r'can only concatenate (?P<have>list|tuple) \(not "(?P<got>[\w.]+)"\) to (?:list|tuple)',
            "+ joins two values of the same kind, and here {a_have} met {a_got}.",
            "To add one item to a list, use its append() method, or put the item in a list of its own "
            "before joining the two.",
        ),
        _Rule(
            _OTHER_OPERANDS.pattern,
            _OTHER_OPERANDS.meaning,
            _OTHER_OPERANDS.remedy
            + " To compute with the items of a collection, go through them (or total them with sum()).",
            when=_collection_involved,
        ),
        _OTHER_OPERANDS,
        _Rule(
            r"(?P<fn>[\w.<>]+)\(\) (?:takes|missing|got an unexpected keyword|got multiple values)",
            "the call to {fn}() passes a different number of arguments (or different names) than the "
            "definition of {fn}() takes.",
            "Compare the call with the def line of {fn}(): count the arguments it expects and check their "
            "names.",
        ),
        _Rule(
            r"can't multiply sequence by non-int of type '(?P<got>[\w.]+)'",
            "a list or a text was multiplied by {a_got}, and repeating a sequence needs a whole number.",
            "If the value is a number written as text, turn it into a number first with float() or int(); "
            "to compute with the items of a list, go through them; to repeat a list or a text, multiply "
            "it by a whole number.",
        ),
        _Rule(
            r"'(?P<got>[\w.]+)' object cannot be interpreted as an integer",
            "range() and positions need a whole number (an int), and they got {a_got}.",
            "Turn the value into a whole number with int() first.",
            extra={"float": " Dividing with // also gives a whole number."},
        ),
        _Rule(
            r"unhashable type: '(?P<got>[\w.]+)'",
            "dictionary keys and set members must be values that never change (numbers, text, tuples), "
            "and {a_got} can change.",
            "Use a value that can't change as the key: a tuple instead of a list, for example, or the "
            "text or number that identifies the item.",
        ),
        _Rule(
            r"(?P<have>string|list|tuple) indices must be integers",
            "positions in a {have} are whole numbers, and the position given was not one.",
            "Use a whole-number position (int() converts text that holds one); a name in square brackets "
            "works only on a dict, so check whether the value is the dict you expected.",
        ),
        _Rule(
            r"sequence item \d+: expected str instance, (?P<got>[\w.]+) found",
            "join() only joins text, and one of the items was {a_got}.",
            "Turn every item into text before joining them (str() does that for one item).",
        ),
    ),
    "ValueError": (
        _Rule(
            r"(?:too many|not enough) values to unpack",
            "unpacking gives each name on the left of = one value from the right, and the numbers "
            "don't match.",
            "Make the number of names on the left match the number of items on the right: print the value "
            "you unpack to count its items.",
        ),
        _Rule(
            r"invalid literal for int\(\)|could not convert string to float",
            "the text given to be turned into a number doesn't hold a number Python can read.",
            "Check the text before you convert it (print it to see what it holds): int() reads whole "
            "numbers only (text like '3.5' is read by float instead), and spaces or commas must go first.",
        ),
        _Rule(
            r"math domain error",
            "a math function got a value outside the ones it accepts, such as the square root or the "
            "logarithm of a negative number.",
            "Check the value before the call: where can it become negative (or zero)?",
        ),
    ),
    "IndexError": (
        _Rule(
            r"empty",
            "an item was taken from a list (or a collection) that was empty at that moment.",
            "Check that the list gets its items before this line, or handle the empty case first.",
        ),
    ),
    "AttributeError": (
        _NONE_RULE,
        _Rule(
            r"module '(?P<module>[\w.]+)' has no attribute '(?P<attr>\w+)'",
            "the module {module} has nothing called {attr}.",
            "Check the name in the module's documentation, capital letters included.",
        ),
        _Rule(
            r"'(?P<got>[\w.]+)' object has no attribute '(?P<attr>\w+)'",
            "{a_got} was asked for {attr}, which a {got} doesn't have.",
            "Use a method {a_got} really has (names are case-sensitive); if the value isn't the type you "
            "expected, look at where it got its value.",
        ),
    ),
}

#: What an operation needs of a value: the attribute that shows it, and the words for it.
_NEEDS = {
    "sized": ("__len__", "a collection"),
    "iterable": ("__iter__", "a collection"),
    "subscriptable": ("__getitem__", "a collection"),
    "callable": ("__call__", "a function"),
}
#: Calls that go through their argument item by item.
_ITERATING_CALLS = frozenset(
    {"sum", "list", "sorted", "set", "tuple", "enumerate", "zip", "max", "min", "any", "all"}
)


class _Fields(dict[str, str]):
    def __missing__(self, key: str) -> str:
        return ""


def _rule_for(kind: str, message: str) -> tuple[_Rule, _Fields] | None:
    """The first rule of ``kind`` whose pattern matches the message (and whose ``when`` holds)."""
    for rule in _RULES.get(kind, ()):
        match = re.search(rule.pattern, message)
        if match is None:
            continue
        groups = {k: v for k, v in match.groupdict().items() if v}
        if rule.when is not None and not rule.when(groups):
            continue
        fields = _Fields(groups)
        fields.update({f"a_{k}": _a(v) for k, v in groups.items()})
        return rule, fields
    return None


def _meaning(kind: str, message: str) -> str:
    found = _rule_for(kind, message)
    if found is None:
        return _MEANINGS.get(kind, _GENERIC_MEANING)
    rule, fields = found
    return rule.meaning.format_map(fields)


def _remedy(kind: str, message: str) -> str:
    found = _rule_for(kind, message)
    if found is None:
        return _NEARLY.get(kind, _GENERIC_NEARLY)
    rule, fields = found
    return rule.remedy.format_map(fields) + rule.extra.get(fields["got"], "")


def _a(word: str) -> str:
    return ("an " if word[:1].lower() in "aeiou" else "a ") + word


def _upper_first(text: str) -> str:
    return text[:1].upper() + text[1:]


def _kind_of(error_type: str) -> str:
    if error_type in _MEANINGS:
        return error_type
    if error_type.endswith("IndentationError") or error_type == "TabError":
        return "IndentationError"
    return error_type


def _where(task: RepairTask) -> str:
    failure = task.failures[0]
    if failure.where == task.label and failure.lineno:
        return f"line {failure.lineno} of your cell"
    if failure.where.startswith("check"):
        return f"the {failure.where} that runs after your cell"
    return "your cell"


def _values_text(task: RepairTask) -> str:
    failure = task.failures[0]
    shown = [
        f"{v.name} was {v.text.strip().splitlines()[0][:120]}" for v in failure.values[:3] if v.text.strip()
    ]
    return f" At that moment, {'; '.join(shown)}." if shown else ""


def _assertion_text(task: RepairTask) -> str:
    failure = task.failures[0]
    if not failure.assertion:
        return ""
    wheres = []
    for line in failure.assertion.splitlines()[1:]:
        match = re.match(r"\s*where (.+?) = (?:\w+ )?(.+)$", line)
        if match:
            wheres.append(f"{match.group(1)} gave {match.group(2)}")
    if not wheres:
        return ""
    return " The check saw: " + "; ".join(wheres[:3]) + "."


def _identifiers(line: str) -> list[str]:
    return list(dict.fromkeys(re.findall(r"[A-Za-z_]\w*", line)))


def _close(word: str, options: Iterable[str]) -> str | None:
    pool = sorted({o for o in options if isinstance(o, str) and o and o != word})
    same_case = [o for o in pool if o.lower() == word.lower()]
    if same_case:
        return same_case[0]
    matches = difflib.get_close_matches(word, pool, n=1, cutoff=0.75)
    return matches[0] if matches else None


def _close_suggestion(task: RepairTask) -> str:
    """A name, attribute or key that exists and resembles the missing one (level 3)."""
    failure = task.failures[0]
    namespace = task.namespace
    message = failure.message
    try:
        if failure.error_type in ("NameError", "UnboundLocalError"):
            match = re.search(r"name '(\w+)' is not defined", message)
            if match:
                tree = _parse(task.code)
                stored = [n.id for n in ast.walk(tree) if isinstance(n, ast.Name)] if tree else []
                names = [k for k in namespace if isinstance(k, str) and not k.startswith("_")]
                found = _close(match.group(1), [*names, *stored, *dir(builtins)])
                if found:
                    return f" A name that does exist and looks similar: {found}."
        elif failure.error_type == "AttributeError":
            match = re.search(r"'(\w+)' object has no attribute '(\w+)'", message)
            if match:
                options: list[str] = []
                for name in _identifiers(failure.line):
                    value = namespace.get(name)
                    if value is not None and type(value).__name__ == match.group(1):
                        options.extend(dir(type(value)))
                found = _close(match.group(2), [o for o in options if not o.startswith("_")])
                if found:
                    return f" A {match.group(1)} does have something with a similar name: {found}."
        elif failure.error_type == "KeyError":
            key = ast.literal_eval(message.strip()) if message.strip() else None
            if isinstance(key, str):
                keys: list[str] = []
                for name in _identifiers(failure.line):
                    value = namespace.get(name)
                    if type(value) is dict and len(value) <= 5000:
                        keys.extend(k for k in value if isinstance(k, str))
                    elif type(value).__module__.startswith("pandas") and hasattr(value, "columns"):
                        columns: Any = getattr(value, "columns", ())
                        keys.extend(str(c) for c in list(columns)[:2000])
                found = _close(key, keys)
                if found:
                    return f" The closest key that exists is {found!r}."
    except Exception:  # hints never fail because of an odd object
        return ""
    return ""


# ---- facts the hint is grounded in: the offline tier's verified candidates, the cell's own loops,
# and the names in scope


def _failing_node(line: str) -> ast.AST | None:
    """The failing line parsed on its own (a compound header gets a body to parse)."""
    text = line.strip()
    for source in (text, text + "\n    pass"):
        tree = _parse(source)
        if tree is not None and tree.body:
            return tree.body[0]
    return None


def _positions(node: ast.AST, needs: str) -> list[ast.expr]:
    """The expressions of ``node`` in the place that needs ``needs`` (``len(HERE)``, ...)."""
    found: list[ast.expr] = []
    for sub in ast.walk(node):
        if needs == "sized" and isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name):
            if sub.func.id == "len":
                found.extend(sub.args[:1])
        elif needs == "iterable":
            if isinstance(sub, (ast.For, ast.comprehension)):
                found.append(sub.iter)
            elif (
                isinstance(sub, ast.Call)
                and isinstance(sub.func, ast.Name)
                and sub.func.id in _ITERATING_CALLS
            ):
                found.extend(sub.args)
        elif needs == "callable" and isinstance(sub, ast.Call):
            found.append(sub.func)
        elif needs == "subscriptable" and isinstance(sub, ast.Subscript):
            found.append(sub.value)
    return found


def _short_type(type_name: str) -> str:
    return type_name.split(".")[-1].split()[0] if type_name.strip() else ""


def _culprits(task: RepairTask, needs: str, got: str) -> list[tuple[str, str]]:
    """(name, its value as captured) for the names in the needing place whose value is a ``got``."""
    failure = task.failures[0]
    node = _failing_node(failure.line)
    if node is None:
        return []
    values = {v.name: v for v in failure.values}
    found = []
    for expr in _positions(node, needs):
        if isinstance(expr, ast.Name) and expr.id in values:
            value = values[expr.id]
            if _short_type(value.type_name) == got:
                found.append((expr.id, value.text.strip().splitlines()[0][:80]))
    return list(dict.fromkeys(found))


def _loop_over(tree: ast.Module, name: str) -> tuple[str, int] | None:
    """The collection a loop of the cell goes over with ``name`` as its variable, and its line."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.For, ast.AsyncFor)) and isinstance(node.target, ast.Name):
            if node.target.id == name:
                return ast.unparse(node.iter), node.lineno
        elif isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            for generator in node.generators:
                if isinstance(generator.target, ast.Name) and generator.target.id == name:
                    return ast.unparse(generator.iter), node.lineno
    return None


def _collections_in(tree: ast.Module) -> set[str]:
    """Names the cell itself shows to be collections: looped over, or given a list/dict/... value."""
    displays = (ast.List, ast.Tuple, ast.Dict, ast.Set, ast.ListComp, ast.SetComp, ast.DictComp)
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)) and isinstance(node.iter, ast.Name):
            found.add(node.iter.id)
        elif isinstance(node, ast.Assign) and isinstance(node.value, displays):
            found.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return found


def _scope_at(tree: ast.Module, lineno: int | None) -> set[str]:
    """Names bound where line ``lineno`` of the cell runs: its functions' and the cell's own."""
    names = set(bound_names(tree))
    if lineno is None:
        return names
    for node in ast.walk(tree):
        inside = isinstance(node, ast.stmt) and node.lineno < lineno <= (node.end_lineno or node.lineno)
        if inside and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names |= bound_names(node)
    return names


def _close_in_scope(task: RepairTask, tree: ast.Module, name: str, needs: str) -> str | None:
    """A name in scope close to ``name`` (as the offline tier judges closeness) whose value is
    known to be what the operation needs: only then is it worth pointing at."""
    failure = task.failures[0]
    lineno = failure.lineno if failure.where == task.label else None
    scope = _scope_at(tree, lineno)
    pool = sorted(scope | {k for k in task.namespace if isinstance(k, str) and not k.startswith("_")})
    close = _offline._close_matches(name, pool)
    if not close:  # a short name: one keystroke away, and the only one (as the tier does in functions)
        near = [n for n in scope if n != name and len(n) >= 2 and _offline._distance(name, n, 1) == 1]
        close = near if len(near) == 1 else []
    attribute, _ = _NEEDS[needs]
    statically = _collections_in(tree) if needs != "callable" else set()
    for candidate in close:
        if candidate in task.namespace and candidate not in scope:
            if hasattr(type(task.namespace[candidate]), attribute):
                return candidate
        elif candidate in statically:
            return candidate
    return None


def _type_facts(task: RepairTask) -> str:
    """For an operation that got the wrong kind of value: which name holds it, what that name
    is (a loop's variable, a function's name hidden by a value), and a close name that fits."""
    failure = task.failures[0]
    found = _rule_for(_kind_of(failure.error_type), failure.message)
    tree = _parse(task.code)
    if found is None or not found[0].needs or not found[1]["got"] or tree is None:
        return ""
    rule, fields = found
    facts = []
    for name, value in _culprits(task, rule.needs, fields["got"])[:2]:
        loop = _loop_over(tree, name)
        if loop is not None:
            facts.append(
                f"`{name}` is the loop variable of the loop over `{loop[0]}` on line {loop[1]}: it holds "
                f"one item at a time (here, {value})."
            )
        if rule.needs == "callable" and hasattr(builtins, name):
            facts.append(
                f"`{name}` is the name of a Python function, and a value given to `{name}` hides it."
            )
        close = _close_in_scope(task, tree, name, rule.needs)
        if close is not None:
            facts.append(f"A name in scope close to `{name}` that is {_NEEDS[rule.needs][1]}: `{close}`.")
    return " " + " ".join(facts) if facts else ""


_TOKEN = re.compile(r"\w+|'(?:[^'\\\n]|\\.)*'|\"(?:[^\"\\\n]|\\.)*\"|\S")
_CONVERSIONS = {"str": "text", "int": "a whole number", "float": "a number"}
_CLOSE_WORDS = {
    "NameError": "A name that exists and is close to `{old}`: `{new}`.",
    "UnboundLocalError": "A name that exists and is close to `{old}`: `{new}`.",
    "AttributeError": "An attribute that exists and is close to `{old}`: `{new}`.",
    "KeyError": "The closest key that exists is {new}.",
    "ModuleNotFoundError": "A module that exists and is close to `{old}`: `{new}`.",
    "ImportError": "A name that exists and is close to `{old}`: `{new}`.",
}


def _described(text: str, failure: Failure) -> str:
    """How a value reads in a hint: "text (a str)", "a number", or its captured type."""
    types = {v.name: _short_type(v.type_name) for v in failure.values}
    kind = types.get(text) or ("str" if text[:1] in "'\"" else "int" if text.isdigit() else "")
    if kind == "str":
        return "text (a str)"
    if kind in _NUMBER_TYPES:
        return "a number"
    return _a(kind) if kind else "a value of another kind"


def _unwrapped(code: str, fixed: str) -> tuple[str, str] | None:
    """(function, expression) when ``fixed`` is ``code`` with one ``str(...)``/``int(...)``/
    ``float(...)`` put around an expression."""
    for function in _CONVERSIONS:
        for match in re.finditer(rf"\b{function}\(", fixed):
            depth, end = 1, match.end()
            while end < len(fixed) and depth:
                depth += {"(": 1, ")": -1}.get(fixed[end], 0)
                end += 1
            inner = fixed[match.end() : end - 1]
            if depth == 0 and fixed[: match.start()] + inner + fixed[end:] == code:
                return function, inner
    return None


def _substituted(code: str, fixed: str) -> tuple[str, str] | None:
    """(old, new) when ``fixed`` is ``code`` with one token replaced by another (everywhere)."""
    old, new = _TOKEN.findall(code), _TOKEN.findall(fixed)
    ops = [
        op for op in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes() if op[0] != "equal"
    ]
    pairs = {(" ".join(old[i1:i2]), " ".join(new[j1:j2])) for _, i1, i2, j1, j2 in ops}
    single = all(tag == "replace" and i2 - i1 == j2 - j1 == 1 for tag, i1, i2, j1, j2 in ops)
    return next(iter(pairs)) if ops and single and len(pairs) == 1 else None


def _literal(token: str) -> str:
    """A string literal as Python shows it ('price', whatever quotes the cell used)."""
    if token[:1] not in "'\"":
        return token
    try:
        return repr(ast.literal_eval(token))
    except (ValueError, SyntaxError):
        return token


def _fix_fact(code: str, fixed: str, failure: Failure) -> str:
    """The offline tier's candidate in words: a close name it substitutes, a conversion it wraps
    around a value, or an import it adds. '' for any other kind of edit."""
    substituted = _substituted(code, fixed)
    if substituted is not None:
        words = _CLOSE_WORDS.get(_kind_of(failure.error_type), "`{old}` looks like a slip for `{new}`.")
        return words.format(old=_literal(substituted[0]), new=_literal(substituted[1]))
    wrapped = _unwrapped(code, fixed)
    if wrapped is not None:
        function, inner = wrapped
        return (
            f"`{inner}` is {_described(inner, failure)} here: {function}() turns it into "
            f"{_CONVERSIONS[function]}."
        )
    added = [line.strip() for line in fixed.split("\n") if line.strip() and line.strip() not in code]
    if len(added) == 1 and re.match(r"(?:import|from)\s", added[0]):
        return f"The module {added[0].split()[1]} provides the missing name, and nothing has imported it yet."
    return ""


def _tier_fact(
    task: RepairTask, runner: TrialRunner | None, timeout_s: float, policy: TrialPolicy | None
) -> str:
    """What the offline tier (the same quick fixes the fix mode tries first) knows about this
    failure, in words. With a ``runner``, only a candidate whose trial passes counts, so the hint
    never points at a change that does not work; without one, the tier's first candidate."""
    failure = task.failures[0]
    context = RepairContext(code=task.code, failure=failure, namespace=task.namespace)
    try:
        fixes, _ = _offline.propose_fixes(context)
    except Exception:  # a hint never fails because of the quick-fix tier
        return ""
    for fix in fixes[:3]:
        if runner is not None and not _passes(fix.code, task, runner, timeout_s, policy):
            continue
        fact = _fix_fact(task.code, fix.code, failure)
        if fact or runner is None:
            return fact
    return ""


def _passes(
    code: str, task: RepairTask, runner: TrialRunner, timeout_s: float, policy: TrialPolicy | None
) -> bool:
    spec = TrialSpec(
        code=code, checks=tuple(task.checks), timeout_s=timeout_s, policy=policy or TrialPolicy()
    )
    try:
        return runner.run(spec).status == "passed"
    except Exception:  # a runner that raises has decided nothing
        return False


def _facts(
    task: RepairTask, runner: TrialRunner | None, timeout_s: float = 10.0, policy: TrialPolicy | None = None
) -> str:
    """The grounded part of hint 3: the tier's verified candidate, else what the cell and its
    values show about the wrong-typed value, else a close name, attribute or key."""
    tier = _tier_fact(task, runner, timeout_s, policy)
    if tier:
        return " " + tier
    return _type_facts(task) or _close_suggestion(task)


def tutor_text(
    task: RepairTask,
    *,
    mode: str,
    level: int = 1,
    runner: TrialRunner | None = None,
    timeout_s: float = 10.0,
    policy: TrialPolicy | None = None,
) -> str:
    """nbrefine's own explanation (``mode="explain"``) or hint at ``level`` 1 to 3, built from
    the captured failure without a model. Plain words; never code. The meaning and the remedy
    are those of the error message seen (``_RULES``), never another error's; hint 3 is grounded
    in what the offline tier finds (with ``runner``, only a candidate that passes its trial),
    the cell's loops and the names in scope (``_facts``)."""
    if not task.failures:
        return "The cell ran, but nbrefine could not see what went wrong, so it has no hint for it."
    failure = task.failures[0]
    kind = _kind_of(failure.error_type)
    where = _where(task)
    detail = failure.message.strip().splitlines()[0][:200] if failure.message.strip() else ""
    said = f" The message was: {detail}." if detail else ""
    if mode == "explain":
        meaning = _meaning(kind, failure.message)
        return (
            f"Python stopped at {where} with {_a(failure.error_type)}. This means {meaning}"
            f"{said}{_assertion_text(task)}{_values_text(task)}"
        )
    if level <= 1:
        return f"Have a look at {where}: {_NUDGES.get(kind, _GENERIC_NUDGE)}"
    if level == 2:
        return (
            f"At {where}, Python raised {_a(failure.error_type)}.{said}{_assertion_text(task)}"
            f"{_values_text(task)} {_upper_first(_NUDGES.get(kind, _GENERIC_NUDGE))}"
        )
    return f"{_remedy(kind, failure.message)}{_facts(task, runner, timeout_s, policy)}"


class OfflineTutor:
    """Explanations and hints without a model (no API key needed), from the captured failure.

    It is a :class:`Provider` (answering a request's context with a first hint), but
    :func:`teach` calls :meth:`reply` directly, with the mode and level."""

    name = "offline-tutor"
    model = "offline-tutor"

    def reply(
        self,
        task: RepairTask,
        *,
        mode: str,
        level: int,
        runner: TrialRunner | None = None,
        timeout_s: float = 10.0,
        policy: TrialPolicy | None = None,
    ) -> ProviderReply:
        text = tutor_text(task, mode=mode, level=level, runner=runner, timeout_s=timeout_s, policy=policy)
        return ProviderReply(text, self.model, stop_reason="end_turn")

    def complete(self, request: ProviderRequest, on_text: TextCallback | None = None) -> ProviderReply:
        context = request.context
        if context is None or context.failure is None:
            return ProviderReply("the offline tutor needs the failure", self.model, stop_reason=DECLINED)
        task = RepairTask(code=context.code, failures=(context.failure,), namespace=context.namespace)
        reply = self.reply(task, mode="hint", level=1)
        if on_text is not None:
            on_text(reply.text)
        return reply


# =========================================================================== one teaching turn


@dataclass(frozen=True)
class TeachingResult:
    """The outcome of one request for help in a teaching mode.

    ``status``: ``"hint"`` (``text`` is the guarded explanation or hint to show), ``"exhausted"``
    (no hints left: ``text`` says so kindly), ``"fix_loop"`` (fix mode, or the solution the
    graduated policy allows: run the normal repair loop) or ``"error"`` (``message`` says why;
    nothing was counted)."""

    step: TeachingStep
    status: str
    text: str = ""
    mode: str = "fix"
    hints_used: int = 0
    hint_cap: int | None = None
    next_kind: str = "exhausted"  # what asking again gives: next_step(...).kind
    withheld: int = 0
    checked: int = 0
    message: str = ""
    provider: str = ""
    model: str = ""
    request: ProviderRequest | None = field(default=None, repr=False)
    reply: ProviderReply | None = field(default=None, repr=False)
    guard: GuardedReply | None = field(default=None, repr=False)

    @property
    def counter(self) -> str:
        """ "Hints used: 2 of 3" (for the panel)."""
        noun = "Explanations" if self.mode == "explain" else "Hints"
        cap = self.hint_cap
        return f"{noun} used: {self.hints_used}" + (f" of {cap}" if cap else "")

    @property
    def more_available(self) -> bool:
        """Whether asking again gives another hint (or the solution the policy allows)."""
        return self.next_kind not in ("exhausted", "fix")

    @property
    def next_label(self) -> str:
        """The label of the panel's button that asks again ('' when there is nothing more)."""
        return {
            "hint": "Another hint",
            "explain": "Explain again",
            "solution": "Show the full solution",
        }.get(self.next_kind, "")

    def render(self) -> str:
        """Plain text for a terminal or a text panel."""
        parts = [self.step.header()] if self.step.header() else []
        parts.append(self.text if self.status != "error" else self.message)
        if self.status in ("hint", "exhausted"):
            parts.append(f"({self.counter})")
        return "\n\n".join(p for p in parts if p)


def teach(
    task: RepairTask,
    provider: Provider,
    runner: TrialRunner,
    redactor: Redactor,
    policy: TeachingPolicy,
    *,
    ledger: HintLedger,
    key: str,
    timeout_s: float = 10.0,
    trial_policy: TrialPolicy | None = None,
    max_tokens: int = 800,
    budget: int = 12000,
    user_note: str = "",
    on_event: Callable[[str, dict[str, Any]], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> TeachingResult:
    """Give the next explanation or hint for the failing cell ``key`` under ``policy``.

    The reply never streams to the student: it is shown only after :func:`guard_reply` has
    checked it. With :class:`OfflineTutor` as ``provider`` no model is asked. A reply that is
    all code (withheld) or declined gets nbrefine's own hint at the same level instead.
    ``KeyboardInterrupt`` propagates when ``should_stop`` turns true while the reply streams."""
    emit = on_event or (lambda kind, payload: None)
    used = ledger.used(key)
    step = next_step(policy, used)
    common: dict[str, Any] = {"mode": policy.mode, "hint_cap": policy.hint_cap}
    if step.runs_fix_loop:
        return TeachingResult(step, "fix_loop", hints_used=used, next_kind=step.kind, **common)
    if step.kind == "exhausted":
        return TeachingResult(
            step, "exhausted", _exhausted_text(policy), hints_used=used, next_kind="exhausted", **common
        )
    mode = "explain" if step.kind == "explain" else "hint"
    level = step.level or 1
    request = teaching_request(
        task,
        redactor,
        mode=mode,
        level=level,
        previous_hints=ledger.hints(key),
        budget=budget,
        max_tokens=max_tokens,
        number=step.number,
        total=step.total,
        user_note=user_note,
    )
    emit("teaching_request", {"step": step.header(), "provider": provider.name, "model": provider.model})

    def check_stop(_piece: str) -> None:  # pieces are never shown: only the guarded whole is
        if should_stop is not None and should_stop():
            raise KeyboardInterrupt

    tutor = OfflineTutor()
    grounding: dict[str, Any] = {"runner": runner, "timeout_s": timeout_s, "policy": trial_policy}
    try:
        if isinstance(provider, OfflineTutor):
            reply = provider.reply(task, mode=mode, level=level, **grounding)
        else:
            reply = provider.complete(request, check_stop)
    except ProviderError as err:
        message = (
            f"nbrefine couldn't get a hint this time ({err}). Nothing was counted, so you can ask again."
        )
        return TeachingResult(
            step, "error", message=message, hints_used=used, next_kind=step.kind, request=request, **common
        )
    emit("teaching_reply", {"chars": len(reply.text)})
    text = reply.text if reply.stop_reason != DECLINED else ""
    guarded = guard_reply(text, task, runner, timeout_s=timeout_s, policy=trial_policy)
    emit("guard_done", {"withheld": guarded.withheld, "checked": guarded.checked, "trials": guarded.trials})
    shown = guarded.text.strip()
    if len(_prose_left(shown)) < 40:
        own = tutor.reply(task, mode=mode, level=level, **grounding).text
        what = "explanation" if mode == "explain" else "hint"
        shown = f"{shown}\n\nHere is nbrefine's own {what} instead: {own}" if shown else own
    hints_used = ledger.record(key, shown)
    return TeachingResult(
        step,
        "hint",
        shown,
        hints_used=hints_used,
        next_kind=next_step(policy, hints_used).kind,
        withheld=guarded.withheld,
        checked=guarded.checked,
        provider=provider.name,
        model=reply.model,
        request=request,
        reply=reply,
        guard=guarded,
        **common,
    )
