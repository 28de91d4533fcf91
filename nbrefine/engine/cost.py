"""Token usage and cost of replies, attempts and sessions (a kernel's total is in :mod:`.kernel_state`).

Prices are list prices in USD per million tokens, ``(input, output, cache write, cache read)``.
Only models whose prices nbrefine knows are listed; for any other model the cost is
``None`` (shown as unknown) unless ``Refine.prices`` gives it: nbrefine never guesses.

May import: the standard library and :mod:`nbrefine.providers.base`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ..providers.base import ProviderReply

__all__ = ["PRICES", "Usage", "price_of", "total", "usage_of"]

Price = tuple[float, float, float, float]

PRICES: dict[str, Price] = {
    # The default model (providers/anthropic.py); Anthropic's model page lists $2 in, $10 out,
    # $2.50 for a 5-minute cache write and $0.20 for a cache read per million tokens
    # (platform.claude.com/docs/en/models/sonnet-5-5/overview), the same as Sonnet 5.
    "claude-sonnet-5-5": (2.0, 10.0, 2.50, 0.20),
    "claude-sonnet-5": (2.0, 10.0, 2.50, 0.20),
    "claude-opus-4-5": (5.0, 25.0, 6.25, 0.50),
    "claude-sonnet-4-5": (3.0, 15.0, 3.75, 0.30),
    "claude-haiku-4-5": (1.0, 5.0, 1.25, 0.10),
}


_FREE_MODELS = frozenset({"quick-fixes", "offline-tutor", "scripted"})


def price_of(model: str, overrides: Mapping[str, Sequence[float]] | None = None) -> Price | None:
    """The price of ``model`` (dated model ids match their family), or None when unknown."""
    table: dict[str, Sequence[float]] = {**PRICES, **(overrides or {})}
    for name in (model, *(known for known in table if model.startswith(known + "-"))):
        found = table.get(name)
        if found is not None:
            values = [float(v) for v in found]
            if len(values) == 2:  # input and output given: cache prices follow the usual ratios
                values += [values[0] * 1.25, values[0] * 0.1]
            return (values[0], values[1], values[2], values[3])
    return None


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float | None = 0.0  # None: some of it was billed at an unknown price

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens + self.cache_read_tokens + self.cache_write_tokens

    def __add__(self, other: Usage) -> Usage:
        cost = None if self.cost_usd is None or other.cost_usd is None else self.cost_usd + other.cost_usd
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
            cost,
        )

    def describe(self) -> str:
        cost = f"${self.cost_usd:.4f}" if self.cost_usd else "no charge"
        if self.cost_usd is None:
            cost = "cost unknown (Refine.prices has no price for this model)"
        cached = f", {self.cache_read_tokens:,} read from cache" if self.cache_read_tokens else ""
        sent = self.input_tokens + self.cache_write_tokens
        return f"{sent:,} in{cached}, {self.output_tokens:,} out, {cost}"


def usage_of(reply: ProviderReply, overrides: Mapping[str, Sequence[float]] | None = None) -> Usage:
    """What one reply cost. Replies that cost nothing (offline, cached) are free."""
    tokens = reply.input_tokens + reply.output_tokens + reply.cache_read_tokens + reply.cache_write_tokens
    price = price_of(reply.model, overrides)
    cost: float | None
    if tokens == 0 or reply.extra.get("cached") or reply.model in _FREE_MODELS:
        cost = 0.0
    elif price is None:
        cost = None
    else:
        p_in, p_out, p_write, p_read = price
        cost = (
            reply.input_tokens * p_in
            + reply.output_tokens * p_out
            + reply.cache_write_tokens * p_write
            + reply.cache_read_tokens * p_read
        ) / 1e6
        # A reply from Anthropic's Message Batches (nbrefine fix --batch) is billed at a share of
        # these prices: its provider says which.
        factor = reply.extra.get("price_factor")
        if isinstance(factor, int | float):
            cost *= factor
    return Usage(
        reply.input_tokens, reply.output_tokens, reply.cache_read_tokens, reply.cache_write_tokens, cost
    )


def total(replies: Iterable[ProviderReply], overrides: Mapping[str, Sequence[float]] | None = None) -> Usage:
    result = Usage()
    for reply in replies:
        result = result + usage_of(reply, overrides)
    return result
