"""The redaction markers: what replaces a secret in text (``<redacted:env API_KEY>``).

May import: the standard library only.
"""

from __future__ import annotations

import re

#: Every redaction marker starts with this, e.g. ``<redacted:env ANTHROPIC_API_KEY>``,
#: ``<redacted:credential name>``, ``<redacted:secret-like value>``, ``<redacted:known secret>``;
#: so ``REDACTED in text`` tells whether anything was redacted.
REDACTED = "<redacted"

_LABEL_CREDENTIAL = "credential name"
_LABEL_SHAPE = "secret-like value"
_LABEL_KNOWN = "known secret"


def _marker(label: str) -> str:
    return f"{REDACTED}:{label}>"


def _marker_labels(text: str) -> list[str]:
    return [m.group(1)[len(REDACTED) + 1 : -1] or "redacted" for m in _MARKER_RE.finditer(text)]


_CREDENTIAL_MARKER = _marker(_LABEL_CREDENTIAL)
_MARKER_RE = re.compile(r"(<redacted(?::[^<>\n]{0,120})?>)")
