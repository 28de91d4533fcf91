"""The build function hatch-jupyter-builder calls (``[tool.hatch.build.hooks.jupyter-builder]``).

A regular build (``python -m build``, ``pip wheel``, ``pip install .``) runs
``hatch_jupyter_builder.npm_builder``: ``jlpm install`` and ``jlpm build:prod`` in
``labextension/`` when the built extension in ``nbrefine/labextension`` is missing or older
than ``labextension/src``, so the wheel always ships the prebuilt extension.

An editable install (``pip install -e .``, what ``./dev`` does) skips the Node.js build
unless ``NBREFINE_BUILD_LABEXTENSION=1``: the Python test suite needs neither Node.js nor
the npm registry, and ``tests/browser/run.sh`` builds the extension in its own step.
See labextension/README.md.
"""

from __future__ import annotations

import os
from typing import Any

from hatch_jupyter_builder import npm_builder


def build(target_name: str, version: str, **kwargs: Any) -> None:
    if version == "editable" and os.environ.get("NBREFINE_BUILD_LABEXTENSION", "") not in ("1", "true"):
        print(
            "nbrefine: editable install, the JupyterLab extension is not built "
            "(set NBREFINE_BUILD_LABEXTENSION=1, or run scripts/build_labextension.sh)"
        )
        return
    npm_builder(target_name, version, **kwargs)
