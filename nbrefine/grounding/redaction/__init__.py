"""Secret redaction: nothing secret leaves the kernel in a prompt.

:class:`Redactor` (in :mod:`.redactor`) is the one entry point. Its rules live beside it:
:mod:`.markers` (what replaces a secret), :mod:`.names` (credential names), :mod:`.rules` (text
rules and credential shapes), :mod:`.codesecrets` (secrets found from the structure of code).

May import: the standard library and :mod:`nbrefine.grounding` below it (summaries, text, _objects).
"""

from .codesecrets import SecretLiteral, secret_literals
from .markers import REDACTED
from .names import is_login_name
from .redactor import Redactor

__all__ = ["REDACTED", "Redactor", "SecretLiteral", "is_login_name", "secret_literals"]
