"""The seam between the refine loop and whatever model answers it.

:class:`ProviderRequest` and :class:`ProviderReply`, the :class:`Provider` protocol, and the
:class:`RepairContext` that providers reasoning without a model read.

May import: the standard library and, for type annotations only, :mod:`nbrefine.grounding` (the
failure a context carries); nothing else of nbrefine, since every provider and the engine import
this module.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ..grounding.capture import Failure

__all__ = ["DECLINED", "Provider", "ProviderReply", "ProviderRequest", "RepairContext", "TextCallback"]

#: ``ProviderReply.stop_reason`` of a provider that has nothing (more) to propose: the loop
#: stops with status "unfixed" and the reply's text as the reason.
DECLINED = "declined"

#: Called with each piece of text as it streams in (for progress displays).
TextCallback = Callable[[str], None]


@dataclass(frozen=True)
class RepairContext:
    """Structured facts behind a request, for providers that reason without a model.

    ``code`` is the code to repair now (the original cell, or the latest candidate), and
    ``failure`` how it failed; ``namespace`` maps names to the live objects the cell saw
    (read-only: providers must not mutate or call into it beyond cheap attribute reads)."""

    code: str
    failure: Failure | None
    namespace: Mapping[str, Any] = field(default_factory=dict, repr=False)
    attempt: int = 1
    original_code: str = ""


@dataclass(frozen=True)
class ProviderRequest:
    """One self-contained repair request: a system prompt and one user message.

    Model providers send ``system`` and ``user``; ``context`` is for offline providers."""

    system: str
    user: str
    max_tokens: int = 4096
    context: RepairContext | None = field(default=None, compare=False, repr=False)
    #: ``user[:cache_prefix]`` is the same in every attempt of a session (the cell, the failure,
    #: the state): providers with prompt caching mark it cacheable. 0: nothing to cache.
    cache_prefix: int = 0


@dataclass(frozen=True)
class ProviderReply:
    """The model's whole reply, with what it cost."""

    text: str
    model: str
    input_tokens: int = 0
    output_tokens: int = 0
    stop_reason: str | None = None
    cache_read_tokens: int = 0  # input tokens served from the provider's prompt cache
    cache_write_tokens: int = 0  # input tokens written to it
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
