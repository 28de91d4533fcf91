"""The documentation site (docs/): every page reachable, and the generated references complete.

``./dev test`` builds the site with warnings as errors and executes its getting-started notebook;
these tests build it again without executing the notebook (so they stay fast) and check what the
generated references must hold, reading the traits, the parsers and ``__all__`` from the code itself:

- every page of docs/ is in a toctree reachable from the index, and every toctree entry is a page;
- the configuration reference has an entry for every ``Refine`` trait;
- the command-line reference has an entry for every option of ``nbrefine`` and each of its commands,
  and for every ``%%refine`` cell option and ``%refine`` line command;
- the API page documents every name of ``nbrefine.__all__``.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import pytest
from docutils.nodes import make_id

import nbrefine
from nbrefine.cli.main import build_parser
from nbrefine.engine.config import Refine
from nbrefine.ipython.magics import RefineMagics
from nbrefine.ipython.options import LINE_COMMANDS

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGE_SUFFIXES = (".md", ".ipynb")


def _pages() -> set[str]:
    """Every source page of the site, as a docname (``notebook``, ``instructor-guide``…)."""
    found = set()
    for path in DOCS.rglob("*"):
        relative = path.relative_to(DOCS)
        if path.suffix in PAGE_SUFFIXES and not any(part.startswith(("_", ".")) for part in relative.parts):
            found.add(relative.with_suffix("").as_posix())
    return found


def _toctree_entries(docname: str) -> list[str]:
    """The entries of every ``{toctree}`` block of a MyST page, as docnames relative to docs/."""
    text = (DOCS / f"{docname}.md").read_text(encoding="utf-8")
    entries = []
    for block in re.findall(r"^```\{toctree\}[^\n]*\n(.*?)^```", text, re.S | re.M):
        for line in block.splitlines():
            line = line.strip()
            if line and not line.startswith(":"):
                base = Path(docname).parent
                entries.append((base / line).as_posix() if str(base) != "." else line)
    return entries


def test_every_page_is_reachable_from_the_index() -> None:
    pages = _pages()
    assert {"index", "getting-started", "configuration", "cli", "api", "security", "privacy"} <= pages
    reached, todo = {"index"}, ["index"]
    while todo:
        for entry in _toctree_entries(todo.pop()):
            assert entry in pages, f"a toctree names {entry!r}, which is no page of docs/"
            if entry not in reached:
                reached.add(entry)
                todo.append(entry)
    assert pages - reached == set(), "pages in no toctree reachable from docs/index.md"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site built as ./dev test builds it (warnings are errors), but with the notebook not run."""
    out = tmp_path_factory.mktemp("docs")
    command = [sys.executable, "-m", "sphinx", "-q", "-W", "--keep-going", "-b", "html"]
    command += ["-D", "nb_execution_mode=off", "-d", str(out / ".doctrees"), str(DOCS), str(out / "html")]
    done = subprocess.run(command, capture_output=True, text=True, timeout=240, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-4000:]
    return out / "html"


def _ids(page: Path) -> set[str]:
    return set(re.findall(r'\bid="([^"]+)"', page.read_text(encoding="utf-8")))


def test_the_configuration_reference_lists_every_refine_trait(site: Path) -> None:
    ids = _ids(site / "configuration.html")
    traits = Refine.class_own_traits(config=True)
    assert len(traits) > 20
    missing = [name for name in traits if make_id(f"refine-{name}") not in ids]
    assert missing == []
    text = (site / "configuration.html").read_text(encoding="utf-8")
    for name in ("max_attempts", "timeout", "provider"):  # the help is there too, not just the name
        assert " ".join(str(traits[name].help).split()[:4]) in re.sub(r"\s+", " ", text), name


def _options(parser: argparse.ArgumentParser) -> list[str]:
    """Every documented argument of ``parser``: option strings, and positionals by their dest."""
    names = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            continue
        if action.help is argparse.SUPPRESS:
            continue
        names += list(action.option_strings) or [action.dest]
    return names


def _commands() -> dict[str, argparse.ArgumentParser]:
    root = build_parser()
    commands = {"nbrefine": root}
    for action in root._actions:
        if isinstance(action, argparse._SubParsersAction):
            commands |= {f"nbrefine-{name}": parser for name, parser in action.choices.items()}
    return commands


def test_the_cli_reference_lists_every_command_and_option(site: Path) -> None:
    ids = _ids(site / "cli.html")
    commands = _commands()
    assert {"nbrefine-fix", "nbrefine-bench"} <= commands.keys()
    missing = [
        f"{command} {option}"
        for command, parser in commands.items()
        for option in _options(parser)
        if make_id(f"{command}-{option}") not in ids
    ]
    assert missing == []
    assert sum(len(_options(p)) for p in commands.values()) > 30
    for command in commands:
        assert make_id(f"command-{command.replace('-', ' ')}") in ids, command


def test_the_cli_reference_lists_every_refine_cell_option_and_line_command(site: Path) -> None:
    ids = _ids(site / "cli.html")
    options = _options(getattr(RefineMagics.refine, "parser"))  # noqa: B009  (IPython sets it)
    assert "--max-attempts" in options and "--allow-network" in options
    assert [o for o in options if make_id(f"refine-{o}") not in ids] == []
    words = [command.split()[0] for command, _ in LINE_COMMANDS]
    assert [w for w in words if make_id(f"refine-line-{w}") not in ids] == []


def test_the_api_page_documents_the_public_surface(site: Path) -> None:
    ids = _ids(site / "api.html")
    missing = [name for name in nbrefine.__all__ if f"nbrefine.{name}" not in ids]
    assert missing == []


#: Where the prose cites files of the repository by path: the pages, the READMEs, the guides, the
#: extension's sources and every docstring and comment of the package and the tests.
_CITING = [
    "docs/**/*.md",
    "*.md",
    "bench/README.md",
    "labextension/README.md",
    "labextension/src/**/*.ts",
    "nbrefine/**/*.py",
    "tests/**/*.py",
    "bench/**/*.py",
]
_CITED_PATH = re.compile(r"(?<![\w/.])((?:nbrefine|tests|bench|labextension/src)/[\w/.-]+\.(?:py|ts|md))\b")


def _cited_paths(text: str) -> set[str]:
    return set(_CITED_PATH.findall(text))


def test_every_file_the_prose_cites_by_path_exists() -> None:
    """A module moved or renamed leaves no page, README or docstring pointing at its old path."""
    stale = sorted(
        f"{source.relative_to(ROOT)}: {cited}"
        for pattern in _CITING
        for source in ROOT.glob(pattern)
        if "node_modules" not in source.parts and source != Path(__file__)  # its own examples
        for cited in _cited_paths(source.read_text(encoding="utf-8"))
        if not (ROOT / cited).exists()
    )
    assert stale == []


def test_the_cited_path_rule_reads_paths_in_prose() -> None:
    assert _cited_paths("see `nbrefine/batch/runner.py` and tests/fakes/server.py.") == {
        "nbrefine/batch/runner.py",
        "tests/fakes/server.py",
    }
    assert _cited_paths("the folder tests/corpus/ and x/nbrefine/a.py") == set()
