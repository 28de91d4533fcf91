"""``nbrefine fix`` over many notebooks: ``--jobs 2`` against ``--jobs 1``, side by side in one run.

    .venv/bin/python bench/bench_batch.py [--notebooks 20] [--rounds 2] [--json out/bench_batch.json]
    .venv/bin/python bench/bench_batch.py --dask [--notebooks 20] [--rounds 2]

It writes N small notebooks (an analysis of made-up sales: imports, a computation that takes a
fraction of a second, one misspelt name the offline tier fixes, a check that passes) and runs the
real command, ``nbrefine fix DIR --provider offline --quiet``, once with ``--jobs 1`` and once
with ``--jobs 2`` per round, alternating, so that the load of the shared machine hits both alike.
Throughput is notebooks per second of wall time, the whole command included (worker start-up,
kernels, repairs, writing the notebooks and the report). Per-notebook overhead comes from the
batch's own JSON report: kernel start, loading the extension (``%load_ext nbrefine`` and its
settings), the cells, the shutdown; and when the workers were ready (their start-up, paid once).
Target (issue 14): at least 1.7x the throughput of --jobs 1 with --jobs 2 on a 2-core machine.

With ``--dask`` it starts a local Dask scheduler and two worker processes of one thread each
(``python -m dask scheduler`` / ``python -m dask worker --nworkers 2 --nthreads 1``, on
loopback), then compares ``--cluster ADDRESS`` with ``--jobs 2``, alternating in the same way.
The cluster is started once, before the first round, as a real one runs before the batch and
after it; its workers import nbclient and nbrefine in the first run (``workers_ready_s``) and
keep them. Target (issue 14): within 15% of the throughput of ``--jobs 2``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

ROOT = Path(__file__).resolve().parent.parent
TARGET = 1.7
DASK_TARGET = 0.85  # the cluster's throughput, as a share of --jobs 2's

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


def run(folder: Path, jobs: int | str, work: Path) -> dict[str, Any]:
    """``jobs``: a number of local jobs, or a Dask scheduler's address."""
    out = work / f"out-{time.monotonic_ns()}"
    report = out / "report.json"
    where = ["--cluster", jobs] if isinstance(jobs, str) else ["--jobs", str(jobs)]
    command = [sys.executable, "-m", "nbrefine.cli", "fix", str(folder), "--provider", "offline",
               *where, "-o", str(out), "--quiet", "--report", str(report)]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NBREFINE_", "ANTHROPIC_"))}
    started = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True, env=env, cwd=work)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"nbrefine fix {label(jobs)} exited {proc.returncode}:\n{proc.stdout}{proc.stderr}")
    data = json.loads(report.read_text())
    return {"jobs": jobs, "wall_s": wall, "report": data}


def summarise(runs: list[dict[str, Any]], count: int, pair: tuple[Any, Any]) -> dict[str, Any]:
    """``pair``: (the baseline, the one compared with it), as ``run`` got them."""
    by_jobs: dict[Any, list[dict[str, Any]]] = {pair[0]: [], pair[1]: []}
    for r in runs:
        by_jobs[r["jobs"]].append(r)
    throughput = {j: [count / r["wall_s"] for r in rs] for j, rs in by_jobs.items()}
    ratios = [two / one for one, two in zip(throughput[pair[0]], throughput[pair[1]], strict=True)]
    overhead: dict[str, dict[str, list[float]]] = {label(j): {} for j in pair}
    ready: list[float] = []
    for r in runs:
        for key, value in r["report"]["summary"]["mean_per_notebook_s"].items():
            overhead[label(r["jobs"])].setdefault(key, []).append(value or 0.0)
        ready.extend(r["report"].get("workers_ready_s") or [])
    return {
        "notebooks": count,
        "wall_s": {j: [round(r["wall_s"], 2) for r in rs] for j, rs in by_jobs.items()},
        "throughput_nb_per_s": {j: [round(t, 3) for t in ts] for j, ts in throughput.items()},
        "ratio_per_round": [round(x, 3) for x in ratios],
        "ratio_median": round(statistics.median(ratios), 3),
        "mean_per_notebook_s": {
            where: {k: round(statistics.mean(v), 3) for k, v in means.items()}
            for where, means in overhead.items()
        },
        "workers_ready_s": {"median": round(statistics.median(ready), 3), "max": round(max(ready), 3)},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notebooks", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=2, help="--jobs 1 and --jobs 2 runs, alternating")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    parser.add_argument(
        "--dask", action="store_true", help="compare a local Dask cluster of 2 worker processes with --jobs 2"
    )
    args = parser.parse_args()
    load_before = os.getloadavg()
    print(f"machine: {os.cpu_count()} CPUs, Python {platform.python_version()} on {platform.system()}")
    print(f"load average {' '.join(f'{v:.2f}' for v in load_before)} at the start")
    runs = []
    with tempfile.TemporaryDirectory(prefix="nbrefine-bench-batch-") as tmp, contextlib.ExitStack() as stack:
        work = Path(tmp)
        folder = work / "notebooks"
        folder.mkdir()
        write_notebooks(folder, args.notebooks)
        pair: tuple[Any, Any] = (2, stack.enter_context(dask_cluster(work))) if args.dask else (1, 2)
        for round_ in range(args.rounds):
            order = pair if round_ % 2 == 0 else pair[::-1]
            for jobs in order:
                result = run(folder, jobs, work)
                print(f"round {round_ + 1}: {label(jobs)}: {result['wall_s']:.1f} s", flush=True)
                runs.append(result)
    figures = summarise(runs, args.notebooks, pair)
    figures["load_average"] = {"start": load_before, "end": os.getloadavg()}
    figures["compared"] = [label(j) for j in pair]
    print_table(figures, pair)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")
    return 0


def label(jobs: int | str) -> str:
    return f"--jobs {jobs}" if isinstance(jobs, int) else "--cluster (2 Dask workers)"


def print_table(f: dict[str, Any], pair: tuple[Any, Any]) -> None:
    n = f["notebooks"]
    print()
    print(f"| {n} notebooks | wall time (s), per round | throughput (notebooks/s) |")
    print("|---|---|---|")
    for jobs in pair:
        walls = ", ".join(f"{w:.1f}" for w in f["wall_s"][jobs])
        rates = ", ".join(f"{t:.3f}" for t in f["throughput_nb_per_s"][jobs])
        print(f"| {label(jobs)} | {walls} | {rates} |")
    ratio = f["ratio_median"]
    target = TARGET if pair == (1, 2) else DASK_TARGET
    verdict = "PASS" if ratio >= target else "MISS"
    rounds = ", ".join(f"{r:.2f}" for r in f["ratio_per_round"])
    print(f"\n{label(pair[1])} / {label(pair[0])} throughput: {ratio:.2f}x median (rounds: {rounds})")
    print(f"target >= {target}x: {verdict}")
    m = f["mean_per_notebook_s"]
    where = [label(j) for j in pair]
    print("\nper notebook (mean over the runs of each, seconds):")
    print(f"  {'':<48}" + "".join(f"{w.split(' (')[0]:>14}" for w in where))
    for key, what in (
        ("kernel_start_s", "kernel start"),
        ("setup_s", "extension load (%load_ext nbrefine + settings)"),
        ("cells_s", "cells, repairs included"),
        ("shutdown_s", "kernel shutdown"),
        ("total_s", "whole job"),
    ):
        print(f"  {what:<48}" + "".join(f"{m[w].get(key, 0):>14.2f}" for w in where))
    w = f["workers_ready_s"]
    what = "worker ready, from the batch's start (once)"
    print(f"  {what:<48}{w['median']:>7.2f} (max {w['max']:.2f})")
    load = f["load_average"]
    print(f"\nload average: {load['start'][0]:.2f} at the start, {load['end'][0]:.2f} at the end")


@contextlib.contextmanager
def dask_cluster(work: Path) -> Iterator[str]:
    """A scheduler and 2 single-threaded worker processes (with their nannies) on loopback."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    address = f"tcp://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NBREFINE_", "ANTHROPIC_"))}
    workers = ["--nworkers", "2", "--nthreads", "1", "--host", "127.0.0.1", "--no-dashboard"]
    commands = [
        ["scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
        ["worker", address, *workers, "--local-directory", str(work)],
    ]
    procs = []
    try:
        for args in commands:
            log = (work / f"dask-{args[0]}.log").open("wb")
            command = [sys.executable, "-m", "dask", *args]
            logged = {"stdout": log, "stderr": subprocess.STDOUT}
            procs.append(subprocess.Popen(command, env=env, start_new_session=True, **logged))
        from distributed import Client

        with Client(address, timeout="60s", set_as_default=False) as client:
            client.wait_for_workers(2, timeout=120)
        yield address
    finally:
        for proc in reversed(procs):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(20)


if __name__ == "__main__":
    sys.exit(main())
