"""The IPython side of nbrefine: the only package that imports IPython, ipywidgets or comm.

- :mod:`.magics`: ``%%refine`` and the ``%refine`` line commands (:mod:`.options` declares their
  options once), light: :mod:`.repairs`, the engine's glue, is imported at the first repair;
- :mod:`.auto`: automatic mode (a repair offered when any cell fails);
- :mod:`.panel`: the review panel (ipywidgets), saying what :mod:`._panel_html` renders, styled by
  :mod:`._panel_css`;
- :mod:`.writeback`: Accept writes the fix into the notebook cell over a comm;
- :mod:`.frontend`: what the JupyterLab extension runs in the kernel when a notebook opens;
- :mod:`._kernel_secrets`: the kernel's connection secrets, hidden from trials.

May import: IPython, ipywidgets, comm, :mod:`nbrefine.engine` and everything below it; never
:mod:`nbrefine.cli`, :mod:`nbrefine.batch` or :mod:`nbrefine.reports`. Nothing is imported here:
``%load_ext nbrefine`` loads :mod:`.magics`, :mod:`.options`, :mod:`.auto` and :mod:`.cells`, which
import nothing of the engine but its settings at import time (see ``nbrefine.load_ipython_extension``;
tests/ipython/test_magics_load.py).
"""
