"""The tests mirror the package: ``tests/<layer>/test_<module>[_<aspect>].py``.

A test of ``nbrefine/engine/verify.py`` is ``tests/engine/test_verify.py``; one of its aspects may
have a file of its own (``tests/sandbox/test_fork_spare.py`` tests the spare of ``sandbox/fork.py``).
Suites that cross the layers live in the folders below, named for what they are; nothing else may
sit in ``tests/`` itself, and a test file whose module is renamed or removed fails here.

The fakes of the model APIs are one package, ``tests/fakes/``, on one HTTP server
(``tests/fakes/server.py``); shared fixtures live in ``conftest.py`` files, helpers are found
through ``pythonpath`` in pyproject.toml, and no test edits ``sys.path``.
"""

from __future__ import annotations

import ast
import re
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
    by ``test_sdk_client.py``), and the layer's own name for its ``__init__.py`` (the provider
    registry in ``providers/__init__.py`` is tested by ``test_providers.py``)."""
    names = {p.stem for p in layer.rglob("*.py") if p.stem != "__init__"}
    names |= {p.parent.name for p in layer.rglob("__init__.py")}
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
    assert _mirrors(Path("test_providers.py"), _modules_of(PACKAGE / "providers"))


def test_test_file_names_are_unique() -> None:
    """pytest imports test files by their basename (no packages here): two alike would clash."""
    names = [p.name for p in TESTS.rglob("test_*.py")]
    assert sorted(n for n in set(names) if names.count(n) > 1) == []


FAKES = TESTS / "fakes"


def _trees(root: Path = TESTS) -> list[tuple[Path, ast.Module]]:
    return [(p, ast.parse(p.read_text(encoding="utf-8"))) for p in sorted(root.rglob("*.py"))]


def _sys_path_edits(tree: ast.Module) -> list[int]:
    """Lines that call ``sys.path.<anything>(...)`` (insert, append, extend)."""
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Attribute)
        and node.func.value.attr == "path"
        and isinstance(node.func.value.value, ast.Name)
        and node.func.value.value.id == "sys"
    ]


def _definitions(tree: ast.Module, name: str) -> list[int]:
    """Lines that define ``name`` at module level or in a class: a def, a class or an assignment."""
    lines = []
    for node in ast.walk(tree):
        if (
            isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name
        ) or (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
        ):
            lines.append(node.lineno)
    return lines


def _http_servers(tree: ast.Module) -> list[str]:
    """Classes built on the stdlib's HTTP server or request handler."""
    bases = ("HTTPServer", "ThreadingHTTPServer", "BaseHTTPRequestHandler", "TCPServer", "ThreadingMixIn")
    return [
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
        and any(ast.unparse(b).rsplit(".", 1)[-1] in bases for b in node.bases)
    ]


def test_no_test_edits_sys_path() -> None:
    """pyproject.toml's pythonpath puts tests/, tests/browser/ and bench/ on the path."""
    edits = [f"{p.relative_to(ROOT)}:{line}" for p, tree in _trees() for line in _sys_path_edits(tree)]
    assert edits == []


def test_the_fakes_are_one_package_on_one_server() -> None:
    assert sorted(p.name for p in FAKES.glob("*.py")) == [
        "__init__.py",
        "anthropic_api.py",
        "openai_api.py",
        "server.py",
    ]
    assert sorted(p.name for p in TESTS.glob("fake*.py")) == []
    servers = {str(p.relative_to(ROOT)): names for p, tree in _trees() if (names := _http_servers(tree))}
    assert servers == {"tests/fakes/server.py": ["_Server", "Handler"]}


#: The module-scoped ``fake`` fixture of tests/conftest.py, as its decorator and body read.
SHARED_FAKE = ("pytest.fixture(scope='module')", "with FakeAnthropic() as server:\n    yield server")


def _is_the_shared_fake(node: ast.FunctionDef) -> bool:
    body = [b for b in node.body if not (isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant))]
    decorators = [ast.unparse(d) for d in node.decorator_list]
    return decorators == [SHARED_FAKE[0]] and "\n".join(ast.unparse(b) for b in body) == SHARED_FAKE[1]


def test_shared_helpers_and_fixtures_are_defined_once() -> None:
    """``TimedFake`` in tests/fakes, ``clean_env`` in a conftest.py, the plain ``fake`` in tests/."""
    where = {"TimedFake": FAKES, "clean_env": None}
    for name, home in where.items():
        found = [(p, line) for p, tree in _trees() for line in _definitions(tree, name)]
        assert len(found) == 1, (name, found)
        path = found[0][0]
        assert path.is_relative_to(home) if home else path.name == "conftest.py", (name, path)
    fixtures = [
        f"{p.relative_to(ROOT)}:{node.lineno}"
        for p, tree in _trees()
        if p.name != "conftest.py"
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef) and _is_the_shared_fake(node)
    ]
    assert fixtures == []  # the plain module-scoped fake is tests/conftest.py's


def test_the_layout_checks_catch_a_violation() -> None:
    tree = ast.parse("import sys\nsys.path.insert(0, 'x')\nclass S(http.server.ThreadingHTTPServer): pass\n")
    assert _sys_path_edits(tree) == [2] and _http_servers(tree) == ["S"]
    assert _definitions(ast.parse("TimedFake = object\ndef clean_env(): pass\n"), "TimedFake") == [1]
    conftest = ast.parse((TESTS / "conftest.py").read_text(encoding="utf-8"))
    assert [n.name for n in conftest.body if isinstance(n, ast.FunctionDef) and _is_the_shared_fake(n)] == [
        "fake"
    ]


# --------------------------------------------------------------------------- the package's own map

#: Module basenames that repeat in the package and mean the same thing in both places (the
#: "Words" section of docs/architecture.md says so): the command and its report, the parser base
#: and the command line's parsers on it.
SAME_MEANING = {"__init__", "_argparse", "bench"}


def _repeated_basenames(paths: list[Path]) -> set[str]:
    stems = [p.stem for p in paths]
    return {s for s in stems if stems.count(s) > 1} - SAME_MEANING


def test_no_module_basename_repeats_with_another_meaning() -> None:
    assert _repeated_basenames(sorted(PACKAGE.rglob("*.py"))) == set()


def test_the_basename_rule_catches_a_second_meaning() -> None:
    assert _repeated_basenames([Path("engine/job.py"), Path("batch/job.py"), Path("cli/bench.py")]) == {"job"}


def _architecture_rows() -> dict[str, str]:
    """The package table of docs/architecture.md: folder (``engine/``) -> what the row says."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| [^|]+ \| `([\w.]+/?)` \| (.+) \|$", text, flags=re.M)
    return {folder: what for folder, what in rows}


def _unnamed_modules(folder: str, what: str) -> list[str]:
    """The modules (``cluster``) and subpackages (``teaching/``) of ``nbrefine/<folder>`` that the
    row does not name in backticks."""
    named = set(re.findall(r"`(\w+/?)`", what))
    layer = PACKAGE / folder
    missing = []
    for path in sorted(layer.rglob("*.py")):
        if path.stem != "__init__":
            name = path.stem
        elif path.parent != layer:
            name = path.parent.name + "/"
        else:
            continue
        if name not in named:
            missing.append(str(path.relative_to(layer)))
    return missing


def test_the_architecture_map_names_every_module_of_every_layer() -> None:
    """docs/architecture.md is the newcomer's map: a module added, moved or renamed must show there."""
    rows = _architecture_rows()
    layers = sorted(p.name + "/" for p in PACKAGE.iterdir() if (p / "__init__.py").exists())
    assert sorted(k for k in rows if k.endswith("/")) == layers
    missing = {
        folder: m
        for folder, what in rows.items()
        if folder.endswith("/") and (m := _unnamed_modules(folder.rstrip("/"), what))
    }
    assert missing == {}


def test_the_map_rule_catches_an_unnamed_module() -> None:
    assert _unnamed_modules("batch", "`client`, `gate`") != []
    assert "notebook_job.py" in _unnamed_modules("batch", "`client`, `gate`")


def test_the_readme_map_names_each_layer_folder_once() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## How it is built", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1] for line in section.splitlines() if line.startswith("| `")]
    named = [name for row in rows for name in re.findall(r"`(\w+/|_errors\.py)`", row)]
    layers = [p.name + "/" for p in PACKAGE.iterdir() if (p / "__init__.py").exists()] + ["_errors.py"]
    assert sorted(named) == sorted(layers)
