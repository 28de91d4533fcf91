"""The pieces ``nbrefine fix``, its batch jobs and ``nbrefine bench`` share (nbrefine.headless), with a
real IPython shell where a session is needed: the one session JSON, the one table of the flags that
set ``Refine`` traits, and the one provenance record (the panel's Accept and ``nbrefine fix``)."""

from __future__ import annotations

import argparse
import json

import pytest

import nbrefine
from nbrefine._errors import BadInputError
from nbrefine.cli._argparse import add_trait_flags, trait_help
from nbrefine.cli.main import build_parser
from nbrefine.engine import FixProvenance, fix_provenance, read_provenance
from nbrefine.engine.config import Refine
from nbrefine.headless.session_json import AttemptJSON, SessionJSON, TeachingJSON, session_json
from nbrefine.headless.settings import TRAIT_FLAGS, cell_options, check_values, config_values
from nbrefine.providers.scripted import ScriptedProvider


def refined(shell, cell: str, replies: list[str], options: str = "--max-attempts 2"):
    provider = ScriptedProvider(replies)
    nbrefine.register_provider("headless-test", lambda settings: provider)
    with pytest.raises(nbrefine.NbrefineError):
        shell.run_cell_magic("refine", f"--provider headless-test {options}", cell)
    return nbrefine.last_session()


# --------------------------------------------------------------------------- session JSON


def test_the_session_json_has_exactly_the_typed_keys(shell) -> None:
    shell.run_cell("values = [1, 2, 3]")
    session = refined(
        shell,
        "total = sum(valuez)",
        ["```python\ntotal = sum(valuez) + 0\n```", "Use the list.\n\n```python\ntotal = sum(values)\n```"],
    )
    data = session_json(session)
    assert set(data) == set(SessionJSON.__required_keys__)
    assert [set(a) for a in data["attempts"]] == [set(AttemptJSON.__required_keys__)] * 2
    assert data["status"] == "fixed" and data["fixed_code"] == "total = sum(values)"
    assert data["failure"] is not None and data["failure"]["error_type"] == "NameError"
    first, second = data["attempts"]
    assert (first["ok"], first["error_type"], first["outcome"]) == (False, "NameError", "failed")
    assert (second["ok"], second["number"], second["model"]) == (True, 2, "scripted")
    assert json.loads(json.dumps(data)) == data  # plain JSON, as it leaves the kernel


def test_a_teaching_session_json_carries_the_hint(shell) -> None:
    session = refined(shell, "x = undefined_name + 1", ["Look at the name you use."], "--mode hint")
    teaching = session_json(session)["teaching"]
    assert teaching is not None and set(teaching) == set(TeachingJSON.__required_keys__)
    assert teaching["status"] == "hint" and teaching["mode"] == "hint"


# --------------------------------------------------------------------------- the flags of Refine traits


def test_every_trait_flag_names_a_refine_trait_and_takes_its_help() -> None:
    traits = Refine.class_traits()
    fix = build_parser()._subparsers._group_actions[0].choices["fix"]  # type: ignore[union-attr]
    by_flag = {flag: action for action in fix._actions for flag in action.option_strings}
    for entry in TRAIT_FLAGS:
        assert entry.trait in traits, entry
        action = by_flag[entry.flag]
        assert action.dest == entry.trait
        assert trait_help(entry.trait) in action.help, entry.flag
    assert by_flag["--mode"].choices == list(traits["mode"].values)
    assert by_flag["--max-attempts"].type is int and by_flag["--timeout"].type is float


def test_a_flag_reaches_the_kernel_as_its_trait() -> None:
    parser = argparse.ArgumentParser()
    add_trait_flags(parser, [t.trait for t in TRAIT_FLAGS])
    args = vars(
        parser.parse_args(["--max-attempts", "5", "--no-quick-fixes", "--mode", "hint", "--model", "m x"])
    )
    assert config_values(args) == {"model": "m x", "max_attempts": 5, "quick_fixes": False}
    assert cell_options(args) == " --model 'm x' --max-attempts 5 --mode hint"
    absent = vars(parser.parse_args([]))
    assert config_values(absent) == {} and cell_options(absent) == ""


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"max_attempts": 0}, "--max-attempts must be at least 1"),
        ({"timeout": float("inf")}, "--timeout must be a positive number of seconds"),
        ({"max_hints": -1}, "--max-hints must be at least 1"),
    ],
)
def test_a_bad_number_names_its_flag(values: dict[str, float], message: str) -> None:
    with pytest.raises(BadInputError, match=message):
        check_values(values)


# --------------------------------------------------------------------------- provenance


def test_the_panel_writes_the_same_provenance_keys_as_nbrefine_fix(shell) -> None:
    from nbrefine.ipython.panel import _provenance

    shell.run_cell("values = [1, 2, 3]")
    session = refined(shell, "total = sum(valuez)", ["Typo.\n\n```python\ntotal = sum(values)\n```"])
    record = _provenance(session)
    assert set(record) == set(FixProvenance.__annotations__) - {"accept_failed"}  # only when it raised
    assert record["error_type"] == "NameError" and record["explanation"] == "Typo."
    assert record["verified"] is True and record["accepted_at"].endswith("+00:00")


def test_provenance_written_before_the_keys_were_unified_is_read() -> None:
    old_cli = {
        "original_source": "x = 1",
        "attempts": 1,
        "provider": "offline",
        "model": "offline-quickfix",
        "fixed_at": "2026-11-01T10:00:00+00:00",
        "error_type": "NameError",
        "explanation": "",
        "version": "0.1.0",
    }
    found = read_provenance({"nbrefine": old_cli})
    assert found is not None and found["accepted_at"] == "2026-11-01T10:00:00+00:00"
    assert found["verified"] is True  # nbrefine fix never applied an unverified fix
    old_panel = {
        "original_source": "y",
        "attempts": 2,
        "provider": "anthropic",
        "model": "m",
        "accepted_at": "2026-11-02T10:00:00+00:00",
        "verified": False,
        "version": "0.1.0",
    }
    found = read_provenance({"nbrefine": old_panel})
    assert found is not None
    assert (found["verified"], found["error_type"], found["explanation"]) == (False, None, "")
    now = fix_provenance(original_source="z", attempts=1, provider="p", model="m", verified=True,
                         error_type=None, explanation="")  # fmt: skip
    assert read_provenance({"nbrefine": dict(now)}) == now


def test_a_hint_record_or_a_policy_is_not_a_fix() -> None:
    assert read_provenance({"nbrefine": {"mode": "hint", "hint": "Look again."}}) is None
    assert read_provenance({"nbrefine": {"mode": "hint", "lock": True}}) is None
    assert read_provenance({}) is None


def test_a_kernel_whose_port_was_taken_meanwhile_is_started_again(tmp_path, monkeypatch) -> None:
    """jupyter_client picks free ports that the kernel binds a moment later; when another process
    took one in between, the kernel dies at once (zmq: Address already in use). One more start,
    said in one line, and the notebook runs."""
    from nbformat.v4 import new_notebook

    from nbrefine.headless import kernel as driver

    real_attach, calls, notes = driver._attach, [], []

    def attach_once_taken(client, started):
        calls.append(started)
        if len(calls) == 1:  # what the first, dead kernel would report
            driver.shutdown(real_attach(client, started))
            raise BadInputError("cannot start the kernel 'python3': Address already in use (addr='tcp://…')")
        return real_attach(client, started)

    monkeypatch.setattr(driver, "_attach", attach_once_taken)
    with driver.open_kernel(new_notebook(), "python3", tmp_path, 30, note=notes.append) as kernel:
        assert kernel is not None
    assert len(calls) == 2 and calls[0] is not calls[1]
    assert notes == ["a port given to the kernel was taken before it could bind it; starting it again"]

    def attach_other_failure(client, started):
        driver.shutdown(real_attach(client, started))
        raise BadInputError("cannot start the kernel 'python3': No module named ipykernel")

    monkeypatch.setattr(driver, "_attach", attach_other_failure)
    with (
        pytest.raises(BadInputError, match="No module named ipykernel"),
        driver.open_kernel(new_notebook(), "python3", tmp_path, 30),
    ):
        pass
