"""``nbrefine fix`` over many notebooks: ``--jobs 2`` against ``--jobs 1``, and this checkout
against an earlier revision, side by side in one run.

    .venv/bin/python bench/bench_batch.py [--notebooks 20] [--rounds 2] [--rev REV] [--json FILE]
    .venv/bin/python bench/bench_batch.py --dask [--notebooks 20] [--rounds 2]

It writes N small notebooks (an analysis of made-up sales: imports, 20,000 rows and a loop over
them, about 30 ms of CPU in all, one misspelt name the offline tier fixes, a check that passes) and runs the
real command, ``nbrefine fix DIR --provider offline --quiet``, with ``--jobs 1`` and ``--jobs 2``
per round (and, with ``--rev``, the same with REV checked out by ``git worktree`` into a temporary
folder, its kernels importing it too), the order alternating from round to round, so that the
load of the shared machine hits every variant alike. Throughput is notebooks per second of wall
time, the whole command included (worker start-up, kernels, repairs, writing the notebooks and the
report); the ratio of --jobs 2 to --jobs 1 is taken within a round, and its median shown. Each
version's bytecode is compiled first (``compileall``), as an installed copy has it.

Per notebook, from the batch's JSON report, median and maximum over every notebook of every run
of a variant, each part as long as it holds up the job: the extension's load with its settings
(``%load_ext nbrefine``, the ``%config`` lines, the shared request gate), the kernel start (the
wait for a kernel that answers, and the launch of the next notebook's kernel, when started
ahead), the shutdown (the wait for the kernel to exit, or the hand-over to a background thread),
and the notebook's own cells, repairs included; and when the workers were ready (their start-up,
paid once). Targets (issue 20): the extension's load and settings <= 0.2 s per notebook; --jobs 2
at least 1.8x the throughput of --jobs 1 on a 2-core machine.

Each round also measures what the machine itself gives a second process: a pure-Python loop (no
I/O, no memory traffic to speak of) in one process, then the same loop in two processes started
together, and the ratio of their throughputs. A virtual machine's two "cores" may share a physical
one, or its host's load; no batch can scale better than that ratio, nor better than the machine's
cores over the cores ``--jobs 1`` keeps busy. The bench prints both limits, the lower one, and the
``--jobs 2`` ratio as a share of it.

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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
from _revisions import worktree
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

ROOT = Path(__file__).resolve().parent.parent
TARGET = 1.8
SETUP_TARGET_S = 0.2
DASK_TARGET = 0.85  # the cluster's throughput, as a share of --jobs 2's
HERE = "this checkout"

CELLS = [
    "import math\nimport statistics\nimport random",
    "random.seed({seed})\nsales = [{{'region': random.choice('NESW'), 'units': random.randint(1, 9), "
    "'price': random.random() * 10}} for _ in range(20_000)]",
    # a loop over the rows (about 15 ms of CPU, the 20,000 rows as long again): a notebook's own work
    "revenue = {{}}\nfor row in sales:\n    revenue[row['region']] = revenue.get(row['region'], 0) + "
    "row['units'] * row['price']\nspread = statistics.pstdev(math.log1p(r['price']) for r in sales)",
    "best = max(revenu, key=revenue.get)\nbest",  # NameError: the offline tier fixes the typo
    "assert set(revenue) <= set('NESW')\nround(spread, 3)",
]
#: (label, how each is computed from a notebook's timings)
PARTS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("setup", "extension load and settings", ("setup_s",)),
    ("start", "kernel start, on the job's path", ("kernel_start_s", "spare_start_s")),
    ("shutdown", "kernel shutdown, on the job's path", ("shutdown_s",)),
    ("cells", "the notebook's cells, repairs included", ("cells_s",)),
    ("total", "whole job", ("total_s",)),
)


@dataclass(frozen=True)
class Variant:
    label: str  # the code's version: this checkout or REV
    tree: Path
    jobs: int | str  # a number of local jobs, or a Dask scheduler's address

    @property
    def name(self) -> str:
        where = f"--jobs {self.jobs}" if isinstance(self.jobs, int) else "--cluster (2 Dask workers)"
        return where if self.label == HERE else f"{self.label} {where}"


def write_notebooks(folder: Path, count: int) -> None:
    for i in range(count):
        cells = [new_markdown_cell(f"# Sales {i}")]
        cells += [new_code_cell(src.format(seed=i)) for src in CELLS]
        nb = new_notebook(cells=cells)
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nbformat.write(nb, folder / f"sales_{i:02d}.ipynb")


def run(folder: Path, variant: Variant, work: Path) -> dict[str, Any]:
    out = work / f"out-{time.monotonic_ns()}"
    report = out / "report.json"
    jobs = variant.jobs
    where = ["--cluster", jobs] if isinstance(jobs, str) else ["--jobs", str(jobs)]
    command = [sys.executable, "-m", "nbrefine.cli", "fix", str(folder), "--provider", "offline",
               *where, "-o", str(out), "--quiet", "--report", str(report)]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NBREFINE_", "ANTHROPIC_"))}
    env["PYTHONPATH"] = str(variant.tree)  # the command and its kernels import this version
    cpu_before = _machine_busy_s()
    started = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True, env=env, cwd=work)
    wall = time.perf_counter() - started
    cpu = _machine_busy_s() - cpu_before
    if proc.returncode != 0:
        raise SystemExit(f"nbrefine fix {variant.name} exited {proc.returncode}:\n{proc.stdout}{proc.stderr}")
    return {"variant": variant, "wall_s": wall, "cpu_s": cpu, "report": json.loads(report.read_text())}


def _machine_busy_s() -> float:
    """The whole machine's busy CPU seconds so far (/proc/stat: every core's time not idle or
    waiting on I/O). The command's kernels are started detached and never waited for by it, so
    the command's own rusage misses them; on a quiet machine (see the load average) the
    machine's figure is the command's."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    ticks = [int(x) for x in fields[:8]]  # user nice system idle iowait irq softirq steal
    busy = sum(ticks) - ticks[3] - ticks[4]
    return busy / os.sysconf("SC_CLK_TCK")


def parts(timings: dict[str, Any]) -> dict[str, float]:
    return {key: sum(float(timings.get(k) or 0.0) for k in keys) for key, _, keys in PARTS}


def summarise(runs: list[dict[str, Any]], count: int, variants: list[Variant]) -> dict[str, Any]:
    figures: dict[str, Any] = {"notebooks": count, "variants": {}}
    for variant in variants:
        mine = [r for r in runs if r["variant"] == variant]
        per_notebook: dict[str, list[float]] = {key: [] for key, _, _ in PARTS}
        ready: list[float] = []
        for r in mine:
            for entry in r["report"]["notebooks"]:
                for key, value in parts(entry.get("timings") or {}).items():
                    per_notebook[key].append(value)
            ready.extend(r["report"].get("workers_ready_s") or [])
        figures["variants"][variant.name] = {
            "wall_s": [round(r["wall_s"], 2) for r in mine],
            "throughput_nb_per_s": [round(count / r["wall_s"], 3) for r in mine],
            # cores kept busy on average (the whole machine's, see _machine_busy_s) per wall second
            "cores_busy": [round(r["cpu_s"] / r["wall_s"], 2) for r in mine],
            "per_notebook_s": {
                key: {"median": round(statistics.median(v), 3), "max": round(max(v), 3)}
                for key, v in per_notebook.items()
                if v
            },
            "workers_ready_s": {"median": round(statistics.median(ready), 3), "max": round(max(ready), 3)}
            if ready
            else None,
        }
    figures["ratios"] = ratios(figures["variants"], variants)
    return figures


def ratios(by_name: dict[str, Any], variants: list[Variant]) -> dict[str, Any]:
    """Per version, the throughput of its second variant over its first's, round by round."""
    found = {}
    for label in dict.fromkeys(v.label for v in variants):
        one, two = (by_name[v.name]["throughput_nb_per_s"] for v in variants if v.label == label)
        per_round = [b / a for a, b in zip(one, two, strict=True)]
        found[label] = {
            "per_round": [round(x, 3) for x in per_round],
            "median": round(statistics.median(per_round), 3),
        }
    return found


def variants_of(args: argparse.Namespace, old: Path | None, cluster: str | None) -> list[Variant]:
    if cluster is not None:
        return [Variant(HERE, ROOT, 2), Variant(HERE, ROOT, cluster)]
    found = [Variant(HERE, ROOT, 1), Variant(HERE, ROOT, 2)]
    if old is not None:
        found += [Variant(args.rev, old, 1), Variant(args.rev, old, 2)]
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0], allow_abbrev=False)
    parser.add_argument("--notebooks", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=2, help="runs of each variant, alternating")
    parser.add_argument("--rev", help="also run this earlier revision (git worktree), side by side")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    parser.add_argument(
        "--dask", action="store_true", help="compare a local Dask cluster of 2 worker processes with --jobs 2"
    )
    args = parser.parse_args()
    if args.dask and args.rev:
        parser.error("--rev compares --jobs runs only")
    load_before = os.getloadavg()
    print(f"machine: {os.cpu_count()} CPUs, Python {platform.python_version()} on {platform.system()}")
    print(f"load average {' '.join(f'{v:.2f}' for v in load_before)} at the start")
    runs = []
    scaling: list[float] = []
    with tempfile.TemporaryDirectory(prefix="nbrefine-bench-batch-") as tmp, contextlib.ExitStack() as stack:
        work = Path(tmp)
        folder = work / "notebooks"
        folder.mkdir()
        write_notebooks(folder, args.notebooks)
        old = stack.enter_context(worktree(args.rev, work / "old")) if args.rev else None
        cluster = stack.enter_context(dask_cluster(work)) if args.dask else None
        variants = variants_of(args, old, cluster)
        for tree in dict.fromkeys(v.tree for v in variants):
            compile_bytecode(tree)
        for round_ in range(args.rounds):
            for variant in variants if round_ % 2 == 0 else variants[::-1]:
                result = run(folder, variant, work)
                print(f"round {round_ + 1}: {variant.name}: {result['wall_s']:.1f} s", flush=True)
                runs.append(result)
            if not args.dask:
                scaling.append(machine_scaling())
                print(f"round {round_ + 1}: 2-process scaling {scaling[-1]:.2f}x", flush=True)
    figures = summarise(runs, args.notebooks, variants)
    if scaling:
        figures["machine_scaling"] = {"per_round": [round(x, 3) for x in scaling],
                                      "median": round(statistics.median(scaling), 3)}  # fmt: skip
    figures["load_average"] = {"start": load_before, "end": os.getloadavg()}
    print_table(figures, variants)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")
    return 0


#: A pure-Python loop of about 0.3 s, timed in the process: it says it is up, then waits for a
#: line on stdin to start.
_LOOP = """
import sys, time
print("up", flush=True)
sys.stdin.readline()
t = time.perf_counter()
s = 0
for i in range(2_500_000):
    s += i * i % 7
print(time.perf_counter() - t, flush=True)
"""


def machine_scaling() -> float:
    """The throughput of the loop in two processes at once over its throughput in one: what the
    machine gives a second process when nothing else is shared (started first, timed from the
    line that starts them, so that the interpreters' start is not counted)."""

    def together(count: int) -> float:
        procs = [subprocess.Popen([sys.executable, "-c", _LOOP], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True) for _ in range(count)]  # fmt: skip
        for proc in procs:  # every interpreter started and waiting
            assert proc.stdout is not None
            proc.stdout.readline()
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        return max(float(proc.communicate()[0]) for proc in procs)

    ones, twos = [], []
    for _ in range(5):  # alternating, the medians: on the shared host, medians of 3 gave 1.4x to 2.3x
        ones.append(together(1))
        twos.append(together(2))
    return 2 * statistics.median(ones) / statistics.median(twos)


def compile_bytecode(tree: Path) -> None:
    """Compile the version's modules, as pip does when it installs them: where the environment
    sets PYTHONDONTWRITEBYTECODE, every kernel would otherwise compile nbrefine from source (about
    half a second of CPU each), which no installed copy pays."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree / "nbrefine")], check=True)
    if os.environ.get("PYTHONDONTWRITEBYTECODE"):
        print(f"bytecode compiled in {tree} (PYTHONDONTWRITEBYTECODE is set here)")


def print_ceiling(first: dict[str, Any], name: str, ratio: float, scaling: dict[str, Any] | None) -> None:
    """The most a second job can add: as many cores as the machine has over the cores the first
    variant already keeps busy (the CPU one notebook costs does not shrink with more jobs), and
    what the machine gives a second process at all (:func:`machine_scaling`)."""
    busy = statistics.median(first["cores_busy"])
    cpus = os.cpu_count() or 1
    print(f"  {name} keeps {busy:.2f} of {cpus} cores busy (busy CPU time / wall time, median): no number of"
          f" jobs can give more than {cpus / busy:.2f}x its throughput on this machine")  # fmt: skip
    if scaling is None:
        return
    rounds = ", ".join(f"{r:.2f}" for r in scaling["per_round"])
    limit = min(cpus / busy, scaling["median"])
    print(f"  the machine's own 2-process scaling (a pure-Python loop): {scaling['median']:.2f}x median"
          f" (rounds: {rounds}); the lower limit, {limit:.2f}x, is reached to"
          f" {100 * ratio / limit:.0f}%")  # fmt: skip


def print_table(f: dict[str, Any], variants: list[Variant]) -> None:
    n, by_name = f["notebooks"], f["variants"]
    print()
    print(f"| {n} notebooks | wall time (s), per round | throughput (notebooks/s) | cores busy |")
    print("|---|---|---|---|")
    for v in variants:
        walls = ", ".join(f"{w:.1f}" for w in by_name[v.name]["wall_s"])
        rates = ", ".join(f"{t:.3f}" for t in by_name[v.name]["throughput_nb_per_s"])
        busy = ", ".join(f"{c:.2f}" for c in by_name[v.name]["cores_busy"])
        print(f"| {v.name} | {walls} | {rates} | {busy} |")
    dask = isinstance(variants[1].jobs, str)
    target = DASK_TARGET if dask else TARGET
    print()
    for label, ratio in f["ratios"].items():
        pair = [v.name for v in variants if v.label == label]
        rounds = ", ".join(f"{r:.2f}" for r in ratio["per_round"])
        verdict = "PASS" if ratio["median"] >= target else "MISS"
        print(f"{pair[1]} / {pair[0]} throughput: {ratio['median']:.2f}x median (rounds: {rounds});"
              f" target >= {target}x: {verdict}")  # fmt: skip
        if not dask:
            print_ceiling(by_name[pair[0]], pair[0], ratio["median"], f.get("machine_scaling"))
    print("\nper notebook, seconds on the job's path: median (max) over every notebook of every run")
    width = max(len(v.name) for v in variants) + 2
    print(f"  {'':<40}" + "".join(f"{v.name:>{width + 8}}" for v in variants))
    for key, what, _ in PARTS:
        cells = []
        for v in variants:
            m = by_name[v.name]["per_notebook_s"].get(key, {"median": 0.0, "max": 0.0})
            cells.append(f"{m['median']:.2f} ({m['max']:.2f})".rjust(width + 8))
        print(f"  {what:<40}" + "".join(cells))
    for v in variants:
        w = by_name[v.name]["workers_ready_s"]
        if w:
            what = f"worker ready, from the batch's start (once), {v.name}"
            print(f"  {what}: {w['median']:.2f} (max {w['max']:.2f})")
    here = [by_name[v.name]["per_notebook_s"]["setup"]["median"] for v in variants if v.label == HERE]
    verdict = "PASS" if max(here) <= SETUP_TARGET_S else "MISS"
    what = f"extension load and settings, {HERE}: {max(here):.2f} s (median)"
    print(f"\n{what}; target <= {SETUP_TARGET_S} s: {verdict}")
    load = f["load_average"]
    print(f"load average: {load['start'][0]:.2f} at the start, {load['end'][0]:.2f} at the end (1 min)")


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
