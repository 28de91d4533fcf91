"""Kernels forked from a batch worker's zygote: real kernels, through the kernel driver as a batch
worker uses it (:class:`SpareKernels`, :func:`open_kernel`), compared with kernels started the
usual way. No timing is asserted (``bench/bench_batch.py`` measures the CPU it saves)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kernel_io import ended, wait_until
from nbformat.v4 import new_code_cell, new_notebook

from nbrefine._errors import KernelDiedError
from nbrefine.headless import SpareKernels
from nbrefine.headless.forked_kernels import ForkedKernel, Zygote, batch_zygote, kernel_launch
from nbrefine.headless.kernel import TIMEOUT_ENAME, KernelDriver, call_code, open_kernel

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.usefixtures("clean_env_in_tmp"),
    pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="the zygote needs pidfds (Linux 5.3)"),
]

# What a kernel's process looks like from inside, as the notebook's code could see it.
PROBE = r"""
import json, os, signal, sys, threading
print(json.dumps({
    "path": sys.path, "cwd": os.getcwd(), "executable": sys.executable, "flags": str(sys.flags),
    "argv": [sys.argv[0], *(a for a in sys.argv[1:] if not a.endswith(".json"))],
    "main": sys.modules["__main__"].__name__,
    "names": sorted(k for k in get_ipython().user_ns if not k.startswith("_")),
    "signals": {s: repr(signal.getsignal(getattr(signal, s))) for s in ("SIGINT", "SIGCHLD", "SIGPIPE")},
    "own_session": os.getsid(0) == os.getpid() == os.getpgid(0),
    "threads": sorted(t.name.split(" ")[0] for t in threading.enumerate()),
    "env": sorted(k for k in os.environ if k != "JPY_PARENT_PID"),
    "env_value": os.environ.get("NBREFINE_ZYGOTE_PROBE"),
    "stdio": [os.readlink(f"/proc/self/fd/{n}").split(":")[0] for n in (0, 1)],  # 2: its own log
    "parent_named": os.environ.get("JPY_PARENT_PID") == str(os.getppid()),
}))
"""


def notebook() -> Any:
    return new_notebook(cells=[new_code_cell("x = 1", id="c1")])


@pytest.fixture
def spares() -> Iterator[SpareKernels]:
    with SpareKernels() as kernels:
        yield kernels


def probe(kernel: KernelDriver) -> dict[str, Any]:
    run = kernel.run(PROBE, 0, store_history=False)
    assert run.ok, run.evalue
    return dict(json.loads(run.stdout()))


def forked(kernel: KernelDriver) -> bool:
    return isinstance(kernel.client.km.provisioner.process, ForkedKernel)


def test_a_forked_kernel_is_the_process_a_started_one_would_be(
    tmp_path: Path, spares: SpareKernels, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NBREFINE_ZYGOTE_PROBE", "the worker's environment")
    (tmp_path / "nb").mkdir()
    with open_kernel(notebook(), "python3", tmp_path / "nb", 30) as kernel:
        assert not forked(kernel)
        started = probe(kernel)
    with open_kernel(notebook(), "python3", tmp_path / "nb", 30, spares=spares) as kernel:
        assert forked(kernel), spares.zygotes.failure
        made = probe(kernel)
        assert kernel.pid != spares.zygotes.zygote.pid  # type: ignore[union-attr]
    assert made == started
    assert made["cwd"] == str(tmp_path / "nb") and made["own_session"] and made["parent_named"]
    assert made["env_value"] == "the worker's environment"
    assert made["argv"][0].endswith("ipykernel_launcher.py")
    assert "Thread-1" in made["threads"]  # ipykernel's watch on its parent (the zygote) runs


def test_each_notebook_gets_a_fresh_process_of_its_own(tmp_path: Path, spares: SpareKernels) -> None:
    seen = []
    for name in ("a", "b", "c"):
        (tmp_path / name).mkdir()
        spares.prepare("python3", tmp_path / name, call_code("warm_up", "offline"))
        with open_kernel(notebook(), "python3", tmp_path / name, 30, spares=spares) as kernel:
            assert forked(kernel), spares.zygotes.failure
            run = kernel.run(
                "import os, random\nleaked = 'secret' in globals()\nsecret = 42\n"
                "print(os.getpid(), random.random(), leaked, os.getcwd())",
                0,
                store_history=True,
            )
            assert run.ok, run.evalue
            pid, draw, leaked, cwd = run.stdout().split()
            seen.append((pid, draw))
            assert leaked == "False" and cwd == str(tmp_path / name)
    assert len({pid for pid, _ in seen}) == 3 and len({draw for _, draw in seen}) == 3  # reseeded


def test_interrupts_reach_a_forked_kernel_and_it_goes_on(tmp_path: Path, spares: SpareKernels) -> None:
    with open_kernel(notebook(), "python3", tmp_path, 2, spares=spares) as kernel:
        assert forked(kernel)
        stuck = kernel.run("import time\ntime.sleep(60)", 0, store_history=False)
        assert stuck.timed_out and stuck.ename == TIMEOUT_ENAME
        after = kernel.run("print('still here')", 0, store_history=False)
        assert after.ok and after.stdout() == "still here\n"


def test_a_forked_kernel_that_dies_is_seen_dead_with_its_exit_code(
    tmp_path: Path, spares: SpareKernels
) -> None:
    with open_kernel(notebook(), "python3", tmp_path, 30, spares=spares) as kernel:
        process = kernel.client.km.provisioner.process
        assert isinstance(process, ForkedKernel)
        with pytest.raises(KernelDiedError):
            kernel.run("import os\nos._exit(3)", 0, store_history=False)
        assert wait_until(lambda: process.poll() is not None)
        assert process.returncode == 3


def test_killing_the_zygote_kills_its_kernels_and_later_ones_start_as_usual(
    tmp_path: Path, spares: SpareKernels
) -> None:
    with open_kernel(notebook(), "python3", tmp_path, 30, spares=spares) as kernel:
        assert forked(kernel)
        zygote = spares.zygotes.zygote
        assert zygote is not None
        os.kill(zygote.pid, signal.SIGKILL)
        kernel_pid = kernel.pid
        assert wait_until(lambda: ended(kernel_pid))  # its parent-death signal
    with open_kernel(notebook(), "python3", tmp_path, 30, spares=spares) as kernel:
        assert not forked(kernel)
        assert kernel.run("print(1 + 1)", 0, store_history=False).stdout() == "2\n"
    assert "the zygote is gone" in spares.zygotes.failure


def test_the_zygote_ends_with_the_worker(tmp_path: Path) -> None:
    with (
        SpareKernels() as kernels,
        open_kernel(notebook(), "python3", tmp_path, 30, spares=kernels) as kernel,
    ):
        assert forked(kernel)
        zygote = kernels.zygotes.zygote
        assert zygote is not None
    assert zygote.process.poll() is not None and kernels.zygotes.zygote is None


def parent_of(kernel: KernelDriver) -> int:
    return int(kernel.run("import os\nprint(os.getppid())", 0, store_history=False).stdout())


def started_for_the_batch() -> Zygote:
    zygote = batch_zygote("python3")
    assert zygote is not None and zygote.process is not None
    return zygote


def test_workers_linked_to_the_batchs_zygote_fork_their_kernels_from_it_and_it_ends_with_the_last(
    tmp_path: Path,
) -> None:
    zygote = started_for_the_batch()
    assert zygote.process is not None
    first, second = SpareKernels(zygote.link()), SpareKernels(zygote.link())
    zygote.channel.close()  # the client's own socket goes first: its workers still use the zygote
    try:
        for kernels in (first, second):
            with open_kernel(notebook(), "python3", tmp_path, 30, spares=kernels) as kernel:
                assert forked(kernel), kernels.zygotes.failure
                assert parent_of(kernel) == zygote.pid
                assert kernels.zygotes.zygote is not None and kernels.zygotes.zygote.process is None
        first.close()
        assert zygote.process.poll() is None  # the second worker still holds its socket
    finally:
        first.close()
        second.close()
    assert wait_until(lambda: zygote.process.poll() is not None)  # type: ignore[union-attr]
    zygote.close()


def test_a_linked_worker_that_dies_takes_its_kernels_with_it_and_the_zygote_serves_the_others(
    tmp_path: Path,
) -> None:
    zygote = started_for_the_batch()
    doomed, other = SpareKernels(zygote.link()), SpareKernels(zygote.link())
    try:
        with open_kernel(notebook(), "python3", tmp_path, 30, spares=doomed) as kernel:
            assert forked(kernel), doomed.zygotes.failure
            assert doomed.zygotes.zygote is not None
            doomed.zygotes.zygote.channel.close()  # as the socket of a killed worker closes
            kernel_pid = kernel.pid
            assert wait_until(lambda: ended(kernel_pid))  # as if its parent, its own zygote, died
        with open_kernel(notebook(), "python3", tmp_path, 30, spares=other) as kernel:
            assert forked(kernel), other.zygotes.failure
            assert parent_of(kernel) == zygote.pid
    finally:
        doomed.close()
        other.close()
        zygote.close()


def test_a_link_to_a_zygote_started_for_another_launch_is_left_and_the_worker_starts_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    zygote = started_for_the_batch()
    # The worker's environment is not the one the zygote imported with: its kernels would not
    # be the processes a started kernel would be.
    monkeypatch.setenv("NBREFINE_ZYGOTE_PROBE", "set after the batch's zygote started")
    try:
        with (
            SpareKernels(zygote.link()) as kernels,
            open_kernel(notebook(), "python3", tmp_path, 30, spares=kernels) as kernel,
        ):
            assert forked(kernel), kernels.zygotes.failure
            own = kernels.zygotes.zygote
            assert own is not None and own.process is not None and own.pid != zygote.pid
            assert parent_of(kernel) == own.pid
            assert probe(kernel)["env_value"] == "set after the batch's zygote started"
        zygote.channel.close()  # the worker left its socket unused: the client's close ends it
        assert zygote.process is not None and wait_until(lambda: zygote.process.poll() is not None)  # type: ignore[union-attr]
    finally:
        zygote.close()


def plain_kernel_spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A kernel spec "plain" whose command is not the launcher's shape (``-m ipykernel``)."""
    spec = tmp_path / "share/jupyter/kernels/plain"
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel", "-f", "{connection_file}"]  # not ipykernel_launcher
    (spec / "kernel.json").write_text(
        json.dumps({"argv": argv, "display_name": "plain", "language": "python"})
    )
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "share/jupyter"))


def test_no_batch_zygote_for_a_kernel_spec_it_cannot_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain_kernel_spec(tmp_path, monkeypatch)
    assert batch_zygote("plain") is None
    assert batch_zygote("no-such-kernel") is None


def test_a_kernel_spec_of_another_shape_is_started_as_usual(
    tmp_path: Path, spares: SpareKernels, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain_kernel_spec(tmp_path, monkeypatch)
    with open_kernel(notebook(), "plain", tmp_path, 30, spares=spares) as kernel:
        assert not forked(kernel) and spares.zygotes.zygote is None
        assert (
            kernel.run("import os\nprint(os.getppid())", 0, store_history=False).stdout()
            == f"{os.getpid()}\n"
        )


@pytest.mark.parametrize(
    ("cmd", "launch"),
    [
        (["py", "-m", "ipykernel_launcher", "-f", "c.json"], (["py"], ["-f", "c.json"])),
        (
            ["py", "-Xfrozen_modules=off", "-m", "ipykernel_launcher", "-f", "c"],
            (["py", "-Xfrozen_modules=off"], ["-f", "c"]),
        ),
        (["py", "-X", "frozen_modules=off", "-m", "ipykernel_launcher", "-f", "c"], None),  # a value: unsure
        (["py", "-m", "ipykernel", "-f", "c"], None),
        (["conda", "run", "py", "-m", "ipykernel_launcher", "-f", "c"], None),
        (["-m", "ipykernel_launcher"], None),
    ],
)
def test_only_kernel_commands_of_the_launcher_shape_are_forked(
    cmd: list[str], launch: tuple[list[str], list[str]] | None
) -> None:
    assert kernel_launch(cmd) == launch


PRELOADED = (
    "import sys\nfrom nbrefine.ipython import zygote\nzygote._preload()\nprint('\\n'.join(sys.modules))"
)


def test_a_forked_kernel_has_imported_what_it_starts_with_before_it_is_forked(
    tmp_path: Path, spares: SpareKernels
) -> None:
    """The zygote preloads what a kernel imports as it starts and loads the extension (debugpy
    alone is ~130 modules); a module missing from its list costs every kernel its import."""
    zygote = subprocess.run([sys.executable, "-c", PRELOADED], capture_output=True, text=True, check=True)
    preloaded = set(zygote.stdout.split())
    assert "debugpy" in preloaded and "nbrefine.ipython.magics" in preloaded
    with open_kernel(notebook(), "python3", tmp_path, 30, spares=spares) as kernel:
        assert forked(kernel), spares.zygotes.failure
        run = kernel.run(
            "%load_ext nbrefine\n%config Refine.display = 'text'\nimport sys\nprint('\\n'.join(sys.modules))",
            0,
            store_history=False,
        )
        assert run.ok, run.evalue
        failed = kernel.run("%%refine --max-attempts 1\nvalue = undefined_name + 1", 0, store_history=True)
        assert failed.ename == "RefineStop"
        after = kernel.run("print('\\n'.join(sys.modules))", 0, store_history=False)
    imported = set(run.stdout().split()) - preloaded
    assert not imported, f"imported by each forked kernel: {sorted(imported)}"
    by_repair = set(after.stdout().split()) - preloaded
    assert not by_repair, f"imported by each forked kernel's first repair: {sorted(by_repair)}"


GC_PROBE = r"""
import gc, json, weakref
class Node: pass
a, b = Node(), Node()
a.other, b.other = b, a  # a cycle of the notebook's own: only the collector frees it
gone = weakref.ref(a)
del a, b
gc.collect()
print(json.dumps({"frozen": gc.get_freeze_count(), "collected": gone() is None}))
"""


def test_a_forked_kernel_collects_its_own_garbage_and_skips_the_zygotes_modules(
    tmp_path: Path, spares: SpareKernels
) -> None:
    """The zygote's objects (all it imported) are frozen before each fork: a kernel's collections
    pass them over, while what the notebook makes is collected as in any kernel."""
    with open_kernel(notebook(), "python3", tmp_path, 30, spares=spares) as kernel:
        assert forked(kernel), spares.zygotes.failure
        run = kernel.run(GC_PROBE, 0, store_history=False)
        assert run.ok, run.evalue
    seen = json.loads(run.stdout())
    assert seen["collected"] and seen["frozen"] > 10_000, seen  # a started kernel: 0
