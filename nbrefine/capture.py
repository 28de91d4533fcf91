"""TEMPORARY shim (issue 13 phase B removes it): the old path of :mod:`nbrefine.grounding.capture`."""

from nbrefine.grounding.capture import *  # noqa: F403  # TEMPORARY shim (issue 13 phase B removes it)
