"""``nbrefine fix`` over many notebooks: ``--jobs 2`` against ``--jobs 1``, side by side in one run.

    .venv/bin/python bench/bench_batch.py [--notebooks 20] [--rounds 2] [--json out/bench_batch.json]

It writes N small notebooks (an analysis of made-up sales: imports, a computation that takes a
fraction of a second, one misspelt name the offline tier fixes, a check that passes) and runs the
real command, ``nbrefine fix DIR --provider offline --quiet``, once with ``--jobs 1`` and once
with ``--jobs 2`` per round, alternating, so that the load of the shared machine hits both alike.
Throughput is notebooks per second of wall time, the whole command included (worker start-up,
kernels, repairs, writing the notebooks and the report). Per-notebook overhead comes from the
batch's own JSON report: kernel start, loading the extension (``%load_ext nbrefine`` and its
settings), the cells, the shutdown; and when the workers were ready (their start-up, paid once).
Target (issue 14): at least 1.7x the throughput of --jobs 1 with --jobs 2 on a 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

ROOT = Path(__file__).resolve().parent.parent
TARGET = 1.7

CELLS = [
    "import math\nimport statistics\nimport random",
    "random.seed({seed})\nsales = [{{'region': random.choice('NESW'), 'units': random.randint(1, 9), "
    "'price': random.random() * 10}} for _ in range(20_000)]",
    # about a fifth of a second of CPU: the kind of work a notebook's cells do
    "revenue = {{}}\nfor row in sales:\n    revenue[row['region']] = revenue.get(row['region'], 0) + "
    "row['units'] * row['price']\nspread = statistics.pstdev(math.log1p(r['price']) for r in sales)",
    "best = max(revenu, key=revenue.get)\nbest",  # NameError: the offline tier fixes the typo
    "assert set(revenue) <= set('NESW')\nround(spread, 3)",
]


def write_notebooks(folder: Path, count: int) -> None:
    for i in range(count):
        cells = [new_markdown_cell(f"# Sales {i}")]
        cells += [new_code_cell(src.format(seed=i)) for src in CELLS]
        nb = new_notebook(cells=cells)
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nbformat.write(nb, folder / f"sales_{i:02d}.ipynb")


def run(folder: Path, jobs: int, work: Path) -> dict[str, Any]:
    out = work / f"out-j{jobs}-{time.monotonic_ns()}"
    report = out / "report.json"
    command = [sys.executable, "-m", "nbrefine.cli", "fix", str(folder), "--provider", "offline",
               "--jobs", str(jobs), "-o", str(out), "--quiet", "--report", str(report)]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NBREFINE_", "ANTHROPIC_"))}
    started = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True, env=env, cwd=work)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"nbrefine fix --jobs {jobs} exited {proc.returncode}:\n{proc.stdout}{proc.stderr}")
    data = json.loads(report.read_text())
    return {"jobs": jobs, "wall_s": wall, "report": data}


def summarise(runs: list[dict[str, Any]], count: int) -> dict[str, Any]:
    by_jobs: dict[int, list[dict[str, Any]]] = {1: [], 2: []}
    for r in runs:
        by_jobs[r["jobs"]].append(r)
    throughput = {j: [count / r["wall_s"] for r in rs] for j, rs in by_jobs.items()}
    ratios = [two / one for one, two in zip(throughput[1], throughput[2], strict=True)]
    overhead: dict[str, list[float]] = {}
    ready: list[float] = []
    for r in runs:
        for key, value in r["report"]["summary"]["mean_per_notebook_s"].items():
            overhead.setdefault(key, []).append(value or 0.0)
        ready.extend(r["report"].get("workers_ready_s") or [])
    return {
        "notebooks": count,
        "wall_s": {j: [round(r["wall_s"], 2) for r in rs] for j, rs in by_jobs.items()},
        "throughput_nb_per_s": {j: [round(t, 3) for t in ts] for j, ts in throughput.items()},
        "ratio_per_round": [round(x, 3) for x in ratios],
        "ratio_median": round(statistics.median(ratios), 3),
        "mean_per_notebook_s": {k: round(statistics.mean(v), 3) for k, v in overhead.items()},
        "workers_ready_s": {"median": round(statistics.median(ready), 3), "max": round(max(ready), 3)},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notebooks", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=2, help="--jobs 1 and --jobs 2 runs, alternating")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = parser.parse_args()
    load_before = os.getloadavg()
    print(f"machine: {os.cpu_count()} CPUs, Python {platform.python_version()} on {platform.system()}")
    print(f"load average {' '.join(f'{v:.2f}' for v in load_before)} at the start")
    runs = []
    with tempfile.TemporaryDirectory(prefix="nbrefine-bench-batch-") as tmp:
        work = Path(tmp)
        folder = work / "notebooks"
        folder.mkdir()
        write_notebooks(folder, args.notebooks)
        for round_ in range(args.rounds):
            order = (1, 2) if round_ % 2 == 0 else (2, 1)
            for jobs in order:
                result = run(folder, jobs, work)
                print(f"round {round_ + 1}: --jobs {jobs}: {result['wall_s']:.1f} s", flush=True)
                runs.append(result)
    figures = summarise(runs, args.notebooks)
    figures["load_average"] = {"start": load_before, "end": os.getloadavg()}
    print_table(figures)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")
    return 0


def print_table(f: dict[str, Any]) -> None:
    n = f["notebooks"]
    print()
    print(f"| {n} notebooks | wall time (s), per round | throughput (notebooks/s) |")
    print("|---|---|---|")
    for jobs in (1, 2):
        walls = ", ".join(f"{w:.1f}" for w in f["wall_s"][jobs])
        rates = ", ".join(f"{t:.3f}" for t in f["throughput_nb_per_s"][jobs])
        print(f"| --jobs {jobs} | {walls} | {rates} |")
    ratio = f["ratio_median"]
    verdict = "PASS" if ratio >= TARGET else "MISS"
    rounds = ", ".join(f"{r:.2f}" for r in f["ratio_per_round"])
    print(f"\n--jobs 2 / --jobs 1 throughput: {ratio:.2f}x median (rounds: {rounds})")
    print(f"target >= {TARGET}x: {verdict}")
    m = f["mean_per_notebook_s"]
    print("\nper notebook (mean over every run, seconds):")
    for key, label in (
        ("kernel_start_s", "kernel start"),
        ("setup_s", "extension load (%load_ext nbrefine + settings)"),
        ("cells_s", "cells, repairs included"),
        ("shutdown_s", "kernel shutdown"),
        ("total_s", "whole job"),
    ):
        print(f"  {label:<48}{m.get(key, 0):>7.2f}")
    w = f["workers_ready_s"]
    label = "worker ready, from the batch's start (once)"
    print(f"  {label:<48}{w['median']:>7.2f} (max {w['max']:.2f})")
    load = f["load_average"]
    print(f"\nload average: {load['start'][0]:.2f} at the start, {load['end'][0]:.2f} at the end")


if __name__ == "__main__":
    sys.exit(main())
