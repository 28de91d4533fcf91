"""The in-kernel API (nbrefine/ipython/kernel_api.py) through a real kernel: a call by name with
JSON arguments and a JSON result in one execute request, its failures as one-line
KernelCallError, and what a failing cell of ``nbrefine fix`` costs in execute requests."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from nbrefine._errors import KernelCallError
from nbrefine.cli.main import main
from nbrefine.headless import KernelDriver, open_kernel


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KernelDriver]:
    folder = tmp_path_factory.mktemp("kernel-api")
    with open_kernel(new_notebook(cells=[new_code_cell("")]), "python3", folder, 60) as driver:
        driver.call("setup_run", {"provider": "offline"}, None, None, True)
        yield driver


def _in_kernel(kernel: KernelDriver, expr: str) -> Any:
    """A test's own look into the kernel (the API has no eval): ``expr`` printed as JSON."""
    ran = kernel.run(f"print(__import__('json').dumps({expr}))", 0, store_history=False)
    assert ran.ok, ran.evalue
    return json.loads(ran.stdout())


def test_a_call_by_name_round_trips_json_in_one_request_and_binds_nothing(kernel: KernelDriver) -> None:
    names = _in_kernel(kernel, "sorted(n for n in get_ipython().user_ns if not n.startswith('_'))")
    count = _in_kernel(kernel, "get_ipython().execution_count")
    cells = [
        {"id": "a", "source": "s = 'é \" \\\\ ' + \"\\n\" + '😀'", "metadata": {"tags": ["x"]}},
        {"id": "b", "source": "y = 2", "metadata": {"nbgrader": {"solution": True}}},
    ]
    sent = kernel.requests
    assert kernel.call("tell_notebook", cells) is None
    assert kernel.requests == sent + 1  # one execute request, nothing else
    seen = _in_kernel(
        kernel,
        "[(c.cell_id, c.source, c.solution) for c in"
        " __import__('nbrefine.engine.kernel_state', fromlist=['_']).current().notebook]",
    )
    assert seen == [["a", cells[0]["source"], False], ["b", "y = 2", True]]
    usage = kernel.call("usage")
    assert usage == {
        "input_tokens": 0,
        "output_tokens": 0,
        "cache_read_tokens": 0,
        "cache_write_tokens": 0,
        "cost_usd": 0.0,
    }
    assert kernel.call("session", "no-such-request") is None
    run, value = kernel.run_call("usage")
    assert value == usage and run.outputs == []  # the result is read back, not left as an output
    assert _in_kernel(kernel, "sorted(n for n in get_ipython().user_ns if not n.startswith('_'))") == names
    assert _in_kernel(kernel, "get_ipython().execution_count") == count


@pytest.mark.parametrize(
    ("name", "args", "message"),
    [
        ("no_such_call", [], "no such kernel call: 'no_such_call'; known: accept, accept_plan, "),
        ("session", [], "session: bad arguments: missing a required argument: 'request_id'"),
        ("usage", [1, 2], "usage: bad arguments: too many positional arguments"),
        (
            "open_notebook",
            [{"mood": "hint"}],
            "open_notebook: ValueError: nbrefine metadata: unknown key 'mood'",
        ),
        ("tell_notebook", [[{"id": "a"}]], "tell_notebook: KeyError: 'source'"),
    ],
)
def test_a_bad_call_or_a_failure_in_the_kernel_is_one_line_of_kernel_call_error(
    kernel: KernelDriver, name: str, args: list[Any], message: str
) -> None:
    with pytest.raises(KernelCallError) as info:
        kernel.call(name, *args)
    text = str(info.value)
    assert text.startswith(message) and "\n" not in text and "Traceback" not in text


def test_a_kernel_without_the_api_gives_kernel_call_error_too(
    kernel: KernelDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    import nbrefine.headless.kernel as driver

    monkeypatch.setattr(driver, "KERNEL_API", "nbrefine.no_such_module")
    with pytest.raises(KernelCallError) as info:
        kernel.call("usage")
    assert str(info.value) == "usage: ModuleNotFoundError: No module named 'nbrefine.no_such_module'"
    monkeypatch.undo()
    assert kernel.call("usage")["input_tokens"] == 0  # the kernel is none the worse


def _notebook(path: Path, *sources: str) -> Path:
    notebook = new_notebook(cells=[new_code_cell(s, id=f"c{i}") for i, s in enumerate(sources, 1)])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(notebook, path)
    return path


TYPO = "total = sum(pricez)\ntotal"


@pytest.mark.parametrize(
    ("reply", "status", "requests"), [("total = sum(prices)\ntotal", "fixed", 2), ("", "unfixed", 1)]
)
def test_a_failing_cell_costs_two_execute_requests_fixed_and_one_unfixed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any, reply: str, status: str, requests: int
) -> None:
    """The cell's own request brings its session back; Accept's brings the session after it."""
    nb = _notebook(tmp_path / "n.ipynb", "prices = [1, 2]", TYPO, "total * 2")
    (tmp_path / "r.json").write_text(json.dumps([f"```python\n{reply}\n```" if reply else "no idea"] * 3))
    monkeypatch.setenv("NBREFINE_SCRIPTED_REPLIES", str(tmp_path / "r.json"))
    at: list[int] = []
    run = KernelDriver.run

    def counted(self: KernelDriver, source: str, index: int, **options: Any) -> Any:
        at.append(index)
        return run(self, source, index, **options)

    monkeypatch.setattr(KernelDriver, "run", counted)
    code = main(
        [
            "fix",
            str(nb),
            "--provider",
            "scripted",
            "--no-quick-fixes",
            "--max-attempts",
            "1",
            "--report",
            str(tmp_path / "r.json.out.json"),
        ]
    )
    capsys.readouterr()
    report = json.loads((tmp_path / "r.json.out.json").read_text())
    assert report["cells"][1]["status"] == status, report["cells"][1]
    assert code == (0 if status == "fixed" else 1)
    assert at.count(1) == requests  # the failing cell is index 1


def test_a_cell_publishes_its_session_only_when_it_raised(kernel: KernelDriver) -> None:
    """With ``sessions`` set up, a ``%%refine`` cell that raised brings its session along in its
    own outputs; one that passed has no session to read, so it sends none (a message fewer, on
    every cell of a batch)."""
    passed = kernel.run("%%refine\nx = 1", 0, store_history=True)
    assert passed.ok and passed.published == []
    failed = kernel.run("%%refine --max-attempts 1\ny = undefined_name + 1", 0, store_history=True)
    assert failed.ename == "RefineStop"
    sessions = [p for p in failed.published if p.get("kind") == "session"]
    assert sessions and {p["request"] for p in sessions} == {failed.request_id}
    assert sessions[-1]["value"]["status"] != "running"  # the last: the whole cell's


def test_setup_run_sets_the_traits_without_loading_ipythons_lazy_magics(tmp_path: Path) -> None:
    with open_kernel(new_notebook(cells=[new_code_cell("")]), "python3", tmp_path, 60) as driver:
        magics = "get_ipython().magics_manager.magics"
        lazy = f"sum(type(f).__name__ == 'LazyMagic' for kind in {magics}.values() for f in kind.values())"
        waiting = _in_kernel(driver, lazy)  # placeholders until first use: IPython's script magics...
        assert waiting > 0
        driver.call(
            "setup_run", {"provider": "offline", "max_attempts": 5, "model": "m-1"}, None, None, False
        )
        settings = "[(s.provider, s.max_attempts, s.model, s.display) for s in get_ipython().configurables"
        settings += " if type(s).__name__ == 'Refine']"
        assert _in_kernel(driver, settings) == [["offline", 5, "m-1", "text"]]
        # %load_ext loaded its own three; %config would have loaded them all (~8 ms)
        assert _in_kernel(driver, lazy) >= waiting - 3
        assert driver.run("%config Refine.max_attempts = 2", 0, store_history=False).ok  # still there
        assert _in_kernel(driver, settings) == [["offline", 2, "m-1", "text"]]
        with pytest.raises(KernelCallError, match="max_attempts"):
            driver.call("setup_run", {"max_attempts": -1}, None, None, False)  # unchecked: said, not dropped
