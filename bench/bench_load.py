"""What ``%load_ext nbrefine`` and the passing cells after it cost, side by side with a revision.

Each round starts one fresh interpreter per code version (this checkout, and REV checked out
with ``git worktree`` into a temporary folder). In it IPython is imported and an
``InteractiveShell`` made and warmed up (one cell) before anything is timed, as in a kernel
where the user types ``%load_ext nbrefine``. Then, timed one by one: a passing cell ``x = 1``
before the load (IPython's own cost), ``shell.run_line_magic('load_ext', 'nbrefine')``, the
same cell with automatic mode off, and again after ``%config Refine.auto = 'on'`` (a passing
cell takes the same path under ``offer``). Cells are stored in the history, as a notebook's are.
Rounds alternate the order of the two versions, so both see the same machine load.

Also printed: the top-level packages (and nbrefine's own modules) that the load imported and
that the cells after it imported, so a heavy import coming back shows; ``--importtime N``
prints the N most expensive imports of this checkout's load (``python -X importtime``).

Target (issue 20): load <= 50 ms (median), nothing imported by a passing cell.

Usage: .venv/bin/python bench/bench_load.py [--rev 8922395] [--rounds 15] [--importtime 15]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from _revisions import worktree

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, sys, time
from IPython.core.interactiveshell import InteractiveShell

shell = InteractiveShell.instance()
shell.run_cell("pass", store_history=True)  # IPython's first-cell costs, paid before timing

def timed(code):
    before = set(sys.modules)
    started = time.perf_counter()
    code()
    ms = (time.perf_counter() - started) * 1000
    return ms, sorted(set(sys.modules) - before)

def cell():
    assert shell.run_cell("x = 1", store_history=True).success

base, _ = timed(cell)
print("-- load --", file=sys.stderr, flush=True)  # where -X importtime's lines of the load start
load, at_load = timed(lambda: shell.run_line_magic("load_ext", "nbrefine"))
print("-- loaded --", file=sys.stderr, flush=True)
off, after_off = timed(cell)
shell.run_line_magic("config", "Refine.auto = 'on'")
on, after_on = timed(cell)
import nbrefine
print(json.dumps({"file": nbrefine.__file__, "ms": {"cell before load": base, "load_ext": load,
    "cell, auto off": off, "cell, auto on": on}, "load": at_load, "cells": after_off + after_on}))
"""

FIGURES = ("load_ext", "cell before load", "cell, auto off", "cell, auto on")


@dataclass
class Version:
    """What the rounds measured of one code version: every figure, and the latest module lists."""

    ms: dict[str, list[float]] = field(default_factory=lambda: {name: [] for name in FIGURES})
    at_load: list[str] = field(default_factory=list)
    by_cells: list[str] = field(default_factory=list)


def measure(tree: Path, version: Version, pycache: Path, importtime: bool = False) -> str:
    """One fresh interpreter on ``tree``'s code, its figures added to ``version``; its stderr
    (the import times, with ``importtime``)."""
    # Byte code is written (to ``pycache``, not into the trees), as an installed package has it:
    # compiling every module at each load would be timed otherwise.
    env = dict(os.environ, PYTHONPATH=str(tree), PYTHONPYCACHEPREFIX=str(pycache))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    flags = ["-X", "importtime"] if importtime else []
    done = subprocess.run(
        [sys.executable, *flags, "-c", CHILD],
        env=env,
        cwd=tempfile.gettempdir(),  # not the checkout: `-c` puts the working folder first on sys.path
        capture_output=True,
        text=True,
        check=True,
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if not str(result["file"]).startswith(str(tree)):
        raise SystemExit(f"{tree}: the child imported nbrefine from {result['file']}")
    for name, ms in result["ms"].items():
        version.ms[name].append(float(ms))
    version.at_load, version.by_cells = list(result["load"]), list(result["cells"])
    return done.stderr


def packages(modules: list[str]) -> str:
    """Modules grouped by top-level package, with counts; nbrefine's own named one by one."""
    counts = Counter(name.split(".")[0] for name in modules)
    ours = sorted(name for name in modules if name.startswith("nbrefine."))
    groups = ", ".join(f"{name} ({n})" for name, n in sorted(counts.items(), key=lambda kv: -kv[1]))
    return (groups or "nothing") + (f"\n    nbrefine: {' '.join(ours)}" if 0 < len(ours) <= 25 else "")


def slowest_imports(stderr: str, count: int) -> list[str]:
    """The ``count`` imports of the load with the largest cumulative time (``-X importtime``)."""
    section = stderr.split("-- load --", 1)[-1].split("-- loaded --", 1)[0]
    rows = []
    for line in section.splitlines():
        if line.startswith("import time:") and "|" in line:
            _, cumulative, name = (part.strip() for part in line.split(":", 1)[1].split("|"))
            if cumulative.isdigit():
                rows.append((int(cumulative), name))
    return [f"{us / 1000:7.1f} ms  {name}" for us, name in sorted(rows, reverse=True)[:count]]


def run_rounds(trees: dict[str, Path], rounds: int, pycache: Path) -> dict[str, Version]:
    """Alternate the versions round by round, so that machine load hits both alike; a first,
    untimed run of each writes its byte code."""
    for tree in trees.values():
        measure(tree, Version(), pycache)
    seen = {label: Version() for label in trees}
    for number in range(rounds):
        order = list(trees.items())
        for label, tree in order if number % 2 == 0 else order[::-1]:
            measure(tree, seen[label], pycache)
        print(f"round {number + 1}/{rounds} done", file=sys.stderr)
    return seen


def report(seen: dict[str, Version], rounds: int) -> None:
    load = os.getloadavg()
    print(f"%load_ext nbrefine in a fresh IPython shell, {rounds} rounds per version (alternating)")
    print(f"load average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} ({os.cpu_count()} cores)")
    print(f"{'version':<16} {'figure':<18} {'median ms':>9} {'max ms':>7}")
    for label, version in seen.items():
        for name in FIGURES:
            values = version.ms[name]
            print(f"{label:<16} {name:<18} {statistics.median(values):9.1f} {max(values):7.1f}")
    for label, version in seen.items():
        print(f"{label}: imported by the load: {packages(version.at_load)}")
        print(f"{label}: imported by the two passing cells after it: {packages(version.by_cells)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0], allow_abbrev=False)
    parser.add_argument("--rev", help="an earlier revision to compare with, side by side")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--importtime", type=int, default=0, metavar="N", help="the N slowest imports")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        trees = {"this checkout": ROOT}
        if args.rev:
            trees[args.rev] = stack.enter_context(worktree(args.rev, Path(tmp) / "old"))
        pycache = Path(tmp) / "pycache"
        seen = run_rounds(trees, args.rounds, pycache)
        stderr = measure(ROOT, Version(), pycache, importtime=True) if args.importtime else ""
    report(seen, args.rounds)
    if args.importtime:
        print(f"the {args.importtime} slowest imports of this checkout's load (cumulative, -X importtime):")
        print("\n".join(slowest_imports(stderr, args.importtime)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
