"""The ``Refine`` settings a headless run passes to its kernel, from ONE table.

Each :class:`TraitFlag` ties a command-line flag to the :class:`~nbrefine.engine.config.Refine` trait it
sets and says how the setting reaches the kernel: a ``%config Refine.<trait> = ...`` line run once
at set-up, the ``%%refine`` cell option of the same name on every wrapped cell (cell options beat
``%config``, so a notebook's own ``%config`` cannot undo the command line), or both. The command
line builds its options from this table (``nbrefine.cli._argparse.add_trait_flags``: type, choices
and help come from the trait), so a flag cannot drift from its trait.

``mode`` and ``max_hints`` go on the ``%%refine`` line only: there a notebook's locked policy
refuses a loosening cell by cell, as it does in a notebook.

May import: :mod:`nbrefine._errors`, :mod:`nbrefine.engine.config` (traitlets only) and the standard library.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from .._errors import BadInputError

__all__ = ["TRAIT_FLAGS", "TraitFlag", "cell_options", "check_values", "config_values", "trait_flag"]

Where = Literal["config", "cell", "both"]


@dataclass(frozen=True)
class TraitFlag:
    trait: str  # the Refine trait (and the options' attribute name)
    flag: str  # the command-line flag, also the %%refine cell option unless ``negated``
    where: Where
    metavar: str | None = None
    negated: bool = False  # a Bool trait the flag turns off (--no-quick-fixes)

    def given(self, value: Any) -> bool:
        """Whether ``value`` (as parsed; None when the flag is absent) sets the trait."""
        return value is False if self.negated else value is not None


TRAIT_FLAGS: tuple[TraitFlag, ...] = (
    TraitFlag("provider", "--provider", "both"),
    TraitFlag("model", "--model", "both"),
    TraitFlag("max_attempts", "--max-attempts", "both", "N"),
    TraitFlag("timeout", "--timeout", "both", "S"),
    TraitFlag("quick_fixes", "--no-quick-fixes", "config", negated=True),
    TraitFlag("early_trials", "--no-early-trials", "config", negated=True),
    TraitFlag("mode", "--mode", "cell"),
    TraitFlag("max_hints", "--max-hints", "cell", "N"),
)


def trait_flag(trait: str) -> TraitFlag:
    return next(t for t in TRAIT_FLAGS if t.trait == trait)


def check_values(values: Mapping[str, Any]) -> None:
    """:class:`BadInputError` (one line, naming the flag) for a value its trait refuses (the rule
    is the trait's own: :meth:`Refine.validated <nbrefine.engine.config.Refine.validated>`)."""
    from traitlets import TraitError

    from ..engine.config import Refine

    for entry in TRAIT_FLAGS:
        if entry.trait in values and entry.given(values[entry.trait]):
            try:
                Refine.validated(entry.trait, values[entry.trait], option=entry.flag)
            except TraitError as err:
                raise BadInputError(str(err)) from None


def config_values(values: Mapping[str, Any]) -> dict[str, Any]:
    """The traits of ``values`` (trait name to value) set once at set-up, as ``%config
    Refine.<trait> = <value>`` does (the in-kernel ``setup_run`` sets them so)."""
    return {
        t.trait: values[t.trait]
        for t in TRAIT_FLAGS
        if t.where != "cell" and t.trait in values and t.given(values[t.trait])
    }


def cell_options(values: Mapping[str, Any]) -> str:
    """The ``%%refine`` options that set the given traits, e.g. `` --max-attempts 5``."""
    return "".join(
        f" {t.flag} {shlex.quote(str(values[t.trait]))}"
        for t in TRAIT_FLAGS
        if t.where != "config" and t.trait in values and t.given(values[t.trait])
    )
