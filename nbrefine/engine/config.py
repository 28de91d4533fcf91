"""``Refine``: nbrefine's settings as a traitlets Configurable.

``%config Refine.max_attempts = 5`` and ``c.Refine.provider = "anthropic"`` in an IPython
profile both work. ``NBREFINE_PROVIDER`` / ``NBREFINE_MODEL`` set the defaults; explicit
configuration beats the environment, and per-cell options beat both. It lives in the engine so
that both adapters read it: the magics (:mod:`nbrefine.ipython`) and the command line
(:mod:`nbrefine.cli`, which maps its flags onto these traits).

May import: traitlets, the standard library, the names of the modes (:mod:`.modes`) and (lazily)
the engine's teaching policy holder.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from typing import Any

from traitlets import Bool, Dict, Enum, Float, Int, TraitError, Unicode, default, validate
from traitlets.config import Configurable

from .modes import MODES

__all__ = ["Refine"]


def _whole(floor: int, ceiling: int | None = None) -> Callable[[str, Any], int]:
    def rule(label: str, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TraitError(f"{label} must be a whole number, not {value!r}")
        if value < floor or (ceiling is not None and value > ceiling):
            within = f"between {floor} and {ceiling}" if ceiling is not None else f"at least {floor}"
            raise TraitError(f"{label} must be {within}, not {value}")
        return value

    return rule


def _positive(unit: str) -> Callable[[str, Any], float]:
    def rule(label: str, value: Any) -> float:
        number = float(value)
        if not (number > 0 and math.isfinite(number)):
            raise TraitError(f"{label} must be a positive number of {unit}, not {value!r}")
        return number

    return rule


def _name(label: str, value: Any) -> str:
    text = str(value).strip()
    if any(c.isspace() for c in text):
        raise TraitError(f"{label} must be one name, without spaces, not {value!r}")
    return text


def _prices(label: str, value: Any) -> dict[str, list[float]]:
    checked: dict[str, list[float]] = {}
    for model, rates in dict(value).items():
        numbers = list(rates) if isinstance(rates, list | tuple) else None
        if (
            not isinstance(model, str)
            or numbers is None
            or not 2 <= len(numbers) <= 4
            or not all(isinstance(n, int | float) and not isinstance(n, bool) and n >= 0 for n in numbers)
        ):
            raise TraitError(
                f"{label}[{model!r}] must be 2 to 4 non-negative USD rates per million tokens "
                f"(input, output[, cache write, cache read]), not {rates!r}"
            )
        checked[model] = [float(n) for n in numbers]
    return checked


#: Each trait's one rule (a trait not named here is checked by its type alone; the teaching
#: traits also by the kernel's policy holder, which may refuse to loosen a locked policy). None
#: always passes where the trait allows it.
_RULES: dict[str, Callable[[str, Any], Any]] = {
    "provider": _name,
    "model": lambda label, value: str(value).strip(),
    "max_attempts": _whole(1),
    "max_retries": _whole(0),
    "max_tokens": _whole(1),
    "prompt_budget": _whole(1000),
    "memory_limit_mb": _whole(1),
    "candidates": _whole(1, 8),
    "max_hints": _whole(1),
    "budget_tokens": _whole(1),
    "kernel_budget_tokens": _whole(1),
    "timeout": _positive("seconds"),
    "request_timeout": _positive("seconds"),
    "budget_usd": _positive("USD"),
    "kernel_budget_usd": _positive("USD"),
    "prices": _prices,
}


class Refine(Configurable):
    """Settings of the %%refine loop."""

    provider = Unicode(
        help="Provider that proposes fixes: 'auto' (anthropic when ANTHROPIC_API_KEY is set, else "
        "offline), 'anthropic', 'offline', 'scripted', or any registered name. Default: "
        "$NBREFINE_PROVIDER, else 'auto'."
    ).tag(config=True)
    quick_fixes = Bool(
        True,
        help="Try the offline quick fixes (typos, missing imports, wrong column names...) before "
        "asking a model: simple errors cost nothing and need no network.",
    ).tag(config=True)
    model = Unicode(
        help="Model name for the provider; empty means the provider's default. Default: $NBREFINE_MODEL."
    ).tag(config=True)
    max_attempts = Int(3, help="Most candidates to try per failing cell (at least 1).").tag(config=True)
    timeout = Float(10.0, help="Wall-clock seconds one trial run of a candidate may take (more than 0).").tag(
        config=True
    )
    request_timeout = Float(120.0, help="Seconds to wait for the model's reply (more than 0).").tag(
        config=True
    )
    max_retries = Int(
        2, help="Retries of a failed model request (rate limits, overload, resets; 0 or more)."
    ).tag(config=True)
    max_tokens = Int(4096, help="Most tokens the model may write per reply.").tag(config=True)
    prompt_budget = Int(
        16000, help="Most characters of one repair prompt (the user message; at least 1000)."
    ).tag(config=True)
    snapshot = Bool(
        True,
        help="Fork a snapshot of the kernel state when %%refine starts, so trials see the state "
        "the cell saw. Off: trials fork from the state after the failed run.",
    ).tag(config=True)
    trials_ahead = Bool(
        True,
        help="While a %%refine cell runs, its snapshot gets the first trial ready (the hardening's "
        "preparation, a spare trial forked and hardened): after a failure the first candidate "
        "starts at once, for about 12 ms of CPU per cell. Off: only once the cell has failed, so "
        "a cell that passes costs its snapshot's fork alone (nbrefine fix turns it off: most "
        "cells of a notebook pass).",
    ).tag(config=True)
    memory_limit_mb = Int(
        4096, help="Address space (MiB) a trial may add on top of the kernel state it forked from."
    ).tag(config=True)
    allow_network = Bool(False, help="Let trials use the network (per cell: --allow-network).").tag(
        config=True
    )
    allow_subprocess = Bool(False, help="Let trials start processes (per cell: --allow-subprocess).").tag(
        config=True
    )
    allow_writes = Bool(
        False, help="Let trials write files outside their scratch folder (per cell: --allow-writes)."
    ).tag(config=True)
    sandbox = Enum(
        ["auto", "fork", "spawn"],
        default_value="auto",
        help="Where trials run: 'fork' (a copy-on-write fork of the kernel state: fast), 'spawn' (a "
        "fresh interpreter that gets pickled copies of the names a candidate uses: for macOS, "
        "Windows, CUDA), or 'auto' (fork where it is safe, else spawn).",
    ).tag(config=True)
    auto = Enum(
        ["off", "offer", "on"],
        default_value="off",
        help="Automatic mode for cells without %%refine: 'offer' shows a 'Suggest a fix' button below "
        "a failing cell's traceback (no model call until clicked); 'on' starts the repair at once.",
    ).tag(config=True)
    auto_snapshot = Bool(
        False,
        help="In automatic mode, fork a snapshot before every cell so trials see the state the "
        "failing cell saw (costs a fork per cell; see bench/bench_auto.py).",
    ).tag(config=True)
    mode = Enum(
        list(MODES),
        default_value="fix",
        help="'fix' repairs the cell; teaching modes never show code that solves it: 'hint' (a nudge), "
        "'explain' (what the error means and where), 'graduated' (hints of rising detail on request; "
        "the fix only if allow_solution). An instructor's locked policy cannot be loosened.",
    ).tag(config=True)
    max_hints = Int(None, allow_none=True, help="Most hints per failing cell in teaching modes.").tag(
        config=True
    )
    allow_solution = Bool(False, help="Graduated mode: may the step after the last hint show the fix?").tag(
        config=True
    )
    candidates = Int(
        1,
        help="Best-of-N: candidates asked for per round (in parallel where the provider allows); "
        "all are trial-run and the passing one with the smallest change is kept (1 to 8).",
    ).tag(config=True)
    early_trials = Bool(
        True,
        help="Start a candidate's trial as soon as its code block is complete in the streamed reply, "
        "while the explanation after it still streams (best-of-N: as soon as each reply is in). The "
        "whole reply decides: a trial of anything else is discarded, so only the wait changes. Only "
        "where trials do not fork the kernel itself (a snapshot or spawn runs them).",
    ).tag(config=True)
    response_cache = Bool(
        True,
        help="Reuse the model's reply to an identical request (same cell, error, state, model) "
        "instead of paying twice. Per cell: --no-cache.",
    ).tag(config=True)
    budget_tokens = Int(None, allow_none=True, help="Most tokens one session may spend.").tag(config=True)
    budget_usd = Float(None, allow_none=True, help="Most money (USD) one session may spend.").tag(config=True)
    kernel_budget_tokens = Int(
        None, allow_none=True, help="Most tokens all sessions of this kernel may spend."
    ).tag(config=True)
    kernel_budget_usd = Float(None, allow_none=True, help="Most money (USD) this kernel may spend.").tag(
        config=True
    )
    prices = Dict(
        help="USD per million tokens for models nbrefine has no price for, e.g. "
        "{'claude-sonnet-5-5': [3, 15]} (input, output[, cache write, cache read])."
    ).tag(config=True)
    display = Enum(
        ["auto", "widget", "text"],
        default_value="auto",
        help="How to show the result: an ipywidgets panel in a notebook, or text ('auto' picks).",
    ).tag(config=True)

    @default("provider")
    def _default_provider(self) -> str:
        return os.environ.get("NBREFINE_PROVIDER", "").strip() or "auto"

    @default("model")
    def _default_model(self) -> str:
        return os.environ.get("NBREFINE_MODEL", "").strip()

    @validate(*(name for name in _RULES if name != "max_hints"))  # (max_hints: see _teaching)
    def _checked(self, proposal: Any) -> Any:
        return self.validated(proposal["trait"].name, proposal["value"])

    @classmethod
    def validated(cls, name: str, value: Any, *, option: str | None = None) -> Any:
        """``value`` as trait ``name`` keeps it, or :class:`~traitlets.TraitError` (one line,
        naming ``option``, by default ``Refine.<name>``) when the trait refuses it: the one rule
        for ``%config``, a profile, the ``%%refine`` options and the command line's flags alike
        (they only map onto it). The teaching traits are the kernel's policy holder's to judge."""
        rule = _RULES.get(name)
        return value if rule is None or value is None else rule(option or f"Refine.{name}", value)

    @validate("mode", "max_hints", "allow_solution")
    def _teaching(self, proposal: Any) -> Any:
        # The kernel-wide policy holder decides (a locked policy refuses to be loosened); a
        # TraitError makes traitlets keep the old value.
        from . import PolicyLockedError, kernel_policy_holder

        name, value = proposal["trait"].name, proposal["value"]
        value = self.validated(name, value)
        options: dict[str, Any] = {name: value}
        if name == "max_hints" and value is None:
            options = {"no_hint_cap": True}
        try:
            kernel_policy_holder().configure(**options, source="config")
        except (PolicyLockedError, ValueError) as err:
            raise TraitError(str(err)) from None
        return value
