"""Capturing failures: cell-mapped frames, failing line, values, assert operands."""

from __future__ import annotations

import linecache

import pytest

from nbrefine.grounding import Redactor
from nbrefine.grounding.capture import capture_failure, statement_index
from nbrefine.sandbox import call_in_fork


def run_cell(code: str, namespace: dict, filename: str = "<cell-1>"):
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    try:
        exec(compile(code, filename, "exec"), namespace)
    except Exception as err:
        return err
    raise AssertionError("the cell did not fail")


def test_frames_are_mapped_to_cell_lines_and_library_frames_folded():
    code = "import json\nx = 1\njson.loads('{bad')\n"
    ns: dict = {}
    err = run_cell(code, ns)
    failure = capture_failure(err, code=code, user_globals=ns)
    assert failure.error_type == "json.decoder.JSONDecodeError"
    assert failure.lineno == 3 and failure.line == "json.loads('{bad')"
    assert failure.where == "cell"
    assert failure.frames[0].label == "cell" and failure.frames[0].lineno == 3
    assert failure.library_frames_hidden >= 1
    assert failure.statements_done == 2
    assert "library frame" in failure.render()


def test_frames_in_functions_of_the_cell_keep_their_values():
    code = "def mean(xs):\n    return sum(xs) / len(xs)\n\ndata = []\nmean(data)\n"
    ns: dict = {}
    err = run_cell(code, ns)
    failure = capture_failure(err, code=code, user_globals=ns)
    assert failure.error_type == "ZeroDivisionError"
    assert [f.lineno for f in failure.frames] == [5, 2]
    assert failure.lineno == 2  # the innermost line of the cell
    names = {v.name: v.text for v in failure.values}
    assert "xs" in names and "list" in names["xs"]


def test_function_from_another_cell_is_labelled():
    other = "def helper(d):\n    return d['missing']\n"
    ns: dict = {}
    linecache.cache["<cell-0>"] = (len(other), None, other.splitlines(True), "<cell-0>")
    exec(compile(other, "<cell-0>", "exec"), ns)
    code = "row = {'present': 1}\nhelper(row)\n"
    err = run_cell(code, ns)
    failure = capture_failure(err, code=code, user_globals=ns)
    assert [f.label for f in failure.frames] == ["cell", "another cell"]
    assert failure.lineno == 2
    assert failure.frames[1].line.strip() == "return d['missing']"


def test_assert_operands_pytest_style():
    code = "total = 3 + 4\nexpected = 10\nassert total == expected, 'sum is off'\n"
    ns: dict = {}
    failure = capture_failure(run_cell(code, ns), code=code, user_globals=ns)
    assert failure.error_type == "AssertionError"
    assert failure.assertion.splitlines()[0] == "assert total == expected"
    assert "where total = int 7" in failure.assertion
    assert "where expected = int 10" in failure.assertion
    assert "message: 'sum is off'" in failure.assertion


def test_assert_with_calls_is_evaluated_only_where_allowed():
    code = "calls = []\ndef f(x):\n    calls.append(x)\n    return x + 1\nassert f(2) == 4\n"
    ns: dict = {}
    err = run_cell(code, ns)
    safe = capture_failure(err, code=code, user_globals=ns)
    assert "not re-evaluated" in safe.assertion
    forked = capture_failure(err, code=code, user_globals=ns, run_unsafe=call_in_fork)
    assert "where f(2) = int 3" in forked.assertion
    assert ns["calls"] == [2]  # evaluated in a fork: the live list did not grow


def test_syntax_error_points_at_the_cell_line():
    code = "x = 1\nif x > 0\n    print(x)\n"
    try:
        compile(code, "<cell>", "exec")
    except SyntaxError as err:
        failure = capture_failure(err, code=code)
    assert failure.error_type == "SyntaxError"
    assert failure.lineno == 2 and failure.line.strip() == "if x > 0"


def test_secret_values_on_the_failing_line_are_redacted():
    code = "api_key = 'abc123abc123'\nurl = 'https://example.invalid'\nraise ValueError(url + api_key[:0])\n"
    ns: dict = {}
    failure = capture_failure(run_cell(code, ns), code=code, user_globals=ns, redactor=Redactor(environ={}))
    by_name = {v.name: v for v in failure.values}
    assert by_name["api_key"].redacted and "abc123" not in by_name["api_key"].text


def test_exception_whose_str_raises_is_still_captured():
    class Weird(Exception):
        def __str__(self):
            raise RuntimeError("no")

    code = "raise Weird()\n"
    ns: dict = {"Weird": Weird}
    failure = capture_failure(run_cell(code, ns), code=code, user_globals=ns)
    assert failure.message.startswith("<str() failed")


@pytest.mark.parametrize(("lineno", "index"), [(1, 0), (2, 1), (3, 1), (4, 2), (None, 0)])
def test_statement_index(lineno, index):
    code = "a = 1\nfor i in range(3):\n    a += i\nb = a\n"
    assert statement_index(code, lineno) == index


def test_cheap_numpy_and_pandas_attributes_are_read_without_calls():
    np = pytest.importorskip("numpy")
    pd = pytest.importorskip("pandas")
    code = "assert arr.shape == (3,) and len(df) == 5 and df.columns[0] == 'b'\n"
    ns: dict = {"arr": np.zeros(4), "df": pd.DataFrame({"a": [1, 2]})}
    failure = capture_failure(run_cell(code, ns), code=code, user_globals=ns)  # no run_unsafe given
    assert failure.assertion.splitlines()[1:] == [
        "  where arr.shape = tuple (len 1) (4,)",
        "  where len(df) = int 2",
        "  where df.columns[0] = str (len 1) 'a'",
    ]
