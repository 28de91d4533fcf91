"""The provider registry (``nbrefine/providers/__init__.py``): providers other packages declare
under the ``nbrefine.providers`` entry-point group, found through a real distribution's metadata
on the import path, and found again when a package is installed or removed."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from nbrefine.providers import ProviderSettings, available_providers, make_provider
from nbrefine.providers.offline import OfflineProvider


def _install(site: Path, name: str, *, minutes_ago: float = 0) -> Path:
    """A distribution ``name`` as pip leaves it: a dist-info folder with its entry points,
    installed ``minutes_ago`` (the folder's mtime)."""
    info = site / f"{name.replace('-', '_')}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[nbrefine.providers]\n{name} = nbrefine.providers:_offline\n")
    then = time.time() - minutes_ago * 60
    os.utime(site, (then, then))
    return info


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "site-packages"
    folder.mkdir()
    monkeypatch.setattr(sys, "path", [*sys.path, str(folder)])
    return folder


def test_a_provider_declared_by_an_installed_package_is_available(site: Path) -> None:
    assert "plugin-one" not in available_providers()
    _install(site, "plugin-one")
    assert "plugin-one" in available_providers() and "anthropic" in available_providers()
    assert isinstance(make_provider("plugin-one", ProviderSettings()), OfflineProvider)


def test_the_scan_is_kept_until_a_package_is_installed_or_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.metadata

    scans = []
    real = importlib.metadata.distributions

    def counting(**kw: object) -> object:
        scans.append(kw)
        return real(**kw)  # type: ignore[arg-type]

    monkeypatch.setattr(importlib.metadata, "distributions", counting)
    site = tmp_path / "site-packages"
    site.mkdir()
    monkeypatch.setattr(sys, "path", [str(site)])  # folders whose mtimes the test sets
    first = _install(site, "plugin-two", minutes_ago=5)
    assert "plugin-two" in available_providers()
    available_providers()
    make_provider("plugin-two", ProviderSettings())
    assert len(scans) == 1  # the path and its folders unchanged: one read serves them all

    _install(site, "plugin-three", minutes_ago=1)  # a new dist-info folder: site's mtime moves
    assert {"plugin-two", "plugin-three"} <= set(available_providers())
    for path in first.iterdir():
        path.unlink()
    first.rmdir()  # uninstalled
    then = time.time() - 30
    os.utime(site, (then, then))
    assert "plugin-two" not in available_providers() and "plugin-three" in available_providers()
    assert len(scans) == 3


def test_a_changed_import_path_is_scanned_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    other = tmp_path / "other"
    other.mkdir()
    _install(other, "plugin-four")
    assert "plugin-four" not in available_providers()
    monkeypatch.setattr(sys, "path", [*sys.path, str(other), str(tmp_path / "missing")])
    assert "plugin-four" in available_providers()


def test_the_first_copy_on_the_path_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    _install(first, "plugin-seven")
    shadowed = _install(second, "plugin-seven")
    (shadowed / "entry_points.txt").write_text(
        "[nbrefine.providers]\nplugin-seven-old = nbrefine.providers:_offline\n"
    )
    monkeypatch.setattr(sys, "path", [str(first), str(second)])
    found = set(available_providers())
    assert "plugin-seven" in found and "plugin-seven-old" not in found


def test_the_working_folder_is_read_as_the_folder_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # '' on the path is the working folder: a kernel forked from a zygote has another one
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    _install(one, "plugin-eight", minutes_ago=3)
    _install(two, "plugin-nine", minutes_ago=3)
    os.utime(one, ns=(two.stat().st_mtime_ns,) * 2)  # the same mtime, too
    monkeypatch.setattr(sys, "path", [""])
    monkeypatch.chdir(one)
    assert "plugin-eight" in available_providers()
    monkeypatch.chdir(two)
    assert "plugin-nine" in available_providers() and "plugin-eight" not in available_providers()
