"""nbrefine: execution-feedback repair for Jupyter cells.

``%load_ext nbrefine`` registers ``%%refine`` (run a cell; if it fails, propose a fix that
passed a trial run in a fork of the kernel state) and ``%refine accept|reject|status``.

May import: :mod:`._errors` and :mod:`._version` at import time; :mod:`.engine`, :mod:`.providers` and
:mod:`.ipython` lazily (``load_ipython_extension`` and the lazy names), so ``import nbrefine`` stays
light."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._errors import (
    NbrefineError,
    ProviderAuthError,
    ProviderConfigError,
    ProviderError,
    ProviderOverloadedError,
    ProviderRateLimitError,
    ProviderReplyError,
    ProviderTimeoutError,
    ProviderUnavailableError,
    SandboxError,
)

if TYPE_CHECKING:
    from .engine import RefineSession, last_session
    from .engine.config import Refine
    from .providers import register_provider

from ._version import __version__

__all__ = [
    "NbrefineError",
    "ProviderAuthError",
    "ProviderConfigError",
    "ProviderError",
    "ProviderOverloadedError",
    "ProviderRateLimitError",
    "ProviderReplyError",
    "ProviderTimeoutError",
    "ProviderUnavailableError",
    "Refine",
    "RefineSession",
    "SandboxError",
    "__version__",
    "last_session",
    "load_ipython_extension",
    "register_provider",
    "unload_ipython_extension",
]

# Imported on first use: the spawn worker and the CLI import this package and should not pay
# for traitlets, IPython or the whole engine when they do not need them.
_LAZY = {
    "Refine": ".engine.config",
    "RefineSession": ".engine",
    "last_session": ".engine",
    "register_provider": ".providers",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'nbrefine' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


_LOADED: dict[int, tuple[Any, Any]] = {}


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext nbrefine``: register the magics and the ``Refine`` configurable.

    Only the settings and the light magics are imported here (bench/bench_load.py times it);
    the engine, the sandbox, the providers and their SDKs wait for the first repair, so loading
    the extension and the passing cells after it stay as fast as without it (issue 20)."""
    from .engine.config import Refine
    from .ipython.magics import RefineMagics  # IPython adapters load only when the extension does

    if id(ipython) in _LOADED:
        return
    settings = Refine(parent=ipython)
    magics = RefineMagics(ipython, settings)
    ipython.register_magics(magics)
    ipython.configurables.append(settings)
    _LOADED[id(ipython)] = (magics, settings)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext nbrefine``: remove every magic and hook this extension added."""
    entry = _LOADED.pop(id(ipython), None)
    if entry is None:
        return
    magics, settings = entry
    magics.auto.stop()
    manager = ipython.magics_manager
    for kind in ("line", "cell"):
        if getattr(manager.magics[kind].get("refine"), "__self__", None) is magics:
            del manager.magics[kind]["refine"]
    manager.registry.pop(type(magics).__name__, None)
    if settings in ipython.configurables:
        ipython.configurables.remove(settings)
