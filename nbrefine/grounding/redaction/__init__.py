"""Secret redaction: nothing secret leaves the kernel in a prompt.

:class:`Redactor` (in :mod:`.redactor`) is the one entry point. Its rules live beside it:
:mod:`.detectors` (what detect-secrets' plugins find), :mod:`.credential_names` (credential names),
:mod:`.rules` (text rules and credential shapes, for what detect-secrets does not see),
:mod:`.codesecrets` (secrets found from the structure of code); what replaces a secret is in
:mod:`nbrefine.grounding.markers`.

May import: the standard library, ``detect_secrets`` (in :mod:`.detectors` only) and
:mod:`nbrefine.grounding` below it (summaries, markers, text, _objects).
"""

from ..markers import REDACTED
from .codesecrets import SecretLiteral, secret_literals
from .credential_names import is_login_name
from .redactor import Redactor

__all__ = ["REDACTED", "Redactor", "SecretLiteral", "is_login_name", "secret_literals"]
