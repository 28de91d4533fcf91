"""Every module's "May import" line is true: read against the module's own imports.

A module docstring says what the module may import ("May import: the standard library,
:mod:`nbrefine._errors` and the engine's cells; never IPython") so that the next engineer knows a
layer's reach without reading its code; import-linter keeps the layers, this keeps the words. The
words are prose, but their nouns come from a small vocabulary (below): a :mod: or ``literal``
reference names a module (absolute, relative or a sibling's basename), and phrases name the
standard library (which goes without saying unless the line says "nothing"), the module's own
package, a layer (and those below it) or a third-party library. What the module imports, at the
top or lazily inside a function (not for type annotations only), must be among what its line
allows, and nothing it imports may be in its ``never`` clause.
"""

from __future__ import annotations

import ast
import functools
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "nbrefine"

#: The layers, bottom first, as the import-linter contract in pyproject.toml orders them.
LAYERS = ["_errors", "grounding", "sandbox", "providers", "engine", "headless", "reports", "batch", "cli"]
BELOW = {layer: LAYERS[: LAYERS.index(layer)] for layer in LAYERS}
BELOW["sandbox"] = ["_errors", "grounding"]  # sandbox | providers: one level
BELOW["providers"] = ["_errors", "grounding"]

#: Phrases naming third-party libraries (and the import names they stand for).
THIRD_PARTY = {
    "IPython": "IPython",
    "ipywidgets": "ipywidgets",
    "comm": "comm",
    "traitlets": "traitlets",
    "nbclient": "nbclient",
    "nbformat": "nbformat",
    "jupyter_client": "jupyter_client",
    "pygments": "pygments",
    "pure_eval": "pure_eval",
    "detect_secrets": "detect_secrets",
    "detect-secrets": "detect_secrets",
    "matplotlib": "matplotlib",
    "rich": "rich",
    "distributed": "distributed",
    "cloudpickle": "cloudpickle",
    "anthropic": "anthropic",
    "openai": "openai",
    "anywidget": "anywidget",
    "ipykernel": "ipykernel",
    "ipykernel_launcher": "ipykernel_launcher",  # the module ipykernel installs beside itself
    "numpy": "numpy",
    "pandas": "pandas",
    "stack_data": "stack_data",
    "jupyter_core": "jupyter_core",
}

#: Phrases naming nbrefine's parts, relative to the module's own package (``own``).
LAYER_WORDS = {
    "the engine": "engine",
    "the sandbox": "sandbox",
    "the providers": "providers",
    "the grounding": "grounding",
    "the cli": "cli",
    "the ipython side": "ipython",
    "the batch": "batch",
}


@dataclass
class Allowed:
    stdlib: bool = False
    any_third_party: bool = False
    modules: set[str] = field(default_factory=set)  # nbrefine modules and packages (prefixes)
    third_party: set[str] = field(default_factory=set)
    never: set[str] = field(default_factory=set)  # module prefixes, nbrefine's or third-party


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _package_of(module: str, path: Path) -> str:
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def _line_of(doc: str) -> str | None:
    """The "May import" sentence(s) of a docstring, on one line, up to the paragraph's end."""
    flat = " ".join(doc.split())
    found = re.search(r"May import:?\s(.*?)(?:\.\s+[A-Z`]|\.$|$)", flat)
    return found.group(1) if found else None


def _resolve(ref: str, own: str) -> str | None:
    """A :mod: or literal reference as an nbrefine module name, or None (not one of ours)."""
    ref = ref.lstrip("~")
    if ref.startswith("."):
        base = own
        ref = ref[1:]
        while ref.startswith("."):
            base, ref = base.rpartition(".")[0], ref[1:]
        return f"{base}.{ref}" if ref else base
    if ref.startswith("nbrefine"):
        return ref
    sibling = f"{own}.{ref}"
    if (ROOT / Path(*sibling.split(".")).with_suffix(".py")).exists() or (
        ROOT / Path(*sibling.split("."))
    ).is_dir():
        return sibling
    return None


def _grounding_leaves(text: str) -> set[str]:
    """``the grounding leaf modules (text, markers, _objects)``: the listed ones."""
    found = re.search(r"grounding[^()]*?(?:leaf |leaves|below it)[^()]*\(([^)]*)\)", text)
    if not found:
        return set()
    names = re.findall(r"[A-Za-z_]+", found.group(1))
    return {f"nbrefine.grounding.{n}" for n in names if (PACKAGE / "grounding" / f"{n}.py").exists()}


def parse(line: str, own: str) -> Allowed:
    allowed = Allowed()
    parts = re.split(r";?\s*\b(?:never|nothing else of nbrefine)\b", line, maxsplit=1)
    head = parts[0]
    never = re.sub(r"\([^)]*\)", "", parts[1]) if len(parts) > 1 else ""  # not the asides
    # The standard library goes without saying, unless the line says the module imports nothing.
    allowed.stdlib = not re.match(r"\s*nothing\b(?! else)", head)
    if "nbrefine's version" in head:
        allowed.modules.add("nbrefine._version")
    allowed.any_third_party = "third-party libraries" in head
    for ref in re.findall(r":(?:mod|func|class):`([^`]+)`|``([^`]+)``", head):
        name = _resolve(ref[0] or ref[1], own)
        if name is not None:
            # a function or class reference names its module
            while name and not _exists(name):
                name = name.rpartition(".")[0]
            if name:
                allowed.modules.add(name)
        if (ref[0] or ref[1]) in THIRD_PARTY:  # ``anthropic``: the SDK, or our module of its name
            allowed.third_party.add(THIRD_PARTY[ref[0] or ref[1]])
    for ref in re.findall(r":mod:`([^`]+)` and (?:everything )?below", head):
        name = _resolve(ref, own)
        part = name.split(".")[1] if name and name.count(".") >= 1 else ""
        allowed.modules.update(f"nbrefine.{below}" for below in BELOW.get(part, []))
    low = head.lower()
    if re.search(
        r"this package|sibling modules|its siblings|the rest of this package|the modules of this", low
    ):
        allowed.modules.add(own)
    for phrase, part in LAYER_WORDS.items():
        if phrase in low:
            allowed.modules.add(f"nbrefine.{part}")
            if re.search(
                phrase + r"(?:'s [a-z ,]+)? and (?:everything |the layers )?below", low
            ) or re.search(phrase + r" and the layers below it", low):
                allowed.modules.update(f"nbrefine.{below}" for below in BELOW.get(part, []))
    if "layers below the engine" in low or "the engine and below" in low:
        allowed.modules.update(f"nbrefine.{below}" for below in BELOW["engine"])
    if "grounding" in low and "nbrefine.grounding" not in allowed.modules:
        leaves = _grounding_leaves(head)
        allowed.modules.update(leaves or {"nbrefine.grounding"})
    for word, name in THIRD_PARTY.items():
        if re.search(rf"(?<![\w.`]){re.escape(word)}(?![\w`])", head):
            allowed.third_party.add(name)
    never_low = never.lower()
    for phrase, part in LAYER_WORDS.items():
        if phrase in never_low:
            allowed.never.add(f"nbrefine.{part}")
    for word, name in THIRD_PARTY.items():
        if re.search(rf"(?<![\w.`]){re.escape(word)}(?![\w`])", never) or (
            word == "IPython" and "ipython" in never_low
        ):
            allowed.never.add(name)
    for ref in re.findall(r":mod:`([^`]+)`", never):
        name = _resolve(ref, own)
        if name is not None:
            allowed.never.add(name)
    if "an sdk" in never_low:
        allowed.never.update({"anthropic", "openai"})
    return allowed


def _exists(module: str) -> bool:
    path = ROOT / Path(*module.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def imports_of(tree: ast.Module, module: str, package: str) -> set[str]:
    """Every module the code imports, but those under ``if TYPE_CHECKING:``."""
    found: set[str] = set()

    class Visitor(ast.NodeVisitor):
        def visit_If(self, node: ast.If) -> None:
            test = node.test
            if isinstance(test, ast.Name) and test.id == "TYPE_CHECKING":
                for child in node.orelse:
                    self.visit(child)
                return
            self.generic_visit(node)

        def visit_Import(self, node: ast.Import) -> None:
            found.update(alias.name for alias in node.names)

        def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
            if node.level:
                base = package
                for _ in range(node.level - 1):
                    base = base.rpartition(".")[0]
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            if node.module is None or _exists(target):
                for alias in node.names:
                    child = f"{target}.{alias.name}"
                    found.add(child if _exists(child) else target)
            else:
                found.add(target)

        def visit_Call(self, node: ast.Call) -> None:  # importlib.import_module("nbrefine.x")
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if (
                name in ("import_module", "__import__")
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                value = node.args[0].value
                if isinstance(value, str) and not value.startswith("."):
                    found.add(value)
            self.generic_visit(node)

    Visitor().visit(tree)
    found.discard("__future__")
    found.discard(module)
    return found


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


@functools.cache
def _with_lines() -> list[Path]:
    return [p for p in _modules() if _line_of(ast.get_docstring(ast.parse(p.read_text())) or "")]


def violations(path: Path) -> list[str]:
    module = _module_name(path)
    return violations_of(path.read_text(), module, _package_of(module, path), path.name == "__init__.py")


def violations_of(text: str, module: str, package: str, is_package: bool = False) -> list[str]:
    tree = ast.parse(text)
    line = _line_of(ast.get_docstring(tree) or "")
    assert line is not None
    allowed = parse(line, package)
    if is_package:
        allowed.modules.add(package)  # a package gathers its own modules' names
    wrong = []
    for name in sorted(imports_of(tree, module, package)):
        root = name.partition(".")[0]
        if any(name == n or name.startswith(n + ".") for n in allowed.never):
            wrong.append(f"{name}: its line says never")
        elif root == "nbrefine":
            if not any(
                name == m or name.startswith(m + ".") or m.startswith(name + ".") for m in allowed.modules
            ):
                wrong.append(f"{name}: not in its line")
        elif root in sys.stdlib_module_names:
            if not allowed.stdlib:
                wrong.append(f"{name}: its line says it imports nothing")
        elif root not in allowed.third_party and not allowed.any_third_party:
            wrong.append(f"{name}: a third-party library not in its line")
    return wrong


def test_most_modules_say_what_they_may_import() -> None:
    missing = [
        str(p.relative_to(ROOT)) for p in _modules() if p not in _with_lines() and p.stat().st_size > 0
    ]
    assert len(missing) <= len(_modules()) // 4, missing


@pytest.mark.parametrize("path", _with_lines(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_the_import_line_is_true(path: Path) -> None:
    assert violations(path) == []


def test_the_reader_catches_a_false_line() -> None:
    line = "the standard library and :mod:`nbrefine.grounding`; never the engine"
    allowed = parse(line, "nbrefine.sandbox")
    assert allowed.stdlib and "nbrefine.grounding" in allowed.modules and "nbrefine.engine" in allowed.never
    code = "import json\nfrom nbrefine.engine import loop\nimport IPython\n"
    wrong = violations_of(f'"""May import: {line}."""\n{code}', "nbrefine.sandbox.x", "nbrefine.sandbox")
    assert wrong == [
        "IPython: a third-party library not in its line",
        "nbrefine.engine.loop: its line says never",
    ]
    assert violations_of('"""May import: nothing."""\nimport json\n', "nbrefine.x", "nbrefine") == [
        "json: its line says it imports nothing"
    ]
    lazy = '"""May import: the standard library."""\ndef f():\n    from nbrefine import sandbox\n'
    wrong = violations_of(lazy, "nbrefine.engine.x", "nbrefine.engine")
    assert wrong == ["nbrefine.sandbox: not in its line"]
    typed = '"""May import: nothing."""\nif TYPE_CHECKING:\n    import json\n'
    assert violations_of(typed, "nbrefine.x", "nbrefine") == []  # annotations only
