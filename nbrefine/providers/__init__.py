"""Model providers and their registry."""

from __future__ import annotations

from collections.abc import Callable
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


def _scripted(settings: ProviderSettings) -> Provider:
    from .scripted import ScriptedProvider

    return ScriptedProvider.from_env(settings.model)


_FACTORIES: dict[str, ProviderFactory] = {"anthropic": _anthropic, "scripted": _scripted}


def register_provider(name: str, factory: ProviderFactory) -> None:
    """Make ``factory`` available as ``%config Refine.provider = name``."""
    _FACTORIES[name] = factory


def available_providers() -> list[str]:
    return sorted(_FACTORIES)


def make_provider(name: str, settings: ProviderSettings) -> Provider:
    factory = _FACTORIES.get(name)
    if factory is None:
        raise ProviderConfigError(f"unknown provider {name!r}; available: {', '.join(available_providers())}")
    return factory(settings)
