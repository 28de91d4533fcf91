"""The SDK client's lifecycle, shared by the SDK-backed providers (anthropic, openai_compat).

A provider's client is made on its first request, not when the provider is built, so an API key
or base URL set in between still counts and a provider that is never used never fails; the
threads that use one provider share its client; :meth:`LazyClient.close` closes its connections
and the next request makes a new one. Whatever the SDK raises while making the client becomes a
one-line :class:`~nbrefine.ProviderConfigError`.

May import: the standard library, :mod:`nbrefine._errors` and ``nbrefine.providers._text``; never
an SDK (each provider imports its own, ``openai`` lazily), the sandbox, the engine, IPython or the
CLI.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

from .._errors import ProviderConfigError
from ._text import describe

__all__ = ["LazyClient", "make_client"]


class _SdkClient(Protocol):
    """What both SDKs' clients (``anthropic.Anthropic``, ``openai.OpenAI``) offer here."""

    @property
    def base_url(self) -> Any: ...

    def close(self) -> None: ...


C = TypeVar("C", bound=_SdkClient)


class LazyClient(Generic[C]):
    """One provider's SDK client: made by ``make`` on first use, shared, closable, made again."""

    def __init__(self, make: Callable[[], C]) -> None:
        self._make = make
        self._client: C | None = None
        self._lock = threading.Lock()  # two threads asking at once must not make two clients

    @property
    def current(self) -> C | None:
        """The client if it was made (and not closed since), else None."""
        return self._client

    def get(self) -> C:
        """The client, made now if there is none (``make``'s errors propagate)."""
        with self._lock:
            if self._client is None:
                self._client = self._make()
            return self._client

    def base_url(self, configured: str) -> str:
        """The base URL requests go to: the client's once it is made, else ``configured``."""
        client = self._client
        return str(client.base_url).rstrip("/") if client is not None else configured

    def close(self) -> None:
        """Close the client's connections (a later :meth:`get` makes a new client)."""
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):  # closing a broken connection can fail too
                client.close()


def make_client(
    what: str, factory: Callable[..., C], *, api_key: str, base_url: str, timeout: float, max_retries: int
) -> C:
    """``factory(...)`` (the SDK's client class) with these settings; any failure is a one-line
    :class:`~nbrefine.ProviderConfigError` naming ``what`` (the SDK) and the base URL."""
    try:
        return factory(api_key=api_key, base_url=base_url, timeout=timeout, max_retries=max_retries)
    except Exception as exc:
        raise ProviderConfigError(
            f"could not set up the {what} client for {base_url}: {describe(exc)}"
        ) from exc
