"""The command line's parsers: strict (no abbreviations), one-line errors, and flags made from the
``Refine`` traits.

:func:`add_trait_flags` turns entries of the one table (:data:`nbrefine.headless.settings.TRAIT_FLAGS`)
into argparse options: the type and the choices come from the trait, the help from its ``help=``,
so a flag cannot drift from the trait it sets.

May import: :mod:`nbrefine._argparse`, :mod:`nbrefine._errors`, :mod:`nbrefine.engine.config` (traitlets
only, no IPython), :mod:`nbrefine.headless` and the standard library.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping
from typing import Any, NoReturn

from .._argparse import StrictParser
from .._errors import BadInputError
from ..headless.settings import trait_flag

__all__ = ["CommandParser", "add_trait_flags", "trait_help"]


class CommandParser(StrictParser):
    """``nbrefine``'s parser (and its commands'): a usage error is one line, exit status 2."""

    def error(self, message: str) -> NoReturn:
        raise BadInputError(f"{message} (see '{self.prog} --help')")


def trait_help(trait: str) -> str:
    """The ``help=`` of the ``Refine`` trait ``trait``, as argparse prints it (``%`` escaped)."""
    from ..engine.config import Refine

    text = str(Refine.class_traits()[trait].help)
    return " ".join(text.split()).replace("%", "%%")


def add_trait_flags(
    parser: argparse._ActionsContainer,
    traits: Iterable[str],
    *,
    notes: Mapping[str, str] | None = None,
    defaults: Mapping[str, Any] | None = None,
) -> None:
    """Add the flags of ``traits`` to ``parser``: absent, each is None (the kernel's own setting
    stands) or the command's own default from ``defaults``. ``notes``: a sentence to add to a
    flag's help (what the setting means for this command)."""
    from traitlets import Bool, Enum, Float, Int

    from ..engine.config import Refine

    for name in traits:
        entry = trait_flag(name)
        trait = Refine.class_traits()[name]
        text = trait_help(name) + (f" {notes[name]}" if notes and name in notes else "")
        kwargs: dict[str, Any] = {"dest": name, "default": None}
        if defaults and name in defaults:
            kwargs["default"] = defaults[name]
            text += f" Here the default is {defaults[name]!r}."
        kwargs["help"] = f"{text} (Refine.{name})"
        if entry.negated:
            assert isinstance(trait, Bool), name
            kwargs.update(action="store_false", help=f"turn Refine.{name} off; on, it means: {text}")
        elif isinstance(trait, Enum):
            kwargs["choices"] = [str(value) for value in trait.values or ()]
        elif isinstance(trait, Int | Float):
            kwargs.update(type=int if isinstance(trait, Int) else float, metavar=entry.metavar)
        parser.add_argument(entry.flag, **kwargs)
