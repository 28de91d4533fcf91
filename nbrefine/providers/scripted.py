"""A provider that plays back prepared replies: for tests, demos and reproducible runs.

May import: the standard library, :mod:`nbrefine._errors` and ``nbrefine.providers.base``;
never the sandbox, the engine, IPython or the CLI.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

from .._errors import ProviderConfigError, ProviderError
from .base import ProviderReply, ProviderRequest, TextCallback

__all__ = ["ScriptedProvider"]


class ScriptedProvider:
    """Answers each request with the next prepared reply.

    A reply is a string, or an exception instance to raise (to simulate provider errors).
    ``requests`` keeps what was asked, so tests can look at the exact prompts."""

    name = "scripted"

    def __init__(self, replies: Iterable[str | Exception] = (), model: str = "scripted") -> None:
        self.replies = list(replies)
        self.model = model or "scripted"
        self.requests: list[ProviderRequest] = []

    @classmethod
    def from_env(cls, model: str = "") -> ScriptedProvider:
        """Replies from the JSON list of strings in the file ``$NBREFINE_SCRIPTED_REPLIES``."""
        path = os.environ.get("NBREFINE_SCRIPTED_REPLIES", "")
        if not path:
            raise ProviderConfigError("the scripted provider needs NBREFINE_SCRIPTED_REPLIES (a JSON file)")
        try:
            replies = json.loads(Path(path).read_text())
        except (OSError, ValueError) as err:
            raise ProviderConfigError(f"cannot read scripted replies from {path}: {err}") from None
        if not isinstance(replies, list) or not all(isinstance(r, str) for r in replies):
            raise ProviderConfigError(f"{path} must hold a JSON list of strings")
        return cls(replies, model)

    def complete(self, request: ProviderRequest, on_text: TextCallback | None = None) -> ProviderReply:
        self.requests.append(request)
        if not self.replies:
            raise ProviderError("the scripted provider has no replies left")
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        if on_text is not None:
            for start in range(0, len(reply), 40):
                on_text(reply[start : start + 40])
        return ProviderReply(
            text=reply,
            model=self.model,
            input_tokens=(len(request.system) + len(request.user)) // 4,
            output_tokens=len(reply) // 4,
            stop_reason="end_turn",
        )
