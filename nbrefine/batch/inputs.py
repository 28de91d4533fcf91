"""Which notebooks a batch repairs, and where each one's outputs go.

Arguments are notebooks, folders (searched recursively) and glob patterns (``**`` included).
Outputs go next to each input (``NAME.fixed.ipynb``), over it (``--in-place``), or under ``-o
DIR`` mirroring the input tree: each path is taken relative to the folder all the arguments share.
nbgrader's layout, ``submitted/<student>/<assignment>/<notebook>.ipynb``, names the student and
the assignment of each notebook.

May import: the standard library."""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["BatchInput", "NbgraderPlace", "expand", "nbgrader_place"]

#: nbgrader's folders of student notebooks: ``<course>/<folder>/<student>/<assignment>/<nb>.ipynb``.
NBGRADER_FOLDERS = ("submitted", "autograded")
_OUTPUT_SUFFIXES = (".fixed.ipynb",)  # what nbrefine itself wrote next to an input


@dataclass(frozen=True)
class BatchInput:
    path: Path  # the input notebook, as found (relative when the argument was)
    output: Path | None  # where its repaired notebook goes (None: --dry-run)
    outdir: Path  # where its other outputs go (the student's feedback file)
    problem: str = ""  # an argument that named no notebook: reported, not run


@dataclass(frozen=True)
class NbgraderPlace:
    student: str
    assignment: str
    notebook: str


def nbgrader_place(path: Path) -> NbgraderPlace | None:
    """Student, assignment and notebook of a path in nbgrader's layout, else None."""
    parts = path.parts
    for i in range(len(parts) - 3, -1, -1):
        if parts[i] in NBGRADER_FOLDERS and len(parts) - i >= 4:
            return NbgraderPlace(parts[i + 1], parts[i + 2], Path(*parts[i + 3 :]).as_posix())
    return None


def expand(
    arguments: Sequence[str], *, output_dir: Path | None, in_place: bool, dry_run: bool
) -> list[BatchInput]:
    """Every notebook the arguments name, once each, in a stable order; an argument that names
    none becomes one entry with its ``problem`` set."""
    found: list[tuple[Path, str]] = []  # (notebook, argument)
    problems: list[BatchInput] = []
    skip = output_dir.resolve() if output_dir is not None else None
    for argument in arguments:
        paths = _notebooks_of(argument, skip)
        if not paths:
            what = "no notebook matches" if glob.has_magic(argument) else "no notebook in the folder"
            problems.append(BatchInput(Path(argument), None, Path(argument), f"{argument}: {what}"))
        found.extend((path, argument) for path in paths)
    seen: set[Path] = set()
    unique = []
    for path, argument in found:
        key = path.resolve()
        if key not in seen:
            seen.add(key)
            unique.append((path, argument))
    root = _common_root([_base_of(argument) for _, argument in unique])
    inputs = [_place(path, root, output_dir, in_place, dry_run) for path, _ in unique]
    return inputs + problems


def _notebooks_of(argument: str, skip: Path | None) -> list[Path]:
    if glob.has_magic(argument):
        matches = sorted(glob.glob(argument, recursive=True))
        return [Path(m) for m in matches if m.endswith(".ipynb") and os.path.isfile(m) and _wanted(Path(m))]
    path = Path(argument)
    if path.is_dir():
        return sorted(
            p
            for p in path.rglob("*.ipynb")
            if p.is_file() and _wanted(p.relative_to(path)) and not _inside(p, skip)
        )
    return [path]  # a file, or a missing one: the job reports what is wrong with it


def _wanted(relative: Path) -> bool:
    """Not a checkpoint, not in a hidden folder, not a notebook nbrefine wrote."""
    hidden = any(part.startswith(".") and part not in (".", "..") for part in relative.parts)
    return not hidden and not relative.name.endswith(_OUTPUT_SUFFIXES)


def _inside(path: Path, folder: Path | None) -> bool:
    return folder is not None and path.resolve().is_relative_to(folder)


def _base_of(argument: str) -> Path:
    """The folder an argument's notebooks are taken relative to."""
    if glob.has_magic(argument):
        fixed = []
        for part in Path(argument).parts:
            if glob.has_magic(part):
                break
            fixed.append(part)
        return Path(*fixed).resolve() if fixed else Path.cwd()
    path = Path(argument)
    return path.resolve() if path.is_dir() else path.resolve().parent


def _common_root(bases: list[Path]) -> Path:
    if not bases:
        return Path.cwd()
    return Path(os.path.commonpath([str(b) for b in bases]))


def _place(path: Path, root: Path, output_dir: Path | None, in_place: bool, dry_run: bool) -> BatchInput:
    if output_dir is not None:
        relative = path.resolve().relative_to(root)
        target = output_dir / relative
        return BatchInput(path, None if dry_run else target, target.parent)
    if in_place:
        return BatchInput(path, None if dry_run else path, path.parent)
    output = path.with_name(path.stem + ".fixed.ipynb")
    return BatchInput(path, None if dry_run else output, path.parent)
