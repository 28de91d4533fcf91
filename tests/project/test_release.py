"""The version, said once: ``nbrefine/_version.py`` is what hatchling reads for the package's
metadata, what ``nbrefine.__version__`` and ``nbrefine --version`` say, and what the JupyterLab
extension's ``package.json`` and ``VERSION`` (answered to ``ping``) must match.

(The built dists are checked by scripts/check_release.sh, which .ci/run runs.)"""

from __future__ import annotations

import importlib.metadata
import json
import re
import runpy
import subprocess
import sys
import tomllib
from pathlib import Path

import nbrefine

ROOT = Path(__file__).resolve().parents[2]


def written_version() -> str:
    version = runpy.run_path(str(ROOT / "nbrefine" / "_version.py"))["__version__"]
    assert isinstance(version, str)
    return version


def test_the_version_is_written_once_and_read_by_hatchling() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"], "pyproject.toml must not repeat the version"
    assert "version" in project["project"]["dynamic"]
    assert project["tool"]["hatch"]["version"]["path"] == "nbrefine/_version.py"
    assert re.fullmatch(r"\d+\.\d+\.\d+", written_version())


def test_nbrefine_version_matches_the_installed_metadata_and_the_package() -> None:
    script = Path(sys.executable).with_name("nbrefine")
    assert script.exists(), f"no console script next to {sys.executable}: pip install -e '.[test]'"
    proc = subprocess.run([str(script), "--version"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    installed = importlib.metadata.version("nbrefine")
    assert installed == written_version(), (
        f"the installed metadata says {installed}, nbrefine/_version.py {written_version()}: "
        "reinstall (pip install -e '.[test]'; ./dev does it when _version.py changes)"
    )
    assert proc.stdout == f"nbrefine {installed}\n"
    assert nbrefine.__version__ == installed


def test_the_extension_has_the_same_version() -> None:
    package = json.loads((ROOT / "labextension" / "package.json").read_text())
    assert package["version"] == nbrefine.__version__
    index = (ROOT / "labextension" / "src" / "index.ts").read_text()
    assert f"export const VERSION = '{nbrefine.__version__}';" in index
