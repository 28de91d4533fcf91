"""``Refine``'s traits validate themselves: a bad value is refused where it is set, in one line,
and the ``%%refine`` options and the command line's flags refuse the same values by the same rule."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nbformat
import pytest
from IPython.core.error import UsageError
from traitlets import Bool, Dict, Enum, Float, Int, TraitError, Unicode

from nbrefine.cli.main import main
from nbrefine.engine.config import _RULES, Refine
from nbrefine.headless.settings import check_values

#: (trait, a value it keeps, values it refuses)
CASES: list[tuple[str, Any, list[Any]]] = [
    ("max_attempts", 5, [0, -1]),
    ("max_retries", 0, [-1]),
    ("max_tokens", 1, [0]),
    ("prompt_budget", 4000, [999, 0]),
    ("memory_limit_mb", 512, [0]),
    ("candidates", 8, [0, 9, 50]),
    ("budget_tokens", 1, [0, -5]),
    ("kernel_budget_tokens", 10, [0]),
    ("timeout", 0.5, [0.0, -1.0, float("inf"), float("nan")]),
    ("request_timeout", 30.0, [0.0, float("inf")]),
    ("budget_usd", 0.01, [0.0, -1.0, float("inf")]),
    ("kernel_budget_usd", 2.0, [0.0]),
    ("provider", "offline", ["two words"]),
    ("prices", {"m": [3, 15]}, [{"m": [3]}, {"m": [3, -1]}, {"m": "cheap"}, {"m": [1, 2, 3, 4, 5]}]),
]


@pytest.mark.parametrize(("name", "good", "bad"), CASES, ids=[c[0] for c in CASES])
def test_a_trait_refuses_a_bad_value_where_it_is_set_and_keeps_its_own(name: str, good: Any, bad: list[Any]):
    settings = Refine()
    setattr(settings, name, good)
    kept = getattr(settings, name)
    for value in bad:
        with pytest.raises(TraitError) as caught:
            setattr(settings, name, value)
        message = str(caught.value)
        assert message.startswith(f"Refine.{name}") and "\n" not in message, message
        assert getattr(settings, name) == kept


def test_every_number_and_table_has_a_rule_and_the_help_names_it():
    """A new Int, Float or Dict trait cannot come without its rule (types alone let 0 or 50 in)."""
    traits = Refine.class_own_traits()
    ruled = {n for n, t in traits.items() if isinstance(t, Int | Float | Dict) and n not in ("max_hints",)}
    assert ruled <= set(_RULES), ruled - set(_RULES)
    for name, trait in traits.items():
        assert str(trait.help).strip(), name  # every trait says what it is
        assert isinstance(trait, Int | Float | Dict | Bool | Enum | Unicode), name
    assert "1 to 8" in str(traits["candidates"].help)


def test_an_option_is_refused_in_the_words_of_its_flag():
    with pytest.raises(TraitError, match=r"^--candidates must be between 1 and 8, not 9$"):
        Refine.validated("candidates", 9, option="--candidates")
    assert Refine.validated("timeout", 2, option="--timeout") == 2.0
    assert Refine.validated("budget_usd", None) is None  # absent: nothing to check


def test_the_teaching_traits_are_also_judged_by_the_policy_gate(shell):
    settings = shell.magics_manager.registry["RefineMagics"].settings
    with pytest.raises(TraitError, match=r"^Refine.max_hints must be at least 1, not 0$"):
        settings.max_hints = 0
    shell.run_line_magic("refine", "policy --mode hint --lock")
    with pytest.raises(TraitError, match=r"fix mode isn.t available"):
        settings.mode = "fix"  # a locked policy is not loosened


def test_config_in_a_real_shell_refuses_at_once_in_one_line(shell, caplog: pytest.LogCaptureFixture):
    settings = shell.magics_manager.registry["RefineMagics"].settings
    shell.run_line_magic("config", "Refine.candidates = 3")
    caplog.clear()
    shell.run_line_magic("config", "Refine.candidates = 50")  # IPython logs the TraitError
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert errors == ["Refine.candidates must be between 1 and 8, not 50"]
    assert settings.candidates == 3


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ("--candidates 9", "%%refine: --candidates must be between 1 and 8, not 9"),
        ("--max-attempts 0", "%%refine: --max-attempts must be at least 1, not 0"),
        ("--timeout -2", "%%refine: --timeout must be a positive number of seconds, not -2.0"),
        ("--provider 'a b'", "%%refine: --provider must be one name, without spaces, not 'a b'"),
    ],
)
def test_the_cell_options_map_onto_the_traits_rules(shell, options: str, message: str):
    with pytest.raises(UsageError) as caught:
        shell.run_cell_magic("refine", options, "x = 1")
    assert str(caught.value) == message
    assert "x" not in shell.user_ns  # refused before the cell ran


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"max_attempts": 0}, "--max-attempts must be at least 1, not 0"),
        ({"timeout": float("inf")}, "--timeout must be a positive number of seconds, not inf"),
        ({"provider": "a b"}, "--provider must be one name, without spaces, not 'a b'"),
    ],
)
def test_the_command_lines_flags_map_onto_the_traits_rules(values: dict[str, Any], message: str):
    from nbrefine._errors import BadInputError

    with pytest.raises(BadInputError) as caught:
        check_values(values)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--max-attempts", "0"], "--max-attempts must be at least 1, not 0"),
        (["--budget-tokens", "0"], "--budget-tokens must be at least 1, not 0"),
        (["--budget-usd", "-1"], "--budget-usd must be a positive number of USD, not -1.0"),
    ],
)
def test_nbrefine_fix_refuses_a_bad_flag_in_one_line_with_exit_2(
    flags: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    notebook = tmp_path / "a.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")]), notebook)
    code = main(["fix", str(notebook), "--provider", "offline", *flags])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.strip() == f"nbrefine: error: {message}"
