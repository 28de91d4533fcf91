"""Trial start of this checkout against an earlier revision, side by side in one run.

Each round starts one fresh interpreter per code version (this checkout, and REV checked out
with ``git worktree`` into a temporary folder), builds the same live state (a written 1 GiB
float64 array, a 100,000-row DataFrame and 300 small variables), takes a snapshot and runs
``--trials`` trials of the same candidate, reporting ``outcome.start_latency_s`` (ask →
candidate running, hardening included) and the layers that were active. Rounds alternate the
order of the two versions, so both see the same machine load; the ratio of the medians is the
figure to read. The first trial of each snapshot is also shown on its own ("first"): it is asked
for right after ``Snapshot.take``, so it waits for whatever of the snapshot's one-time preparation
(the hidden paths, Landlock's rules, the namespaces trials share) is left; the others ("later")
do not. ``%%refine`` asks for its first trial only after the cell ran and the model answered.

Usage: .venv/bin/python bench/bench_hardening_cost.py [--rev 2fc870c] [--rounds 4] [--trials 10] [--mib 1024]
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
import json, sys, time
import numpy as np, pandas as pd
try:
    from nbrefine.grounding import Redactor
except ImportError:  # a revision from before the package had layers (issue 13)
    from nbrefine.context import Redactor
from nbrefine.sandbox import Snapshot, TrialSpec
mib, trials = int(sys.argv[1]), int(sys.argv[2])
ns = {"big": np.ones(mib * 131072), "df": pd.DataFrame({"x": np.arange(100_000), "y": 1.5})}
ns.update({f"var_{i:03d}": i for i in range(300)})
snap = Snapshot.take(ns, Redactor(environ={}))
starts, layers = [], ()
for _ in range(trials):
    out = snap.run(TrialSpec("total = float(big[:10].sum())\nrows = len(df)"))
    assert out.ok, out.render()
    starts.append(out.start_latency_s * 1000)
    layers = out.layers
snap.close()
print(json.dumps({"starts": starts, "layers": list(layers)}))
"""


def measure(tree: Path, mib: int, trials: int) -> dict[str, object]:
    env = dict(os.environ, PYTHONPATH=str(tree))
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(mib), str(trials)],
        env=env,
        cwd=tempfile.gettempdir(),
        capture_output=True,
        text=True,
        check=True,
    )
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0], allow_abbrev=False)
    parser.add_argument("--rev", default="2fc870c", help="the earlier revision (default: before issue 10)")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--mib", type=int, default=1024, help="size of the live array")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, worktree(args.rev, Path(tmp) / "old") as old:
        starts: dict[str, list[float]] = {"this checkout": [], args.rev: []}
        firsts: dict[str, list[float]] = {"this checkout": [], args.rev: []}
        laters: dict[str, list[float]] = {"this checkout": [], args.rev: []}
        layers: dict[str, list[str]] = {}
        for number in range(args.rounds):
            order = [("this checkout", ROOT), (args.rev, old)]
            for label, tree in order if number % 2 == 0 else order[::-1]:
                result = measure(tree, args.mib, args.trials)
                starts[label] += result["starts"]  # type: ignore[arg-type]
                firsts[label].append(result["starts"][0])  # type: ignore[index]
                laters[label] += result["starts"][1:]  # type: ignore[index]
                layers[label] = result["layers"]  # type: ignore[assignment]
            print(f"round {number + 1}/{args.rounds} done", file=sys.stderr)
    load = os.getloadavg()
    print(f"trial start at {args.mib} MiB, {args.rounds} rounds x {args.trials} trials per version")
    print(f"load average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} (2 cores, shared)")
    print(f"{'version':<16} {'median ms':>9} {'p90 ms':>7} {'max ms':>7} {'first':>6} {'later':>6}  layers")
    for label, values in starts.items():
        ordered = sorted(values)
        p90 = ordered[int(0.9 * (len(ordered) - 1))]
        figures = f"{statistics.median(values):9.1f} {p90:7.1f} {max(values):7.1f}"
        figures += (
            f" {statistics.median(firsts[label]):6.1f} {statistics.median(laters[label] or values):6.1f}"
        )
        print(f"{label:<16} {figures}  {len(layers[label])}: {', '.join(layers[label])}")
    ratio = statistics.median(starts["this checkout"]) / statistics.median(starts[args.rev])
    print(f"ratio of the medians (this checkout / {args.rev}): {ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
