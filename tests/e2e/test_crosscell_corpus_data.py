"""The cross-cell corpus (``tests/corpus/crosscell/``) is what its generator writes, and every case is sound.

The end-to-end test runs each case through ``nbrefine fix``; this one only checks the data, with no
kernel and no nbrefine: the files are the generator's output, each case is well formed, its reply
has the shape it claims, and its cells really behave as the case says (the buggy function fails
its checks and the expected source passes them, the moved cell makes the notebook run, the cascade
starts where it says). Cells run in a subprocess, in order in one namespace, like a kernel.
"""

from __future__ import annotations

import ast
import functools
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "corpus" / "crosscell"
GENERATOR = ROOT / "scripts" / "make_crosscell_corpus.py"
CASES = sorted(CORPUS.glob("*.json"))
ARGS = ["--no-quick-fixes", "--max-attempts", "1"]
KINDS = ("checked", "nbgrader", "cascade", "below", "unchecked")
SHAPES = ("function-above-checks", "labelled-blocks", "whole-cell", "comment-label", "prose-around")
STATUSES = ("fixed", "unfixed", "proposal")
CELL_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")  # nbformat 4.5
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.S | re.M)
LABEL = re.compile(r"^#+ In \[(\d+)\] \(cell '([^']+)'\)$")
RUN_TIMEOUT_S = 5.0  # per run of a case's cells

#: Runs jobs like a kernel runs a notebook's code cells: in order, in a fresh namespace per job,
#: each cell once, going on after an error. Prints each cell's error type (null: it passed), or
#: null for a job that ran longer than the limit.
RUNNER = r"""
import io, json, signal, sys

class _Late(BaseException):
    pass

def _late(*_):
    raise _Late()

signal.signal(signal.SIGALRM, _late)
jobs, limit = json.loads(sys.stdin.read())
real_stdout, results = sys.stdout, []
for job in jobs:
    sys.stdout, ns, out = io.StringIO(), {"__name__": "__main__"}, []
    signal.setitimer(signal.ITIMER_REAL, limit)
    try:
        for cell_id, source in job:
            try:
                exec(compile(source, "<cell %s>" % cell_id, "exec"), ns)
                out.append(None)
            except _Late:
                raise
            except BaseException as err:
                out.append(type(err).__name__)
    except _Late:
        out = None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    results.append(out)
real_stdout.write(json.dumps(results))
"""


def load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def code_ids(case: dict[str, Any]) -> list[str]:
    return [c["id"] for c in case["cells"] if c["type"] == "code"]


def source_of(case: dict[str, Any], cell_id: str) -> str:
    return next(c["source"] for c in case["cells"] if c["id"] == cell_id)


def blocks(reply: str) -> list[tuple[str, str, int]]:
    """The fenced blocks of a reply: (tag, code without its last newline, offset of the fence)."""
    return [(m.group(1), m.group(2).removesuffix("\n"), m.start()) for m in FENCE.finditer(reply)]


def in_order(
    case: dict[str, Any], order: list[str] | None = None, sources: dict[str, str] | None = None
) -> list[tuple[str, str]]:
    """The code cells in ``order`` (default: the notebook's), with some sources replaced."""
    sources = sources or {}
    by_id = {c["id"]: c for c in case["cells"]}
    ids = order or [c["id"] for c in case["cells"]]
    return [(i, sources.get(i, by_id[i]["source"])) for i in ids if by_id[i]["type"] == "code"]


def failed(results: dict[str, str | None]) -> dict[str, str]:
    return {cell_id: error for cell_id, error in results.items() if error is not None}


def top_level_names(source: str) -> set[str]:
    names: set[str] = set()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def function_text(source: str, name: str) -> str:
    """The source text of the top-level function ``name``."""
    lines = source.splitlines()
    node = next(n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == name)
    return "\n".join(lines[node.lineno - 1 : node.end_lineno])


# --------------------------------------------------------------------------- the corpus as a whole


def test_the_files_are_what_the_generator_writes(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(GENERATOR), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    written = sorted(p.name for p in tmp_path.glob("*.json"))
    assert written == [p.name for p in CASES], "run: python scripts/make_crosscell_corpus.py"
    for name in written:
        assert (tmp_path / name).read_bytes() == (CORPUS / name).read_bytes(), name


def test_the_corpus_has_enough_cases_of_each_kind() -> None:
    cases = [load(p) for p in CASES]
    kinds = Counter(c["kind"] for c in cases)
    assert len(cases) >= 30
    assert kinds["checked"] >= 14 and kinds["nbgrader"] >= 4, kinds
    assert kinds["cascade"] >= 3 and kinds["below"] >= 3 and kinds["unchecked"] >= 3, kinds
    checked = [c for c in cases if c["kind"] == "checked"]
    assert sum(c["origin"].startswith("QuixBugs") for c in checked) >= 8
    assert sum(c["origin"].startswith("HumanEvalFix") for c in checked) >= 6
    shapes = Counter(c["reply_shape"] for c in cases if c["kind"] in ("checked", "nbgrader"))
    assert set(shapes) == set(SHAPES) and min(shapes.values()) >= 3, shapes


def test_the_readme_lists_every_case() -> None:
    readme = (CORPUS / "README.md").read_text(encoding="utf-8")
    for path in CASES:
        assert f"`{path.stem}`" in readme, path.stem


# --------------------------------------------------------------------------- each case


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_the_case_is_well_formed(path: Path) -> None:
    case = load(path)
    assert set(case) == {"name", "origin", "kind", "reply_shape", "cells", "replies", "args", "expect"}
    assert case["name"] == path.stem
    assert case["kind"] in KINDS
    assert case["args"] == ARGS
    assert case["origin"].strip()
    ids = [c["id"] for c in case["cells"]]
    assert len(set(ids)) == len(ids), "cell ids must be unique"
    for cell in case["cells"]:
        assert set(cell) == {"id", "type", "source", "metadata"}
        assert CELL_ID.match(cell["id"]), cell["id"]
        assert cell["type"] in ("code", "markdown")
        assert isinstance(cell["source"], str) and cell["source"].strip()
        assert isinstance(cell["metadata"], dict)
        if cell["type"] == "code":
            ast.parse(cell["source"])
    code = code_ids(case)

    replies = case["replies"]
    assert isinstance(replies, list) and replies
    for reply in replies:
        assert isinstance(reply, str) and reply.strip()
        assert reply.count("```") % 2 == 0, "every fence is closed"
        for tag, block, _ in blocks(reply):
            assert tag == "python"
            ast.parse(block)

    expect = case["expect"]
    allowed = {"changed", "identical", "status", "cause", "errors", "applied"}
    assert set(expect) == allowed | ({"moved"} if case["kind"] == "below" else set())
    changed, identical = expect["changed"], expect["identical"]
    assert not set(changed) & set(identical)
    assert sorted([*changed, *identical]) == sorted(ids), "every cell is changed or identical"
    assert len(identical) == len(set(identical))
    assert set(changed) <= set(code)
    for new in changed.values():
        ast.parse(new)
    status = expect["status"]
    assert status and set(status) <= set(code) and set(status.values()) <= set(STATUSES)
    assert set(expect["cause"]) <= set(status) and set(expect["cause"].values()) <= set(code)
    assert set(expect["errors"]) == set(status)
    assert isinstance(expect["applied"], bool)


def _check_label(case: dict[str, Any], count: str, cell_id: str) -> None:
    """``In [k] (cell 'x')``: x is a code cell and k its place among the code cells."""
    code = code_ids(case)
    assert cell_id in code
    assert int(count) == code.index(cell_id) + 1


@pytest.mark.parametrize(
    "path", [p for p in CASES if load(p)["kind"] in ("checked", "nbgrader")], ids=lambda p: p.stem
)
def test_a_checked_case_fixes_the_function_cell_and_keeps_the_checks(path: Path) -> None:
    case = load(path)
    expect = case["expect"]
    (function_id, new_source), (checks_id, status) = *expect["changed"].items(), *expect["status"].items()
    assert status == "fixed" and expect["applied"] is True
    assert expect["cause"] == {checks_id: function_id}
    assert [c["type"] for c in case["cells"]] == ["markdown", "code", "code"]
    assert code_ids(case) == [function_id, checks_id]
    checks = source_of(case, checks_id)
    tree = ast.parse(checks)
    assert 3 <= len(tree.body) <= 5 and all(isinstance(s, ast.Assert) for s in tree.body)
    corpus = (
        "quixbugs_python.jsonl" if case["origin"].startswith("QuixBugs") else "humanevalpack_python.jsonl"
    )
    assert f"corpora/{corpus}" in case["origin"] and "corpora/LICENSE-octopack" in case["origin"]

    if case["kind"] == "nbgrader":
        by_id = {c["id"]: c for c in case["cells"]}
        solution, tests = by_id[function_id]["metadata"]["nbgrader"], by_id[checks_id]["metadata"]["nbgrader"]
        assert solution["solution"] is True and solution["grade"] is False and solution["locked"] is False
        assert tests["grade"] is True and tests["locked"] is True and tests["solution"] is False
        assert tests["points"] == 1 and solution["schema_version"] == tests["schema_version"] == 3
        assert solution["grade_id"].endswith("-solution") and tests["grade_id"].endswith("-tests")

    # The reply has the shape it claims, and the expected source is what its code holds.
    (reply,) = case["replies"]
    found = blocks(reply)
    shape = case["reply_shape"]
    name = next(n.name for n in ast.parse(new_source).body if isinstance(n, ast.FunctionDef))
    if shape == "function-above-checks":
        ((_, code, at),) = found
        assert reply[:at].strip(), "prose first"
        assert code.endswith("\n" + checks), "the checks come back unchanged, below the function"
        assert function_text(code, name) == function_text(new_source, name)
        source = source_of(case, function_id)
        old = function_text(source, name)
        assert new_source == source.replace(old, function_text(code, name))
    elif shape == "labelled-blocks":
        assert reply[: found[0][2]].strip(), "prose first"
        labelled = {}
        for _, code, at in found:
            heading = reply[:at].rstrip().splitlines()[-1]
            match = LABEL.match(heading)
            assert match, heading
            _check_label(case, *match.groups())
            labelled[match.group(2)] = code
        assert labelled[function_id] == new_source
        assert labelled.get(checks_id, checks) == checks, "a checks block comes back unchanged"
    elif shape == "comment-label":
        ((_, code, at),) = found
        first, _, rest = code.partition("\n")
        match = LABEL.match(first)
        assert match and first.startswith("# "), first
        _check_label(case, *match.groups())
        assert match.group(2) == function_id and rest == new_source
        assert reply[:at].strip()
    else:
        assert shape in ("whole-cell", "prose-around"), shape
        ((_, code, at),) = found
        assert code == new_source and reply[:at].strip()
        tail = reply[reply.index("```", at + 3) + 3 :].strip()
        assert bool(tail) == (shape == "prose-around"), "prose after the block only in prose-around"


@pytest.mark.parametrize("path", [p for p in CASES if load(p)["kind"] == "cascade"], ids=lambda p: p.stem)
def test_a_cascade_case_declines_and_patches_nothing(path: Path) -> None:
    case = load(path)
    expect = case["expect"]
    ((then, first),) = expect["cause"].items()
    assert expect["status"] == {first: "unfixed", then: "unfixed"}
    assert expect["changed"] == {} and expect["applied"] is False
    code = code_ids(case)
    assert code.index(first) < code.index(then)
    decline, wrong, *_ = case["replies"]
    assert blocks(decline) == [] and "```" not in decline, "the first reply declines, with no code"
    ((_, patch, _),) = blocks(wrong)
    assert patch != source_of(case, then), "the second reply would patch the dependent cell"


@pytest.mark.parametrize("path", [p for p in CASES if load(p)["kind"] == "below"], ids=lambda p: p.stem)
def test_a_below_case_moves_the_defining_cell(path: Path) -> None:
    case = load(path)
    expect = case["expect"]
    moved, above = expect["moved"]["cell"], expect["moved"]["above"]
    assert set(expect["moved"]) == {"cell", "above"}
    code = code_ids(case)
    assert code.index(moved) > code.index(above), "the defining cell starts below"
    assert expect["status"] == {above: "fixed"} and expect["cause"] == {above: moved}
    assert expect["changed"] == {} and expect["applied"] is True
    (reply,) = case["replies"]
    ((_, invented, _),) = blocks(reply)
    defined = top_level_names(source_of(case, moved))
    assert top_level_names(invented) & defined, "the reply invents what the cell below defines"


@pytest.mark.parametrize("path", [p for p in CASES if load(p)["kind"] == "unchecked"], ids=lambda p: p.stem)
def test_an_unchecked_case_is_a_proposal(path: Path) -> None:
    case = load(path)
    expect = case["expect"]
    ((cell, status),) = expect["status"].items()
    assert status == "proposal" and expect["applied"] is False and expect["changed"] == {}
    assert expect["cause"] == {cell: cell}
    for cell_id in code_ids(case):
        tree = ast.parse(source_of(case, cell_id))
        assert not any(isinstance(n, ast.Assert) for n in ast.walk(tree)), "nothing checks the result"
    (reply,) = case["replies"]
    ((_, code, _),) = blocks(reply)
    assert code != source_of(case, cell) and len(code.splitlines()) == len(source_of(case, cell).splitlines())


# --------------------------------------------------------------------------- each case, run


def runs_of(case: dict[str, Any]) -> dict[str, list[tuple[str, str]]]:
    """The runs that show a case is sound: the notebook as it is, and the notebook as fixed."""
    expect, kind = case["expect"], case["kind"]
    found = {"original": in_order(case)}
    if kind in ("checked", "nbgrader"):
        found["fixed"] = in_order(case, sources=expect["changed"])
    elif kind == "below":
        moved, above = expect["moved"]["cell"], expect["moved"]["above"]
        order = [c["id"] for c in case["cells"] if c["id"] != moved]
        order.insert(order.index(above), moved)
        found["moved"] = in_order(case, order)
    elif kind == "unchecked":
        ((cell, _),) = expect["status"].items()
        ((_, proposal, _),) = blocks(case["replies"][0])
        found["proposal"] = in_order(case, sources={cell: proposal})
    return found


@functools.cache
def outcomes() -> dict[str, dict[str, dict[str, str | None] | None]]:
    """Every case's runs, in one subprocess (in a scratch folder, without $ALERT_THRESHOLD_MM):
    case name -> run -> each code cell's error type (None: it passed), or None if it timed out."""
    jobs = [(load(p)["name"], what, job) for p in CASES for what, job in runs_of(load(p)).items()]
    env = {k: v for k, v in os.environ.items() if k != "ALERT_THRESHOLD_MM"}
    with tempfile.TemporaryDirectory() as scratch:
        done = subprocess.run(
            [sys.executable, "-I", "-c", RUNNER],
            input=json.dumps([[job for _, _, job in jobs], RUN_TIMEOUT_S]),
            capture_output=True,
            text=True,
            timeout=60,
            cwd=scratch,
            env=env,
        )
    assert done.returncode == 0, done.stderr
    found: dict[str, dict[str, dict[str, str | None] | None]] = {}
    for (name, what, job), result in zip(jobs, json.loads(done.stdout), strict=True):
        cells = (
            None
            if result is None
            else {cell_id: error for (cell_id, _), error in zip(job, result, strict=True)}
        )
        found.setdefault(name, {})[what] = cells
    return found


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_the_cells_behave_as_the_case_says(path: Path) -> None:
    case = load(path)
    expect, kind = case["expect"], case["kind"]
    runs = outcomes()[case["name"]]
    assert all(result is not None for result in runs.values()), f"a run took over {RUN_TIMEOUT_S} s"
    original = runs["original"]
    assert original is not None and failed(original) == expect["errors"]
    if kind in ("checked", "nbgrader"):
        (checks_id,) = expect["status"]
        assert expect["errors"][checks_id] not in ("RecursionError", "TimeoutError")
        assert failed(runs["fixed"]) == {}, "the expected source passes every check"
    elif kind == "cascade":
        ((then, first),) = expect["cause"].items()
        ids = code_ids(case)
        assert set(failed(original)) == {first, then}
        assert all(original[i] is None for i in ids[: ids.index(first)]), "the cells above pass"
        assert expect["errors"][then] in ("NameError", "KeyError")
    elif kind == "below":
        assert expect["errors"] == {expect["moved"]["above"]: "NameError"}
        assert failed(runs["moved"]) == {}, "with the cell moved above, all pass"
    else:
        assert failed(runs["proposal"]) == {}, "the proposal runs"
