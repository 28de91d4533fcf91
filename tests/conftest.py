"""Fixtures shared across the test folders: an IPython shell, a clean environment, the fake API."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes.anthropic_api import FakeAnthropic
from IPython.core.interactiveshell import InteractiveShell


@pytest.fixture
def shell():
    """A real IPython shell with nbrefine loaded and text output; cleaned up afterwards."""
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "nbrefine")
    ip.run_line_magic("config", "Refine.display = 'text'")
    ip.run_line_magic("config", "Refine.quick_fixes = False")  # tests of the model path opt back in
    ip.run_line_magic("config", "Refine.response_cache = False")  # tests re-run the same cells
    yield ip
    ip.run_line_magic("unload_ext", "nbrefine")
    ip.config.pop("Refine", None)  # %config settings outlive the extension: keep tests independent
    ip.reset(new_session=False)
    from nbrefine.engine.kernel_state import reset

    reset()  # what a kernel remembers (policy lock, hints, spending, cached replies) is process-wide


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No real provider, no inherited nbrefine settings: the tests pick their provider."""
    for name in list(os.environ):
        if name.startswith(("NBREFINE_", "ANTHROPIC_")):
            monkeypatch.delenv(name)


@pytest.fixture
def clean_env_in_tmp(clean_env: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """:func:`clean_env`, and the test runs in its ``tmp_path`` (what a run writes lands there)."""
    monkeypatch.chdir(tmp_path)


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeAnthropic]:
    """One fake Anthropic API for a module's tests (the real SDK in its kernels talks to it); a
    module that needs another (function-scoped, timed, batch) defines its own ``fake``."""
    with FakeAnthropic() as server:
        yield server
