"""Benchmark of the %%refine engine in a real ipykernel with a big kernel state.

Starts a real ipykernel through jupyter_client, builds 1,000 user variables in it (a 1 GiB
float64 numpy array that is really written, a 1M-row pandas DataFrame with mixed dtypes and
998 small values), then runs failing ``%%refine --provider scripted`` cells that use the big
objects. Each cell gets scripted replies that fix it (one needs two attempts). After each cell
``nbrefine.last_session().timings`` is printed as JSON in the kernel and read back from iopub.

The same cells run first against a small kernel state (a few variables, tiny array and frame)
in a kernel of its own, so the cost of the state size shows side by side.

Measured (see bench/README.md for details):

* ``snapshot_s``: fork of the snapshot process when %%refine starts;
* ``prompt_ready_s``: from the failed run returning to the first request being built
  (capture + context + prompt), target <= 20 ms;
* ``trial_start_s``: from asking the snapshot for a trial to the candidate running in the
  trial child, target <= 60 ms;
* memory: the kernel's VmRSS/VmHWM from /proc/<pid>/status before and after the runs, and
  the private memory (Private_Clean + Private_Dirty of /proc/<pid>/smaps_rollup) of the
  snapshot process and of the trial child, read by a probe at the end of each passing fix,
  inside the trial child itself, i.e. after the candidate has done all its work.

Usage: .venv/bin/python bench/bench_engine.py [--quick] [--repeat N] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MIB = 1 << 20
GIB = 1 << 30
USER_VARIABLES = 1000  # big + df + the small ones

# --------------------------------------------------------------------------- the kernel side

KERNEL_HELPERS = r'''
import gc as _bench_gc
import json as _bench_json
import os as _bench_os
import resource as _bench_resource
import statistics as _bench_statistics
import time as _bench_time

import numpy as np
import pandas as pd

import nbrefine as _bench_nbrefine

_BENCH_KERNEL_PID = _bench_os.getpid()
_BENCH_SKIP = {"In", "Out", "get_ipython", "exit", "quit", "open"}


def _bench_kb(path, keys=None):
    """The 'Key: N kB' lines of a /proc file, as {key: N}."""
    out = {}
    try:
        with open(path) as fh:
            for line in fh:
                key, _, rest = line.partition(":")
                parts = rest.split()
                if len(parts) == 2 and parts[1] == "kB" and (keys is None or key in keys):
                    out[key] = int(parts[0])
    except OSError:
        pass
    return out


def _bench_mem(pid):
    """RSS (shared pages included) and private memory (only this process's pages) of pid."""
    m = _bench_kb(f"/proc/{pid}/smaps_rollup")
    if not m:
        return None
    return {
        "rss_kb": m.get("Rss"),
        "pss_kb": m.get("Pss"),
        "private_kb": m.get("Private_Clean", 0) + m.get("Private_Dirty", 0),
        "anon_huge_kb": m.get("AnonHugePages"),
    }


def _bench_probe():
    """Called as the last line of every passing fix: this runs inside the trial child."""
    me, parent = _bench_os.getpid(), _bench_os.getppid()
    data = {
        "trial_pid": me,
        "trial": _bench_mem(me),
        "snapshot_pid": parent,
        "snapshot": _bench_mem(parent),
        "kernel": _bench_mem(_BENCH_KERNEL_PID),
    }
    print("BENCH_PROBE " + _bench_json.dumps(data))


def _bench_user_names():
    ns = get_ipython().user_ns
    return [
        k for k, v in ns.items()
        if not k.startswith("_") and k not in _BENCH_SKIP and type(v).__name__ != "module"
    ]


def _bench_small_value(i):
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


def _bench_build(n_array, n_rows, n_small):
    ns = get_ipython().user_ns
    started = _bench_time.perf_counter()
    rng = np.random.default_rng(0)
    ns["big"] = np.ones(n_array)  # np.ones writes every element: all the pages exist
    pool = np.array([f"item-{i:04d}" for i in range(2000)], dtype=object)
    ns["df"] = pd.DataFrame(
        {
            "id": np.arange(n_rows, dtype=np.int64),
            "price": np.round(rng.random(n_rows) * 100, 2),
            "qty": rng.integers(1, 50, n_rows).astype(np.int32),
            "label": pd.Categorical.from_codes(rng.integers(0, 5, n_rows), list("abcde")),
            "name": pool[rng.integers(0, len(pool), n_rows)],
            "when": pd.date_range("2024-01-01", periods=n_rows, freq="min"),
            "flag": rng.random(n_rows) < 0.3,
        }
    )
    for i in range(n_small):
        ns[f"var_{i:03d}"] = _bench_small_value(i)
    _bench_gc.collect()
    df = ns["df"]
    print("BENCH_JSON " + _bench_json.dumps({
        "build_s": _bench_time.perf_counter() - started,
        "variables": len(_bench_user_names()),
        "array_bytes": int(ns["big"].nbytes),
        "df_rows": len(df),
        "df_bytes": int(df.memory_usage(deep=True).sum()),
        "df_dtypes": {k: str(v) for k, v in df.dtypes.items()},
        "kernel_pid": _BENCH_KERNEL_PID,
    }))


def _bench_report():
    s = _bench_nbrefine.last_session()
    probe = None
    for attempt in s.attempts:
        out = attempt.outcome.stdout if attempt.outcome is not None else ""
        for line in out.splitlines():
            if line.startswith("BENCH_PROBE "):
                probe = _bench_json.loads(line[len("BENCH_PROBE "):])
    print("BENCH_JSON " + _bench_json.dumps({
        "status": s.status,
        "message": s.message,
        "attempts": len(s.attempts),
        "errors": [a.error_type for a in s.attempts],
        "timings": s.timings,
        "prompt_chars": len(s.prompts[0]) if s.prompts else 0,
        "probe": probe,
    }, default=str))


def _bench_breakdown(cell, reps=5):
    """Replays, step by step, what %%refine does between the failed run and the first request."""
    try:
        from nbrefine.ipython import repairs as _m
        from nbrefine.engine import job as _job
        from nbrefine.grounding.scope import global_names
        from nbrefine.grounding.capture import capture_failure
        from nbrefine.grounding import Redactor, summarize_names
        from nbrefine.engine import RepairTask, build_request
        from nbrefine.providers import ProviderSettings, make_provider

        ip = get_ipython()
        ns = ip.user_ns
        settings = next(c for c in ip.configurables if type(c).__name__ == "Refine")
        before = dict(ns)
        result = ip.run_cell(cell, store_history=False)
        error = result.error_before_exec or result.error_in_exec
        if error is None:
            raise RuntimeError("the cell did not fail")
        from nbrefine.sandbox import Snapshot

        steps = {k: [] for k in ("transform", "capture", "summarize", "provider", "build", "total")}
        steps["total_live_snapshot"] = []
        steps["faults"] = []
        steps["faults_live_snapshot"] = []
        for rep in range(2 * reps):
            # odd passes run while a snapshot process is alive, as in %%refine: every page the
            # kernel writes then takes a copy-on-write fault
            snapshot = Snapshot.take(ns, Redactor()) if rep % 2 else None
            redactor = Redactor()
            f0 = _bench_resource.getrusage(_bench_resource.RUSAGE_SELF).ru_minflt
            t0 = _bench_time.perf_counter()
            code = ip.transform_cell(cell)
            t1 = _bench_time.perf_counter()
            failure = capture_failure(
                error, code=code, user_globals=ns, redactor=redactor, run_unsafe=_m._fork_eval
            )
            t2 = _bench_time.perf_counter()
            names = [n for n in global_names(code) if _job._is_user_name(n)]
            summaries, left_out = summarize_names(names, before, redactor)
            t3 = _bench_time.perf_counter()
            make_provider("scripted", ProviderSettings())
            t4 = _bench_time.perf_counter()
            task = RepairTask(
                code=cell, failures=(failure,), values=tuple(summaries), values_left_out=left_out
            )
            build_request(task, [], redactor, budget=settings.prompt_budget, max_tokens=settings.max_tokens)
            t5 = _bench_time.perf_counter()
            faults = _bench_resource.getrusage(_bench_resource.RUSAGE_SELF).ru_minflt - f0
            if snapshot is not None:
                snapshot.close()
                steps["total_live_snapshot"].append(t5 - t0)
                steps["faults_live_snapshot"].append(faults)
                continue
            steps["faults"].append(faults)
            for key, value in zip(steps, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t5 - t0)):
                steps[key].append(value)
        data = {k: _bench_statistics.median(v) for k, v in steps.items()}
    except Exception as err:  # the internals may change; report instead of failing the bench
        data = {"error": f"{type(err).__name__}: {err}"}
    print("BENCH_JSON " + _bench_json.dumps(data))
'''

# --------------------------------------------------------------------------- the cases


def _reply(code: str, probe: bool) -> str:
    body = code.rstrip() + ("\n_bench_probe()" if probe else "")
    return f"Scripted fix for the benchmark.\n\n```python\n{body}\n```"


@dataclass(frozen=True)
class Case:
    name: str
    cell: str
    fixes: tuple[str, ...]  # the scripted candidates; only the last one passes

    def replies(self) -> list[str]:
        last = len(self.fixes) - 1
        return [_reply(code, probe=(i == last)) for i, code in enumerate(self.fixes)]


CASES = (
    Case(
        "KeyError (df column)",
        'mask = df["Price"] > var_006\nexpensive = int(mask.sum())',
        ('mask = df["price"] > var_006\nexpensive = int(mask.sum())',),
    ),
    Case(
        "assert on big.sum()",
        # The scripted fixes keep the asserts (a fix that edits one is not "verified").
        'factor = 2\ntotal = big.sum()\nassert total == big.size * factor, "every element should be 2"',
        ('factor = 1\ntotal = big.sum()\nassert total == big.size * factor, "every element should be 2"',),
    ),
    Case(
        "assert calling big.mean()",
        'expected = 2.0\nassert big.mean() == expected, "mean of the array"',
        ('expected = 1.0\nassert big.mean() == expected, "mean of the array"',),
    ),
    Case(
        "NameError (typo)",
        'by_label = dff.groupby("label", observed=True)["price"].mean()',
        ('by_label = df.groupby("label", observed=True)["price"].mean()',),
    ),
    Case(
        "AttributeError (array)",
        "peak = big.maximum()",
        ("peak = big.max()",),
    ),
    Case(
        "KeyError, fixed at attempt 2",
        'top = df.nlargest(3, "Price")["Name"].tolist()',
        ('top = df.nlargest(3, "price")["Name"].tolist()', 'top = df.nlargest(3, "price")["name"].tolist()'),
    ),
)


@dataclass(frozen=True)
class StateSize:
    label: str
    n_array: int
    n_rows: int
    n_small: int


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


def kernel_memory(pid: int) -> dict[str, int | None]:
    status = proc_kb(f"/proc/{pid}/status", ("VmRSS", "VmHWM"))
    rollup = proc_kb(f"/proc/{pid}/smaps_rollup")
    private = rollup.get("Private_Clean", 0) + rollup.get("Private_Dirty", 0) if rollup else None
    return {
        "rss_kb": status.get("VmRSS"),
        "hwm_kb": status.get("VmHWM"),
        "private_kb": private,
        "anon_huge_kb": rollup.get("AnonHugePages"),
    }


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


class MemAvailableSampler:
    """Lowest MemAvailable (system-wide) seen while a cell runs, polled every few ms."""

    def __init__(self, interval_s: float = 0.005) -> None:
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.baseline_kb = 0
        self.lowest_kb = 0

    @staticmethod
    def available_kb() -> int:
        return proc_kb("/proc/meminfo", ("MemAvailable",)).get("MemAvailable", 0)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.lowest_kb = min(self.lowest_kb, self.available_kb())

    def __enter__(self) -> MemAvailableSampler:
        self.baseline_kb = self.lowest_kb = self.available_kb()
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.lowest_kb = min(self.lowest_kb, self.available_kb())

    @property
    def drop_kb(self) -> int:
        return max(self.baseline_kb - self.lowest_kb, 0)


# --------------------------------------------------------------------------- the kernel


class BenchError(RuntimeError):
    pass


@dataclass
class CellResult:
    ok: bool
    stdout: str
    error: str
    wall_s: float


class Kernel:
    """A real ipykernel (jupyter_client), always shut down by :meth:`close`."""

    def __init__(self, env: dict[str, str], cwd: str) -> None:
        from jupyter_client.manager import KernelManager

        self.km = KernelManager(kernel_name="python3")
        self.kc: Any = None
        self.km.start_kernel(env={**os.environ, **env}, cwd=cwd)
        self.kc = self.km.blocking_client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=60)

    def run(self, code: str, *, timeout: float = 300, stop_on_error: bool = False) -> CellResult:
        parts: list[str] = []
        errors: list[str] = []

        def hook(msg: dict[str, Any]) -> None:
            kind, content = msg["header"]["msg_type"], msg["content"]
            if kind == "stream":
                parts.append(content.get("text", ""))
            elif kind == "error":
                errors.append(f"{content.get('ename')}: {content.get('evalue')}")

        started = time.perf_counter()
        reply = self.kc.execute_interactive(
            code, timeout=timeout, output_hook=hook, stop_on_error=stop_on_error, store_history=False
        )
        wall = time.perf_counter() - started
        ok = reply["content"].get("status") == "ok"
        return CellResult(ok, "".join(parts), "\n".join(errors), wall)

    def run_json(self, code: str, *, timeout: float = 300) -> dict[str, Any]:
        """Run ``code`` and return the last ``BENCH_JSON {...}`` line it printed."""
        result = self.run(code, timeout=timeout)
        lines = [line for line in result.stdout.splitlines() if line.startswith("BENCH_JSON ")]
        if not result.ok or not lines:
            raise BenchError(
                f"kernel code failed: {code[:80]!r}\nerror: {result.error}\noutput:\n{result.stdout[-3000:]}"
            )
        data: dict[str, Any] = json.loads(lines[-1][len("BENCH_JSON ") :])
        return data

    def close(self) -> None:
        try:
            if self.kc is not None:
                self.kc.stop_channels()
        finally:
            try:
                self.km.shutdown_kernel(now=False)
            except Exception:
                self.km.shutdown_kernel(now=True)


# --------------------------------------------------------------------------- one state size


@dataclass
class ProfileResult:
    label: str
    size: StateSize
    build: dict[str, Any] = field(default_factory=dict)
    runs: list[dict[str, Any]] = field(default_factory=list)
    warmup: dict[str, Any] = field(default_factory=dict)
    mem_before: dict[str, Any] = field(default_factory=dict)
    mem_after: dict[str, Any] = field(default_factory=dict)
    breakdown: dict[str, dict[str, Any]] = field(default_factory=dict)
    leftover_children: list[int] = field(default_factory=list)


def _refine_once(kernel: Kernel, case: Case, replies_path: Path) -> dict[str, Any]:
    # What is not nbrefine's own work, measured the same way just before: the cell failing without
    # %%refine (its run and IPython's traceback, which a failing cell costs anyway), and the passing
    # fix run plain (the candidate's own computation, which its trial repeats).
    plain_failing = kernel.run(case.cell)
    if plain_failing.ok:
        raise BenchError(f"case {case.name!r}: the cell did not fail without %%refine")
    candidate = kernel.run(case.fixes[-1].rstrip() + "\n_bench_probe()")
    replies_path.write_text(json.dumps(case.replies()))
    with MemAvailableSampler() as sampler:
        cell = kernel.run("%%refine --provider scripted\n" + case.cell)
    report = kernel.run_json("_bench_report()")
    if report["status"] != "fixed" or report["attempts"] != len(case.fixes):
        raise BenchError(
            f"case {case.name!r}: expected a fix at attempt {len(case.fixes)}, got {report['status']} "
            f"after {report['attempts']} attempt(s) ({report.get('message')}); errors {report['errors']}\n"
            f"cell output:\n{cell.stdout[-3000:]}\n{cell.error}"
        )
    report["case"] = case.name
    report["cell_wall_s"] = cell.wall_s
    report["plain_failing_wall_s"] = plain_failing.wall_s
    report["candidate_wall_s"] = candidate.wall_s
    report["own_wall_s"] = cell.wall_s - plain_failing.wall_s - candidate.wall_s
    report["mem_available_drop_kb"] = sampler.drop_kb
    return report


def run_profile(size: StateSize, repeat: int, workdir: Path, log: Callable[[str], None]) -> ProfileResult:
    out = ProfileResult(size.label, size)
    replies_path = workdir / f"replies-{size.label}.json"
    replies_path.write_text("[]")
    log(f"[{size.label}] starting a kernel …")
    kernel = Kernel({"NBREFINE_SCRIPTED_REPLIES": str(replies_path)}, cwd=str(workdir))
    try:
        setup = kernel.run(KERNEL_HELPERS + "\nget_ipython().run_line_magic('load_ext', 'nbrefine')\n")
        if not setup.ok:
            raise BenchError(f"kernel setup failed: {setup.error}\n{setup.stdout}")
        kernel.run("%config Refine.display = 'text'")
        kernel.run("%config Refine.quick_fixes = False")  # measure the scripted model path alone
        kernel.run("%config Refine.response_cache = False")  # the same cells repeat on purpose
        log(f"[{size.label}] building the state …")
        out.build = kernel.run_json(f"_bench_build({size.n_array}, {size.n_rows}, {size.n_small})")
        pid = int(out.build["kernel_pid"])
        out.warmup = _refine_once(kernel, CASES[0], replies_path)  # first use: imports, caches
        out.mem_before = kernel_memory(pid)
        log(f"[{size.label}] {len(CASES)} cases x {repeat} …")
        for _ in range(repeat):
            for case in CASES:
                out.runs.append(_refine_once(kernel, case, replies_path))
        out.mem_after = kernel_memory(pid)
        log(f"[{size.label}] step-by-step breakdown of prompt_ready_s …")
        for case in CASES:
            out.breakdown[case.name] = kernel.run_json(f"_bench_breakdown({case.cell!r})")
        out.leftover_children = descendants(pid)
    finally:
        kernel.close()
    return out


# --------------------------------------------------------------------------- the report


def _values(result: ProfileResult, key: str) -> list[float]:
    values: list[float] = []
    for run in result.runs:
        if key in _PER_RUN:
            value: Any = run.get(key)
        else:
            value = run["timings"].get(key)
        if isinstance(value, list):
            values.extend(float(v) for v in value)
        elif isinstance(value, (int, float)):
            values.append(float(value))
    return values


_PER_RUN = ("cell_wall_s", "plain_failing_wall_s", "candidate_wall_s", "own_wall_s")


def _verdict(values: list[float], target: float | None) -> str:
    if target is None or not values:
        return ""
    if max(values) <= target:
        return "PASS"
    return "MISS" if statistics.median(values) > target else "MISS(max)"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.1f}"


def _mib(kb: int | None) -> str:
    return "-" if kb is None else f"{kb / 1024:.0f} MiB"


#: (key, title, target: one for every state, or one per state label)
QUANTITIES: tuple[tuple[str, str, float | dict[str, float] | None], ...] = (
    ("snapshot_s", "snapshot fork at %%refine start", None),
    ("prompt_ready_s", "exception -> prompt ready", 0.020),
    ("trial_start_s", "trial start (ask snapshot -> running)", 0.060),
    ("reply_s", "reply (scripted provider)", None),
    ("trial_s", "trial (start -> outcome back)", None),
    ("cell_wall_s", "whole %%refine cell (client side)", None),
    ("plain_failing_wall_s", "  the same cell failing, no %%refine", None),
    ("candidate_wall_s", "  the passing fix run plain", None),
    ("own_wall_s", "nbrefine's own: whole - the two above", {"small": 0.050, "big": 0.150}),
)


def _target(target: float | dict[str, float] | None, label: str) -> float | None:
    return target.get(label) if isinstance(target, dict) else target


def summary(results: list[ProfileResult]) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for key, _, target in QUANTITIES:
        data[key] = {"target_s": target}
        for result in results:
            values = _values(result, key)
            data[key][result.label] = {
                "n": len(values),
                "median_s": statistics.median(values) if values else None,
                "max_s": max(values) if values else None,
                "verdict": _verdict(values, _target(target, result.label)),
            }
    return data


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


def _state_line(result: ProfileResult) -> str:
    b = result.build
    return (
        f"{result.label}: {b['variables']} user variables; big = {b['array_bytes'] / MIB:.0f} MiB float64; "
        f"df = {b['df_rows']:,} rows x {len(b['df_dtypes'])} cols ({b['df_bytes'] / MIB:.0f} MiB deep; "
        + ", ".join(sorted(set(b["df_dtypes"].values())))
        + f"); built in {b['build_s']:.2f} s"
    )


def report(results: list[ProfileResult], args: argparse.Namespace) -> str:
    labels = [r.label for r in results]
    summ = summary(results)
    out: list[str] = []
    out.extend(_state_line(r) for r in results)
    runs = len(results[0].runs)
    out.append(
        f"{len(CASES)} failing cells x {args.repeat} repeat(s) = {runs} %%refine runs per state "
        f"(+1 warm-up run not counted); trial figures count every trial (one case needs 2 attempts)."
    )
    out.append("")
    head = ["quantity (ms)", "target"]
    for label in labels:
        head += [f"{label} median", f"{label} max", ""]
    rows = [head]
    for key, title, target in QUANTITIES:
        goals = dict.fromkeys(_target(target, label) for label in labels)  # in the states' order
        row = [title, " / ".join("-" if t is None else f"<= {t * 1000:.0f}" for t in goals)]
        for label in labels:
            s = summ[key][label]
            row += [_ms(s["median_s"]), _ms(s["max_s"]), s["verdict"]]
        rows.append(row)
    out.append(_table(rows, right=[i for i in range(2, len(head)) if (i - 2) % 3 != 2]))
    out.append("")
    out.append("Per case (median over the repeats, ms):")
    head = ["case"]
    for label in labels:
        head += [f"{label} snapshot", f"{label} prompt_ready", f"{label} trial_start"]
    rows = [head]
    for case in CASES:
        row = [case.name]
        for result in results:
            case_runs = [r for r in result.runs if r["case"] == case.name]
            for key in ("snapshot_s", "prompt_ready_s", "trial_start_s"):
                vals: list[float] = []
                for r in case_runs:
                    v = r["timings"].get(key)
                    vals.extend(v if isinstance(v, list) else [] if v is None else [v])
                row.append(_ms(statistics.median(vals)) if vals else "-")
        rows.append(row)
    out.append(_table(rows, right=range(1, len(head))))
    out.append("")
    out.append(_memory_table(results))
    out.append("")
    out.append(_breakdown_table(results))
    out.append("")
    out.append("First %%refine in a fresh kernel (warm-up, not counted above), ms:")
    for result in results:
        t = result.warmup["timings"]
        first_trial = (t.get("trial_start_s") or [None])[0]
        out.append(
            f"  {result.label}: snapshot {_ms(t.get('snapshot_s'))}, "
            f"prompt_ready {_ms(t.get('prompt_ready_s'))}, trial_start {_ms(first_trial)}"
        )
    return "\n".join(out)


def _memory_table(results: list[ProfileResult]) -> str:
    def probe_max(result: ProfileResult, who: str, key: str) -> int | None:
        values = [
            r["probe"][who][key]
            for r in result.runs
            if r.get("probe") and r["probe"].get(who) and r["probe"][who].get(key) is not None
        ]
        return max(values) if values else None

    rows = [["memory", *[r.label for r in results]]]

    def add(title: str, fn: Callable[[ProfileResult], int | None]) -> None:
        rows.append([title, *[_mib(fn(r)) for r in results]])

    add("kernel VmRSS after building the state", lambda r: r.mem_before.get("rss_kb"))
    add("kernel VmRSS after all %%refine runs", lambda r: r.mem_after.get("rss_kb"))
    add("kernel VmHWM (peak RSS, whole life)", lambda r: r.mem_after.get("hwm_kb"))
    add("kernel AnonHugePages (THP)", lambda r: r.mem_after.get("anon_huge_kb"))
    add("snapshot process RSS, max (shared incl.)", lambda r: probe_max(r, "snapshot", "rss_kb"))
    add("snapshot process private, max", lambda r: probe_max(r, "snapshot", "private_kb"))
    add("trial child RSS, max (shared incl.)", lambda r: probe_max(r, "trial", "rss_kb"))
    add("trial child private, max", lambda r: probe_max(r, "trial", "private_kb"))
    add("system MemAvailable drop in a cell, max", lambda r: max(x["mem_available_drop_kb"] for x in r.runs))
    verdicts = []
    for r in results:
        array_kb = r.build["array_bytes"] // 1024
        growth = (r.mem_after.get("rss_kb") or 0) - (r.mem_before.get("rss_kb") or 0)
        worst = max(probe_max(r, "snapshot", "private_kb") or 0, probe_max(r, "trial", "private_kb") or 0)
        if array_kb < 32 * 1024:
            verdicts.append(f"  {r.label}: n/a (the array is too small to tell)")
            continue
        ok = growth < array_kb // 2 and worst < array_kb // 2
        verdicts.append(
            f"  {r.label}: {'PASS' if ok else 'MISS'} — kernel grew {growth / 1024:+.0f} MiB over the runs, "
            f"largest private memory of a snapshot/trial process {worst / 1024:.0f} MiB; "
            f"limit: half the array = {array_kb / 2048:.0f} MiB"
        )
    probes_ok = [sum(1 for x in r.runs if x.get("probe")) for r in results]
    leftovers = ", ".join(f"{r.label}: {len(r.leftover_children)}" for r in results)
    note = (
        "(RSS counts the pages a process shares with the kernel after fork; private = Private_Clean + "
        "Private_Dirty of /proc/<pid>/smaps_rollup, i.e. what the fork really copied. Snapshot and trial "
        "figures are read by a probe appended to each passing fix, inside the trial child after the "
        f"candidate ran; probes read: {', '.join(map(str, probes_ok))}. The MemAvailable drop is "
        "system-wide, sampled every 5 ms, and includes other processes. Kernel child processes left at "
        f"the end: {leftovers}.)"
    )
    verdict = "no copy of the 1 GiB (or --quick 64 MiB) array by the snapshot/trial forks:\n" + "\n".join(
        verdicts
    )
    return _table(rows, right=range(1, len(rows[0]))) + "\n" + verdict + "\n" + textwrap.fill(note, 110)


def _breakdown_table(results: list[ProfileResult]) -> str:
    steps = ("transform", "capture", "summarize", "provider", "build", "total", "total_live_snapshot")
    head = ["prompt_ready breakdown (ms)", "state", *steps[:-1], "w/ snapshot", "measured", "faults"]
    rows = [head]
    for case in CASES:
        for result in results:
            b = result.breakdown.get(case.name, {})
            measured = [r["timings"].get("prompt_ready_s") for r in result.runs if r["case"] == case.name]
            measured = [m for m in measured if m is not None]
            if "error" in b:
                rows.append([case.name, result.label, b["error"][:60], *[""] * (len(head) - 3)])
                continue
            rows.append(
                [
                    case.name,
                    result.label,
                    *[_ms(b.get(s)) for s in steps],
                    _ms(statistics.median(measured)) if measured else "-",
                    f"{b.get('faults', 0):.0f} / {b.get('faults_live_snapshot', 0):.0f}",
                ]
            )
    text = _table(rows, right=range(2, len(head)))
    note = (
        "(Replayed in the kernel on the same state, median of 5: transform = shell.transform_cell; capture = "
        "capture_failure, including re-evaluating assert operands that pure_eval cannot evaluate in a "
        "throwaway fork of the kernel; summarize = summarize_names; provider = make_provider; build = "
        "build_request; total = their sum; w/ snapshot = the same total while a snapshot process is alive "
        "(copy-on-write faults in the kernel), as in a real %%refine; measured = prompt_ready_s of the "
        "real runs; faults = minor page faults in the kernel during the replay, without / with a live "
        "snapshot: with one, each page the kernel writes is first copied.)"
    )
    return text + "\n" + textwrap.fill(note, 110)


def _machine_line() -> str:
    mem = proc_kb("/proc/meminfo", ("MemTotal",)).get("MemTotal", 0)
    try:
        thp = Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text().strip()
    except OSError:
        thp = "?"
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        import numpy
        import pandas

        libs = f"numpy {numpy.__version__}, pandas {pandas.__version__}"
    except ImportError:
        libs = ""
    try:
        load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        load = "?"
    return (
        f"load average {load} at the start (other processes share the machine)\n"
        f"machine: {os.cpu_count()} CPUs ({cpu}), {mem / 1024 / 1024:.1f} GiB RAM, "
        f"Python {platform.python_version()} on {platform.system()} {platform.release()}, "
        f"THP {thp}; {libs}"
    )


# --------------------------------------------------------------------------- main


def _on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)  # so the finally blocks shut the kernels down


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="64 MiB array and 100k rows: a smoke run")
    parser.add_argument("--repeat", type=int, default=None, help="runs of each case (default 5, quick 1)")
    parser.add_argument("--json", metavar="PATH", help="also write every figure as JSON here")
    args = parser.parse_args(argv)
    args.repeat = args.repeat or (1 if args.quick else 5)
    signal.signal(signal.SIGTERM, _on_sigterm)
    big = (
        StateSize("big", 64 * MIB // 8, 100_000, USER_VARIABLES - 2)
        if args.quick
        else StateSize("big", GIB // 8, 1_000_000, USER_VARIABLES - 2)
    )
    small = StateSize("small", 1_000, 1_000, 8)
    started = time.perf_counter()
    machine = _machine_line()
    print(machine + "\n", flush=True)

    def log(text: str) -> None:
        print(f"{time.perf_counter() - started:6.1f}s {text}", file=sys.stderr, flush=True)

    results = []
    with tempfile.TemporaryDirectory(prefix="nbrefine-bench-") as tmp:
        for size in (small, big):  # one kernel each, one after the other: the big state lives alone
            results.append(run_profile(size, args.repeat, Path(tmp), log))
    text = report(results, args)
    print(text)
    print(f"\n(total bench time {time.perf_counter() - started:.1f} s{'; --quick' if args.quick else ''})")
    if args.json:
        payload = {
            "machine": machine,
            "quick": args.quick,
            "repeat": args.repeat,
            "summary": summary(results),
            "profiles": [r.__dict__ | {"size": r.size.__dict__} for r in results],
        }
        Path(args.json).write_text(json.dumps(payload, indent=2, default=str))
        print(f"JSON written to {args.json}")
    broken = sorted({b["error"] for r in results for b in r.breakdown.values() if "error" in b})
    if broken:  # the replay no longer matches nbrefine's internals: its figures are missing
        print(f"bench_engine: the step-by-step replay failed: {'; '.join(broken)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
