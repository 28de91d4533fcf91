"""Talking to a real kernel over jupyter_client, and looking at its processes: shared by the
end-to-end and adversarial suites."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import time
from pathlib import Path
from typing import Any

from jupyter_client.manager import KernelManager

JSON_MARK = "@@KERNEL-JSON@@ "


def collect(kc: Any, msg_id: str, timeout: float = 60.0, alive: Any = None) -> dict[str, Any]:
    """The iopub output of one execute request until the kernel goes idle, and its reply.

    Raises TimeoutError at the deadline, or at once when ``alive()`` says the kernel died."""
    deadline = time.monotonic() + timeout
    out: dict[str, Any] = {"stdout": "", "stderr": "", "results": [], "displays": [], "errors": []}
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"no idle status within {timeout} s; output so far: {out}")
        try:
            msg = kc.get_iopub_msg(timeout=min(remaining, 0.5))
        except queue.Empty:
            if alive is not None and not alive():
                raise TimeoutError(f"the kernel died; output so far: {out}") from None
            continue
        if msg["parent_header"].get("msg_id") != msg_id:
            out.setdefault("foreign", []).append(msg["msg_type"])
            continue
        kind, content = msg["msg_type"], msg["content"]
        if kind == "stream":
            out[content["name"]] += content["text"]
        elif kind == "execute_result":
            out["results"].append(content["data"].get("text/plain", ""))
        elif kind == "display_data":
            out["displays"].append(content["data"].get("text/plain", ""))
        elif kind == "error":
            out["errors"].append((content["ename"], content["evalue"]))
        elif kind == "status" and content["execution_state"] == "idle":
            break
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"no execute_reply within {timeout} s")
        try:
            reply = kc.get_shell_msg(timeout=remaining)
        except queue.Empty:
            continue
        if reply["parent_header"].get("msg_id") == msg_id:
            break
    out["status"] = reply["content"]["status"]
    out["ename"] = reply["content"].get("ename")
    out["evalue"] = reply["content"].get("evalue")
    out["text"] = "\n".join(
        [
            out["stdout"],
            out["stderr"],
            *out["results"],
            *out["displays"],
            *(f"{e}: {v}" for e, v in out["errors"]),
        ]
    )
    return out


def execute(kc: Any, code: str, timeout: float = 60.0) -> dict[str, Any]:
    """Run ``code`` in the kernel; see :func:`collect` for what comes back."""
    return collect(kc, kc.execute(code), timeout)


def read_proc_stat(pid: int) -> tuple[str, int] | None:
    """(state, ppid) of a process from /proc, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as fh:
            data = fh.read()
    except OSError:
        return None
    fields = data.rsplit(")", 1)[1].split()  # the command name may hold spaces and parentheses
    return fields[0], int(fields[1])


def children_of(ppid: int) -> dict[int, str]:
    """pid -> state of every process whose parent is ``ppid`` (zombies included)."""
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = read_proc_stat(int(entry))
            if stat is not None and stat[1] == ppid:
                found[int(entry)] = stat[0]
    return found


def exists(pid: int) -> bool:
    """Whether process ``pid`` exists (a zombie does: a kernel must also be reaped)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def ended(pid: int) -> bool:
    """Whether process ``pid`` has ended: gone, or a zombie that is not ours to reap. When its
    parent died first, the kernel reparents it to init (or a subreaper), which reaps it when it
    gets to it: on some machines PID 1 does that seconds later."""
    stat = read_proc_stat(pid)
    return stat is None or (stat[0] == "Z" and stat[1] != os.getpid())


def wait_until(condition: Any, within: float = 5.0) -> bool:
    """Poll ``condition`` (a callable) every 50 ms until it holds; False if it still does not
    after ``within`` seconds (a process ends, a file appears: things the test cannot be told of)."""
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def kernels_in(folder: Path) -> list[int]:
    """Processes running ipykernel whose working folder is in ``folder``: a batch's kernels,
    the ones started ahead included (they run in their notebook's folder). A kernel forked from
    a worker's zygote has the zygote's command line."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes()
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        is_kernel = b"ipykernel" in command or b"nbrefine.ipython.zygote" in command
        if is_kernel and Path(cwd).is_relative_to(folder):
            found.append(int(entry.name))
    return found


class RealKernel:
    """A real ipykernel started with ``env``; restarted by :meth:`ensure_healthy` when broken."""

    def __init__(self, env: dict[str, str], transport: str = "tcp") -> None:
        self.env = env
        self.transport = transport
        self.broken = False
        self.restarts = 0
        self.km: Any = None
        self.kc: Any = None
        self.pid = 0
        self.start()

    def start(self) -> None:
        self.km = KernelManager(kernel_name="python3", transport=self.transport)
        if self.transport == "ipc":
            # ipc endpoints are files named after the connection file: keep them in a private folder.
            folder = self.env.get("NBREFINE_TEST_IPC_DIR") or "/tmp"
            self.km.ip = os.path.join(folder, f"kernel-{os.getpid()}-{self.restarts}")
        self.km.start_kernel(env=self.env)
        self.kc = self.km.client()
        self.kc.start_channels()
        try:
            self.kc.wait_for_ready(timeout=60)
        except RuntimeError:
            self.shutdown()
            raise
        self.broken = False
        self.pid = int(self.value("__import__('os').getpid()"))

    def shutdown(self) -> None:
        if self.kc is not None:
            self.kc.stop_channels()
        if self.km is not None:
            with contextlib.suppress(Exception):
                self.km.shutdown_kernel(now=True)
        self.km = self.kc = None

    def ensure_healthy(self) -> None:
        if not self.broken and self.km.is_alive():
            try:
                if self.run("1+1", timeout=10)["results"] == ["2"]:
                    return
            except TimeoutError:
                pass
        self.shutdown()
        self.restarts += 1
        self.start()

    def run(self, code: str, timeout: float = 60.0) -> dict[str, Any]:
        try:
            return collect(self.kc, self.kc.execute(code), timeout, alive=self.km.is_alive)
        except TimeoutError:
            self.broken = True
            raise

    def ok(self, code: str, timeout: float = 60.0) -> dict[str, Any]:
        out = self.run(code, timeout)
        assert out["status"] == "ok", f"{code[:200]!r} failed in the kernel: {out['errors']}\n{out['text']}"
        return out

    def value(self, expr: str, timeout: float = 60.0) -> Any:
        out = self.ok(f"print({JSON_MARK!r} + __import__('json').dumps({expr}))", timeout)
        line = next(ln for ln in out["stdout"].splitlines() if ln.startswith(JSON_MARK))
        return json.loads(line[len(JSON_MARK) :])


# The configuration every adversarial suite starts a case from (each adds its own lines).
ADVERSARIAL_SETUP = """\
%reset -f
%load_ext nbrefine
%config Refine.display = 'text'
%config Refine.response_cache = False
%config Refine.provider = 'anthropic'
%config Refine.quick_fixes = False
%config Refine.sandbox = 'fork'
%config Refine.max_retries = 0
%config Refine.request_timeout = 20.0
"""


def adversarial_kernel(base_url: str, transport: str, **env: str) -> RealKernel:
    """A kernel for an adversarial suite: the model is the loopback fake at ``base_url``; no
    NBREFINE_/ANTHROPIC_ settings of this process leak in; ``env`` adds variables."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("NBREFINE_", "ANTHROPIC_"))}
    clean.update(ANTHROPIC_BASE_URL=base_url, ANTHROPIC_API_KEY="sk-adv-dummy-key")
    clean.update(env)
    return RealKernel(clean, transport=transport)
