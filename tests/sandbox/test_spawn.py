"""The spawn fallback: trials in a fresh interpreter that gets copies of the names they use.

Every trial here starts a real ``python -m nbrefine.sandbox._spawn_worker`` process."""

from __future__ import annotations

import linecache
import os
import signal
import sqlite3
import sys
import threading
import time
import types

import numpy as np
import pandas as pd
import pytest

from nbrefine.grounding import Redactor
from nbrefine.sandbox import (
    SandboxOptions,
    SpawnRunner,
    TrialPolicy,
    TrialSpec,
    fork_unsafe_reason,
    names_to_ship,
)

NOTEBOOK_CELL = """\
scale = 3

def triple(x):
    return x * scale

def mean(xs):
    return sum(xs) / len(xs)

class Point:
    def __init__(self, x, y):
        self.x, self.y = x, y

    def norm2(self):
        return self.x ** 2 + self.y ** 2

origin = Point(0, 0)
"""


def notebook_namespace(**values: object) -> dict:
    """A namespace like a kernel's: code defined in it belongs to ``__main__`` (shipped by value)."""
    namespace: dict = {"__name__": "__main__"}
    filename = "<cell-0>"
    linecache.cache[filename] = (len(NOTEBOOK_CELL), None, NOTEBOOK_CELL.splitlines(True), filename)
    exec(compile(NOTEBOOK_CELL, filename, "exec"), namespace)
    namespace.update(values)
    return namespace


def runner_for(namespace: dict, **options: object) -> SpawnRunner:
    return SpawnRunner(namespace, Redactor(environ={}), SandboxOptions(**options) if options else None)


def group_exists(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


# --------------------------------------------------------------------------- outcomes


def test_a_passing_trial_reports_its_output():
    runner = runner_for(notebook_namespace(data=[1, 2, 3]))
    outcome = runner.run(TrialSpec("print(sum(data))\nlen(data)"))
    assert outcome.ok, outcome.render()
    assert outcome.stdout == "6\nOut: int 3\n"
    assert outcome.statements_done == outcome.statements_total == 2
    assert "audit-hook" in outcome.layers and "rlimits" in outcome.layers
    assert not runner.unshippable and "not shipped" not in outcome.detail


def test_a_failure_is_mapped_to_candidate_lines_with_assert_operands():
    runner = runner_for(notebook_namespace(total=7))
    outcome = runner.run(TrialSpec("x = 1\nassert total == 10\n", label="candidate"))
    assert outcome.status == "failed"
    failure = outcome.failure
    assert failure.error_type == "AssertionError" and failure.where == "candidate" and failure.lineno == 2
    assert "where total = int 7" in failure.assertion
    assert outcome.statements_done == 1 and outcome.statements_total == 2


def test_names_used_only_by_checks_are_shipped():
    runner = runner_for(notebook_namespace(expected=42))
    outcome = runner.run(TrialSpec("value = 40 + 2", checks=("assert value == expected",)))
    assert outcome.ok, outcome.render()
    failing = runner.run(TrialSpec("value = 1", checks=("assert value == expected",)))
    assert failing.status == "failed" and failing.check_failures[0].where == "check 1"


def test_numpy_and_pandas_values_are_shipped_and_used():
    frame = pd.DataFrame({"a": [1, 2, 3], "b": ["x", "y", "z"]})
    runner = runner_for(notebook_namespace(np=np, arr=np.arange(10.0), df=frame))
    code = (
        "assert isinstance(arr, np.ndarray) and arr.sum() == 45.0\n"
        "df['c'] = df['a'] * 2\n"
        "assert list(df.columns) == ['a', 'b', 'c'] and df['c'].sum() == 12\n"
        "print(type(df).__name__, arr.dtype)"
    )
    outcome = runner.run(TrialSpec(code))
    assert outcome.ok, outcome.render()
    assert outcome.stdout == "DataFrame float64\n"
    assert list(frame.columns) == ["a", "b"]  # the kernel's frame is untouched


def test_functions_and_classes_of_the_notebook_are_shipped_by_value():
    runner = runner_for(notebook_namespace())
    code = (
        "assert triple(2) == 6\n"
        "scale = 10\n"  # functions see the trial's globals, as in the kernel
        "assert triple(2) == 20\n"
        "p = Point(3, 4)\n"
        "assert p.norm2() == 25\n"
        "assert isinstance(origin, Point) and origin.norm2() == 0\n"
        "print(triple.__module__, Point.__name__)"
    )
    outcome = runner.run(TrialSpec(code))
    assert outcome.ok, outcome.render()
    assert outcome.stdout == "__main__ Point\n"


def test_a_failure_inside_a_shipped_function_shows_the_notebook_frame():
    runner = runner_for(notebook_namespace())
    outcome = runner.run(TrialSpec("xs = []\nmean(xs)"))
    assert outcome.status == "failed" and outcome.failure.error_type == "ZeroDivisionError"
    frames = outcome.failure.frames
    assert [frame.label for frame in frames] == ["candidate", "another cell"]
    assert frames[1].line.strip() == "return sum(xs) / len(xs)"
    assert "xs = list (len 0) []" in outcome.failure.render()  # values at the failing line
    # Also through functions reached only from shipped values (methods of an instance here).
    outcome = runner.run(TrialSpec("Point.norm2(origin, 1)"))
    assert outcome.failure.error_type == "TypeError"
    outcome = runner.run(TrialSpec("origin.x = None\norigin.norm2()"))
    assert outcome.failure.frames[-1].line.strip() == "return self.x ** 2 + self.y ** 2"


# --------------------------------------------------------------------------- what cannot be shipped


def test_unshippable_values_are_listed_and_their_use_fails_clearly():
    conn = sqlite3.connect(":memory:")
    namespace = notebook_namespace(gen=(i for i in range(3)), lock=threading.Lock(), conn=conn, fine=[1, 2])
    exec("def query():\n    return conn.execute('select 1').fetchone()\n", namespace)
    runner = runner_for(namespace)

    outcome = runner.run(TrialSpec("print(fine)\nwith lock:\n    pass"))
    assert outcome.status == "failed" and outcome.failure.error_type == "NameError"
    assert outcome.detail.startswith("not shipped to the spawn sandbox: lock (TypeError: cannot pickle")
    assert "lock exists in the kernel but could not be copied" in outcome.failure.render()
    assert outcome.stdout == "[1, 2]\n"

    outcome = runner.run(TrialSpec("next(gen)"))
    assert outcome.status == "failed" and "'generator'" in outcome.detail
    outcome = runner.run(TrialSpec("conn.execute('select 1')\nquery()"))
    assert outcome.status == "failed" and "conn (" in outcome.detail and "query (" in outcome.detail

    assert set(runner.unshippable) == {"gen", "lock", "conn", "query"}
    assert runner.unshippable["gen"] == "TypeError: cannot pickle 'generator' object"
    assert "cannot pickle '_thread.lock' object" in runner.unshippable["lock"]
    assert "sqlite3.Connection" in runner.unshippable["conn"]
    assert "sqlite3.Connection" in runner.unshippable["query"]  # it needs conn as a global

    # A trial that does not need them is not told about them.
    assert runner.run(TrialSpec("assert fine == [1, 2]")).detail == ""
    conn.close()


def test_a_value_that_fails_to_load_in_the_worker_is_reported():
    namespace = notebook_namespace()
    exec(
        "import os\n"
        "class Homebound:\n"
        "    def __init__(self):\n"
        "        self.home = os.getpid()\n"
        "    def __setstate__(self, state):\n"
        "        if state['home'] != os.getpid():\n"
        "            raise RuntimeError('only loads where it was made')\n"
        "        self.__dict__.update(state)\n"
        "pet = Homebound()\n",
        namespace,
    )
    runner = runner_for(namespace)
    outcome = runner.run(TrialSpec("pet"))
    assert outcome.status == "failed" and outcome.failure.error_type == "NameError"
    assert "pet (RuntimeError: only loads where it was made (when loading it in the spawn sandbox))" in (
        outcome.detail
    )
    assert "only loads where it was made" in runner.unshippable["pet"]


def test_the_live_namespace_is_unchanged_after_a_trial_mutates_everything():
    frame = pd.DataFrame({"a": [1, 2]})
    namespace = notebook_namespace(data=[1, 2, 3], config={"mode": "fast"}, df=frame, arr=np.zeros(3))
    before = {k: (id(v), repr(v)) for k, v in namespace.items() if k != "__builtins__"}
    code = (
        "data.append(4)\nconfig.clear()\ndf.loc[0, 'a'] = 99\narr += 1\n"
        "Point.norm2 = lambda self: -1\nscale = 0\ndel data\nnew_name = 1\n"
        "import os\nos.environ['NBREFINE_SPAWN_LEAK'] = '1'"
    )
    outcome = runner_for(namespace).run(TrialSpec(code))
    assert outcome.ok, outcome.render()
    assert {k: (id(v), repr(v)) for k, v in namespace.items() if k != "__builtins__"} == before
    assert namespace["Point"](1, 1).norm2() == 2 and namespace["triple"](1) == 3
    assert "NBREFINE_SPAWN_LEAK" not in os.environ and "new_name" not in namespace


# --------------------------------------------------------------------------- limits


def test_timeout_kills_the_whole_process_group():
    runner = runner_for(notebook_namespace())
    started = time.monotonic()
    outcome = runner.run(TrialSpec("while True:\n    pass", timeout_s=1))
    assert outcome.status == "timeout" and "1 s" in outcome.detail
    assert time.monotonic() - started < 8
    assert runner.last_pid is not None and not group_exists(runner.last_pid)


def test_the_cpu_limit_stops_a_busy_trial_before_its_timeout():
    policy = TrialPolicy(cpu_s=1)
    started = time.monotonic()
    outcome = runner_for(notebook_namespace()).run(
        TrialSpec("while True:\n    pass", timeout_s=20, policy=policy)
    )
    # The CPU limit (1 s plus the worker's own start-up CPU time) ended it, not the 20 s wall clock.
    assert outcome.status == "cpu_limit", outcome.render()
    assert time.monotonic() - started < 10


def test_memory_bomb_hits_the_memory_limit():
    policy = TrialPolicy(memory_mb=256)
    outcome = runner_for(notebook_namespace()).run(TrialSpec("blob = bytearray(2 * 1024**3)", policy=policy))
    assert outcome.status == "memory_limit", outcome.render()


def test_exits_and_crashes_are_typed():
    runner = runner_for(notebook_namespace())
    hard = runner.run(TrialSpec("import os\nos._exit(3)"))
    assert hard.status == "exited" and "code 3" in hard.detail
    assert runner.run(TrialSpec("import sys\nsys.exit(2)")).status == "exited"
    crash = runner.run(TrialSpec("import ctypes\nctypes.string_at(0)"))
    assert crash.status == "crashed" and "SIGSEGV" in crash.detail
    assert runner.run(TrialSpec("raise KeyboardInterrupt")).status == "interrupted"


def test_writes_outside_the_scratch_folder_are_refused(tmp_path):
    target = tmp_path / "outside.txt"
    runner = runner_for(notebook_namespace(target=str(target)))
    outcome = runner.run(TrialSpec("open(target, 'w').write('x')"))
    assert outcome.status == "refused" and "outside.txt" in outcome.detail
    assert not target.exists()
    inside = runner.run(
        TrialSpec(
            "import os, tempfile\n"
            "path = os.path.join(tempfile.gettempdir(), 'mine.txt')\n"
            "open(path, 'w').write('ok')\n"
            "print(tempfile.gettempdir())"
        )
    )
    assert inside.ok, inside.render()
    scratch = inside.stdout.strip()
    assert os.path.basename(scratch).startswith("nbrefine-trial-") and not os.path.exists(scratch)


def test_interrupt_while_waiting_kills_the_trial_and_propagates():
    runner = runner_for(notebook_namespace())
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            runner.run(TrialSpec("import time\ntime.sleep(30)", timeout_s=30))
    finally:
        timer.cancel()
    assert runner.last_pid is not None and not group_exists(runner.last_pid)


def test_a_missing_interpreter_is_a_sandbox_error():
    runner = SpawnRunner({}, Redactor(environ={}), python="/nonexistent/python3")
    outcome = runner.run(TrialSpec("pass"))
    assert outcome.status == "sandbox_error" and "could not start" in outcome.detail


def test_a_worker_that_cannot_start_is_a_sandbox_error_that_says_why(tmp_path):
    python = tmp_path / "python"
    python.write_text("#!/bin/sh\necho 'ModuleNotFoundError: No module named nbrefine' >&2\nexit 1\n")
    python.chmod(0o755)
    runner = SpawnRunner({}, Redactor(environ={}), python=str(python))
    outcome = runner.run(TrialSpec("pass"))
    assert outcome.status == "sandbox_error"
    assert "code 1" in outcome.detail and "No module named nbrefine" in outcome.detail


def test_spawn_start_latency():
    runner = runner_for(notebook_namespace(data=list(range(1000))))
    latencies = []
    for _ in range(3):
        outcome = runner.run(TrialSpec("sum(data)"))
        assert outcome.ok, outcome.render()
        latencies.append(outcome.start_latency_s)
    print(f"\nspawn start latency: {', '.join(f'{s * 1000:.0f} ms' for s in latencies)}")
    assert all(0 < s < 5 for s in latencies)


# --------------------------------------------------------------------------- helpers


def test_fork_unsafe_reason_here_and_off_the_main_thread():
    assert fork_unsafe_reason() is None
    found: list[str | None] = []
    thread = threading.Thread(target=lambda: found.append(fork_unsafe_reason()))
    thread.start()
    thread.join()
    assert found == ["not on the main thread"]


def test_fork_unsafe_reason_sees_an_initialised_cuda_context(monkeypatch):
    # A stand-in torch module (torch is not installed here): only what the check reads.
    torch = types.ModuleType("torch")
    torch.cuda = types.SimpleNamespace(is_initialized=lambda: False)
    monkeypatch.setitem(sys.modules, "torch", torch)
    assert fork_unsafe_reason() is None
    torch.cuda = types.SimpleNamespace(is_initialized=lambda: True)
    assert fork_unsafe_reason() == "a CUDA context is initialised (torch)"


def test_names_to_ship():
    namespace = {
        name: 1
        for name in (
            "df",
            "np",
            "f",
            "x",
            "total",
            "items",
            "cfg",
            "k",
            "helper",
            "counter",
            "y",
            "_i3",
            "Out",
        )
    }
    namespace.update({"_": 5, "__": 6, "get_ipython": print, "print": print, "len": len, "list": [1]})
    assert names_to_ship("df.head()\nprint(np.mean(x))", namespace) == ["df", "np", "x"]
    code = (
        "def g(x, *, k=total):\n"
        "    y = helper(x)\n"
        "    return [v * y for v in items if v > cfg]\n"
        "lambda x: x + f(x)\n"
        "counter += 1\n"
        "_ + __ + _i3 + len(Out) + get_ipython() + len(list)\n"
    )
    assert names_to_ship(code, namespace) == ["total", "helper", "items", "cfg", "f", "counter", "list"]
    assert names_to_ship("class A(df):\n    z = x\n    def m(self):\n        return y", namespace) == [
        "df",
        "x",
        "y",
    ]
    # Names the code binds before it reads them need no copy; reads before (or in a branch) do.
    assert names_to_ship("import np\nfrom m import f\nnp.x + f", namespace) == []
    assert names_to_ship("df = df.dropna()\nx = 1\ndf.head(x)", namespace) == ["df"]
    assert names_to_ship("if total:\n    x = 1\nprint(x)\nx = 2", namespace) == ["total", "x"]
    assert names_to_ship("def broken(:", namespace) == []
    # Names read through strings, where that is cheap to see.
    assert names_to_ship("df.query('a > @total and b == \"x@y\"')", namespace) == ["df", "total"]
    assert names_to_ship("eval('cfg + 1')\nglobals()['helper']", namespace) == ["cfg", "helper"]
    assert names_to_ship("def h():\n    global x\n    x = 2\n    return x", namespace) == ["x"]


def test_ipythons_own_names_are_not_shipped_but_a_users_open_is(shell):
    """A real shell's namespace: IPython's helpers and its ``open`` (a wrapper of the builtin the
    worker has anyway) stay behind; an ``open`` the notebook defined itself is the user's."""
    code = "open('data.csv')\nIn, Out, exit, quit, get_ipython, _ih, _oh, _dh"
    assert names_to_ship(code, shell.user_ns) == []
    shell.run_cell("def open(path):\n    return path.upper()")
    assert names_to_ship(code, shell.user_ns) == ["open"]
