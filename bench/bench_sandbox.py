"""Trial start latency and extra memory of the three trial harnesses, side by side, in one run.

For a live state of 10 MiB, 100 MiB and 1 GiB (a float64 numpy array ``big``, really
allocated and written, plus a DataFrame ``df`` of a few MiB and 300 small variables), the
same candidate (``total = float(big[:10].sum())``, ``rows = len(df)``, then a probe that
prints /proc figures) is tried in:

1. **fork**: :class:`nbrefine.sandbox.Snapshot` (the default sandbox): the time to take the
   snapshot, and the trial start latency (``outcome.start_latency_s``, from asking the
   snapshot to the candidate running in a fresh fork of it);
2. **spawn**: :class:`nbrefine.sandbox.SpawnRunner`: a fresh ``python -m nbrefine.sandbox._spawn_worker``
   that gets cloudpickled copies of the names the candidate uses (``big`` and ``df``);
   ``outcome.start_latency_s`` covers finding the names, pickling, sending, starting the
   interpreter, unpickling and hardening;
3. **naive**: ``subprocess.run([sys.executable, "-c", candidate])``, a fresh interpreter with
   no state at all (the candidate fails with a NameError); the latency is from calling
   ``subprocess.run`` to the child's first line (it prints ``time.monotonic()``: the clock
   is system-wide on Linux).

Extra memory (peak, MiB):

* fork: private memory (``Private_Clean + Private_Dirty`` of ``/proc/<pid>/smaps_rollup``:
  the pages the fork really copied) of the trial child, read by the candidate itself after
  its work, and of the snapshot process (its parent, read from inside the trial where the
  trial can see it, which it cannot from its own PID namespace, and again from the bench after
  the trial; the larger counts), plus the growth of the bench
  process's peak RSS (``VmHWM`` after resetting it through ``/proc/self/clear_refs``) while
  the snapshot lives;
* spawn: the worker's ``VmHWM`` (read by the candidate from ``/proc/self/status``) plus the
  bench process's peak RSS growth during ``run()`` (the pickles);
* naive: the child's ``VmHWM``.

:data:`nbrefine.sandbox.spawn.MAX_VALUE_BYTES` (1 GiB) refuses to ship larger values. A 1 GiB array
pickles to a little more than that, so at 1 GiB the bench makes one spawn attempt with the
full array (reported as refused when it is) and measures spawn with ``big`` rebound to its
first 900 MiB (a view, under the 95% guard spawn applies before pickling): the fork and naive
harnesses keep the full 1 GiB.

Targets (at 1 GiB): fork trial start <= 60 ms (PASS when the max meets it) and >= 20x faster
than spawn+cloudpickle (PASS when min(spawn) / max(fork) meets it; MISS(worst) when only the
ratio of the medians does).

Usage: .venv/bin/python bench/bench_sandbox.py [--quick] [--repeat N] [--json PATH]
"""

from __future__ import annotations

import argparse
import builtins
import contextlib
import gc
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import textwrap
import time
import tracemalloc
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from nbrefine.grounding import Redactor
from nbrefine.sandbox import SandboxOptions, Snapshot, TrialOutcome, TrialSpec
from nbrefine.sandbox.spawn import MAX_VALUE_BYTES, SpawnRunner

MIB = 1 << 20
GIB = 1 << 30
SPAWN_CAP_BYTES = 900 * MIB  # under spawn's guard (95% of MAX_VALUE_BYTES), with room for the pickle
DF_ROWS = 100_000
SMALL_VARIABLES = 300
TRIALS_PER_SNAPSHOT = 2
TARGET_START_S = 0.060
TARGET_RATIO = 20.0

# --------------------------------------------------------------------------- the candidates

PROBE_MARK = "BENCH_PROBE "

# Tried by the fork and spawn harnesses. The probe runs after the candidate's work, inside
# the trial process: it reads its own /proc files and its parent's (the snapshot process
# for a fork trial; the bench process for spawn, not used).
CANDIDATE = textwrap.dedent(
    """\
    total = float(big[:10].sum())
    rows = len(df)
    import json as _bench_json
    import os as _bench_os

    def _bench_kb(path):
        found = {}
        try:
            with open(path) as fh:
                for line in fh:
                    key, _, rest = line.partition(":")
                    parts = rest.split()
                    if len(parts) == 2 and parts[1] == "kB":
                        found[key] = int(parts[0])
        except OSError as err:
            found["error"] = f"{type(err).__name__}: {err}"
        return found

    print(
        "BENCH_PROBE "
        + _bench_json.dumps(
            {
                "total": total,
                "rows": rows,
                "self": _bench_kb("/proc/self/smaps_rollup"),
                "status": _bench_kb("/proc/self/status"),
                # 0 in a trial's PID namespace: the snapshot, its parent, is outside it
                "parent": _bench_kb(f"/proc/{_bench_os.getppid()}/smaps_rollup")
                if _bench_os.getppid()
                else {"error": "the snapshot is outside the trial's PID namespace"},
            }
        )
    )
    """
)

# The naive harness: a fresh interpreter; its first line notes the time.
NAIVE_CHILD = textwrap.dedent(
    """\
    import time; _bench_t0 = time.monotonic()
    try:
        total = float(big[:10].sum())
        _bench_status = "passed"
    except NameError as err:
        _bench_status = f"NameError: {err}"
    import json
    with open("/proc/self/status") as fh:
        _bench_hwm = next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:"))
    print("BENCH_PROBE " + json.dumps({"t0": _bench_t0, "status": _bench_status, "hwm_kb": _bench_hwm}))
    """
)


def _probe(outcome_stdout: str) -> dict[str, Any] | None:
    for line in outcome_stdout.splitlines():
        if line.startswith(PROBE_MARK):
            data: dict[str, Any] = json.loads(line[len(PROBE_MARK) :])
            return data
    return None


# --------------------------------------------------------------------------- /proc helpers


def proc_kb(path: str, keys: Iterable[str] | None = None) -> dict[str, int]:
    wanted = set(keys) if keys is not None else None
    out: dict[str, int] = {}
    try:
        with open(path) as fh:
            for line in fh:
                key, _, rest = line.partition(":")
                parts = rest.split()
                if len(parts) == 2 and parts[1] == "kB" and (wanted is None or key in wanted):
                    out[key] = int(parts[0])
    except OSError:
        pass
    return out


def private_kb(rollup: dict[str, Any] | None) -> int | None:
    if not rollup or "Private_Dirty" not in rollup:
        return None
    return int(rollup.get("Private_Clean", 0)) + int(rollup["Private_Dirty"])


def self_status() -> dict[str, int]:
    return proc_kb("/proc/self/status", ("VmRSS", "VmHWM"))


def reset_peak_rss() -> bool:
    """Reset this process's VmHWM to its current RSS (Linux 4.0+: write 5 to clear_refs)."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        return False
    return True


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (by the ppid field of /proc/<n>/stat)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                stat = fh.read()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


# --------------------------------------------------------------------------- the state


def _small_value(i: int) -> object:
    kind = i % 6
    if kind == 0:
        return i
    if kind == 1:
        return f"text value number {i}"
    if kind == 2:
        return list(range(i % 25))
    if kind == 3:
        return {"id": i, "name": f"item-{i}", "tags": ["x", "y"][: i % 3]}
    if kind == 4:
        return i / 7.0
    return (i, str(i), i % 2 == 0)


def build_state(array_bytes: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """A notebook-like namespace and facts about it."""
    started = time.perf_counter()
    ns: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
    big = np.empty(array_bytes // 8, dtype=np.float64)
    big.fill(1.0)  # every page written: the array is really resident
    ns["big"] = big
    rng = np.random.default_rng(0)
    pool = np.array([f"item-{i:04d}" for i in range(2000)], dtype=object)
    ns["df"] = pd.DataFrame(
        {
            "id": np.arange(DF_ROWS, dtype=np.int64),
            "price": np.round(rng.random(DF_ROWS) * 100, 2),
            "qty": rng.integers(1, 50, DF_ROWS).astype(np.int32),
            "label": pd.Categorical.from_codes(rng.integers(0, 5, DF_ROWS), list("abcde")),
            "name": pool[rng.integers(0, len(pool), DF_ROWS)],
            "when": pd.date_range("2024-01-01", periods=DF_ROWS, freq="min"),
            "flag": rng.random(DF_ROWS) < 0.3,
        }
    )
    for i in range(SMALL_VARIABLES):
        ns[f"var_{i:03d}"] = _small_value(i)
    gc.collect()
    facts = {
        "array_bytes": int(big.nbytes),
        "df_bytes": int(ns["df"].memory_usage(deep=True).sum()),
        "variables": sum(1 for k in ns if not k.startswith("__")),
        "build_s": time.perf_counter() - started,
        "rss_kb": self_status().get("VmRSS"),
    }
    return ns, facts


# --------------------------------------------------------------------------- results


@dataclass
class Runs:
    """Samples of one harness in one state."""

    latency_s: list[float] = field(default_factory=list)
    extra_kb: list[int] = field(default_factory=list)
    parts: list[dict[str, int | None]] = field(default_factory=list)  # what extra_kb is made of
    layers: set[tuple[str, ...]] = field(default_factory=set)
    statuses: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class StateResult:
    label: str
    facts: dict[str, Any]
    snapshot_take: Runs = field(default_factory=Runs)
    fork: Runs = field(default_factory=Runs)
    spawn: Runs = field(default_factory=Runs)
    naive: Runs = field(default_factory=Runs)
    spawn_bytes: int = 0  # the size of `big` the spawn figures are for
    spawn_refused: str = ""  # why the full array was not shipped, if it was not
    spawn_refused_s: float | None = None
    spawn_refused_outcome: str = ""  # what the trial did without the value


def _note_status(runs: Runs, outcome: TrialOutcome, expected: str = "passed") -> None:
    runs.statuses.append(outcome.status)
    runs.layers.add(outcome.layers)
    if outcome.status != expected:
        text = f"{outcome.status}: {outcome.one_line()}"
        if outcome.detail and outcome.detail not in text:
            text += f" ({outcome.detail})"
        if text not in runs.notes:
            runs.notes.append(text[:300])


# --------------------------------------------------------------------------- the harnesses


def _spec() -> TrialSpec:
    return TrialSpec(CANDIDATE, timeout_s=60.0, label="bench candidate")


def run_fork(ns: dict[str, Any], repeats: int, out: StateResult, redactor: Redactor) -> None:
    """Take a snapshot, run TRIALS_PER_SNAPSHOT trials from it, close it; ``repeats`` times."""
    for _ in range(repeats):
        gc.collect()
        reset_peak_rss()
        rss0 = self_status().get("VmRSS", 0)
        started = time.monotonic()
        snapshot = Snapshot.take(ns, redactor, SandboxOptions())
        out.snapshot_take.latency_s.append(time.monotonic() - started)
        trials: list[dict[str, int | None]] = []
        try:
            for _ in range(TRIALS_PER_SNAPSHOT):
                outcome = snapshot.run(_spec())
                _note_status(out.fork, outcome)
                if not outcome.ok:
                    continue
                out.fork.latency_s.append(outcome.start_latency_s)
                probe = _probe(outcome.stdout) or {}
                outside = private_kb(proc_kb(f"/proc/{snapshot.pid}/smaps_rollup"))
                inside = private_kb(probe.get("parent"))
                snap_private = max((v for v in (inside, outside) if v is not None), default=None)
                if inside is None and "error" in (probe.get("parent") or {}):
                    note = f"snapshot smaps read from the bench (inside: {probe['parent']['error']})"
                    if note not in out.fork.notes:
                        out.fork.notes.append(note)
                status = probe.get("status") or {}
                trials.append(
                    {
                        "trial_private": private_kb(probe.get("self")),
                        "snapshot_private": snap_private,
                        "page_tables": (status.get("VmPTE") or 0)
                        + proc_kb(f"/proc/{snapshot.pid}/status", ("VmPTE",)).get("VmPTE", 0),
                    }
                )
        finally:
            snapshot.close()
        growth = max(self_status().get("VmHWM", 0) - rss0, 0)
        for part in trials:
            part["parent_growth"] = growth
            out.fork.parts.append(part)
            out.fork.extra_kb.append((part["trial_private"] or 0) + (part["snapshot_private"] or 0) + growth)


def _spawn_once(runner: SpawnRunner, out: Runs, *, count: bool) -> TrialOutcome:
    gc.collect()
    measured_peak = reset_peak_rss()
    rss0 = self_status().get("VmRSS", 0)
    outcome = runner.run(_spec())
    parent_peak: int | None = max(self_status().get("VmHWM", 0) - rss0, 0) if measured_peak else None
    if count:
        _note_status(out, outcome)
        if outcome.ok:
            out.latency_s.append(outcome.start_latency_s)
            probe = _probe(outcome.stdout) or {}
            worker = (probe.get("status") or {}).get("VmHWM")
            out.parts.append({"worker_hwm": worker, "parent_peak": parent_peak})
            out.extra_kb.append((worker or 0) + (parent_peak or 0))
    return outcome


def _tracemalloc_peak_kb(runner: SpawnRunner) -> int:
    """Fallback when clear_refs cannot reset VmHWM: the bench's Python allocation peak in run()."""
    gc.collect()
    tracemalloc.start()
    try:
        runner.run(_spec())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak // 1024


def run_spawn(ns: dict[str, Any], repeats: int, out: StateResult, redactor: Redactor) -> None:
    runner = SpawnRunner(ns, redactor, SandboxOptions())
    out.spawn_bytes = out.facts["array_bytes"]
    if out.facts["array_bytes"] > SPAWN_CAP_BYTES:
        # One attempt with the full array: the size guard is expected to refuse it.
        started = time.monotonic()
        outcome = runner.run(_spec())
        elapsed = time.monotonic() - started
        if "big" in runner.unshippable:
            out.spawn_refused = runner.unshippable["big"]
            out.spawn_refused_s = elapsed
            out.spawn_refused_outcome = outcome.one_line()[:80]
            capped = dict(ns)
            capped["big"] = ns["big"][: SPAWN_CAP_BYTES // 8]  # a view: the first 900 MiB
            runner = SpawnRunner(capped, redactor, SandboxOptions())
            out.spawn_bytes = SPAWN_CAP_BYTES
        else:
            _note_status(out.spawn, outcome)  # shipped after all: count it as a normal run
            if outcome.ok:
                out.spawn.latency_s.append(outcome.start_latency_s)
    for _ in range(repeats):
        _spawn_once(runner, out.spawn, count=True)
    if out.spawn.parts and all(p["parent_peak"] is None for p in out.spawn.parts):
        peak = _tracemalloc_peak_kb(runner)
        for part in out.spawn.parts:
            part["parent_peak"] = peak
        out.spawn.extra_kb = [(p["worker_hwm"] or 0) + peak for p in out.spawn.parts]
        out.spawn.notes.append("parent pickling peak from tracemalloc (clear_refs not available)")
    if runner.unshippable:
        out.spawn.notes.append(f"not shipped: {runner.unshippable}")


def run_naive(repeats: int, out: StateResult) -> None:
    for _ in range(repeats):
        started = time.monotonic()
        proc = subprocess.run(
            [sys.executable, "-c", NAIVE_CHILD], capture_output=True, text=True, timeout=60, check=False
        )
        probe = _probe(proc.stdout)
        if proc.returncode != 0 or probe is None:
            out.naive.notes.append(f"child exit {proc.returncode}: {proc.stderr.strip()[-200:]}")
            continue
        out.naive.latency_s.append(probe["t0"] - started)
        out.naive.statuses.append(probe["status"])
        out.naive.extra_kb.append(int(probe["hwm_kb"]))
        out.naive.parts.append({"child_hwm": int(probe["hwm_kb"])})


def run_state(label: str, array_bytes: int, repeats: int, log: Callable[[str], None]) -> StateResult:
    log(f"[{label}] building the state …")
    ns, facts = build_state(array_bytes)
    out = StateResult(label, facts)
    redactor = Redactor(environ={})
    try:
        log(f"[{label}] fork: {repeats} snapshots x {TRIALS_PER_SNAPSHOT} trials …")
        run_fork(ns, repeats, out, redactor)
        log(f"[{label}] spawn+cloudpickle: {repeats} trials …")
        run_spawn(ns, repeats, out, redactor)
        log(f"[{label}] naive fresh interpreter: {repeats} runs …")
        run_naive(repeats, out)
    finally:
        ns.clear()
        gc.collect()
    return out


def warm_up(log: Callable[[str], None]) -> dict[str, float]:
    """One run of each harness on a tiny state (imports, page cache); not counted."""
    log("warm-up …")
    ns, facts = build_state(MIB)
    out = StateResult("warm-up", facts)
    redactor = Redactor(environ={})
    try:
        run_fork(ns, 1, out, redactor)
        run_spawn(ns, 1, out, redactor)
        run_naive(1, out)
    finally:
        ns.clear()
        gc.collect()
    first = {
        name: runs.latency_s[0]
        for name, runs in (("fork", out.fork), ("spawn", out.spawn), ("naive", out.naive))
        if runs.latency_s
    }
    return first


# --------------------------------------------------------------------------- the report


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.1f}"


def _mib(kb: float | None) -> str:
    return "-" if kb is None else f"{kb / 1024:.1f}"


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _max(values: list[float]) -> float | None:
    return max(values) if values else None


def _table(rows: list[list[str]], right: Iterable[int] = ()) -> str:
    right = set(right)
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for n, row in enumerate(rows):
        cells = [
            c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _size(nbytes: int) -> str:
    return f"{nbytes / GIB:g} GiB" if nbytes % GIB == 0 else f"{nbytes / MIB:g} MiB"


def _layers(runs: Runs) -> str:
    if not runs.layers:
        return "-"
    return " | ".join(", ".join(layers) or "(none)" for layers in sorted(runs.layers))


def latency_table(results: list[StateResult]) -> str:
    rows = [["state", "harness", "measured with", "n", "median ms", "max ms", "status"]]
    for r in results:
        full = _size(r.facts["array_bytes"])
        spawn_size = _size(r.spawn_bytes) + (" (capped)" if r.spawn_bytes != r.facts["array_bytes"] else "")
        entries = (
            ("fork: snapshot take", r.snapshot_take, full, ""),
            ("fork: trial start", r.fork, full, None),
            ("spawn+cloudpickle: trial start", r.spawn, spawn_size, None),
            ("naive fresh python: first line", r.naive, "no state", None),
        )
        for title, runs, size, status in entries:
            if status is None:
                counts = {s: runs.statuses.count(s) for s in dict.fromkeys(runs.statuses)}
                status = ", ".join(f"{k} x{v}" for k, v in counts.items()) or "-"
            rows.append(
                [
                    r.label,
                    title,
                    size,
                    str(len(runs.latency_s)),
                    _ms(_median(runs.latency_s)),
                    _ms(_max(runs.latency_s)),
                    status,
                ]
            )
        if r.spawn_refused:
            rows.append(
                [
                    r.label,
                    "spawn+cloudpickle: full array",
                    full,
                    "1",
                    "REFUSED",
                    "",
                    f"'big' {r.spawn_refused}, after {_ms(r.spawn_refused_s)} ms in run(); "
                    f"trial: {r.spawn_refused_outcome}",
                ]
            )
    return _table(rows, right=(3, 4, 5))


def memory_table(results: list[StateResult]) -> str:
    rows = [["state", "harness", "peak extra MiB (max)", "median", "made of (at the max, MiB)"]]
    for r in results:
        for title, runs in (("fork", r.fork), ("spawn+cloudpickle", r.spawn), ("naive", r.naive)):
            if not runs.extra_kb:
                rows.append([r.label, title, "-", "-", "no passing run"])
                continue
            worst = max(range(len(runs.extra_kb)), key=runs.extra_kb.__getitem__)
            part = runs.parts[worst]
            if title == "fork":
                made = (
                    f"trial private {_mib(part['trial_private'])} + snapshot private "
                    f"{_mib(part['snapshot_private'])} + bench VmHWM growth {_mib(part['parent_growth'])}"
                    f" (page tables, not counted: {_mib(part['page_tables'])})"
                )
            elif title == "spawn+cloudpickle":
                made = (
                    f"worker VmHWM {_mib(part['worker_hwm'])} + bench peak in run() "
                    f"{_mib(part['parent_peak'])} [big shipped: {_size(r.spawn_bytes)}]"
                )
            else:
                made = f"child VmHWM {_mib(part['child_hwm'])} (the state is not there)"
            rows.append(
                [
                    r.label,
                    title,
                    _mib(runs.extra_kb[worst]),
                    _mib(_median([float(x) for x in runs.extra_kb])),
                    made,
                ]
            )
    return _table(rows, right=(2, 3))


def targets(results: list[StateResult], quick: bool) -> tuple[str, dict[str, Any]]:
    r = results[-1]
    fork, spawn = r.fork.latency_s, r.spawn.latency_s
    data: dict[str, Any] = {"state": r.label}
    rows = [["target", "state", "measured", "verdict"]]
    if fork:
        ok_max = max(fork) <= TARGET_START_S
        verdict = "PASS" if ok_max else ("MISS(max)" if statistics.median(fork) <= TARGET_START_S else "MISS")
        rows.append(
            [
                f"fork trial start <= {TARGET_START_S * 1000:.0f} ms",
                f"{r.label} (fork {_size(r.facts['array_bytes'])})",
                f"median {_ms(statistics.median(fork))} ms, max {_ms(max(fork))} ms",
                verdict,
            ]
        )
        data["start_verdict"] = verdict
    if fork and spawn:
        ratio_median = statistics.median(spawn) / statistics.median(fork)
        ratio_worst = min(spawn) / max(fork)
        verdict = (
            "PASS"
            if ratio_worst >= TARGET_RATIO
            else ("MISS(worst)" if ratio_median >= TARGET_RATIO else "MISS")
        )
        rows.append(
            [
                f"fork >= {TARGET_RATIO:.0f}x faster than spawn+cloudpickle",
                f"{r.label} (spawn {_size(r.spawn_bytes)})",
                f"median/median {ratio_median:.0f}x; min(spawn)/max(fork) {ratio_worst:.0f}x",
                verdict,
            ]
        )
        data.update(ratio_median=ratio_median, ratio_worst=ratio_worst, ratio_verdict=verdict)
    text = _table(rows)
    if quick or r.facts["array_bytes"] < GIB:
        text += f"\n(the targets are for 1 GiB; this run evaluates them at {r.label}, as a smoke check only)"
    return text, data


def machine_line() -> str:
    mem = proc_kb("/proc/meminfo", ("MemTotal",)).get("MemTotal", 0)
    try:
        thp = Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text().strip()
    except OSError:
        thp = "?"
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    try:
        import cloudpickle

        pickler = f", cloudpickle {cloudpickle.__version__}"
    except ImportError:
        pickler = ""
    try:
        load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        load = "?"
    return (
        f"load average {load} at the start (other processes share the machine)\n"
        f"machine: {os.cpu_count()} CPUs ({cpu}), {mem / 1024 / 1024:.1f} GiB RAM, "
        f"Python {platform.python_version()} on {platform.system()} {platform.release()}, THP {thp}; "
        f"numpy {np.__version__}, pandas {pd.__version__}{pickler}"
    )


def report(results: list[StateResult], warm: dict[str, float], args: argparse.Namespace) -> str:
    out: list[str] = []
    for r in results:
        f = r.facts
        out.append(
            f"{r.label}: big = {f['array_bytes'] / MIB:.0f} MiB float64 (written), df = {DF_ROWS:,} rows x 7 "
            f"cols ({f['df_bytes'] / MIB:.1f} MiB deep), {f['variables']} variables; bench RSS "
            f"{f['rss_kb'] / 1024:.0f} MiB; built in {f['build_s']:.2f} s"
        )
    out.append(
        f"{args.repeat} repeat(s) per harness and state; fork = {args.repeat} snapshots x "
        f"{TRIALS_PER_SNAPSHOT} trials. Candidate: total = float(big[:10].sum()); rows = len(df); "
        "+ a /proc probe."
    )
    out.append("")
    out.append(
        "Start latency (fork/spawn: outcome.start_latency_s, from asking to the candidate's first line):"
    )
    out.append(latency_table(results))
    out.append("")
    out.append("Peak extra memory:")
    out.append(memory_table(results))
    out.append("")
    out.append("Targets:")
    text, _ = targets(results, args.quick)
    out.append(text)
    out.append("")
    fork_layers = {_layers(r.fork) for r in results}
    spawn_layers = {_layers(r.spawn) for r in results}
    out.append(f"hardening layers active (outcome.layers): fork: {' / '.join(sorted(fork_layers))}")
    out.append(f"                                        spawn: {' / '.join(sorted(spawn_layers))}")
    out.append("                                        naive: none (a plain subprocess)")
    naive = sorted({s for r in results for s in r.naive.statuses})
    out.append(f"naive harness candidate result: {'; '.join(naive) or '-'}")
    notes = [
        f"  {r.label} {name}: {note}"
        for r in results
        for name, runs in (("fork", r.fork), ("spawn", r.spawn), ("naive", r.naive))
        for note in runs.notes
    ]
    if notes:
        out.append("notes:")
        out.extend(notes)
    if any(r.spawn_refused for r in results):
        out.append(
            "spawn at 1 GiB: the size guard "
            f"(nbrefine.sandbox.spawn.MAX_VALUE_BYTES = {MAX_VALUE_BYTES / MIB:.0f} MiB) "
            f"refused the full array, so spawn was measured with big = big[:{SPAWN_CAP_BYTES // 8}] "
            f"({_size(SPAWN_CAP_BYTES)}); fork and naive used the full 1 GiB."
        )
    out.append(
        "warm-up (first use of each harness, 1 MiB state, not counted): "
        + ", ".join(f"{k} {_ms(v)} ms" for k, v in warm.items())
    )
    out.append(
        textwrap.fill(
            "(Private = Private_Clean + Private_Dirty of /proc/<pid>/smaps_rollup: what a fork really "
            "copied; RSS would count the shared copy-on-write pages too. Bench growth = VmHWM after the "
            "snapshot's life (fork) or after run() (spawn) minus VmRSS before, with VmHWM reset through "
            "/proc/self/clear_refs. Page tables are copied by every fork and are shown apart: VmPTE of the "
            "trial + VmPTE of the snapshot.)",
            110,
        )
    )
    return "\n".join(out)


# --------------------------------------------------------------------------- main


def _on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)  # so the finally blocks close the snapshots


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10 MiB and 100 MiB only, 2 repeats")
    parser.add_argument(
        "--repeat", type=int, default=None, help="runs per harness and state (default 5, quick 2)"
    )
    parser.add_argument("--json", metavar="PATH", help="also write every figure as JSON here")
    args = parser.parse_args(argv)
    args.repeat = args.repeat or (2 if args.quick else 5)
    signal.signal(signal.SIGTERM, _on_sigterm)
    sizes = [("10 MiB", 10 * MIB), ("100 MiB", 100 * MIB)] + ([] if args.quick else [("1 GiB", GIB)])
    started = time.perf_counter()
    print(machine_line() + "\n", flush=True)

    def log(text: str) -> None:
        print(f"{time.perf_counter() - started:6.1f}s {text}", file=sys.stderr, flush=True)

    warm = warm_up(log)
    results = [run_state(label, nbytes, args.repeat, log) for label, nbytes in sizes]
    print(report(results, warm, args))
    left = descendants(os.getpid())
    print(f"processes left under the bench at the end: {len(left)}{' ' + str(left) if left else ''}")
    print(f"\n(total bench time {time.perf_counter() - started:.1f} s{'; --quick' if args.quick else ''})")
    if args.json:
        _, target_data = targets(results, args.quick)
        payload = {
            "machine": machine_line(),
            "quick": args.quick,
            "repeat": args.repeat,
            "targets": target_data,
            "warm_up": warm,
            "states": [
                {
                    "label": r.label,
                    "facts": r.facts,
                    "spawn_bytes": r.spawn_bytes,
                    "spawn_refused": r.spawn_refused,
                    "spawn_refused_s": r.spawn_refused_s,
                    "spawn_refused_outcome": r.spawn_refused_outcome,
                    **{
                        name: {
                            "latency_s": runs.latency_s,
                            "extra_kb": runs.extra_kb,
                            "parts": runs.parts,
                            "layers": sorted(runs.layers),
                            "statuses": runs.statuses,
                            "notes": runs.notes,
                        }
                        for name, runs in (
                            ("snapshot_take", r.snapshot_take),
                            ("fork", r.fork),
                            ("spawn", r.spawn),
                            ("naive", r.naive),
                        )
                    },
                }
                for r in results
            ],
        }
        Path(args.json).write_text(json.dumps(payload, indent=2, default=str))
        print(f"JSON written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
