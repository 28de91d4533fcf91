"""nbrefine.grounding.history: definers, stale-state warnings, the rendered section, cross-cell targets."""

from __future__ import annotations

import hashlib
import linecache
import re

import nbformat
import pytest

from nbrefine.grounding.history import (
    ExecutedCell,
    NotebookCell,
    analyse,
    cross_cell_target,
    defining_cell,
    free_names,
    notebook_cells,
    notebook_path,
)


def cells(*sources: str, ids: list[str] | None = None) -> list[ExecutedCell]:
    return [
        ExecutedCell(n, source, ids[n - 1] if ids else f"c{n}") for n, source in enumerate(sources, start=1)
    ]


# --------------------------------------------------------------------------- definers


@pytest.mark.parametrize(
    ("source", "name"),
    [
        ("x = 1", "x"),
        ("a, (b, *x) = 1, (2, 3)", "x"),
        ("x += 1", "x"),
        ("x: int = 1", "x"),
        ("def x():\n    pass", "x"),
        ("async def x():\n    pass", "x"),
        ("class x:\n    y = 1", "x"),
        ("import os.path as x", "x"),
        ("import x.path", "x"),
        ("from os import path as x", "x"),
        ("for x in range(3):\n    pass", "x"),
        ("with open('f') as x:\n    pass", "x"),
        ("if (x := 3):\n    pass", "x"),
        ("y = [x := i for i in range(3)]", "x"),
        ("def f():\n    global x\n    x = 1", "x"),
        ("def f():\n    global x\n    import json as x", "x"),
        ("match 1:\n    case [*x]:\n        pass", "x"),
        ("match 1:\n    case {'a': 1, **x}:\n        pass", "x"),
        ("match 1:\n    case int() as x:\n        pass", "x"),
        ("try:\n    x = 1\nexcept ValueError:\n    pass", "x"),
        ("%matplotlib inline\nx = !ls", "x"),
        ("%%capture x\nprint(1)", "x"),
        ("%%refine --max-attempts 2\nx = 1", "x"),
        ("%%time\nx = 1", "x"),
    ],
)
def test_assignment_forms_define_a_name(source, name):
    report = analyse(cells("y = 0", source), [name])
    assert report.definers == {name: 2}, source


@pytest.mark.parametrize(
    "source",
    [
        "x: int",  # an annotation alone binds nothing
        "y = [x for x in range(3)]",  # comprehension variables are local
        "def f(x):\n    x = 2",  # a function's locals
        "def f():\n    x = 2",
        "class C:\n    x = 1",  # a class attribute
        "try:\n    pass\nexcept Exception as x:\n    pass",  # unbound again after the handler
        "print(x)",
        "obj.x = 1",
        "%%bash\nx=1",  # not Python
        "%%timeit\nx = 1",  # runs inside a function
    ],
)
def test_forms_that_do_not_define_the_name(source):
    report = analyse(cells("x = 0", source), ["x"])
    assert report.definers == {"x": 1}, source


def test_the_last_definer_wins_and_a_later_del_is_reported():
    executed = cells("x = 1\ny = 1", "x = 2", "del y", "z = x + 1")
    report = analyse(executed, ["x", "y", "z"])
    assert report.definers == {"x": 2, "z": 4}
    assert any("`y` was deleted by In [3] (cell 'c3')" in w for w in report.warnings)


def test_reset_forgets_what_ran_before():
    report = analyse(cells("x = 1\nw = 1", "%reset -f", "w = 2"), ["x", "w"])
    assert report.definers == {"w": 3}


def test_ipython_translation_is_used_when_given():
    cell = ExecutedCell(1, "files = !ls\n%time y = 2", "c", code="files = get_ipython().getoutput('ls')\n")
    assert analyse([cell], ["files"]).definers == {"files": 1}


def test_the_names_the_definers_use_are_followed():
    executed = cells(
        "import pandas as pd",
        "raw = pd.read_csv('x.csv')",
        "def clean(frame):\n    return frame.dropna() + offset",
        "offset = 3",
        "unrelated = 1",
    )
    report = analyse(executed, free_names("out = clean(raw)"))
    assert report.definers == {"clean": 3, "raw": 2}
    assert report.indirect == {"offset": 4, "pd": 1}
    notebook = [NotebookCell(c.cell_id or "", c.source) for c in executed]
    notebook[3] = NotebookCell("c4", "offset = 4")  # edited, not re-run: stale for clean() too
    stale = analyse(executed, free_names("out = clean(raw)"), notebook)
    assert [w[:47] for w in stale.warnings] == ["`offset` was last defined by In [4] (cell 'c4')"]


def test_names_local_to_the_code_are_not_taken_from_earlier_cells():
    """A lambda's parameter, an ``except`` name and a class body's own names are the code's own:
    an earlier cell that happens to bind the same names is not where they come from."""
    code = (
        "def top(rows):\n"
        "    try:\n"
        "        return sorted(rows, key=lambda r: r[column])\n"
        "    except KeyError as err:\n"
        "        return str(err)\n"
        "class Config:\n"
        "    size = 3\n"
        "    double = size * factor\n"
        "    def show(self):\n"
        "        return size\n"
    )
    assert free_names(code) == ["factor", "sorted", "column", "KeyError", "str", "size"]
    report = analyse(cells("err = None\nr = 0\nfactor = 2\nsize = 9"), free_names(code))
    assert report.definers == {"factor": 1, "size": 1}  # the method's `size` is the global one


def test_a_timed_line_defines_its_names():
    """``%time total = compute(data)`` runs its code in the namespace: the cell defines ``total``."""
    timed = ExecutedCell(
        2,
        "%time total = compute(data)",
        "c2",
        code="get_ipython().run_line_magic('time', 'total = compute(data)')\n",
    )
    report = analyse([*cells("compute = len\ndata = [1]"), timed], ["total"])
    assert report.definers == {"total": 2}
    assert report.indirect == {"compute": 1, "data": 1}


# --------------------------------------------------------------------------- warnings


def test_edited_cell_not_rerun():
    executed = cells("import pandas as pd", "df = pd.read_csv('a.csv')")
    notebook = [NotebookCell("c1", "import pandas as pd"), NotebookCell("c2", "data = pd.read_csv('b.csv')")]
    report = analyse(executed, ["df"], notebook)
    (warning,) = report.warnings
    assert warning.startswith(
        "`df` was last defined by In [2] (cell 'c2'), which has been edited since it ran"
    )
    assert "or the notebook was not saved since" in warning  # no times: it cannot tell
    assert "its current source no longer defines `df`" in warning


def test_edit_warning_uses_the_save_time():
    executed = [ExecutedCell(1, "df = 1", "c1", ran_at=100.0)]
    notebook = [NotebookCell("c1", "df = 2")]
    edited = analyse(executed, ["df"], notebook, saved_at=200.0)  # saved after it ran: a real edit
    assert len(edited.warnings) == 1 and "not saved since" not in edited.warnings[0]
    assert "no longer defines" not in edited.warnings[0]
    assert analyse(executed, ["df"], notebook, saved_at=50.0).warnings == ()  # the file is older
    assert analyse(executed, ["df"], [NotebookCell("c1", "df = 1\n\n")]).warnings == ()  # whitespace only


def test_name_from_an_earlier_version_of_a_rerun_cell():
    executed = [ExecutedCell(1, "a = 1\nb = 2", "c1"), ExecutedCell(2, "a = 1", "c1")]
    report = analyse(executed, ["b"], [NotebookCell("c1", "a = 1")])
    assert report.definers == {"b": 1}
    assert "`b` comes from In [1] (cell 'c1'), an earlier version of that cell" in report.warnings[0]
    assert "In [2], no longer defines `b`" in report.warnings[0]


def test_cells_run_out_of_order():
    executed = [ExecutedCell(7, "df = load()", "clean"), ExecutedCell(9, "def load():\n    return 1", "load")]
    notebook = [NotebookCell("load", "def load():\n    return 1"), NotebookCell("clean", "df = load()")]
    report = analyse(executed, ["df", "load"], notebook)
    assert report.warnings == (
        "In [9] (cell 'load') is above In [7] (cell 'clean') in the notebook but ran after it "
        "(cells this code depends on ran out of order).",
    )
    in_order = analyse(executed, ["df"], list(reversed(notebook)))
    assert in_order.warnings == ()


def test_dependency_below_the_failing_cell():
    executed = cells("x = 1", "y = x")
    notebook = [NotebookCell("c1", "x = 1"), NotebookCell("fail", "print(y)"), NotebookCell("c2", "y = x")]
    report = analyse(executed, ["y"], notebook, current_cell_id="fail")
    assert report.warnings == (
        "In [2] (cell 'c2') is below the failing cell in the notebook, yet it depends on it: "
        "running the notebook from the top would fail here.",
    )


def test_name_from_a_deleted_cell():
    executed = [ExecutedCell(1, "x = 1", "gone", ran_at=10.0), ExecutedCell(2, "y = 2", "kept", ran_at=11.0)]
    notebook = [NotebookCell("kept", "y = 2")]
    report = analyse(executed, ["x", "y"], notebook, saved_at=20.0)
    assert report.warnings == (
        "`x` only exists because of In [1] (cell 'gone'), which is no longer in the notebook: "
        "a restart and Run All would not define it.",
    )
    # It ran after the last save: the cell may just not be saved yet.
    assert analyse(executed, ["x"], notebook, saved_at=5.0).warnings == ()


def test_name_in_the_namespace_that_no_cell_defined():
    executed = cells("from helpers import *", "y = 1")
    report = analyse(executed, ["mystery", "y", "len", "ghost"], namespace={"mystery", "y", "len"})
    (warning,) = report.warnings
    assert warning.startswith("`mystery` exists in the kernel, but no cell run in this session defines it")
    assert "In [1] (cell 'c1') has `from helpers import *`" in warning
    assert analyse(executed, ["mystery"]).warnings == ()  # without the namespace: nothing said


def test_missing_ids_are_inferred_from_the_saved_sources():
    executed = [ExecutedCell(1, "x = 1"), ExecutedCell(2, "y = x")]
    notebook = [NotebookCell("b", "y = x"), NotebookCell("a", "x = 1")]
    report = analyse(executed, ["y", "x"], notebook)
    assert [c.cell_id for c in report.executed] == ["a", "b"]
    assert "In [2] (cell 'b') is above In [1] (cell 'a')" in report.warnings[0]


# --------------------------------------------------------------------------- render


def _session(n: int) -> list[ExecutedCell]:
    out = []
    for i in range(1, n + 1):
        body = "\n".join(f"value_{i}_{j} = {j} * {i}" for j in range(12))
        out.append(ExecutedCell(i, f"# cell {i}\n{body}", f"id{i}"))
    out.append(ExecutedCell(n + 1, "def target(x):\n    return x + base\n", "tgt"))
    out.append(ExecutedCell(n + 2, "base = 'text'", "base"))
    return out


def test_render_shows_definers_first_in_execution_order():
    report = analyse(_session(30), free_names("print(target(value_3_1))"))
    text = report.render(1500)
    assert len(text) <= 1500
    assert "- target: In [31] (cell 'tgt')" in text
    assert "- value_3_1: In [3] (cell 'id3')" in text
    assert "- base (used by those cells): In [32] (cell 'base')" in text
    assert "Cells run in this session, in execution order (32 run;" in text
    shown = [int(n) for n in re.findall(r"^In \[(\d+)\]", text, re.M)]
    assert shown == sorted(shown) and {3, 31, 32} <= set(shown)
    assert "[... 2 earlier cells not shown]" in text  # In [1], In [2]
    assert re.search(r"^\[\.\.\. \d+ cells not shown\]$", text, re.M)  # the gap after In [3]
    assert "In [3] (cell 'id3'), defines value_3_1:" in text


def test_render_keeps_the_defining_lines_of_a_long_cell():
    long_cell = "\n".join(f"filler_{j} = {j}" for j in range(80)) + "\nthreshold = 0.5\n" + "z = 1\n" * 40
    report = analyse([ExecutedCell(1, long_cell, "big")], ["threshold"])
    text = report.render(600)
    assert len(text) <= 600
    assert "    threshold = 0.5" in text and "    filler_0 = 0" in text
    assert re.search(r"\[\.\.\. \d+ lines\]", text) and re.search(r"\[\.\.\. \d+ more lines\]", text)


@pytest.mark.parametrize("budget", [0, 40, 120, 300, 700, 2000, 5000, 50000])
def test_render_respects_any_budget(budget):
    report = analyse(
        _session(60),
        ["target", "value_1_1", "ghost"],
        [NotebookCell("tgt", "changed")],
        namespace={"ghost"},
    )
    text = report.render(budget)
    assert len(text) <= budget
    if budget >= 300:
        assert "Stale state" in text
    if budget == 50000:
        assert "not shown" not in text and "(62 run):" in text


def test_render_groups_reruns_and_handles_an_empty_session():
    executed = [ExecutedCell(n, "counter += 1", "loop") for n in range(1, 7)]
    executed.insert(0, ExecutedCell(0, "counter = 0", "init"))
    text = analyse(executed, ["counter"]).render(2000)
    assert "6 runs, the latest In [3], In [4], In [5], In [6] (cell 'loop'), defines counter:" in text
    assert text.count("counter += 1") == 1
    assert analyse([], ["x"]).render(500) == "No cells have run in this session before this one."


# --------------------------------------------------------------------------- defining_cell


def _register(name: str, code: str) -> None:
    """What IPython's CachingCompiler.cache does for each cell."""
    linecache.cache[name] = (len(code), None, [line + "\n" for line in code.splitlines()], name)


def _ipython_name(code: str, count: int) -> str:
    return f"<ipython-input-{count}-{hashlib.sha1(code.encode()).hexdigest()[:12]}>"


def test_defining_cell_matches_ipython_and_ipykernel_file_names():
    executed = [
        ExecutedCell(1, "def f():\n    return 1\n", "a"),
        ExecutedCell(2, "def g():\n    return 2", "b"),
        ExecutedCell(3, "def f():\n    return 1\n", "a"),  # the same cell again
    ]
    ipython = _ipython_name(executed[1].source, 2)
    _register(ipython, executed[1].source)
    assert defining_cell(ipython, executed, None) == executed[1]
    kernel = "/tmp/ipykernel_123/4242.py"  # ipykernel: hashed from the source, no count
    _register(kernel, executed[0].source)
    assert defining_cell(kernel, executed, None) == executed[2]  # the newest run of that source
    assert defining_cell(kernel, executed, None, counts={kernel: 1}) == executed[0]  # IPython's own map
    assert defining_cell(kernel, executed, ["something else\n"], counts={kernel: 1}) is None
    assert defining_cell("/tmp/ipykernel_123/9.py", executed, None) is None  # unknown file name
    assert defining_cell("<ipython-input-2-0123456789ab>", executed, None) == executed[1]  # count only


def test_defining_cell_sees_through_ipython_syntax_and_cell_magics():
    raw = "%load_ext autoreload\ndef f(x):\n    return x"
    translated = "get_ipython().run_line_magic('load_ext', 'autoreload')\ndef f(x):\n    return x\n"
    magic = ExecutedCell(1, raw, "m")
    refine = ExecutedCell(2, "%%refine --max-attempts 2\ndef h():\n    return 3", "r")
    lines = [line + "\n" for line in translated.splitlines()]
    assert defining_cell("/tmp/x/1.py", [magic, refine], lines) == magic
    assert defining_cell("/tmp/x/2.py", [magic, refine], ["def h():\n", "    return 3\n"]) == refine
    shell = ExecutedCell(4, "%%refine\nfiles = !ls\nfirst = files[0]", "s")
    shell_lines = ["files = get_ipython().getoutput('ls')\n", "first = files[0]\n"]
    assert defining_cell("/tmp/x/4.py", [shell, magic], shell_lines) == shell
    with_code = ExecutedCell(3, raw, "m", code=translated)
    assert defining_cell("/tmp/x/3.py", [with_code], lines) == with_code


# --------------------------------------------------------------------------- the saved notebook


def test_notebook_cells_reads_a_real_notebook(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# Title"),
        nbformat.v4.new_code_cell("import math", id="imports"),
        nbformat.v4.new_code_cell("r = 2\narea = math.pi * r ** 2", id="area"),
    ]
    path = tmp_path / "analysis.ipynb"
    nbformat.write(nb, str(path))
    assert notebook_cells(str(path)) == [
        NotebookCell("imports", "import math"),
        NotebookCell("area", "r = 2\narea = math.pi * r ** 2"),
    ]
    assert notebook_path({"__session__": str(path)}) == str(path)
    assert notebook_path({"__vsc_ipynb_file__": str(path)}) == str(path)
    assert notebook_path({"__session__": str(tmp_path / "missing.ipynb")}) is None
    assert notebook_path({}) is None


def test_notebook_cells_is_none_on_any_problem(tmp_path):
    broken = tmp_path / "broken.ipynb"
    broken.write_text('{"cells": [', encoding="utf-8")
    assert notebook_cells(str(broken)) is None
    assert notebook_cells(str(tmp_path / "missing.ipynb")) is None
    assert notebook_cells(str(tmp_path)) is None  # a directory
    old = tmp_path / "old.ipynb"  # nbformat 4.4: no cell ids to match the kernel's with
    old.write_text(
        '{"nbformat": 4, "nbformat_minor": 4, "metadata": {}, "cells": [{"cell_type": "code", '
        '"metadata": {}, "source": "x = 1", "outputs": [], "execution_count": null}]}',
        encoding="utf-8",
    )
    assert notebook_cells(str(old)) is None


# --------------------------------------------------------------------------- in a real shell


def test_in_a_real_ipython_shell_the_function_cell_is_the_target():
    from IPython.core.interactiveshell import InteractiveShell

    ip = InteractiveShell.instance()
    recorded: dict[int, str | None] = {}

    def record(result):  # what the adapter does: O(1) per cell
        if result.info.store_history:
            recorded[result.execution_count] = result.info.cell_id

    ip.events.register("post_run_cell", record)
    try:
        ip.run_cell(
            "import math\n\ndef area(r):\n    return math.pi * r ** 2\n", store_history=True, cell_id="geom"
        )
        ip.run_cell("%config HistoryManager.enabled\nradius = '2'", store_history=True, cell_id="params")
        failing = ip.run_cell("total = area(radius) + 1", store_history=True, cell_id="use")
        error = failing.error_in_exec
        assert isinstance(error, TypeError)
        assert recorded[failing.execution_count] == "use"

        history = ip.history_manager
        executed = [
            ExecutedCell(n, history.input_hist_raw[n], cell_id, code=history.input_hist_parsed[n])
            for n, cell_id in sorted(recorded.items())
            if n != failing.execution_count
        ]
        # The innermost frame is inside area(): its code was compiled under the geom cell's name.
        tb = error.__traceback__
        while tb.tb_next is not None:
            tb = tb.tb_next
        filename = tb.tb_frame.f_code.co_filename
        cell = defining_cell(filename, executed, linecache.getlines(filename))
        assert cell is not None and cell.cell_id == "geom" and "def area" in cell.source
        assert defining_cell(filename, executed, None, counts=ip.compile._filename_map) == cell

        target = cross_cell_target(error, executed, ip.user_ns, counts=ip.compile._filename_map)
        assert target is not None and target.cell == cell and target.cell_id == "geom"
        assert (target.function, target.lineno, target.line.strip()) == ("area", 4, "return math.pi * r ** 2")
        assert "inside `area`, which In [" in target.note() and "(cell 'geom')" in target.note()

        report = analyse(executed, free_names("total = area(radius) + 1"), namespace=ip.user_ns)
        assert report.definers == {"area": cell.count, "radius": cell.count + 1}
        assert report.indirect == {}  # math is imported by the same cell
        text = report.render(1200)
        assert f"- area: In [{cell.count}] (cell 'geom')" in text and "radius = '2'" in text

        assert cross_cell_target(error, executed, ip.user_ns, current_cell_id="geom") is None
        # An error in the failing cell's own code has no other cell to blame.
        own = ip.run_cell("1 / 0", store_history=True, cell_id="own").error_in_exec
        assert cross_cell_target(own, executed, ip.user_ns) is None
    finally:
        ip.events.unregister("post_run_cell", record)
        ip.reset(new_session=False)


def test_a_cell_nbrefine_fix_ran_under_a_refine_line_is_not_edited_since() -> None:
    """nbrefine fix runs every cell under a %%refine line: the notebook's cell is the same cell."""
    from nbrefine.grounding.history import ExecutedCell, NotebookCell, analyse

    ran = ExecutedCell(1, "%%refine --max-attempts 1\ndef mean(xs):\n    return sum(xs) / len(xs)", "mean")
    notebook = [NotebookCell("mean", "def mean(xs):\n    return sum(xs) / len(xs)")]
    report = analyse([ran], ["mean"], notebook, namespace={"mean"})
    assert not [w for w in report.warnings if "edited" in w], report.warnings
