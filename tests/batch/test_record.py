"""The batch's pure parts: which notebooks, where outputs go, the run record, mistake signatures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nbrefine.batch.inputs import expand, nbgrader_place
from nbrefine.batch.record import RunRecord, settings_key
from nbrefine.reports.classroom import anonymise, bound_names, error_signature, is_teaching


@pytest.fixture(autouse=True)
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def touch(*paths: str) -> None:
    for path in paths:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text("{}")


def test_folders_are_searched_recursively_without_outputs_checkpoints_or_hidden_folders() -> None:
    touch("nbs/a.ipynb", "nbs/sub/b.ipynb", "nbs/a.fixed.ipynb", "nbs/.ipynb_checkpoints/a-checkpoint.ipynb",
          "nbs/.hidden/c.ipynb", "nbs/notes.txt", "nbs/out/old.ipynb")  # fmt: skip

    found = expand(["nbs", "nbs/a.ipynb"], output_dir=Path("nbs/out"), in_place=False, dry_run=False)

    assert [str(i.path) for i in found] == ["nbs/a.ipynb", "nbs/sub/b.ipynb"]  # once each
    assert [str(i.output) for i in found] == ["nbs/out/a.ipynb", "nbs/out/sub/b.ipynb"]


def test_outputs_mirror_the_tree_the_arguments_share() -> None:
    touch("a/x.ipynb", "b/deep/x.ipynb")

    found = expand(["a/x.ipynb", "b/**/*.ipynb"], output_dir=Path("out"), in_place=False, dry_run=False)

    assert [str(i.output) for i in found] == ["out/a/x.ipynb", "out/b/deep/x.ipynb"]  # no clash
    beside = expand(["a/x.ipynb"], output_dir=None, in_place=False, dry_run=False)
    assert (str(beside[0].output), str(beside[0].outdir)) == ("a/x.fixed.ipynb", "a")
    over = expand(["a/x.ipynb"], output_dir=None, in_place=True, dry_run=False)
    assert str(over[0].output) == "a/x.ipynb"
    assert expand(["a/x.ipynb"], output_dir=None, in_place=False, dry_run=True)[0].output is None


def test_an_argument_that_names_no_notebook_is_a_problem_not_an_error() -> None:
    Path("empty").mkdir()

    found = expand(["nothing/*.ipynb", "empty"], output_dir=None, in_place=False, dry_run=False)

    assert [i.problem for i in found] == [
        "nothing/*.ipynb: no notebook matches",
        "empty: no notebook in the folder",
    ]


def test_nbgrader_layout() -> None:
    place = nbgrader_place(Path("/course/submitted/alice/ps1/part 1/ps1.ipynb"))
    assert place is not None and (place.student, place.assignment, place.notebook) == (
        "alice",
        "ps1",
        "part 1/ps1.ipynb",
    )
    assert nbgrader_place(Path("/course/autograded/bob/ps2/x.ipynb")) is not None
    assert nbgrader_place(Path("/course/source/ps1/ps1.ipynb")) is None
    assert nbgrader_place(Path("/work/submitted/x.ipynb")) is None


def test_the_same_mistake_has_the_same_signature_across_students() -> None:
    a = error_signature("IndexError", "index 5 is out of bounds for axis 0 with size 3")
    b = error_signature("IndexError", "index 12 is out of bounds for axis 0 with size 4")
    assert a == b == "IndexError: index N is out of bounds for axis N with size N"
    assert error_signature("KeyError", "'Price'") != error_signature("KeyError", "'units'")
    own = error_signature("NameError", "name 'alice_total' is not defined", ("alice",))
    assert own == "NameError: name '<student>_total' is not defined"


def test_an_example_is_anonymised() -> None:
    source = "# Alice Smith, alice@uni.example\ntotal = sum(pricez)  # my answer\nowner = 'alice'\n"

    shown = anonymise(source, ("alice",))

    assert "Smith" not in shown and "uni.example" not in shown and "alice" not in shown.lower()
    assert "total = sum(pricez)" in shown and "owner = '<student>'" in shown
    broken = anonymise("x = (1,  # Alice\n", ("alice",))  # does not tokenize: comments cut by line
    assert "Alice" not in broken and broken.startswith("x = (1,")


def test_bound_names() -> None:
    assert bound_names("import numpy as np\nfrom math import pi\ndef f(): pass\nx, y = 1, 2\nz += 1") == {
        "np", "pi", "f", "x", "y", "z",
    }  # fmt: skip
    assert bound_names("avg = total / len(prices\navg") == {"avg"}  # a SyntaxError cell


def test_teaching_runs_are_told_apart() -> None:
    assert is_teaching({"report": {"teaching": {"mode": "hint"}, "cells": []}})
    assert not is_teaching({"report": {"teaching": {"mode": "fix"}, "cells": []}})
    # a setup cell of the notebook set the policy at run time: the hints say so
    assert is_teaching({"report": {"teaching": {"mode": "fix"}, "cells": [{"hint": {"text": "x"}}]}})


def test_the_record_survives_a_torn_last_line_and_resumes(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    nb = tmp_path / "a.ipynb"
    nb.write_text("{}")
    key = settings_key({"model": "m", "jobs": None})
    assert key == settings_key({"jobs": None, "model": "m"})  # order does not matter
    first = RunRecord(path, {"settings_key": key}, resume=False)
    first.add({"input": str(nb.resolve()), "path": "a.ipynb", "status": "pass", "input_sha": _sha(nb),
               "output": None, "output_sha": None})  # fmt: skip
    first.close()
    with path.open("a") as fh:
        fh.write('{"kind": "notebook", "input": "half')  # the process died while writing

    again = RunRecord(path, {"settings_key": key}, resume=True)
    other = RunRecord(tmp_path / "other.jsonl", {"settings_key": "different"}, resume=True)

    assert (again.done_before(nb, None) or {}).get("status") == "pass"
    assert other.done_before(nb, None) is None
    nb.write_text('{"changed": true}')
    assert again.done_before(nb, None) is None  # the input changed since
    lines = [json.loads(line) for line in path.read_text().splitlines()[-1:]]
    assert lines[0]["kind"] == "run"


def _sha(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()
