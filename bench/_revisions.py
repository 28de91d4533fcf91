"""What the benches that compare this checkout with an earlier revision share: that revision,
checked out with ``git worktree`` into a folder, and removed again whatever happens."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@contextlib.contextmanager
def worktree(rev: str, where: Path) -> Iterator[Path]:
    """``rev`` checked out (detached) at ``where`` for the block."""
    git = ["git", "-C", str(ROOT), "worktree"]
    subprocess.run([*git, "add", "-q", "--detach", str(where), rev], check=True)
    try:
        yield where
    finally:
        subprocess.run([*git, "remove", "--force", str(where)], check=False)
