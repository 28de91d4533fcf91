"""The seam between the refine loop and whatever model answers it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

__all__ = ["Provider", "ProviderReply", "ProviderRequest", "TextCallback"]

#: Called with each piece of text as it streams in (for progress displays).
TextCallback = Callable[[str], None]


@dataclass(frozen=True)
class ProviderRequest:
    """One self-contained repair request: a system prompt and one user message."""

    system: str
    user: str
    max_tokens: int = 4096


@dataclass(frozen=True)
class ProviderReply:
    """The model's whole reply, with what it cost."""

    text: str
    model: str
    input_tokens: int = 0
    output_tokens: int = 0
    stop_reason: str | None = None
    extra: dict[str, object] = field(default_factory=dict)


@runtime_checkable
class Provider(Protocol):
    """Anything that turns a :class:`ProviderRequest` into a :class:`ProviderReply`.

    Implementations raise a subclass of :class:`nbrefine.ProviderError` with a one-line
    message when they cannot answer; they never let SDK or network exceptions escape.
    """

    name: str
    model: str

    def complete(self, request: ProviderRequest, on_text: TextCallback | None = None) -> ProviderReply:
        """Return the model's reply to ``request``, calling ``on_text`` with streamed pieces."""
        ...
