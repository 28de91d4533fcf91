"""Imported first by the local pool's fork server (:data:`nbrefine.batch.pool.PRELOAD`), before
nbclient: nbformat is imported through :func:`nbrefine.headless.notebook_files.nbf`, without the
grammars of rfc3987-syntax (0.8 s of CPU), so every worker forked from the server is without them too.

May import: :mod:`nbrefine.headless.notebook_files`.
"""

from __future__ import annotations

from ..headless.notebook_files import nbf

nbf()
