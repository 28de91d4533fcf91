"""Sphinx configuration of nbrefine's documentation (MyST Markdown, pydata-sphinx-theme).

Built by ``./dev test`` with ``sphinx-build -W --keep-going -b html docs out/docs``: warnings are
errors, nothing is fetched from the network (no intersphinx, no linkcheck), and the getting-started
page is a notebook that myst-nb executes with the offline provider, so a page that drifts from the
code fails the build. The configuration and command-line references are generated from the code by
the local extension in ``docs/_ext/nbrefine_docs.py``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(DOCS / "_ext"))
sys.path.insert(0, str(ROOT))  # this checkout's nbrefine, for autodoc and the generated references

# The executed notebook's kernel inherits this environment: the offline provider answers (no API
# key, no network, the same output on every build), and the kernel imports this checkout.
os.environ["NBREFINE_PROVIDER"] = "offline"
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)

from nbrefine import __version__  # noqa: E402

project = "nbrefine"
author = "the nbrefine developers"
copyright = "the nbrefine developers"
release = version = __version__

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "nbrefine_docs",
]

exclude_patterns = ["_build", "Thumbs.db", ".DS_Store", "**.ipynb_checkpoints", "jupyter_execute"]
source_suffix = {".md": "myst-nb", ".ipynb": "myst-nb"}

myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

# The getting-started notebook runs at every build, in a real kernel, with the offline provider.
nb_execution_mode = "force"
nb_execution_timeout = 120
nb_execution_raise_on_error = True
nb_execution_show_tb = True

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "show-inheritance": True}

html_theme = "pydata_sphinx_theme"
html_title = f"nbrefine {release}"
html_static_path: list[str] = []
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "footer_start": ["copyright"],
    "footer_end": [],
}
html_sidebars = {"**": ["sidebar-nav-bs"]}

# Options and code are written as they are typed: "--allow-network" stays two hyphens.
smartquotes = False
