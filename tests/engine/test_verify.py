"""The "verified" verifier and the state fingerprints of nbrefine.engine.verify (issue 10, items 7 and 8)."""

from __future__ import annotations

import collections
import datetime
import io
import math
import sys
import types
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from nbrefine.engine.verify import (
    FINGERPRINT_CAP,
    ChecksVerifier,
    _nbrefine_fingerprints,
    changed_names,
    drift,
    fingerprint_spec,
    fingerprints_of,
    known_fingerprints,
    names_read,
    read_fingerprints,
)
from nbrefine.grounding import Redactor
from nbrefine.grounding.capture import Failure
from nbrefine.sandbox import LiveForkRunner, Snapshot, TrialOutcome, TrialSpec

PASSED = TrialOutcome("passed")


def reason(original: str, candidate: str, *, lines: tuple[int, ...] = (), checks: int = 0, **kw) -> str:
    return ChecksVerifier(original, checks, lines, **kw)(
        candidate, TrialOutcome("passed", checks_total=checks)
    )


# --------------------------------------------------------------------------- asserts


def test_an_honest_fix_is_verified():
    assert reason("total = sum(value)\nassert total == 6", "total = sum(values)\nassert total == 6") == ""


def test_deleting_the_failing_assert_changes_the_checks():
    why = reason("total = sum(xs) + 1\nassert total == 6", "total = sum(xs) + 1", lines=(2,))
    assert why == "drops `assert total == 6`"


def test_changing_what_an_assert_expects_changes_the_checks():
    assert "drops `assert total == 6`" in reason("t = 1\nassert total == 6", "t = 1\nassert total == 7")
    assert reason("x = 1\nassert x == 1, 'old message'", "x = 1\nassert x == 1, 'new message'") == ""


def test_an_assert_moved_off_the_top_level_or_into_dead_code_changes_the_checks():
    why = reason("x = f()\nassert x == 1", "x = f()\nif False:\n    assert x == 1")
    assert why == "moves `assert x == 1` off the cell's top level"
    # asserts inside a function of the original may stay anywhere
    assert reason("def g():\n    assert y\ng()", "def g(y=1):\n    assert y\ng()") == ""


def test_a_crashing_assert_may_change_the_names_its_failure_blamed_and_nothing_else():
    failure = Failure("NameError", "name 'totl' is not defined", lineno=2)
    verifier = ChecksVerifier.for_failures("total = sum(items)\nassert totl == 7", [failure], 0)
    assert verifier("total = sum(items)\nassert total == 7", PASSED) == ""
    assert "drops" in verifier("total = sum(items)\nassert total == 8", PASSED)
    assert "drops" in verifier("total = sum(items)\nassert 7 == 7", PASSED)
    # An AssertionError blames nothing: the assert itself is what is checked.
    failed = Failure("AssertionError", "'totl'", lineno=2)
    strict = ChecksVerifier.for_failures("assert totl == 7", [failed], 0)
    assert "drops" in strict("assert total == 7", PASSED)


def test_the_asserts_of_a_cell_that_does_not_parse_are_kept_too():
    original = "total = sum([1, 2, 3)\nassert total == 6"
    assert reason(original, "total = sum([1, 2, 3])\nassert total==6") == ""
    assert reason(original, "total = sum([1, 2, 3])") == "drops `assert total == 6`"


# --------------------------------------------------------------------------- blanket except


@pytest.mark.parametrize(
    "candidate",
    [
        "try:\n    total = sum(value)\nexcept Exception:\n    pass",
        "try:\n    total = sum(value)\nexcept:\n    total = 0",
        "try:\n    total = sum(value)\nexcept (ValueError, BaseException):\n    pass",
        "import contextlib\nwith contextlib.suppress(Exception):\n    total = sum(value)",
        "from contextlib import suppress as s\nwith s(BaseException):\n    total = sum(value)",
        "try:\n    total = sum(value)\nexcept builtins.Exception:\n    pass",
    ],
)
def test_a_blanket_except_around_the_failing_statement_changes_the_checks(candidate):
    why = reason("total = sum(value)", candidate, lines=(1,))
    assert why.startswith("adds a blanket") and "around the failing statement" in why, why


def test_excepts_that_are_narrow_re_raise_already_existed_or_are_elsewhere_are_fine():
    original = "import json\ndata = json.loads(text)\nrate = data['rate']"
    lines = (3,)
    assert reason(original, original.replace("data['rate']", "data.get('rate', 0)"), lines=lines) == ""
    narrow = (
        "import json\ntry:\n    data = json.loads(text)\nexcept ValueError:\n    data = {}\n"
        "rate = data['rate']"
    )
    assert reason(original, narrow, lines=(2,)) == ""
    reraise = "try:\n    rate = data['rate']\nexcept Exception as err:\n    raise KeyError('rate') from err"
    assert reason("rate = data['rate']", reraise, lines=(1,)) == ""
    unrelated = "try:\n    import seaborn as sns\nexcept Exception:\n    sns = None\nrate = data['rate']"
    assert reason("rate = data['Rate']", unrelated, lines=(1,)) == ""
    kept = "try:\n    x = load()\nexcept Exception:\n    x = None\ny = x + 1"
    assert reason(kept, kept.replace("x + 1", "(x or 0) + 1"), lines=(5,)) == ""


def test_without_a_known_failing_line_any_new_blanket_except_counts():
    why = reason("x = f()", "try:\n    import seaborn\nexcept Exception:\n    pass\nx = f()")
    assert why == "adds a blanket `except Exception` (line 3) around the cell"


# --------------------------------------------------------------------------- nbrefine and the sandbox


@pytest.mark.parametrize(
    ("candidate", "said"),
    [
        ("import nbrefine.sandbox as s\ns.run_checks = lambda *a, **k: []", "imports nbrefine"),
        ("from nbrefine import sandbox", "imports nbrefine"),
        ("m = __import__('nbrefine.sandbox')", "mentions nbrefine"),
        ("import importlib\nm = importlib.import_module('nbrefine')", "mentions nbrefine"),
        ("import sys\nsys.modules['nbrefine.sandbox'].run_checks = None", "sys.modules"),
        ("m = __import__('nbre' + 'fine')", "named at run time: __import__"),
        ("exec('import nbrefine')", "imports nbrefine"),
        ("exec(source)", "named at run time: exec"),
        ("import ctypes\nctypes.CDLL(None)", "imports ctypes"),
        ("import os\nos._exit(0)", "os._exit"),
        ("import os as o\no.write(4, b'x')", "os.write"),
        ("from os import dup2\ndup2(1, 4)", "os.dup2"),
        ("import posix\nposix.write(4, b'x')", "posix.write"),
        ("import os\ngetattr(os, '_exit')(0)", "os._exit"),
        ("open(4, 'wb').write(b'x')", "file descriptor 4"),
        ("import os\nfds = os.listdir('/proc/self/fd')", "/proc"),
        ("import sys\nsys._getframe(1).f_locals['spec'] = None", "_getframe"),
        ("import sys\nsys.settrace(lambda *a: None)", "settrace"),
        ("import inspect\nframe = inspect.currentframe()", "inspect.currentframe"),
        ("import gc\nobjs = gc.get_objects()", "gc.get_objects"),
        ("try:\n    1 / 0\nexcept ZeroDivisionError as e:\n    f = e.__traceback__.tb_frame", "tb_frame"),
    ],
)
def test_reaching_into_nbrefine_or_the_sandbox_changes_the_checks(candidate, said):
    why = reason("x = 1", candidate + "\nx = 1")
    assert said in why, why


def test_what_the_original_cell_already_did_is_not_held_against_the_candidate():
    original = "import gc\ngc.collect()\nobjs = gc.get_objects()\nn = len(objs) + missing"
    assert reason(original, original.replace(" + missing", "")) == ""


def test_what_the_candidate_adds_counts_even_where_the_original_already_did_it_once():
    original = "x = eval(a)\ny = x + missing"
    assert reason(original, "x = eval(a)\ny = x") == ""
    assert (
        reason(original, "x = eval(a)\ny = eval(b)")
        == "runs code or imports a module named at run time: eval (line 2)"
    )


def test_the_trial_outcome_counts_its_suspect_and_the_checks_it_ran():
    verifier = ChecksVerifier("x = 1", 2)
    assert verifier("x = 2", TrialOutcome("passed", checks_total=2)) == ""
    assert verifier("x = 2", TrialOutcome("passed", checks_total=1)) == "the trial ran 1 of its 2 checks"
    flagged = TrialOutcome("passed", checks_total=2, suspect="`assert x == 1` compares a Weird")
    assert verifier("x = 2", flagged) == "the trial flagged its pass: `assert x == 1` compares a Weird"


def test_ipython_syntax_is_transformed_before_it_is_read():
    verifier = ChecksVerifier("%time total = sum(value)", transform=lambda code: code.replace("%time ", ""))
    assert verifier("%time total = sum(values)", PASSED) == ""


# --------------------------------------------------------------------------- names and fingerprints


def test_names_read_by_the_code_and_its_checks_in_order():
    code = "items.append(3)\nlast = items[-1]\ndef f():\n    return helper(limit)\nout = f()"
    assert names_read(code, ["assert last == expected"]) == ["items", "helper", "limit", "expected"]
    assert names_read("x = (") is None


def test_fingerprints_follow_content_not_identity():
    frame = pd.DataFrame({"a": [1, 2], "b": ["x", "y"]})
    namespace = {"items": [1, 2], "arr": np.arange(6), "df": frame, "np": np, "gen": (i for i in [])}
    first = _nbrefine_fingerprints(namespace, ["items", "arr", "df", "np", "gen", "missing"], 1 << 20)
    assert first["np"] == "module:numpy" and first["missing"] == "absent"
    assert first["gen"].startswith("unknown")
    namespace["items"] = [1, 2]  # another object, the same content
    namespace["df"] = frame.copy()
    assert _nbrefine_fingerprints(namespace, ["items", "df"], 1 << 20) == {
        "items": first["items"],
        "df": first["df"],
    }
    namespace["arr"][0] = 99  # mutated in place
    namespace["items"].append(3)
    later = _nbrefine_fingerprints(namespace, ["items", "arr"], 1 << 20)
    assert later["items"] != first["items"] and later["arr"] != first["arr"]
    big = _nbrefine_fingerprints({"big": np.zeros(1 << 18)}, ["big"], 1 << 20)
    assert big["big"] == "unknown: past the 1 MiB hashed per check"
    halves = {"a": np.zeros(1 << 16), "b": np.ones(1 << 16), "c": [1]}  # 512 KiB each
    seen = _nbrefine_fingerprints(halves, ["a", "b", "c"], 1 << 20)
    assert not seen["a"].startswith("unknown") and seen["b"].startswith("unknown: past")
    assert not seen["c"].startswith("unknown")  # small values still fit in what is left


def test_fingerprints_follow_the_globals_a_function_reads():
    namespace: dict = {"rate": 0.2}
    exec("def net(price):\n    return price * (1 - rate)", namespace)
    before = _nbrefine_fingerprints(namespace, ["net"], 1 << 20)
    assert set(before) == {"net", "rate"}
    namespace["rate"] = 0.3
    assert changed_names(before, _nbrefine_fingerprints(namespace, ["net"], 1 << 20)) == ["rate"]


def test_changed_names():
    assert changed_names({"a": "1", "b": "2"}, {"a": "1", "b": "2"}) == []
    assert changed_names({"a": "1", "b": "2"}, {"a": "1", "b": "3"}) == ["b"]
    assert changed_names({"g": "unknown: TypeError"}, {"g": "unknown: TypeError"}) == ["g"]
    assert changed_names(None, {"a": "1"}) is None


def test_fingerprints_are_taken_in_a_real_trial_and_match_across_forks():
    namespace = {"items": [1, 2], "arr": np.arange(4)}
    runner = LiveForkRunner(namespace, Redactor(environ={}))
    first = fingerprints_of(runner, ["items", "arr"])
    assert first == _nbrefine_fingerprints(namespace, ["items", "arr"], 256 << 20)
    namespace["items"].append(3)
    assert changed_names(first, fingerprints_of(runner, ["items", "arr"])) == ["items"]
    assert fingerprint_spec(["items"]).label == "fingerprint"
    assert read_fingerprints(TrialOutcome("failed")) is None


def test_drift_says_what_changed_and_what_could_not_be_compared():
    same = {"a": "1", "big": "unknown: past the 64 MiB hashed per check"}
    assert drift({"a": "1"}, {"a": "1"}) == ""
    assert drift({"a": "1"}, {"a": "2"}) == "`a` changed since (the failed run or a later cell changed it)"
    assert drift(same, same) == "`big` could not be compared (past the 64 MiB hashed per check)"
    assert drift(None, same) == "the state it reads could not be compared with the live one"


def test_a_transform_that_fails_on_the_broken_cell_does_not_break_the_gate():
    def ipython_like(code: str) -> str:
        if "  return" in code:
            raise IndentationError("unindent does not match any outer indentation level")
        return code

    original = "def f(x):\n    y = x\n  return y\nassert f(1) == 1"
    verifier = ChecksVerifier(original, transform=ipython_like)
    assert verifier("def f(x):\n    y = x\n    return y\nassert f(1) == 1", PASSED) == ""
    assert "drops `assert f(1) == 1`" in verifier("def f(x):\n    y = x\n    return y", PASSED)


# ------------------------------------------- an original that does not parse (issue 18, item 7)

# The cell under repair for a SyntaxError or IndentationError does not parse, yet what it already
# did (an eval, an assert, a blanket except) is not the candidate's doing.
REPR_CELL = (
    "class Expr:\n"
    "    def __init__(self, text):\n"
    "        self.text = text\n"
    "    def __repr__(self):\n"
    "        return 'Expr(' + repr(eval(self.text)) + ')'\n"
    "    def size(self)\n"
    "        return len(self.text)\n"
    "assert Expr('1 + 1').size() == 5\n"
)
REPR_FIX = REPR_CELL.replace("def size(self)", "def size(self):")


def test_what_a_cell_that_does_not_parse_already_did_is_not_held_against_its_fix():
    assert reason(REPR_CELL, REPR_FIX) == ""


@pytest.mark.parametrize(
    ("added", "said"),
    [
        ("value = eval(input_text)\n", "runs code or imports a module named at run time: eval (line 9)"),
        ("import ctypes\n", "reaches into the sandbox: imports ctypes (line 9)"),
        ("import nbrefine\n", "imports nbrefine (line 9)"),
    ],
)
def test_what_the_fix_of_a_cell_that_does_not_parse_adds_still_changes_the_checks(added, said):
    assert reason(REPR_CELL, REPR_FIX + added) == said


@pytest.mark.parametrize(
    ("original", "fixed"),
    [
        # pasted from a function body: "unexpected indent" on line 1
        (
            "    import gc\n    objs = gc.get_objects()\n    n = len(objs)\n",
            "import gc\nobjs = gc.get_objects()\nn = len(objs)\n",
        ),
        # "unindent does not match any outer indentation level": the def never parses, its lines do
        (
            "def f(x):\n    y = eval(x)\n  return y\nassert f('1') == 1\n",
            "def f(x):\n    y = eval(x)\n    return y\nassert f('1') == 1\n",
        ),
        # a line that does not parse even alone: its expressions are read from its tokens
        ("y = eval(text)) + 1\nassert y\n", "y = eval(text) + 1\nassert y\n"),
        # an alias imported in a chunk that parses, used in a header missing its colon
        (
            "import os as o\nif o.write(4, b'x') > 0\n    pass\n",
            "import os as o\nif o.write(4, b'x') > 0:\n    pass\n",
        ),
    ],
)
def test_an_original_with_an_indentation_or_syntax_error_is_read_leniently(original, fixed):
    assert reason(original, fixed) == ""


def test_the_fix_of_an_indentation_error_that_adds_an_eval_changes_the_checks():
    original = "def f(x):\n    y = eval(x)\n  return y\n"
    fixed = "def f(x):\n    y = eval(x)\n    return y\nz = eval('1')\n"
    assert reason(original, fixed) == ""  # a constant read like the cell: nothing in it
    assert reason(original, fixed.replace("eval('1')", "eval(z)")).startswith("runs code")


def test_a_multi_line_assert_of_a_cell_that_does_not_parse_is_kept_too():
    original = "total = sum([1, 2, 3]\nassert (\n    total == 6\n), 'the sum'\n"
    fixed = "total = sum([1, 2, 3])\nassert total == 6, 'the sum'\n"
    assert reason(original, fixed) == ""
    assert reason(original, "total = sum([1, 2, 3])\n") == "drops `assert total == 6`"
    # and its place: at the cell's top level
    moved = "total = sum([1, 2, 3])\nif total:\n    assert total == 6\n"
    assert reason(original, moved) == "moves `assert total == 6` off the cell's top level"


def test_an_assert_in_a_method_of_a_class_with_a_missing_colon_is_kept_where_it_was():
    original = "class A:\n    def check(self)\n        assert self.n == 1\n"
    fixed = original.replace("(self)", "(self):")
    assert reason(original, fixed) == ""
    assert reason(original, "class A:\n    def check(self):\n        pass\n") == "drops `assert self.n == 1`"


def test_a_blanket_except_a_cell_that_does_not_parse_already_had_is_not_the_fix_s():
    original = "try:\n    data = load()\nexcept Exception:\n    data = None\nrate = data['rate'\n"
    fixed = original.replace("['rate'", "['rate']")
    assert reason(original, fixed, lines=(5,)) == ""
    added = fixed.replace("rate = data", "try:\n    rate = data") + "except Exception:\n    rate = 0\n"
    assert reason(original, added).startswith("adds a blanket `except Exception` (line 7)")


class _Reduces:
    """A user's class: pickling it runs its ``__reduce__``, which only a trial may run."""

    ran = 0

    def __reduce__(self) -> tuple[object, ...]:
        _Reduces.ran += 1
        return (_Reduces, ())


class _SneakyClass:
    """A user's object whose ``__class__`` is code: even isinstance would run it."""

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        _Reduces.ran += 1
        return list


def _library_values() -> dict[str, object]:
    frame = pd.DataFrame(
        {
            "price": [1.5, 2.0],
            "label": pd.Categorical(["a", "b"]),
            "when": pd.to_datetime(["2024-01-01", "2024-02-01"]),
        }
    )
    return {
        "items": [1, {"a": (2, 3.0)}, "s", None],
        "arr": np.arange(6).reshape(2, 3),
        "frame": frame,
        "series": frame["price"],
        "np": np,
        "f": _library_values,
        "when": datetime.date(2024, 1, 1),
        "counts": collections.Counter("abca"),
    }


def test_known_fingerprints_are_the_trials_own_digests_taken_without_a_trial():
    namespace = _library_values()
    names = list(namespace)
    assert known_fingerprints(namespace, names) == _nbrefine_fingerprints(namespace, names, FINGERPRINT_CAP)
    runner = LiveForkRunner(namespace, Redactor(environ={}))
    assert known_fingerprints(namespace, names) == read_fingerprints(runner.run(fingerprint_spec(names)))


@pytest.mark.parametrize(
    "value",
    [_Reduces(), [1, _Reduces()], {"k": _Reduces()}, pd.Series([_Reduces()], dtype=object), _SneakyClass()],
    ids=["object", "in-a-list", "in-a-dict", "in-a-frame", "class-property"],
)
def test_known_fingerprints_refuse_what_might_run_the_users_code(value: object):
    _Reduces.ran = 0
    assert known_fingerprints({"v": value}, ["v"]) is None
    assert _Reduces.ran == 0  # refused before any of it ran


def test_a_runner_that_can_look_in_place_takes_no_trial_and_one_that_cannot_does():
    namespace = _library_values()

    class InPlace:
        trials = 0

        def run(self, spec: TrialSpec) -> TrialOutcome:
            InPlace.trials += 1
            return LiveForkRunner(namespace, Redactor(environ={})).run(spec)

        def inspect(self, fn: Callable[..., object], *args: object) -> object:
            return fn(namespace, *args)

    assert fingerprints_of(InPlace(), ["items", "arr"]) == known_fingerprints(namespace, ["items", "arr"])
    assert InPlace.trials == 0
    namespace["odd"] = [_Reduces()]
    assert fingerprints_of(InPlace(), ["odd"]) is not None  # its trial took them
    assert InPlace.trials == 1


def test_the_snapshot_looks_at_its_own_state_in_place():
    namespace = _library_values()
    with Snapshot.take(namespace, Redactor(environ={})) as snapshot:
        namespace["items"].append("later")  # the kernel moves on; the snapshot does not
        seen = snapshot.inspect(known_fingerprints, ["items", "arr"])
        assert seen is not None and seen["arr"] == known_fingerprints(namespace, ["arr"])["arr"]  # type: ignore[index]
        assert seen["items"] != known_fingerprints(namespace, ["items"])["items"]  # type: ignore[index]
        assert snapshot.inspect(_raises) is None  # an error there is None here, and it goes on
        assert snapshot.inspect(known_fingerprints, ["arr"]) == {"arr": seen["arr"]}


def _raises(namespace: object) -> None:
    raise ValueError("no")


def _reads_open(path: str) -> str:
    with open(path) as handle:  # IPython's open, which reads io.open as io_open, is of this kind
        return handle.read()


def test_c_functions_of_the_standard_library_are_known_and_the_digests_are_the_trials():
    namespace = {"sqrt": math.sqrt, "io_open": io.open, "open": _reads_open, "size": sys.getsizeof}
    names = ["sqrt", "io_open", "open", "size"]
    found = known_fingerprints(namespace, names)
    assert found is not None and not any(v.startswith("unknown") for v in found.values())
    runner = LiveForkRunner(namespace, Redactor(environ={}))
    assert found == read_fingerprints(runner.run(fingerprint_spec(names)))


def test_a_c_function_is_not_known_through_a_users_module_or_object(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    _Reduces.ran = 0
    bound = [_Reduces()].copy  # a C method of an object: pickling it pickles the object
    assert known_fingerprints({"v": bound}, ["v"]) is None and _Reduces.ran == 0
    shadow = types.ModuleType("csv")  # a file of the user's that takes a standard module's name
    shadow.__file__ = str(tmp_path / "csv.py")
    monkeypatch.setitem(sys.modules, "csv", shadow)
    monkeypatch.setattr(math.sqrt, "__module__", "csv")  # (a C function's __module__ is writable)
    assert known_fingerprints({"v": math.sqrt}, ["v"]) is None
    monkeypatch.setattr(math.sqrt, "__module__", "nbrefine_no_such_module")
    assert known_fingerprints({"v": math.sqrt}, ["v"]) is None
