"""One model request through a request gate: a slot held, the shared budget checked, the reply
charged, and a rate limit or an overload retried. The gate's own providers
(:class:`~.gate.GatedProvider`) and the Message Batches spool
(:class:`~.message_batches.spool.SpooledProvider`) both ask this way.

May import: :mod:`nbrefine._errors`, :mod:`nbrefine.providers` (base) and the standard library."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from .._errors import ProviderError, ProviderOverloadedError, ProviderRateLimitError
from ..providers.base import ProviderReply

if TYPE_CHECKING:  # only an annotation: gate.py imports this module
    from .gate import RequestGate

__all__ = ["through_gate"]

_RETRYABLE = (ProviderRateLimitError, ProviderOverloadedError)


def through_gate(
    gate: RequestGate,
    retries: int,
    ask: Callable[[], ProviderReply],
    cost: Callable[[ProviderReply], tuple[int, float | None]],
    *,
    pause: Callable[[BaseException, int], float] | None = None,
) -> ProviderReply:
    """``ask()`` with a slot of ``gate`` held, again up to ``retries`` times on a rate limit or
    an overload; with ``pause``, each such answer first pauses every job for
    ``pause(err, attempt)`` seconds. The budget is checked once the slot is held and the reply
    charged before it is let go: a job that waited for the slot sees what the one before it spent.
    """
    for attempt in range(retries + 1):
        with gate.slot():
            over = gate.over_budget()
            if over:
                raise ProviderError(over)
            try:
                reply = ask()
            except _RETRYABLE as err:
                if pause is not None:
                    gate.back_off(pause(err, attempt))
                if attempt == retries:
                    raise
                continue
            gate.charge(*cost(reply))
        return reply
    raise AssertionError("unreachable: the last attempt returns or raises")
