"""TEMPORARY shim (issue 13 phase B removes it): the old path of :mod:`nbrefine.grounding.history`."""

from nbrefine.grounding.history import *  # noqa: F403  # TEMPORARY shim (issue 13 phase B removes it)
