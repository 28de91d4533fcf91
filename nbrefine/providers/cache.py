"""A response cache: re-running the same failing cell does not pay for the same reply twice.

The key is the whole request as the model would see it — the cell source, the error with its
signature, the summaries of the state, the earlier attempts and the mode are all in it — plus
the provider and the model. The replies are kept in memory in a :class:`ResponseStore`, the
kernel's own for the life of the kernel (:mod:`nbrefine.engine.kernel_state` holds it); off with
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

__all__ = ["CachingProvider", "ResponseStore"]

_MAX_ENTRIES = 256


class ResponseStore:
    """Free copies of replies by request key; past ``max_entries`` the least recently used goes.
    Safe to share between threads (a background loop and the next cell's)."""

    def __init__(self, max_entries: int = _MAX_ENTRIES) -> None:
        self._replies: OrderedDict[str, ProviderReply] = OrderedDict()
        self._max_entries = max_entries
        self._lock = threading.Lock()

    def get(self, key: str) -> ProviderReply | None:
        with self._lock:
            reply = self._replies.get(key)
            if reply is not None:
                self._replies.move_to_end(key)
            return reply

    def put(self, key: str, reply: ProviderReply) -> None:
        with self._lock:
            self._replies[key] = reply
            while len(self._replies) > self._max_entries:
                self._replies.popitem(last=False)

    def __len__(self) -> int:
        with self._lock:
            return len(self._replies)


def _key(provider: Provider, request: ProviderRequest) -> str:
    digest = hashlib.sha256()
    for part in (provider.name, provider.model, str(request.max_tokens), request.system, request.user):
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()


class CachingProvider:
    """Wraps a provider; a request seen before (in ``store``) gets the same reply, free (tokens 0)."""

    def __init__(self, inner: Provider, store: ResponseStore) -> None:
        self.inner = inner
        self.store = store
        self.hits = 0
        self.name, self.model = inner.name, inner.model

    def complete(self, request: ProviderRequest, on_text: TextCallback | None = None) -> ProviderReply:
        key = _key(self.inner, request)
        cached = self.store.get(key)
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
            self.store.put(key, free)
        return reply
