"""What importing nbformat costs a process that reads notebooks (``nbf``), in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys

import pytest

CHECK = """
import sys, time
from nbrefine.headless.notebook_files import nbf, parse_notebook
nbf()
import nbclient  # imports nbformat and jsonschema too
text = '{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}'
parse_notebook(text, __import__("pathlib").Path("x.ipynb"))
print("rfc3987_syntax.syntax_helpers" in sys.modules, "jsonschema" in sys.modules)
"""


def test_reading_notebooks_builds_no_iri_grammars_and_still_validates() -> None:
    pytest.importorskip("rfc3987_syntax", reason="only where jsonschema would import it")
    done = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True"]


def test_a_broken_notebook_is_still_refused() -> None:
    broken = CHECK.replace('"nbformat": 4,', '"nbformat": 4, "cells_extra": 1,').replace(
        '"cells": [],', '"cells": [{"cell_type": "code"}],'
    )
    done = subprocess.run([sys.executable, "-c", broken], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "BadInputError" in done.stderr
