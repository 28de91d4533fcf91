"""``--batch``, in each kernel: the model request goes to a spool folder, not to the API.

The Anthropic provider of a ``--batch`` job is a :class:`SpooledProvider`. It writes the Messages
API parameters it would have sent (the same model, system prompt, prompt-cache marks and user
message as :class:`~nbrefine.providers.anthropic.AnthropicProvider`) to
``SPOOL/requests/<custom_id>.json`` and waits for ``SPOOL/results/<custom_id>.json``. The client
(:mod:`.rounds`) gathers the requests of every notebook into one Message Batch, polls it, and
writes each result back. So the refine loop runs as always (trials, feedback, the next attempt);
only its model calls wait for their batch.

The shared gate still applies: the budget is checked before a request is spooled and charged
at the batch price (half the Messages API's) when its result comes; a slot is held while it
waits, so the report's in-flight figures count the requests waiting on batches.

May import: :mod:`nbrefine._errors`, :mod:`nbrefine.providers` (base, anthropic), and
:mod:`nbrefine.batch._through_gate` and (lazily) :mod:`nbrefine.engine`, and the standard library."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..._errors import (
    ProviderAuthError,
    ProviderError,
    ProviderOverloadedError,
    ProviderRateLimitError,
)
from ...providers.base import ProviderReply, ProviderRequest, TextCallback
from .._through_gate import through_gate

if TYPE_CHECKING:  # only an annotation: at run time gate.py imports this module
    from ..gate import RequestGate

__all__ = ["BATCH_PRICE", "SEPARATOR", "SpooledProvider", "read_json", "spool_spec", "write_json"]

#: What the Message Batches API charges, as a share of the Messages API's prices.
BATCH_PRICE = 0.5
#: Between the gate's spec and the spool's in the spec a batch job's kernel installs.
SEPARATOR = " spool:"
_POLL_S = 0.2


def spool_spec(folder: Path, job: int) -> str:
    return f"{SEPARATOR}{folder}:{job}"


class SpooledProvider:
    """The Anthropic provider of a ``--batch`` job (see the module docstring)."""

    name = "anthropic"

    def __init__(self, model: str, gate: RequestGate, spool: str, retries: int) -> None:
        # Here, not at the top: every batch kernel imports this module with the gate (for
        # SEPARATOR), and the Anthropic SDK costs about a second that only --batch needs.
        from ...providers.anthropic import DEFAULT_MODEL

        folder, _, job = spool.rpartition(":")
        self.folder, self.job = Path(folder), int(job)
        self.model = model or DEFAULT_MODEL
        self.gate, self.retries = gate, max(0, retries)

    def complete(self, request: ProviderRequest, on_text: TextCallback | None = None) -> ProviderReply:
        # An overloaded or rate-limited result of a batch goes into the next round, unpaused.
        reply = through_gate(
            self.gate,
            self.retries,
            lambda: _reply(self._ask(self.params(request)), self.model),
            _batch_cost,
        )
        if on_text is not None:
            on_text(reply.text)  # nothing streams from a batch: the whole text at once
        return reply

    def params(self, request: ProviderRequest) -> dict[str, Any]:
        """The Messages API parameters, as the Anthropic provider sends them."""
        from ...providers.anthropic import _messages

        system = [{"type": "text", "text": request.system, "cache_control": {"type": "ephemeral"}}]
        return {
            "model": self.model,
            "max_tokens": request.max_tokens,
            "system": system,
            "messages": _messages(request),
        }

    def _ask(self, params: dict[str, Any]) -> dict[str, Any]:
        custom_id = f"j{self.job}-{uuid.uuid4().hex[:20]}"
        write_json(self.folder / "requests" / f"{custom_id}.json", {"job": self.job, "params": params})
        answer = self.folder / "results" / f"{custom_id}.json"
        while True:
            data = read_json(answer)
            if data is not None:
                with contextlib.suppress(OSError):
                    answer.unlink()
                return data
            if not self.folder.is_dir():
                raise ProviderError("the batch run ended before this request's batch did")
            time.sleep(_POLL_S)


def _reply(answer: dict[str, Any], model: str) -> ProviderReply:
    """A batch result (``{"batch_id", "result"}``) as a reply, or the error it stands for."""
    batch = str(answer.get("batch_id") or "")
    result = answer.get("result") or {}
    kind = result.get("type")
    if kind == "succeeded":
        return _message_reply(result.get("message") or {}, model, batch)
    if kind == "errored":
        error = (result.get("error") or {}).get("error") or {}
        etype, message = str(error.get("type") or "error"), str(error.get("message") or "")
        text = f"the Message Batches API answered {etype}: {message} (batch {batch})"
        if etype in ("overloaded_error", "api_error"):
            raise ProviderOverloadedError(text)
        if etype == "rate_limit_error":
            raise ProviderRateLimitError(text)
        if etype in ("authentication_error", "permission_error"):
            raise ProviderAuthError(text)
        raise ProviderError(text)
    if kind in ("expired", "canceled"):
        raise ProviderError(f"the request {kind} in its batch (batch {batch}) before it was processed")
    raise ProviderError(str(answer.get("message") or f"no usable batch result ({kind!r})"))


def _message_reply(message: dict[str, Any], model: str, batch: str) -> ProviderReply:
    usage = message.get("usage") or {}
    text = "".join(b.get("text", "") for b in message.get("content") or [] if b.get("type") == "text")
    return ProviderReply(
        text=text,
        model=str(message.get("model") or model),
        input_tokens=int(usage.get("input_tokens") or 0),
        output_tokens=int(usage.get("output_tokens") or 0),
        cache_read_tokens=int(usage.get("cache_read_input_tokens") or 0),
        cache_write_tokens=int(usage.get("cache_creation_input_tokens") or 0),
        stop_reason=str(message.get("stop_reason") or "end_turn"),
        extra={"id": message.get("id"), "batch": batch, "price_factor": BATCH_PRICE},
    )


def _batch_cost(reply: ProviderReply) -> tuple[int, float | None]:
    from ...engine import usage_of

    usage = usage_of(reply)  # at the batch price: the reply's price_factor says so
    return usage.tokens, usage.cost_usd


# --------------------------------------------------------------------------- the spool's files


def write_json(path: Path, data: Any) -> None:
    """Whole or not at all: the other side may look at any moment."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(data, fh)
    os.replace(tmp, path)


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
