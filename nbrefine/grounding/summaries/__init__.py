"""Typed, bounded value summaries for a repair prompt (``df: DataFrame 120 rows × 4 columns ...``).

:func:`summarize_value` summarises one value; :func:`summarize_names` the names a cell uses within
a budget; :func:`render_summaries` lays them out; :class:`ValueSummary` is one entry. Secrets are
kept out by the redactor a summary is made with (:meth:`nbrefine.grounding.redaction.Redactor.summarize`).

May import: the standard library and the grounding leaf modules (text, ipython_names,
markers, _objects); never :mod:`nbrefine.grounding.redaction` (which imports this).
"""

from .summarize import (
    SummaryRedactor,
    ValueSummary,
    redacted_summary,
    render_summaries,
    summarize_names,
    summarize_value,
)

__all__ = [
    "SummaryRedactor",
    "ValueSummary",
    "redacted_summary",
    "render_summaries",
    "summarize_names",
    "summarize_value",
]
