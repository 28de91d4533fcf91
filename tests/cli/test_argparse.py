"""Every command-line parser in nbrefine refuses abbreviated options.

argparse accepts any unambiguous prefix of an option by default, so ``nbrefine fix NB --mode hint``
was silently read as ``--model hint`` before ``fix`` had a ``--mode`` of its own: an instructor
who asked for hints got full solutions. These tests fail if any parser in the package, present or
future, accepts an abbreviation.
"""

from __future__ import annotations

import argparse
import ast
import importlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import nbrefine
from nbrefine._errors import BadInputError
from nbrefine.cli import _argparse as cli_argparse
from nbrefine.cli.main import build_parser, main
from nbrefine.engine.teaching import policy as teaching
from nbrefine.headless import EXIT_USAGE
from nbrefine.ipython import magics

PACKAGE = Path(nbrefine.__file__).resolve().parent


def _modules() -> Iterator[tuple[Path, ast.Module]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path, ast.parse(path.read_text(encoding="utf-8"), str(path))


def _name(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def _parser_classes() -> dict[str, Path]:
    """Every class of the package that derives, directly or not, from argparse.ArgumentParser."""
    bases: dict[str, tuple[set[str], Path]] = {}
    for path, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                bases[node.name] = ({_name(b) for b in node.bases}, path)
    found: dict[str, Path] = {}
    changed = True
    while changed:
        changed = False
        for name, (parents, path) in bases.items():
            if name not in found and parents & ({"ArgumentParser"} | set(found)):
                found[name] = path
                changed = True
    return found


def test_every_parser_class_of_the_package_is_strict() -> None:
    strict = importlib.import_module("nbrefine._argparse").StrictParser
    classes = _parser_classes()
    assert {"StrictParser", "CommandParser", "_PolicyParser"} <= set(classes), classes
    for name in classes:
        if name == "StrictParser":
            continue
        holders = [m for m in (cli_argparse, magics, teaching) if hasattr(m, name)]
        assert holders, f"{name} ({classes[name]}): add its module to this test"
        for module in holders:
            cls = getattr(module, name)
            assert issubclass(cls, strict), f"{module.__name__}.{name}"


def test_no_plain_argument_parser_is_built_in_the_package() -> None:
    """A parser made from argparse.ArgumentParser itself would accept abbreviations again."""
    plain = []
    for path, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and _name(node.func) == "ArgumentParser":
                plain.append(f"{path.name}:{node.lineno}")
    assert plain == []


def _recorded(monkeypatch: pytest.MonkeyPatch, build: Callable[[], Any]) -> list[argparse.ArgumentParser]:
    made: list[argparse.ArgumentParser] = []
    real_init = argparse.ArgumentParser.__init__

    def init(self: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        real_init(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(argparse.ArgumentParser, "__init__", init)
    build()
    return made


BUILDERS: dict[str, Callable[[], Any]] = {
    "nbrefine (fix and bench)": build_parser,
    "%refine policy": lambda: teaching.parse_policy_args(["--mode", "hint"]),
}


@pytest.mark.parametrize("what", sorted(BUILDERS))
def test_every_parser_built_refuses_abbreviations(what: str, monkeypatch: pytest.MonkeyPatch) -> None:
    made = _recorded(monkeypatch, BUILDERS[what])
    assert made
    assert [p.prog for p in made if p.allow_abbrev] == []


def test_the_cell_magics_parser_refuses_abbreviations() -> None:
    """IPython builds the %%refine parser when the magic is defined; it is made strict then."""
    assert magics.RefineMagics.refine.parser.allow_abbrev is False


FIX = ["fix", "nb.ipynb"]


@pytest.mark.parametrize(
    "argv",
    [
        [*FIX, "--mode", "hint", "--mod", "hint"],
        [*FIX, "--max-att", "3"],
        [*FIX, "--in-pl"],
        [*FIX, "--no-quick"],
        ["bench", "corpus.jsonl", "--lim", "2"],
    ],
)
def test_the_command_line_refuses_an_abbreviation(argv: list[str], capsys: Any) -> None:
    assert main(argv) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "unrecognized arguments" in err
    assert len(err.strip().splitlines()) == 1


def test_mode_is_never_read_as_model() -> None:
    args = build_parser().parse_args([*FIX, "--mode", "hint", "--max-hints", "2"])
    assert (args.mode, args.max_hints, args.model) == ("hint", 2, None)


def test_the_cell_and_policy_options_refuse_abbreviations() -> None:
    from IPython.core.error import UsageError

    with pytest.raises(UsageError, match="unrecognized arguments"):
        magics.RefineMagics.refine.parser.parse_args(["--max-att", "3"])
    with pytest.raises(ValueError, match="unrecognized arguments"):
        teaching.parse_policy_args(["--mode", "hint", "--max", "3"])
    with pytest.raises(BadInputError, match="unrecognized arguments"):
        build_parser().parse_args(["bench", "corpus.jsonl", "--lim", "2"])
