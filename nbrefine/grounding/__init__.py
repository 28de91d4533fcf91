"""The ground truth a repair is built on, gathered in the kernel: the failure, the values, the history.

The bottom layer of nbrefine (besides :mod:`nbrefine._errors`). Everything here is plain Python with
no IPython import, and nothing here imports another nbrefine layer.

- :mod:`.capture`: a live exception as a :class:`Failure` (cell-mapped frames, values on the failing
  line, assert operands);
- :mod:`.summaries`: typed, bounded value summaries (:func:`summarize_value`, :func:`summarize_names`);
- :mod:`.redaction`: the :class:`Redactor` (nothing secret leaves the kernel);
- :mod:`.history`: the notebook's history (last definer of each name, stale-state warnings, the cell
  a cross-cell failure belongs to);
- :mod:`.scope`: the one scope analysis (what code reads and binds); :mod:`.ipython_names`: the
  names IPython keeps in a user namespace; :mod:`.text`: the one clipping helper.

Inside, imports go one way too: the leaves (text, scope, ipython_names, markers, _objects), then
summaries, then redaction (a redacted summary is a summary made with a redactor), then capture and
history.

May import: :mod:`nbrefine._errors`, the standard library and third-party libraries.
"""

from .capture import Failure, FrameInfo, capture_failure, statement_index, top_level_statements
from .history import (
    CellTarget,
    ExecutedCell,
    HistoryReport,
    NotebookCell,
    analyse,
    cross_cell_target,
    defining_cell,
    notebook_cells,
    notebook_path,
)
from .ipython_names import IPYTHON_NAMES, is_ipython_name, is_ipython_value
from .redaction import REDACTED, Redactor
from .scope import free_names, global_names
from .summaries import ValueSummary, render_summaries, summarize_names, summarize_value
from .text import clip, one_line

__all__ = [
    "IPYTHON_NAMES",
    "REDACTED",
    "CellTarget",
    "ExecutedCell",
    "Failure",
    "FrameInfo",
    "HistoryReport",
    "NotebookCell",
    "Redactor",
    "ValueSummary",
    "analyse",
    "capture_failure",
    "clip",
    "cross_cell_target",
    "defining_cell",
    "free_names",
    "global_names",
    "is_ipython_name",
    "is_ipython_value",
    "notebook_cells",
    "notebook_path",
    "one_line",
    "render_summaries",
    "statement_index",
    "summarize_names",
    "summarize_value",
    "top_level_statements",
]
