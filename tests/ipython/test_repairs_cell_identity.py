"""How nbrefine tells which cell is running, whatever IPython did to its whitespace.

IPython empties the whitespace-only lines of a cell magic's body (``    `` between two functions
becomes an empty line), so the body ``%%refine`` receives is not the text the user typed. The
commands find a cell's session by the execute request that ran it (``tests/cli/test_fix.py``,
``tests/cli/test_bench.py``); this checks the magic's own lookup of its history entry.
"""

from __future__ import annotations

import nbrefine
from nbrefine.providers.scripted import ScriptedProvider

BLANKS = "    "


def test_a_refine_cell_with_whitespace_only_lines_is_not_its_own_history(shell) -> None:
    provider = ScriptedProvider()
    provider.replies = ["No idea what undefined_q should be."]
    nbrefine.register_provider("test-scripted", lambda settings: provider)
    shell.run_cell("x = 1", store_history=True)
    first = shell.execution_count - 1
    body = f"def f():\n    return 1\n{BLANKS}\nprint(f() + undefined_q)\n"

    shell.run_cell(f"%%refine --provider test-scripted --max-attempts 1\n{body}", store_history=True)

    prompt = nbrefine.last_session().prompts[0]
    history = prompt.split("## Notebook history", 1)[1].split("\n## ", 1)[0]
    assert f"In [{first}]" in history
    assert f"In [{first + 1}]" not in history  # the failing cell is the cell, not an earlier run
