"""headless/kernel.py: a batch kernel's shutdown. Real kernels, started as a batch starts them."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from kernel_io import exists
from nbformat.v4 import new_code_cell, new_notebook

from nbrefine.headless.kernel import SHUTDOWN_WAIT_S, open_kernel

pytestmark = [pytest.mark.timeout(120), pytest.mark.usefixtures("clean_env_in_tmp")]

# jupyter_client's own wait: SIGTERM 2.5 s after the shutdown request, SIGKILL at 5 s.
DEFAULT_SIGTERM_S = 2.5


def test_a_kernel_that_does_not_exit_after_its_shutdown_request_is_terminated_sooner(tmp_path: Path) -> None:
    """What ipykernel's shutdown race does to a kernel (it sits, its reply sent, until SIGTERM),
    an exit handler that never returns does too: such a kernel is terminated at half of
    SHUTDOWN_WAIT_S, not at jupyter_client's 2.5 s, and leaves no process behind."""
    notebook = new_notebook(cells=[new_code_cell("x = 1", id="c1")])
    with open_kernel(notebook, "python3", tmp_path, 30) as kernel:
        run = kernel.run("import atexit, time\natexit.register(time.sleep, 60)", 0, store_history=False)
        assert run.ok, run.evalue
        pid = kernel.pid
        started = time.monotonic()  # the block's end shuts the kernel down
    took = time.monotonic() - started
    assert not exists(pid)
    assert SHUTDOWN_WAIT_S / 2 <= took < DEFAULT_SIGTERM_S, f"shut down in {took:.2f} s"
