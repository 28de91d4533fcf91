"""IPython adapter: ``%%refine`` and ``%refine``, as ``%load_ext nbrefine`` registers them.

Light on purpose (issue 20): loading the extension defines the magic with its options
(:mod:`.options`), the hooks of automatic mode (:mod:`.auto`) and, in a notebook, the comm that
keeps the kernel told of the cells (:mod:`.watched_cells`), and nothing more. The work (the engine,
sandbox, grounding, providers and the SDKs they use) is in :mod:`.repairs`, imported by
:attr:`RefineMagics.repairs` at its first use: a ``%%refine`` cell, a failure in automatic
mode, a ``%refine`` command other than ``help`` and ``auto``.

May import: IPython, :mod:`nbrefine._errors`, this package's light modules (:mod:`.options`,
:mod:`.auto`, :mod:`.watched_cells`) and, lazily, :mod:`.repairs`; at import time nothing of
:mod:`nbrefine.engine` but its settings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class

from .._errors import RefineStop
from ..engine.config import Refine
from .auto import MODES, AutoMode
from .options import help_text, refine_arguments
from .watched_cells import watch_cells

if TYPE_CHECKING:
    from .repairs import Repairs

__all__ = ["RefineMagics", "RefineStop"]


@magics_class
class RefineMagics(Magics):
    """``%%refine`` runs a cell and, if it fails, repairs it; ``%refine accept|reject|status``."""

    def __init__(self, shell: Any, settings: Refine) -> None:
        super().__init__(shell)
        self.ip: Any = shell  # typed Any: IPython's own annotations make it Optional
        self.settings = settings
        self.running = False  # a %%refine cell is executing (guards re-entry and automatic hooks)
        self._repairs: Repairs | None = None
        self.auto = AutoMode(self)
        self.auto.set_mode(settings.auto)
        settings.observe(lambda change: self.auto.set_mode(change["new"]), names="auto")
        settings.observe(lambda change: self.auto.snapshots(change["new"]), names="auto_snapshot")
        # In a notebook, the extension keeps the kernel told of the notebook's cells (.watched_cells).
        self.cells_comm = watch_cells() if getattr(shell, "kernel", None) is not None else None

    @property
    def repairs(self) -> Repairs:
        """The engine's glue, imported at its first use (see the module's docstring)."""
        if self._repairs is None:
            from .repairs import Repairs

            self._repairs = Repairs(self)
        return self._repairs

    @line_cell_magic
    @refine_arguments
    def refine(self, line: str, cell: str | None = None) -> None:
        """Run the cell; if it raises, propose a fix that passed a trial run in a sandbox (a fork of
        the kernel state as it was before the cell ran), and offer Accept / Reject. Options given
        here beat ``%config Refine....`` settings for this cell."""
        if cell is None:
            self._line_command(line.strip())
            return
        if self.running:
            raise UsageError("%%refine cannot run inside another %%refine cell")
        self.repairs.run_cell(line, cell)

    def declared(self) -> Any:
        """The magic as IPython registered it: its parser and its help come from one declaration."""
        return self.magics["cell"]["refine"]

    def _line_command(self, command: str) -> None:
        """``%refine help`` and ``%refine auto ...`` here (a setup cell must not load the engine);
        every other command is the repairs'."""
        if command in ("", "help"):
            print(help_text(self.declared()))
        elif command.startswith("auto"):
            self._auto_command(command[4:].strip())
        else:
            self.repairs.line_command(command)

    def _auto_command(self, mode: str) -> None:
        if mode not in MODES:
            raise UsageError("%refine auto: use offer, on or off")
        self.settings.auto = mode  # the observer (un)registers the hooks
        print(f"nbrefine: automatic mode is {mode}")
