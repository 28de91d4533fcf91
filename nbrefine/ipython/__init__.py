"""The IPython side of nbrefine: the only package that imports IPython, ipywidgets or comm.

- :mod:`.magics`: ``%%refine`` and the ``%refine`` line commands (:mod:`.options` declares their
  options once), light: :mod:`.repairs`, the engine's glue, is imported at the first repair;
- :mod:`.auto`: automatic mode (a repair offered when any cell fails);
- :mod:`.panel`: the review panel (ipywidgets), saying what :mod:`._panel_html` renders, styled by
  :mod:`._panel_css`;
- :mod:`.writeback`: Accept writes the fix into the notebook cell over a comm;
- :mod:`.kernel_api`: the in-kernel API, everything a caller outside the kernel runs in it
  (``nbrefine fix``, a batch job, ``nbrefine bench``, the JupyterLab extension), called by name
  with JSON arguments;
- :mod:`.frontend`: what the JupyterLab extension's ``open_notebook`` call does when a notebook opens;
- :mod:`._kernel_secrets`: the kernel's connection secrets, hidden from trials.

May import: IPython, ipywidgets, comm, :mod:`nbrefine.engine` and everything below it; never
:mod:`nbrefine.cli` or :mod:`nbrefine.reports`, nor :mod:`nbrefine.batch` but in :mod:`.kernel_api`
(a batch job's request gate) and :mod:`nbrefine.headless` but there (a session's JSON shape).
Nothing is imported here: ``%load_ext nbrefine`` loads :mod:`.magics`, :mod:`.options`,
:mod:`.auto` and :mod:`.watched_cells`, which import nothing of the engine but its settings at import
time (see ``nbrefine.load_ipython_extension``; tests/ipython/test_magics_load.py).
"""
