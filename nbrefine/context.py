"""TEMPORARY shim (issue 13 phase B removes it): the old path of the value summaries and the redactor."""

from nbrefine.grounding.redaction import *  # noqa: F403  # TEMPORARY shim (issue 13 phase B removes it)
from nbrefine.grounding.summaries import *  # noqa: F403  # TEMPORARY shim (issue 13 phase B removes it)
