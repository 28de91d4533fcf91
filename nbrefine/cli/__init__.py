"""The ``nbrefine`` command line: one thin module per command over the headless kernel driver.

- :mod:`.main`: the console script's entry (``nbrefine = "nbrefine.cli.main:main"``): subcommand
  dispatch, one-line errors, exit statuses;
- :mod:`.fix`: ``nbrefine fix`` (one notebook through :mod:`nbrefine.headless`, several through
  :mod:`nbrefine.batch`);
- :mod:`.bench`: ``nbrefine bench`` (what it runs in the kernel is in ``nbrefine.ipython.kernel_api``);
- :mod:`._argparse`: the strict parser, and flags made from the ``Refine`` traits.

The top layer, beside the IPython side: cli > batch > reports > headless > engine. It talks to a
kernel only through nbclient (:mod:`nbrefine.headless.kernel`).

May import: :mod:`nbrefine.batch`, :mod:`nbrefine.reports`, :mod:`nbrefine.headless`, the engine
and everything below it, and :mod:`nbrefine.engine.config` (traitlets only); never the IPython side
(magics, the panel, automatic mode, write-back, frontend, the kernel's secrets).

``nbrefine.cli.main`` names the function (``from nbrefine.cli import main`` keeps working); the
module is ``sys.modules["nbrefine.cli.main"]`` (``from nbrefine.cli.main import build_parser``).
"""

from __future__ import annotations

from .main import main

__all__ = ["main"]
