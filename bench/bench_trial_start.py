"""Trial start against a bare fork of the same process, in one run (issue 20, item 1: ≤ 2×).

Each round starts one fresh interpreter per code version (this checkout, and REV checked out
with ``git worktree`` into a temporary folder), which builds the same live state (a written 1 GiB
float64 array, a 100,000-row DataFrame and 300 small variables), takes a snapshot and then, turn
about, ``--trials`` times: a bare ``os.fork()`` of itself (the child writes one byte to a pipe;
timed from the fork to that byte) and one ``Snapshot.run`` of a trivial candidate, timed by
``outcome.start_latency_s`` (ask → candidate running, every hardening layer included). The two
measures share the process, the kernel and the moment, so their ratio is the figure to read;
rounds alternate the order of the versions, so both see the same machine load.

``--gap-ms`` waits between trials, as ``%%refine`` does while the model answers: a snapshot that
keeps a spare trial (forked and hardened ahead) makes the next one while a candidate runs, and a
trial asked for before it is ready waits for the rest. ``--gap-ms 0`` shows back-to-back trials.
The first trial of each snapshot ("first"), asked for right after ``Snapshot.take``, waits for
the snapshot's one-time preparation, and is left out of the medians.

``--array-only`` leaves out pandas, the DataFrame and the variables: a bare fork of a process
that imported pandas copies more (its mappings), so the ratio is then the harder one to meet.

Usage: .venv/bin/python bench/bench_trial_start.py [--rev 5177755] [--rounds 4] [--trials 15] [--mib 1024]
       [--gap-ms 100] [--array-only]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _revisions import worktree

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import collections, json, os, sys, time
import numpy as np
mib, trials, gap, array_only = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]) / 1000, sys.argv[4]
if array_only != "1":
    import pandas as pd
from nbrefine.grounding import Redactor
from nbrefine.sandbox import Snapshot, TrialSpec

def bare_fork():
    read_fd, write_fd = os.pipe()
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:
        os.write(write_fd, b"x")
        os._exit(0)
    os.read(read_fd, 1)
    taken = time.monotonic() - started
    os.close(read_fd)
    os.close(write_fd)
    os.waitpid(pid, 0)
    return taken * 1000

ns = {"big": np.ones(mib * 131072)}
if array_only != "1":
    ns.update({"df": pd.DataFrame({"x": np.arange(100_000), "y": 1.5})})
    ns.update({f"var_{i:03d}": i for i in range(300)})
snap = Snapshot.take(ns, Redactor(environ={}))
forks, starts, how, layers = [], [], collections.Counter(), ()
for number in range(trials + 1):
    time.sleep(gap)
    forks.append(bare_fork())
    time.sleep(gap)
    out = snap.run(TrialSpec("total = float(big[:10].sum())\nrows = len(globals().get('df', ()))"))
    assert out.ok, out.render()
    starts.append(out.start_latency_s * 1000)
    how[getattr(snap, "last_start", "") or "fork"] += number > 0
    layers = out.layers
snap.close()
result = {"forks": forks[1:], "first": starts[0], "starts": starts[1:], "how": how, "layers": list(layers)}
print(json.dumps(result))
"""


def measure(tree: Path, args: argparse.Namespace) -> dict[str, object]:
    env = dict(os.environ, PYTHONPATH=str(tree))
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            CHILD,
            str(args.mib),
            str(args.trials),
            str(args.gap_ms),
            str(int(args.array_only)),
        ],
        env=env,
        cwd=tempfile.gettempdir(),
        capture_output=True,
        text=True,
        check=True,
    )
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def figures(values: list[float]) -> str:
    ordered = sorted(values)
    p90 = ordered[int(0.9 * (len(ordered) - 1))]
    return f"{statistics.median(values):7.2f} {p90:7.2f} {max(values):7.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0], allow_abbrev=False)
    parser.add_argument("--rev", default="5177755", help="the earlier revision (default: before issue 20.1)")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--trials", type=int, default=15, help="bare forks and trials per round and version")
    parser.add_argument("--mib", type=int, default=1024, help="size of the live array")
    parser.add_argument("--gap-ms", type=float, default=100.0, help="wait before each fork and each trial")
    parser.add_argument(
        "--array-only", action="store_true", help="the array alone (no pandas: a bare fork is then cheaper)"
    )
    args = parser.parse_args()
    labels = ("this checkout", args.rev)
    results: dict[str, list[dict[str, object]]] = {label: [] for label in labels}
    with tempfile.TemporaryDirectory() as tmp, worktree(args.rev, Path(tmp) / "old") as old:
        for number in range(args.rounds):
            order = [(labels[0], ROOT), (labels[1], old)]
            for label, tree in order if number % 2 == 0 else order[::-1]:
                results[label].append(measure(tree, args))
            print(f"round {number + 1}/{args.rounds} done", file=sys.stderr)
    report(args, results)
    return 0


def report(args: argparse.Namespace, results: dict[str, list[dict[str, object]]]) -> None:
    load = os.getloadavg()
    state = "the array alone" if args.array_only else "the array, a DataFrame and 300 variables"
    print(
        f"trial start vs a bare fork at {args.mib} MiB ({state}), {args.rounds} rounds x {args.trials}"
        f" of each per version, {args.gap_ms:g} ms apart"
    )
    cores = os.cpu_count()
    print(f"load average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} ({cores} cores, shared)")
    print(f"{'version':<14} {'measure':<12} {'median':>7} {'p90':>7} {'max':>7}  (ms)")
    medians: dict[str, float] = {}
    for label, runs in results.items():
        forks = [value for run in runs for value in run["forks"]]  # type: ignore[attr-defined]
        starts = [value for run in runs for value in run["starts"]]  # type: ignore[attr-defined]
        firsts = [float(run["first"]) for run in runs]  # type: ignore[arg-type]
        print(f"{label:<14} {'bare fork':<12} {figures(forks)}")
        print(f"{'':<14} {'trial start':<12} {figures(starts)}   first {statistics.median(firsts):.2f}")
        ratio = statistics.median(starts) / statistics.median(forks)
        how: dict[str, int] = {}
        for run in runs:
            for kind, count in run["how"].items():  # type: ignore[attr-defined]
                how[kind] = how.get(kind, 0) + count
        started = ", ".join(f"{count} in a {kind}" for kind, count in sorted(how.items()))
        print(f"{'':<14} ratio trial start / bare fork: {ratio:.2f} (started: {started})")
        layers: list[str] = runs[-1]["layers"]  # type: ignore[assignment]
        print(f"{'':<14} layers {len(layers)}: {', '.join(layers)}")
        medians[label] = statistics.median(starts)
    this, rev = medians.values()
    print(f"trial start, this checkout / {args.rev}: {this / rev:.2f}")


if __name__ == "__main__":
    sys.exit(main())
