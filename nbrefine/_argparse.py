"""The one ``ArgumentParser`` base of every nbrefine parser (commands, cell options, policy).

May import: the standard library only (every layer may use it)."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["StrictParser"]


class StrictParser(argparse.ArgumentParser):
    """argparse without abbreviated options, whatever the caller passes.

    By default argparse takes any unambiguous prefix of an option, so ``--mode`` was read as
    ``--model`` by a parser that had no ``--mode``. Sub-command parsers made with
    ``add_subparsers().add_parser`` are built from the parent's class, so they are strict too."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)
