"""The tests mirror the package: ``tests/<layer>/test_<module>[_<aspect>].py``.

A test of ``nbrefine/engine/verify.py`` is ``tests/engine/test_verify.py``; one of its aspects may
have a file of its own (``tests/sandbox/test_fork_spare.py`` tests the spare of ``sandbox/fork.py``).
Suites that cross the layers live in the folders below, named for what they are; nothing else may
sit in ``tests/`` itself, and a test file whose module is renamed or removed fails here.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
PACKAGE = ROOT / "nbrefine"

#: Folders of tests that cross the layers (and what they hold), not mirrors of one layer.
CROSS_LAYER = {
    "e2e": "whole runs in real kernels: %%refine end to end, the cross-cell corpus",
    "adversarial": "hostile candidates against the sandbox, the redaction and the verdict",
    "project": "the repository itself: docs, release, import lines, this layout",
    "browser": "JupyterLab and Notebook 7 in chromium (tests/browser/run.sh)",
}


def _modules_of(layer: Path) -> set[str]:
    """The names a test file may start with: the layer's modules and subpackages, theirs too
    (``grounding/redaction/redactor.py``), without a leading underscore (``_sdk_client`` is tested
    by ``test_sdk_client.py``)."""
    names = {p.stem for p in layer.rglob("*.py") if p.stem != "__init__"}
    names |= {p.parent.name for p in layer.rglob("__init__.py") if p.parent != layer}
    return {name.lstrip("_") for name in names}


def _mirrors(test: Path, modules: set[str]) -> bool:
    stem = test.stem.removeprefix("test_")
    return any(stem == name or stem.startswith(name + "_") for name in modules)


def test_no_test_file_sits_in_tests_itself() -> None:
    assert sorted(p.name for p in TESTS.glob("test_*.py")) == []


def test_every_test_folder_is_a_layer_or_a_named_cross_layer_suite() -> None:
    layers = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    folders = {p.parent.relative_to(TESTS).parts[0] for p in TESTS.rglob("test_*.py")}
    assert folders - layers - set(CROSS_LAYER) == set()


def test_each_test_file_is_named_for_a_module_of_its_layer() -> None:
    wrong = []
    for test in sorted(TESTS.rglob("test_*.py")):
        layer = test.relative_to(TESTS).parts[0]
        if layer in CROSS_LAYER:
            continue
        if not _mirrors(test, _modules_of(PACKAGE / layer)):
            wrong.append(str(test.relative_to(ROOT)))
    assert wrong == []


def test_the_rule_catches_a_file_named_for_no_module() -> None:
    modules = _modules_of(PACKAGE / "engine")
    assert _mirrors(Path("test_verify.py"), modules) and _mirrors(Path("test_teaching_withheld.py"), modules)
    assert not _mirrors(Path("test_widget.py"), modules)
    assert _mirrors(Path("test_sdk_client.py"), _modules_of(PACKAGE / "providers"))


def test_test_file_names_are_unique() -> None:
    """pytest imports test files by their basename (no packages here): two alike would clash."""
    names = [p.name for p in TESTS.rglob("test_*.py")]
    assert sorted(n for n in set(names) if names.count(n) > 1) == []
