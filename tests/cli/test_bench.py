"""``nbrefine bench``: corpora of bugs run through the real loop in a real kernel."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

import pytest

from nbrefine.cli import bench
from nbrefine.cli.main import build_parser
from nbrefine.cli.main import main as nbrefine_main
from nbrefine.reports import bench as bench_report

ROOT = Path(__file__).resolve().parents[2]
QUIXBUGS = ROOT / "corpora" / "quixbugs_python.jsonl"

pytestmark = [pytest.mark.timeout(120), pytest.mark.usefixtures("clean_env")]


def main(argv: list[str]) -> int:
    """``nbrefine bench ARGV``."""
    return nbrefine_main(["bench", *argv])


def block(code: str) -> str:
    return f"Fixed it.\n\n```python\n{code}\n```"


ADD = ("add", "def add(a, b):\n    return a - b", "assert add(1, 2) == 3\nassert add(2, 2) == 4")
ADD_FIXED = "def add(a, b):\n    return a + b"
MAX = ("biggest", "def biggest(xs):\n    return min(xs)", "assert biggest([1, 5, 3]) == 5")
MAX_WRONG = "def biggest(xs):\n    return xs[0]"
MAX_FIXED = "def biggest(xs):\n    return max(xs)"
FIRST = ("first", "def first(xs):\n    return xs[1]", "assert first([7, 8]) == 7")
FIRST_WRONG = "def first(xs):\n    return xs[-1]"


def cell(program: str, tests: str) -> str:
    return f"{program}\n\n{tests}\n"


def write_corpus(path: Path, *cases: tuple[str, str, str]) -> Path:
    lines = [json.dumps({"name": n, "buggy_program": p, "tests": t, "solution": ""}) for n, p, t in cases]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_scripted_run_counts_rounds_cycles_and_no_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    passing = ("ok", "def one():\n    return 1", "assert one() == 1")
    corpus = write_corpus(tmp_path / "mini.jsonl", ADD, MAX, passing, FIRST)
    replies = [
        block(cell(ADD_FIXED, ADD[2])),  # add: round 1
        block(cell(MAX_WRONG, MAX[2])),  # biggest: round 1 fails (xs[0] == 1)...
        block(cell(MAX_FIXED, MAX[2])),  # ...round 2 passes
        block(cell(FIRST_WRONG, FIRST[2])),  # first: fails again (8 != 7)...
        block(cell(FIRST_WRONG, FIRST[2])),  # ...and repeats itself: a cycle, unfixed
    ]
    (tmp_path / "replies.json").write_text(json.dumps(replies))
    monkeypatch.setenv("NBREFINE_SCRIPTED_REPLIES", str(tmp_path / "replies.json"))
    out = tmp_path / "report.json"

    code = main(
        [str(corpus), "--provider", "scripted", "--no-quick-fixes", "--rounds", "3", "--json", str(out)]
    )

    assert code == 0
    report = json.loads(out.read_text())
    s = report["summary"]
    assert report["format"] == "quixbugs"
    assert (s["cases"], s["no_failure"], s["failing"], s["fixed"], s["unfixed"]) == (4, 1, 3, 2, 1)
    assert s["first_attempt_success_rate"] == pytest.approx(1 / 3, abs=1e-3)
    assert [r["fixed"] for r in s["cumulative_success"]] == [1, 2, 2]
    assert s["cumulative_success"][1]["rate"] == pytest.approx(2 / 3, abs=1e-3)
    assert s["by_error_type"] == {
        "AssertionError": {"failing": 3, "fixed": 2, "rate": pytest.approx(2 / 3, abs=1e-3)}
    }
    assert s["cycles"] == 1
    assert s["declined"] == 0 and s["provider_errors"] == 0
    assert s["tokens"]["input"] > 0 and s["tokens"]["output"] > 0
    by_name = {c["name"]: c for c in report["cases"]}
    assert by_name["add"]["fixed_round"] == 1
    assert by_name["biggest"]["fixed_round"] == 2
    assert by_name["ok"]["status"] == "no_failure"
    assert by_name["first"]["status"] == "unfixed" and by_name["first"]["stop_reason"] == "cycle"
    printed = capsys.readouterr().out
    assert "cumulative success, round 2" in printed and "66.7%" in printed


def test_provider_error_when_replies_run_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    corpus = write_corpus(tmp_path / "mini.jsonl", ADD, FIRST)
    (tmp_path / "replies.json").write_text(json.dumps([block(cell(ADD_FIXED, ADD[2]))]))
    monkeypatch.setenv("NBREFINE_SCRIPTED_REPLIES", str(tmp_path / "replies.json"))
    out = tmp_path / "report.json"
    assert main([str(corpus), "--provider", "scripted", "--no-quick-fixes", "--json", str(out)]) == 0
    s = json.loads(out.read_text())["summary"]
    assert (s["fixed"], s["provider_errors"]) == (1, 1)


def test_offline_on_real_quixbugs_declines(tmp_path: Path, capsys: Any) -> None:
    out = tmp_path / "out" / "q.json"  # as in the README, on a fresh clone: out/ is made
    code = main([str(QUIXBUGS), "--limit", "2", "--timeout", "2", "--json", str(out)])
    assert code == 0
    report = json.loads(out.read_text())
    s = report["summary"]
    assert s["cases"] == 2 and s["failing"] == 2 and s["fixed"] == 0
    assert [r["fixed"] for r in s["cumulative_success"]] == [0, 0, 0]
    assert s["declined"] == 2
    # bitcount loops forever: the hang is stopped and counted as a TimeoutError failure
    assert report["cases"][0]["name"] == "bitcount" and report["cases"][0]["error_type"] == "TimeoutError"
    assert "first-attempt success" in capsys.readouterr().out


def _runtime_text(path: Path) -> str:
    """What of ``path`` can be run: Python string literals (not docstrings), shell lines that are
    not comments, Markdown code blocks, notebook code cells. Provenance notes may name the shared
    folder the corpora were copied from; nothing that runs may read it."""
    text = path.read_text(errors="replace")
    if path.suffix == ".py":
        tree = ast.parse(text)
        docs = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and node.body
            and isinstance(node.body[0], ast.Expr)
        }
        return "\n".join(
            n.value
            for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs
        )
    if path.suffix == ".md":
        return "\n".join(re.findall(r"```[^\n]*\n(.*?)```", text, re.S))
    if path.suffix == ".ipynb":
        return "\n".join("".join(c["source"]) for c in json.loads(text)["cells"] if c["cell_type"] == "code")
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))


def test_the_repository_is_self_contained() -> None:
    """The corpora ship in corpora/ with their licence; nothing that runs reads a folder beside the
    clone (tests, benches, scripts, the README's and the docs' commands, the notebooks)."""
    for name in ("quixbugs_python.jsonl", "humanevalpack_python.jsonl", "LICENSE-octopack", "README.md"):
        assert (ROOT / "corpora" / name).is_file(), name
    assert len((ROOT / "corpora" / "quixbugs_python.jsonl").read_text().splitlines()) == 40
    assert len((ROOT / "corpora" / "humanevalpack_python.jsonl").read_text().splitlines()) == 164
    folder_name = "sha" + "red"  # spelt in parts: this file's own literals are scanned too
    needles = (f"../{folder_name}", f"{folder_name}/data")
    files = [ROOT / "README.md", ROOT / "dev", ROOT / ".ci" / "run"]
    for folder in ("nbrefine", "bench", "tests", "scripts", "docs", "notebooks"):
        files += [
            p
            for p in (ROOT / folder).rglob("*")
            if p.is_file() and p.suffix in (".py", ".md", ".sh", ".ipynb")
        ]
    hits = [str(p.relative_to(ROOT)) for p in files if any(n in _runtime_text(p) for n in needles)]
    # a path built in parts, as in Path(...).parent / "shared" / "data"
    hits += [str(p.relative_to(ROOT)) for p in files if p.suffix == ".py" and _has_literal(p, folder_name)]
    assert hits == []


def _has_literal(path: Path, word: str) -> bool:
    tree = ast.parse(path.read_text(errors="replace"))
    return any(isinstance(n, ast.Constant) and n.value == word for n in ast.walk(tree))


def test_whitespace_only_lines_find_the_session(tmp_path: Path) -> None:
    """IPython empties whitespace-only lines in a %%refine body; the case is still matched to its
    session (by the request that ran it) and keeps its real error."""
    corpus = write_corpus(
        tmp_path / "ws.jsonl",
        (
            "ws",
            "def add_tax(x):\n    return x + 1\n    \ndef main():\n    return add_tx(2)",
            "assert main() == 3",
        ),
    )
    out = tmp_path / "r.json"
    assert main([str(corpus), "--json", str(out)]) == 0
    case = json.loads(out.read_text())["cases"][0]
    assert (case["status"], case["error_type"], case["fixed_round"]) == ("fixed", "NameError", 1)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no such file"),
        ("", "empty corpus"),
        ('{"foo": 1}\n', "unknown format"),
        ("not json\n", "unknown format"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, capsys: Any, content: str | None, message: str
) -> None:
    path = tmp_path / "corpus.jsonl"
    if content is not None:
        path.write_text(content)
    assert main([str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err


def test_empty_folder_and_bad_options(tmp_path: Path, capsys: Any) -> None:
    assert main([str(tmp_path)]) == 2
    assert "empty corpus" in capsys.readouterr().err
    corpus = write_corpus(tmp_path / "c.jsonl", ADD)
    assert main([str(corpus), "--rounds", "0"]) == 2
    assert main([str(corpus), "--bogus"]) == 2


def test_humanevalfix_records_are_detected(tmp_path: Path) -> None:
    record = {
        "task_id": "Python/0",
        "prompt": "def inc(x):\n",
        "buggy_solution": "    return x + 2\n",
        "test": "def check(f):\n    assert f(1) == 2\n",
        "entry_point": "inc",
    }
    path = tmp_path / "he.jsonl"
    path.write_text(json.dumps(record) + "\n")
    corpus = bench.load_corpus(path, None)
    assert corpus.kind == "humanevalfix"
    assert corpus.cases[0].code.rstrip().endswith("check(inc)")
    assert "return x + 2" in corpus.cases[0].code


def test_add_parser_wires_into_a_subparsers_group() -> None:
    import argparse

    parser = argparse.ArgumentParser(prog="nbrefine")
    commands = parser.add_subparsers(dest="command")
    bench.add_parser(commands)
    args = parser.parse_args(["bench", "x.jsonl", "--rounds", "2", "--limit", "5"])
    assert (args.command, args.corpus, args.rounds, args.limit, args.provider) == (
        "bench",
        "x.jsonl",
        2,
        5,
        "offline",
    )


def test_folder_of_notebooks_each_failing_cell_is_a_case(tmp_path: Path, capsys: Any) -> None:
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook

    notebook = new_notebook(
        cells=[
            new_code_cell("prices = [1, 2]"),  # state for the next cell
            new_code_cell("total = sum(pricez)\ntotal"),  # a typo: the offline tier fixes it
            new_code_cell("x = 1 / 0"),  # logic: declined
        ]
    )
    nbformat.write(notebook, tmp_path / "a.ipynb")
    out = tmp_path / "r.json"
    assert main([str(tmp_path), "--json", str(out), "--plot", str(tmp_path / "p.png")]) == 0
    report = json.loads(out.read_text())
    assert report["format"] == "notebooks"
    cases = [(c["name"], c["status"], c["error_type"]) for c in report["cases"]]
    assert cases == [
        ("a.ipynb:cell2", "fixed", "NameError"),
        ("a.ipynb:cell3", "unfixed", "ZeroDivisionError"),
    ]
    assert report["summary"]["first_attempt_success_rate"] == 0.5
    printed = capsys.readouterr().out
    assert (tmp_path / "p.png").exists() or "pip install matplotlib" in printed


def test_plot_without_matplotlib_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    summary = bench_report.summarize([bench_report.CaseResult("a", "unfixed", "AssertionError")], 2)
    opts = bench.options(build_parser().parse_args(["bench", str(tmp_path / "c.jsonl")]))
    line = bench_report.write_plot(summary, opts, tmp_path / "p.png")
    assert "pip install matplotlib" in line and "\n" not in line
    assert not (tmp_path / "p.png").exists()
