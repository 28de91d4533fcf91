"""Automatic mode: what it costs a cell that passes, measured side by side in one run.

    .venv/bin/python bench/bench_auto.py [--cells N] [--big-mib M]

1. The post_run_cell callback itself on a passing cell (timeit on the real callback).
2. Whole passing cells (``x = 1``) through a real IPython shell, automatic mode off vs
   ``offer``, in alternating batches so that machine noise hits both alike.
3. ``Refine.auto_snapshot``: the fork before every cell, with a small state and with a large
   numpy array in the namespace.
Target (issue): <= 50 microseconds of overhead per passing cell for ``offer``.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
import timeit
import types

import numpy as np
from IPython.core.interactiveshell import InteractiveShell


def per_cell_us(shell: InteractiveShell, cells: int) -> float:
    started = time.perf_counter()
    for _ in range(cells):
        shell.run_cell("x = 1", store_history=False)
    return (time.perf_counter() - started) / cells * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=400, help="passing cells per batch")
    parser.add_argument("--batches", type=int, default=30)
    parser.add_argument("--big-mib", type=int, default=1024, help="array size for the auto_snapshot row")
    args = parser.parse_args()
    print(f"load average {' '.join(f'{v:.2f}' for v in os.getloadavg())} at the start")
    print(f"machine: {os.cpu_count()} CPUs, Python {platform.python_version()} on {platform.system()}")

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "nbrefine")
    magics = next(m for m in shell.magics_manager.registry.values() if type(m).__name__ == "RefineMagics")
    auto = magics.auto

    # 1. the callback alone
    passing = types.SimpleNamespace(error_in_exec=None, error_before_exec=None, info=None)
    auto.set_mode("offer")
    number = 200_000
    best = min(timeit.repeat(lambda: auto.post_run_cell(passing), number=number, repeat=5))
    callback_ns = best / number * 1e9

    # 2. whole cells, off vs offer, alternating
    off, offer = [], []
    for _ in range(args.batches):
        auto.set_mode("off")
        off.append(per_cell_us(shell, args.cells))
        auto.set_mode("offer")
        offer.append(per_cell_us(shell, args.cells))
    auto.set_mode("off")
    overhead = statistics.median(o - f for o, f in zip(offer, off, strict=True))
    overhead_min = min(offer) - min(off)  # best case of each: the least noisy estimate

    # 3. auto_snapshot: a fork before every cell
    rows = []
    for label, mib in (("small state", 0), (f"{args.big_mib} MiB array", args.big_mib)):
        shell.user_ns["big"] = np.ones(mib * (1 << 20) // 8) if mib else None
        shell.run_line_magic("config", "Refine.auto_snapshot = True")
        auto.set_mode("offer")
        with_snapshot = statistics.median(per_cell_us(shell, 50) for _ in range(3))
        auto.set_mode("off")
        shell.run_line_magic("config", "Refine.auto_snapshot = False")
        without = statistics.median(per_cell_us(shell, 50) for _ in range(3))
        rows.append((label, without, with_snapshot))
    shell.user_ns.pop("big", None)

    print()
    print(f"{'quantity':<52}{'measured':>14}  target     verdict")
    print(f"{'post_run_cell callback on a passing cell':<52}{callback_ns / 1000:>11.3f} µs  -")
    print(f"{'passing cell, automatic mode off (median)':<52}{statistics.median(off):>11.1f} µs  -")
    print(f"{'passing cell, automatic mode offer':<52}{statistics.median(offer):>11.1f} µs  -")
    verdict = "PASS" if overhead <= 50 else "MISS"
    print(
        f"{'overhead per passing cell (offer - off, median)':<52}{overhead:>11.1f} µs  <= 50 µs   {verdict}"
    )
    print(f"{'overhead per passing cell (fastest batch of each)':<52}{overhead_min:>11.1f} µs")
    for label, without, with_snapshot in rows:
        name = f"auto_snapshot fork per cell, {label}"
        print(f"{name:<52}{(with_snapshot - without) / 1000:>11.2f} ms  (optional; off by default)")
    print(f"\n({args.batches} alternating batches of {args.cells} cells; callback: {number:,} calls)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
