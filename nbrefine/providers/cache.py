"""A response cache: re-running the same failing cell does not pay for the same reply twice.

The key is the whole request as the model would see it — the cell source, the error with its
signature, the summaries of the state, the earlier attempts and the mode are all in it — plus
the provider and the model. Kept in memory for the life of the kernel; off with
``Refine.response_cache = False`` or ``%%refine --no-cache``.

May import: the standard library and ``nbrefine.providers.base``;
never the sandbox, the engine, IPython or the CLI.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from dataclasses import replace

from .base import DECLINED, Provider, ProviderReply, ProviderRequest, TextCallback

__all__ = ["CachingProvider", "clear_response_cache"]

_MAX_ENTRIES = 256
_STORE: OrderedDict[str, ProviderReply] = OrderedDict()
_LOCK = threading.Lock()


def clear_response_cache() -> None:
    with _LOCK:
        _STORE.clear()


def _key(provider: Provider, request: ProviderRequest) -> str:
    digest = hashlib.sha256()
    for part in (provider.name, provider.model, str(request.max_tokens), request.system, request.user):
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()


class CachingProvider:
    """Wraps a provider; a request seen before gets the same reply, free (tokens 0)."""

    def __init__(self, inner: Provider) -> None:
        self.inner = inner
        self.hits = 0
        self.name, self.model = inner.name, inner.model

    def complete(self, request: ProviderRequest, on_text: TextCallback | None = None) -> ProviderReply:
        key = _key(self.inner, request)
        with _LOCK:
            cached = _STORE.get(key)
            if cached is not None:
                _STORE.move_to_end(key)
        if cached is not None:
            self.hits += 1
            if on_text is not None:
                on_text(cached.text)
            return cached
        reply = self.inner.complete(request, on_text)
        self.name, self.model = self.inner.name, self.inner.model  # a tiered provider may switch
        if reply.stop_reason != DECLINED and reply.text.strip():
            free = replace(
                reply,
                input_tokens=0,
                output_tokens=0,
                cache_read_tokens=0,
                cache_write_tokens=0,
                extra={**reply.extra, "cached": True},
            )
            with _LOCK:
                _STORE[key] = free
                while len(_STORE) > _MAX_ENTRIES:
                    _STORE.popitem(last=False)
        return reply
