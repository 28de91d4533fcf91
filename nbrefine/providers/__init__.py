"""Model providers and their registry.

The built-in providers (``anthropic``, ``openai``, ``offline``, ``scripted``), those other
packages add under the ``nbrefine.providers`` entry-point group, and :func:`make_provider`, which
builds one by name (with the offline quick fixes asked first when wanted). Each provider's module
is imported only when that provider is asked for.

May import: the standard library, :mod:`nbrefine._errors` and the modules of this package;
never the sandbox, the engine, IPython or the CLI.
"""

from __future__ import annotations

import functools
import importlib
import os
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from .._errors import ProviderConfigError
from .base import Provider, ProviderReply, ProviderRequest

__all__ = [
    "Provider",
    "ProviderReply",
    "ProviderRequest",
    "ProviderSettings",
    "available_providers",
    "make_provider",
    "register_provider",
    "resolve_provider_name",
    "wrap_provider_factories",
]


@dataclass(frozen=True)
class ProviderSettings:
    model: str = ""
    request_timeout: float = 120.0
    max_retries: int = 2


ProviderFactory = Callable[[ProviderSettings], Provider]


def _anthropic(settings: ProviderSettings) -> Provider:
    from .anthropic import AnthropicProvider

    return AnthropicProvider(
        settings.model or None, timeout=settings.request_timeout, max_retries=settings.max_retries
    )


def _offline(settings: ProviderSettings) -> Provider:
    from .offline import OfflineProvider

    return OfflineProvider()


def _openai(settings: ProviderSettings) -> Provider:
    from .openai_compat import OpenAIProvider

    return OpenAIProvider(
        settings.model or None, timeout=settings.request_timeout, max_retries=settings.max_retries
    )


def _scripted(settings: ProviderSettings) -> Provider:
    from .scripted import ScriptedProvider

    return ScriptedProvider.from_env(settings.model)


_FACTORIES: dict[str, ProviderFactory] = {
    "anthropic": _anthropic,
    "offline": _offline,
    "openai": _openai,
    "scripted": _scripted,
}
#: Third-party packages add providers under this entry point group: ``name = "pkg.module:factory"``,
#: the factory taking :class:`ProviderSettings` and returning a :class:`Provider`.
ENTRY_POINT_GROUP = "nbrefine.providers"


def _discovered() -> dict[str, ProviderFactory]:
    """The providers that installed packages declare, first on the import path first (as
    ``entry_points`` would give them). Each folder of the path is read again only when its mtime
    changed: installing or removing a package changes it (importlib.metadata keeps each folder's
    listing by mtime too). Reading every distribution's metadata takes ~5 ms in a Jupyter
    environment; a batch's kernel, forked from a zygote that read the shared folders, reads only
    its notebook's."""
    found: dict[str, ProviderFactory] = {}
    seen: set[str] = set()
    for entry in sys.path:
        folder = os.path.abspath(entry)  # '' is the working folder, another in each kernel
        try:
            mtime = os.stat(folder).st_mtime_ns
        except OSError:  # a missing folder, a zip that is not there
            continue
        for distribution, declared in _declared_in(folder, mtime):
            if distribution in seen:  # a copy further down the path, shadowed
                continue
            seen.add(distribution)
            for name, target in declared:
                found.setdefault(name, functools.partial(_load_and_call, target))
    return found


@functools.lru_cache(maxsize=64)
def _declared_in(folder: str, mtime: int) -> tuple[tuple[str, tuple[tuple[str, str], ...]], ...]:
    """(distribution, ((provider, "module:factory"), ...)) for each distribution in ``folder``
    that declares providers (``mtime`` keys the cache)."""
    from importlib.metadata import distributions

    declaring = []
    for distribution in distributions(path=[folder]):
        declared = tuple((e.name, e.value) for e in distribution.entry_points if e.group == ENTRY_POINT_GROUP)
        if declared:
            name = re.sub(r"[-_.]+", "-", distribution.name or "").lower()  # as pip compares them
            declaring.append((name, declared))
    return tuple(declaring)


def _load_and_call(target: str, settings: ProviderSettings) -> Provider:
    module_name, _, attribute = target.partition(":")
    factory: ProviderFactory = getattr(importlib.import_module(module_name), attribute)
    return factory(settings)


def register_provider(name: str, factory: ProviderFactory) -> None:
    """Make ``factory`` available as ``%config Refine.provider = name``."""
    _FACTORIES[name] = factory


def available_providers() -> list[str]:
    return sorted({*_FACTORIES, *_discovered()})


def wrap_provider_factories(wrap: Callable[[str, ProviderFactory], ProviderFactory | None]) -> None:
    """Replace the factory of every available provider (registered or found by entry point) by
    ``wrap(name, factory)``; where it returns None, the factory stays as it is. A batch job's
    kernel puts its providers behind the batch's request gate so."""
    for name in available_providers():
        factory = _FACTORIES.get(name) or _discovered().get(name)
        if factory is None:
            continue
        wrapped = wrap(name, factory)
        if wrapped is not None:
            register_provider(name, wrapped)


def resolve_provider_name(name: str, environ: Mapping[str, str]) -> tuple[str, str]:
    """The provider to use for ``name`` ('' or 'auto': anthropic with a key, else offline),
    and a one-line note saying why when the choice was automatic."""
    if name not in ("", "auto"):
        return name, ""
    if environ.get("ANTHROPIC_API_KEY", "").strip():
        return "anthropic", ""
    return "offline", "no ANTHROPIC_API_KEY is set, so only the offline quick fixes are used"


def make_provider(name: str, settings: ProviderSettings, *, quick_fixes_first: bool = False) -> Provider:
    """Build provider ``name``; with ``quick_fixes_first``, the offline tier asks first."""
    if quick_fixes_first and name != "offline":
        from .tiered import TieredProvider

        return TieredProvider(make_provider("offline", settings), lambda: make_provider(name, settings))
    factory = _FACTORIES.get(name) or _discovered().get(name)
    if factory is None:
        raise ProviderConfigError(f"unknown provider {name!r}; available: {', '.join(available_providers())}")
    return factory(settings)
