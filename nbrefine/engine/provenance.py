"""Provenance: the record an accepted fix leaves in its notebook cell's ``metadata.nbrefine``.

Written in two places with the same keys: by the review panel's Accept (through the JupyterLab
extension) and by ``nbrefine fix``. Notebooks written before the keys were unified may hold
``fixed_at`` (``nbrefine fix``) instead of ``accepted_at``: :func:`read_provenance` reads both.

May import: the standard library (and nbrefine's version).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, NotRequired, TypedDict

__all__ = ["FixProvenance", "fix_provenance", "read_provenance"]

#: What older notebooks call a key today's records name otherwise.
_OLD_KEYS = {"fixed_at": "accepted_at"}


class FixProvenance(TypedDict):
    original_source: str  # the cell's source before the fix (the extension's undo puts it back)
    attempts: int  # the attempts that proposed something
    provider: str  # which provider proposed the fix ("offline": the quick-fix tier)
    model: str
    verified: bool  # False only for a fix applied anyway, without passing where it would run
    error_type: str | None  # the error the cell raised
    explanation: str
    accepted_at: str  # ISO 8601, UTC, to the second
    version: str  # nbrefine's
    accept_failed: NotRequired[str]  # the fix passed its trial but raised when accepted


def fix_provenance(
    *,
    original_source: str,
    attempts: int,
    provider: str,
    model: str,
    verified: bool,
    error_type: str | None,
    explanation: str,
) -> FixProvenance:
    """The provenance of a fix accepted now."""
    from .._version import __version__

    return {
        "original_source": original_source,
        "attempts": attempts,
        "provider": provider,
        "model": model,
        "verified": verified,
        "error_type": error_type,
        "explanation": explanation,
        "accepted_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "version": __version__,
    }


def read_provenance(metadata: Mapping[str, Any]) -> FixProvenance | None:
    """The fix provenance in a cell's ``metadata`` (None when the cell has none: no
    ``metadata.nbrefine``, or a teaching hint's record), with older keys read as today's."""
    record = metadata.get("nbrefine")
    if not isinstance(record, Mapping) or not isinstance(record.get("original_source"), str):
        return None
    data = {_OLD_KEYS.get(key, key): value for key, value in record.items()}
    found: FixProvenance = {
        "original_source": data["original_source"],
        "attempts": int(data.get("attempts") or 0),
        "provider": str(data.get("provider") or ""),
        "model": str(data.get("model") or ""),
        # Before the keys were unified, only the panel could apply a fix anyway (and said so).
        "verified": bool(data.get("verified", True)),
        "error_type": data.get("error_type"),
        "explanation": str(data.get("explanation") or ""),
        "accepted_at": str(data.get("accepted_at") or ""),
        "version": str(data.get("version") or ""),
    }
    if "accept_failed" in data:
        found["accept_failed"] = str(data["accept_failed"])
    return found
