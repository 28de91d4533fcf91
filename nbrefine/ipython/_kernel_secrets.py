"""What a trial forked from a Jupyter kernel must not hold: the kernel's session key, its
connection details and the way to its connection file. IPython-side (it knows ipykernel), used
by the magics when they build the sandbox options; imports nothing from ipykernel that is not
already loaded.

May import: the standard library (ipykernel only through ``sys.modules``).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
from typing import Any

__all__ = ["connection_paths", "forget_kernel_secrets"]

_BYTES_DATA_OFFSET = sys.getsizeof(b"") - 1  # where a bytes object's payload starts


def _kernel_app() -> Any:
    module = sys.modules.get("ipykernel.kernelapp")
    app_class = getattr(module, "IPKernelApp", None)
    if app_class is None or not app_class.initialized():
        return None
    return app_class.instance()


def connection_paths() -> tuple[str, ...]:
    """The kernel's connection file (it holds the HMAC key and the ports), for the sandbox to
    make unreadable. Its folder (Jupyter's runtime folder) is among the hidden home paths."""
    app = _kernel_app()
    path = getattr(app, "abs_connection_file", None) or getattr(app, "connection_file", None)
    return (os.path.realpath(path),) if isinstance(path, str) and path else ()


def _zero(key: bytes) -> None:
    """Overwrite a bytes object's payload in place. Only ever called in a forked child: the
    page is copied on write, so the kernel's own key is untouched."""
    if key:
        ctypes.memset(id(key) + _BYTES_DATA_OFFSET, 0, len(key))


def _sessions() -> list[Any]:
    """The kernel's jupyter_client sessions (usually one object, shared by the kernel, its
    output streams and display publisher). Found by reference, not with ``gc.get_objects``:
    that would touch (and so copy) every object of a forked snapshot."""
    app = _kernel_app()
    ipython = sys.modules.get("IPython")
    get_ipython = getattr(ipython, "get_ipython", None)
    shell = get_ipython() if callable(get_ipython) else None
    holders = [app, getattr(app, "kernel", None), getattr(shell, "kernel", None)]
    holders += [getattr(shell, "display_pub", None), getattr(shell, "displayhook", None)]
    found: dict[int, Any] = {}
    for holder in holders:
        session = getattr(holder, "session", None)
        if session is not None and hasattr(session, "key"):
            found[id(session)] = session
    return list(found.values())


_CONNECTION_TRAITS = (
    "connection_file",
    "ip",
    "shell_port",
    "iopub_port",
    "stdin_port",
    "control_port",
    "hb_port",
)


def _forget_connection(app: Any) -> None:
    """The connection details go too: a trial has no business knowing where the kernel listens."""
    for name in _CONNECTION_TRAITS:
        with contextlib.suppress(Exception):
            setattr(app, name, "" if name in ("connection_file", "ip") else 0)


def forget_kernel_secrets() -> None:
    """In a forked child: blank the kernel's session key and signer, so that a candidate cannot
    sign messages to the live kernel (over ipc, the network namespace does not stand in its
    way). The key's bytes are zeroed in place too, for any other reference to them."""
    for session in _sessions():
        with contextlib.suppress(Exception):
            key = session.key
            session.auth = None
            session.key = b""
            session.auth = None
            if isinstance(key, bytes):
                _zero(key)
    app = _kernel_app()
    if app is not None:
        _forget_connection(app)
