"""Writing files atomically: whole or not at all, with missing folders made only then.

May import: :mod:`nbrefine._errors` and the standard library.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, TextIO, cast

from .._errors import BadInputError

__all__ = ["atomic_text", "check_writable", "write_atomic"]


@contextlib.contextmanager
def _replacing(path: Path, *, text: bool, mode: int | None = None) -> Iterator[IO[Any]]:
    """A file to write ``path`` through: a temporary file in the same folder that replaces
    ``path`` (``os.replace``) only when the block ends without an error. ``mode``: its permission
    bits (default: what the umask gives a new file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w" if text else "wb", encoding="utf-8" if text else None) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        if mode is None:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def atomic_text(path: Path) -> Iterator[TextIO]:
    """A text file to write ``path`` through, piece by piece: it appears, whole, only when the
    block ends without an error."""
    with _replacing(path, text=True) as fh:
        yield cast(TextIO, fh)


def write_atomic(path: Path, data: str | bytes, *, mode: int | None = None) -> None:
    """Write ``data`` to ``path``: ``path`` holds either its old content or the new one, never
    half of it. Missing folders are made (only now, so a run that fails or is interrupted leaves
    none behind)."""
    with _replacing(path, text=False, mode=mode) as fh:
        fh.write(data.encode("utf-8") if isinstance(data, str) else data)


def check_writable(path: Path, what: str) -> None:
    """:class:`BadInputError` now, before a run, when ``path`` could not be written at its end.
    Missing folders are fine: the writers above make them then (a fresh clone has no ``out/``)."""
    if path.is_dir():
        raise BadInputError(f"{what} {path}: is a folder")
    folder = path.parent
    while not os.path.lexists(folder) and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise BadInputError(f"{what} {path}: {folder} is not a folder")
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as err:
        raise BadInputError(f"{what} {path}: cannot write in {folder}: {err.strerror or err}") from None
