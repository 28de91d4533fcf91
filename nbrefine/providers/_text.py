"""Helpers the SDK-backed providers share to turn any exception into one readable line.

May import: the standard library, :mod:`nbrefine._errors` and :mod:`nbrefine.grounding.text`;
never the sandbox, the engine, IPython or the CLI.
"""

from __future__ import annotations

import json

from .._errors import ProviderError, ProviderReplyError, ProviderTimeoutError, ProviderUnavailableError
from ..grounding.text import one_line

__all__ = ["connection_error", "describe", "http_error_kind", "one_line", "reading_error", "retried"]


def describe(exc: BaseException) -> str:
    """``TypeName: message`` on one line, for wrapping low-level exceptions."""
    text = one_line(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def retried(exc: BaseException) -> str:
    """`` after N retries`` when the SDK retried (both SDKs stamp each attempt's retry count on the
    request), else ``""``; also ``""`` when the exception carries no request."""
    try:
        n = int(exc.request.headers.get("x-stainless-retry-count", "0"))  # type: ignore[attr-defined]
    except (AttributeError, RuntimeError, TypeError, ValueError):
        return ""
    return f" after {n} {'retry' if n == 1 else 'retries'}" if n > 0 else ""


def http_error_kind(exc: BaseException) -> str | None:
    """``"timeout"`` / ``"transport"`` for the SDKs' HTTP library errors (httpx or httpx2), else None.

    Matched by class name along the MRO so that no provider imports the HTTP library the
    installed SDK happens to use.
    """
    for cls in type(exc).__mro__:
        if cls.__module__.split(".")[0] not in ("httpx", "httpx2", "httpcore", "httpcore2"):
            continue
        if cls.__name__ == "TimeoutException":
            return "timeout"
        if cls.__name__ == "TransportError":
            return "transport"
    return None


def reading_error(
    exc: BaseException, *, who: str, base_url: str, timeout: float, received: int | None
) -> ProviderError | None:
    """The error for a failure of the HTTP layer or of the reply's encoding, the same for every
    SDK-backed provider; None when ``exc`` is none of those. ``received``: characters of text
    streamed before it happened (None: before the reply started)."""
    kind = http_error_kind(exc)
    if kind == "timeout":
        what = "for the rest of the reply" if received is not None else "to answer"
        return ProviderTimeoutError(f"{who} took longer than {timeout:g} s {what}")
    if kind == "transport" and received is not None:
        return ProviderReplyError(
            f"the reply stream from {who} was cut off after {received} characters of text ({describe(exc)})"
        )
    if kind == "transport":
        return ProviderUnavailableError(f"could not reach {who} at {base_url}: {describe(exc)}")
    if isinstance(exc, json.JSONDecodeError | UnicodeDecodeError):
        return ProviderReplyError(f"{who} sent a malformed reply ({describe(exc)})")
    return None


def connection_error(
    exc: BaseException,
    *,
    who: str,
    connecting: str,
    timeout: float,
    received: int | None,
    timed_out: bool,
) -> ProviderError:
    """The error for an SDK's ``APITimeoutError`` (``timed_out``) or ``APIConnectionError``, the
    same for every SDK-backed provider. SDKs wrap a stream cut in the middle of the reply into
    these too (anthropic 2.17 does, earlier 2.x did not), so ``received`` (characters of text
    streamed before it; None: before the reply started) tells a cut-off reply from no answer.
    ``connecting``: what the connection was to, as the message names it."""
    if timed_out and received is not None:
        return ProviderTimeoutError(
            f"{who} took longer than {timeout:g} s for the rest of the reply "
            f"(after {received} characters of text)"
        )
    if timed_out:
        return ProviderTimeoutError(f"{who} did not answer within {timeout:g} s{retried(exc)}")
    cause = exc.__cause__
    why = describe(cause) if cause is not None else one_line(str(getattr(exc, "message", exc)))
    if received is not None:
        return ProviderReplyError(
            f"the reply stream from {who} was cut off after {received} characters of text ({why})"
        )
    return ProviderUnavailableError(f"the connection to {connecting} failed{retried(exc)}: {why}")
