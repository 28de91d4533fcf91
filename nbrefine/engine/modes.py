"""The names of the teaching modes, in a module of their own.

The settings (``Refine.mode``, :mod:`.config`) and the ``%%refine --mode`` option
(:mod:`nbrefine.ipython.options`) declare them at ``%load_ext nbrefine``, which must not import
the teaching package (its guard, tutor and prompts); :mod:`.teaching.policy` says what they mean.

May import: nothing.
"""

from __future__ import annotations

__all__ = ["MODES", "TEACHING_MODES"]

MODES: tuple[str, ...] = ("fix", "hint", "explain", "graduated")
TEACHING_MODES: tuple[str, ...] = ("hint", "explain", "graduated")
