"""A cell run for real in this process and its failure captured, as the kernel would: shared by
the tests that build a repair task from a genuine failure without starting a kernel."""

from __future__ import annotations

import linecache
from typing import Any

from nbrefine.grounding.capture import Failure, capture_failure


def run_failing_cell(code: str, namespace: dict[str, Any]) -> Failure:
    """Run ``code`` on ``namespace`` (as ``<cell>``) and return its captured failure; the cell must fail."""
    linecache.cache["<cell>"] = (len(code), None, code.splitlines(keepends=True), "<cell>")
    try:
        exec(compile(code, "<cell>", "exec"), namespace)
    except Exception as err:
        return capture_failure(
            err, code=code, code_filename="<cell>", user_globals=namespace, run_unsafe=lambda fn: fn()
        )
    raise AssertionError("the cell was meant to fail")
