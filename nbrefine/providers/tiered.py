"""Quick fixes first, the model only when they have nothing to offer.

:class:`TieredProvider` is given both providers (it does not build them).

May import: the standard library, :mod:`nbrefine._errors` and ``nbrefine.providers.base``;
never the sandbox, the engine, IPython or the CLI.
"""

from __future__ import annotations

from collections.abc import Callable

from .._errors import ProviderConfigError
from .base import DECLINED, Provider, ProviderReply, ProviderRequest, TextCallback

__all__ = ["TieredProvider"]


class TieredProvider:
    """Asks ``first`` (offline, free); when it declines, asks ``then`` (a model).

    ``then`` is built lazily, so a missing API key only matters once the quick fixes are
    exhausted; then the reply declines with both reasons instead of failing."""

    def __init__(self, first: Provider, then: Callable[[], Provider]) -> None:
        self.first = first
        self._make_then = then
        self._then: Provider | None = None
        self.name = f"{first.name}+model"
        self.model = first.model
        self.first_declined = False
        self.quick_fix_reason = ""

    def _model(self) -> Provider:
        if self._then is None:
            self._then = self._make_then()
            self.name = f"{self.first.name}+{self._then.name}"
        return self._then

    def complete(self, request: ProviderRequest, on_text: TextCallback | None = None) -> ProviderReply:
        if not self.first_declined:
            reply = self.first.complete(request, on_text)
            if reply.stop_reason != DECLINED:
                return reply
            self.first_declined = True
            self.quick_fix_reason = reply.text.strip()
        try:
            model = self._model()
            self.model = model.model
            return model.complete(request, on_text)
        except ProviderConfigError as err:
            text = f"{self.quick_fix_reason} No model to ask: {err}".strip()
            return ProviderReply(text, self.model, stop_reason=DECLINED)
