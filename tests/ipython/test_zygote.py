"""The zygote's own bookkeeping, in a process of its own (it reaps any child, as the zygote does).
Whole kernels forked from it are in tests/headless/test_forked_kernels.py."""

from __future__ import annotations

import signal
import subprocess
import sys

# A kernel that runs under a pid the system gave an earlier kernel, which exited and was reaped
# (pids are reused, after ~32,000 processes where pid_max is low); then its worker's socket closes.
REUSED_PID = """
import os, socket, time
from nbrefine.ipython.zygote import _Clients

worker, other_end = socket.socketpair()
clients = _Clients([worker], {})
pid = os.fork()
if pid == 0:
    time.sleep(5)
    os._exit(0)
clients.exited[pid] = 0  # the earlier kernel's exit, under this pid
clients.spawned(pid, worker)
clients.drop(worker)
_, status = os.waitpid(pid, 0)
print(os.waitstatus_to_exitcode(status))
"""


def test_a_dropped_workers_kernel_is_killed_though_its_pid_once_named_a_kernel_that_exited() -> None:
    done = subprocess.run([sys.executable, "-c", REUSED_PID], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(-signal.SIGKILL)
