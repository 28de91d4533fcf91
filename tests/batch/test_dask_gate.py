"""``nbrefine fix --cluster``: a real dask.distributed scheduler and real worker processes.

The scheduler and the workers are ``python -m dask scheduler`` / ``python -m dask worker``
processes on loopback (two worker processes of one thread each, under a nanny, as on a cluster),
started once for this module; nothing of Dask is mocked. The model is the offline tier, or the
real ``anthropic`` SDK against ``tests/fakes/anthropic_api.py`` (the workers' kernels reach it by the
environment the workers were started with).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

distributed = pytest.importorskip("distributed")

from fakes.anthropic_api import FakeAnthropic  # noqa: E402
from test_client import FAILING, FIX_REPLY, TOGETHER, code_sources, notebook  # noqa: E402

from nbrefine.batch.gate import GateLimits, open_gate  # noqa: E402
from nbrefine.cli.main import main  # noqa: E402

pytestmark = [pytest.mark.timeout(300), pytest.mark.usefixtures("clean_env_in_tmp")]

OFFLINE = ["--provider", "offline"]
TYPO = "total = sum(pricez)\ntotal"
FIXED = "total = sum(prices)\ntotal"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Cluster:
    """A scheduler and one ``dask worker`` command (a nanny per worker process) on loopback."""

    def __init__(self, folder: Path, env: dict[str, str], workers: int = 2) -> None:
        self.address = f"tcp://127.0.0.1:{_free_port()}"
        self.workers = workers
        self.logs = folder
        port = self.address.rsplit(":", 1)[1]
        self.procs = [
            self._start("scheduler", ["scheduler", "--host", "127.0.0.1", "--port", port], env),
        ]
        options = ["--nworkers", str(workers), "--nthreads", "1", "--host", "127.0.0.1"]
        options += ["--no-dashboard", "--death-timeout", "60", "--local-directory", str(folder)]
        self.procs.append(self._start("workers", ["worker", self.address, *options], env))
        self.wait_for_workers()

    def _start(self, name: str, args: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        log = (self.logs / f"{name}.log").open("wb")
        extra = ["--no-dashboard"] if name == "scheduler" else []
        return subprocess.Popen(
            [sys.executable, "-m", "dask", *args, *extra],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # stopped as a group: the nannies' workers and their kernels
        )

    def wait_for_workers(self, timeout: float = 120) -> list[str]:
        with distributed.Client(self.address, timeout="60s", set_as_default=False) as client:
            client.wait_for_workers(self.workers, timeout=timeout)
            return sorted(client.scheduler_info(n_workers=-1)["workers"])

    def stop(self) -> None:
        for proc in reversed(self.procs):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in reversed(self.procs):
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeAnthropic]:
    with FakeAnthropic(default={"text": FIX_REPLY, "delay": 1.0}) as server:
        yield server


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, fake: FakeAnthropic) -> Iterator[Cluster]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NBREFINE_", "ANTHROPIC_", "DASK_"))}
    env.update(ANTHROPIC_API_KEY="sk-test", ANTHROPIC_BASE_URL=fake.base_url)
    running = Cluster(tmp_path_factory.mktemp("dask-logs"), env)
    try:
        yield running
    finally:
        running.stop()


def _alive(pid: int) -> bool:
    """Running: a killed kernel stays a zombie until its worker reaps it, which is dead enough."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def _running(pids: list[int], within: float = 10.0) -> list[int]:
    """Those of ``pids`` still running after ``within`` seconds (a kernel shuts down in its time)."""
    deadline = time.monotonic() + within
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    return [p for p in pids if _alive(p)]


# --------------------------------------------------------------------------- a folder, on the cluster


def test_a_folder_is_repaired_on_the_cluster_and_written_here(
    tmp_path: Path, cluster: Cluster, capsys: Any
) -> None:
    workers = cluster.wait_for_workers()
    for name in ("a", "b", "sub/c", "sub/d"):
        notebook(tmp_path / f"proj/{name}.ipynb", "prices = [2.5, 4.0, 1.5]", TYPO)
    notebook(tmp_path / "proj/logic.ipynb", "shares = [0.5, 0.5]", "assert sum(shares) == 2")
    (tmp_path / "proj/broken.ipynb").write_text("this is not json")

    code = main(["fix", "proj", *OFFLINE, "--cluster", cluster.address, "-o", "out",
                 "--report", "out/r.json", "--report", "out/r.xml"])  # fmt: skip

    out, err = capsys.readouterr()
    assert code == 2, out + err  # the bad notebook is reported, the others ran
    assert f"on the Dask scheduler at {cluster.address} (2 workers, 2 threads)" in err
    written = sorted(str(p.relative_to(tmp_path / "out")) for p in (tmp_path / "out").rglob("*.ipynb"))
    assert written == ["a.ipynb", "b.ipynb", "logic.ipynb", "sub/c.ipynb", "sub/d.ipynb"], err
    assert all(code_sources(tmp_path / "out" / name)[1] == FIXED for name in written if name != "logic.ipynb")
    report = json.loads((tmp_path / "out/r.json").read_text())
    assert report["cluster"] == cluster.address
    rows = {e["path"]: e for e in report["notebooks"]}
    assert rows["proj/logic.ipynb"]["outcome"] == "fail"
    assert "not valid JSON" in rows["proj/broken.ipynb"]["message"]
    ran = [e for e in rows.values() if e["path"] != "proj/broken.ipynb"]
    # Where each ran (the worker's address), how long it waited and ran; both workers took part.
    assert {e["worker"] for e in ran} == set(workers)
    for entry in ran:
        timings = entry["timings"]
        assert timings["queued_s"] >= 0 and 0 < timings["kernel_start_s"] < timings["total_s"]
        assert entry["started_at"] < entry["ended_at"] and entry["attempts"] == []
    # One thread per worker: a notebook handed out third waited for a free worker.
    assert max(e["timings"]["queued_s"] for e in ran) > min(e["timings"]["total_s"] for e in ran) / 2
    assert len(report["workers_ready_s"]) == 2  # nbclient and nbrefine imported once per worker
    assert 'tests="6" failures="1" errors="1"' in (tmp_path / "out/r.xml").read_text()

    # --resume: the same settings and the same files, nothing is sent to the cluster again.
    code = main(["fix", "proj", *OFFLINE, "--cluster", cluster.address, "-o", "out", "--resume",
                 "--report", "out/r.json"])  # fmt: skip
    capsys.readouterr()
    report = json.loads((tmp_path / "out/r.json").read_text())
    assert code == 2 and sum(bool(e.get("resumed")) for e in report["notebooks"]) == 5


# --------------------------------------------------------------------------- a worker that dies

# The kernel was forked by its worker's zygote, whose parent is the worker process running the
# notebook: it names that worker, then stays busy.
SLOW = (
    "import os, pathlib, time\n"
    "marks = pathlib.Path({marks!r})\n"
    "run = len(list(marks.glob('{name}-*')))\n"
    "parent = os.getppid()\n"
    "assert 'nbrefine.ipython.zygote' in open(f'/proc/{{parent}}/cmdline').read()\n"
    "worker = int(open(f'/proc/{{parent}}/stat').read().rsplit(')', 1)[1].split()[1])\n"
    "(marks / f'{name}-{{run}}').write_text(f'{{worker}} {{os.getpid()}}')\n"
    "if {always} or run == 0:\n"
    "    time.sleep(120)"
)


def test_a_worker_killed_mid_notebook_retries_it_once_elsewhere_then_reports_it(
    tmp_path: Path, cluster: Cluster, capsys: Any
) -> None:
    cluster.wait_for_workers()
    marks = tmp_path / "marks"
    marks.mkdir()
    notebook(tmp_path / "nbs/once.ipynb", SLOW.format(marks=str(marks), name="once", always=False), "x = 1")
    notebook(tmp_path / "nbs/always.ipynb", SLOW.format(marks=str(marks), name="always", always=True))
    notebook(tmp_path / "nbs/fine.ipynb", "prices = [1, 2]", TYPO)
    killed: list[tuple[str, int, int]] = []  # (mark, worker pid, kernel pid)

    def kill_workers() -> None:
        # SIGKILL the worker running each slow notebook, as the OOM killer would: 'once' on its
        # first run, 'always' on both of its runs.
        for mark in ("once-0", "always-0", "always-1"):
            path = marks / mark
            deadline = time.monotonic() + 150
            while not (path.exists() and path.read_text()) and time.monotonic() < deadline:
                time.sleep(0.1)
            if not path.exists():
                return
            worker, kernel = (int(p) for p in path.read_text().split())
            os.kill(worker, signal.SIGKILL)
            killed.append((mark, worker, kernel))

    killer = threading.Thread(target=kill_workers, daemon=True)
    killer.start()
    code = main(["fix", "nbs", *OFFLINE, "--cluster", cluster.address, "--dry-run", "--report", "r.json"])
    killer.join(10)

    out, err = capsys.readouterr()
    assert [mark for mark, _, _ in killed] == ["once-0", "always-0", "always-1"], out + err
    assert code == 1, out + err
    rows = {e["path"]: e for e in json.loads((tmp_path / "r.json").read_text())["notebooks"]}
    assert {p: e["outcome"] for p, e in rows.items()} == {
        "nbs/once.ipynb": "pass",  # run again on another worker, where it finished
        "nbs/always.ipynb": "fail",  # its second worker died too: reported, not run a third time
        "nbs/fine.ipynb": "pass",
    }
    once, always = rows["nbs/once.ipynb"], rows["nbs/always.ipynb"]
    assert [a["died"] for a in once["attempts"]] == [True]
    assert once["worker"] != once["attempts"][0]["worker"]
    first, second = (a["worker"] for a in always["attempts"])
    assert first != second
    assert always["message"] == f"the worker running it died, 2 times ({first}, {second}): not run again"
    assert not (marks / "always-2").exists()  # no third run
    assert "↻ nbs/once.ipynb: its worker died; running it again on another worker" in err
    assert f"✗ nbs/always.ipynb: {always['message']}" in err
    # The dead workers' kernels went too (their zygote ended with the worker: parent-death signal).
    assert _running([k for _, _, k in killed], within=15.0) == []


# --------------------------------------------------------------------------- Ctrl-C

WAIT = "import os, time\nopen('{name}.pid', 'w').write(str(os.getpid()))\ntime.sleep(120)"


def test_ctrl_c_kills_the_kernels_on_the_workers_and_writes_the_partial_report(
    tmp_path: Path, cluster: Cluster
) -> None:
    cluster.wait_for_workers()
    for name in ("s0", "s1", "s2"):
        notebook(tmp_path / f"nbs/{name}.ipynb", WAIT.format(name=name), "y = 2")
    command = [sys.executable, "-m", "nbrefine.cli", "fix", "nbs", *OFFLINE, "--cluster", cluster.address,
               "-o", "out", "--report", "r.json"]  # fmt: skip
    proc = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pids: list[int] = []
    try:
        deadline = time.monotonic() + 120
        while len(pids) < 2 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
            pids = [int(p.read_text()) for p in (tmp_path / "nbs").glob("s*.pid") if p.read_text()]
        assert len(pids) == 2, proc.communicate()[1] if proc.poll() is not None else "no kernel started"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out + err
    assert _running(pids, within=5.0) == []  # both workers' kernels were killed
    assert "Traceback" not in err and "interrupted" in err
    assert not list((tmp_path / "out").rglob("*.ipynb"))  # nothing half-done
    report = json.loads((tmp_path / "r.json").read_text())
    assert {e["outcome"] for e in report["notebooks"]} == {"not_run"} and len(report["notebooks"]) == 3
    # The workers are free again: the next batch runs at once.
    assert len(cluster.wait_for_workers(timeout=5)) == 2


# --------------------------------------------------------------------------- shared requests


def test_the_request_limit_and_budget_hold_across_workers(
    tmp_path: Path, cluster: Cluster, fake: FakeAnthropic, capsys: Any
) -> None:
    cluster.wait_for_workers()
    fake.reset()
    for name in ("a", "b"):
        notebook(tmp_path / f"{name}.ipynb", TOGETHER.format(name=name), FAILING)
    model = ["--provider", "anthropic", "--no-quick-fixes", "--max-attempts", "1", "--dry-run"]

    code = main(["fix", "a.ipynb", "b.ipynb", *model, "--cluster", cluster.address, "--max-requests", "1",
                 "--report", "r.json"])  # fmt: skip

    out, err = capsys.readouterr()
    assert code == 0, out + err
    report = json.loads((tmp_path / "r.json").read_text())
    assert len({e["worker"] for e in report["notebooks"]}) == 2  # the two jobs on two workers
    requests = report["requests"]
    assert (requests["requests"], requests["max_in_flight"], requests["in_flight"]) == (2, 1, 0)
    assert requests["waited_s"] > 0.5  # one waited for the other's 1-second reply
    assert requests["tokens"] == report["summary"]["tokens"] > 0

    # One budget: the first reply spends it, the other worker's job sends nothing.
    fake.reset()
    code = main(["fix", "a.ipynb", "b.ipynb", *model, "--cluster", cluster.address, "--max-requests", "1",
                 "--budget-tokens", "1", "--report", "r.json"])  # fmt: skip

    out, err = capsys.readouterr()
    assert code == 1, out + err
    assert len(fake.requests) == 1
    cells = [e["report"]["cells"][1] for e in json.loads((tmp_path / "r.json").read_text())["notebooks"]]
    assert sorted(c["status"] for c in cells) == ["fixed", "unfixed"]
    assert any("batch budget of 1 tokens is spent" in c["reason"] for c in cells)


HOLDER = """
import json, sys, time
from nbrefine.batch.gate import open_gate
gate = open_gate(sys.argv[1])
gate.over_budget()  # connected
print("ready", flush=True)
sys.stdin.readline()
with gate.slot():
    entered = time.time()
    time.sleep(0.5)
print(json.dumps({"entered": entered, "left": time.time()}), flush=True)
"""


def test_the_dask_gate_limits_separate_processes(cluster: Cluster) -> None:
    from nbrefine.batch.dask_gate import DaskGate

    with distributed.Client(cluster.address, set_as_default=False) as client:
        gate = DaskGate.create(client, GateLimits(max_requests=2, budget_usd=0.05))
        command = [sys.executable, "-c", HOLDER, gate.spec]
        pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE}
        procs = [subprocess.Popen(command, text=True, **pipes) for _ in range(4)]
        try:
            for proc in procs:
                assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
            for proc in procs:  # all at once
                assert proc.stdin is not None
                proc.stdin.write("go\n")
                proc.stdin.flush()
            spans = []
            for proc in procs:
                out, _ = proc.communicate(timeout=60)
                spans.append(json.loads(out.strip().splitlines()[-1]))
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
        edges = sorted([(s["entered"], 1) for s in spans] + [(s["left"], -1) for s in spans])
        now = most = 0
        for _, step in edges:
            now += step
            most = max(most, now)
        assert most == 2
        state = gate.state()
        assert (state.requests, state.max_in_flight, state.in_flight) == (4, 2, 0)

        other = open_gate(gate.spec)  # another job's view of the same gate
        other.charge(100, 0.06)
        reason = gate.over_budget()
        assert reason is not None and "$0.05 is spent" in reason
        gate.close()


# --------------------------------------------------------------------------- usage


def test_workers_with_another_nbrefine_are_refused_in_one_line(
    tmp_path: Path, cluster: Cluster, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    from nbrefine.batch import cluster as executor

    cluster.wait_for_workers()
    notebook(tmp_path / "a.ipynb", "x = 1")
    monkeypatch.setattr(executor, "__version__", "0.0.0-client")  # the workers report their own

    assert main(["fix", "a.ipynb", *OFFLINE, "--cluster", cluster.address]) == 2

    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert out == "" and len(lines) == 1, err
    assert f"--cluster {cluster.address}: 2 worker(s) run nbrefine " in lines[0]
    assert "this is 0.0.0-client: install the same version on every worker" in lines[0]
    assert not (tmp_path / "nbrefine-run.jsonl").exists()  # nothing started


def test_without_dask_the_error_is_one_line(monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)  # as if the extra were not installed

    assert main(["fix", "a.ipynb", "--cluster", "tcp://127.0.0.1:8786"]) == 2

    out, err = capsys.readouterr()
    expected = "nbrefine: error: --cluster needs dask.distributed: pip install 'nbrefine[dask]'\n"
    assert out == "" and err == expected


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--cluster", "tcp://127.0.0.1:8786", "--jobs", "2"], "--jobs does not apply with --cluster"),
        (["--cluster", "nonsense://x"], "--cluster nonsense://x: cannot reach a Dask scheduler"),
    ],
)
def test_bad_cluster_usage_is_one_line(tmp_path: Path, args: list[str], expected: str, capsys: Any) -> None:
    notebook(tmp_path / "a.ipynb", "x = 1")

    assert main(["fix", "a.ipynb", *OFFLINE, *args]) == 2

    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert out == "" and len(lines) == 1 and lines[0].startswith("nbrefine: error: ")
    assert expected in lines[0]
    assert not (tmp_path / "nbrefine-run.jsonl").exists()  # nothing started
