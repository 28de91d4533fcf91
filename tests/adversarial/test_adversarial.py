"""Adversarial candidates trial-run from a REAL kernel: nothing they do may reach the kernel.

One ipykernel (module fixture) talks to the loopback fake of the Anthropic API
(tests/fakes/anthropic_api.py). For each case in tests/adversarial_cases.py the fake is scripted to
reply with the adversarial candidate, and a ``%%refine --max-attempts 1 --timeout 3`` cell that
raises is run, so that exactly that candidate is trial-run through the real path (snapshot fork,
trial fork, hardening layers). Before and after, the test compares:

* in the kernel (read back as JSON): user names, their ids, content hashes of the mutable values
  (list, dict, DataFrame, ndarray, bytearray, shared mmap, memmap), the cwd, a hash of os.environ,
  a hash of the builtins, the ids of watched ``sys.modules`` entries and of ``json``'s attributes,
  the SIGINT handler, the sqlite connection's change counter;
* in the kernel: the offset and status flags of every file and folder it holds open under the
  test's folders (a fork shares open file descriptions);
* in this process: every file (content, mode, mtime, xattrs) under a test-owned folder outside
  the trial's scratch folder and under the kernel's cwd, the sqlite database file and row count,
  the connection count of a loopback TCP server and of a unix socket server, the datagrams a unix
  datagram socket received, and the host's SysV IPC objects under this run's keys;

and afterwards that the notebook saw only nbrefine's own lines, that the kernel answers ``1+1``
within a second, that no process the kernel started is left (children of the kernel, and any
process carrying this run's marker in its environment), and that once the case's cleanup ran no
SysV IPC object under this run's keys is left in the host.

``pytest -s`` prints one line per case: name, outcome status, active hardening layers.
A failing case here is a real sandbox escape: the assertions state the safe behaviour.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import re
import resource
import secrets
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import adversarial_cases
import pytest
from adversarial_cases import CASES, Case
from fakes import FakeAnthropic, block
from kernel_io import ADVERSARIAL_SETUP, RealKernel, adversarial_kernel, children_of, collect, read_proc_stat

pytestmark = pytest.mark.timeout(120)

SERVICE_TOKEN = "svc-" + secrets.token_hex(16)  # in the kernel's environment as MY_SERVICE_TOKEN
RUN_MARK = "adv-" + secrets.token_hex(8)  # in the kernel's environment as NBREFINE_ADV_RUN
LEAK = "ADV-LEAK"
HISTORY_TOKEN = "NBHIST-" + secrets.token_hex(12)  # planted as an earlier session's input
# SysV keys of this run (16 of them from IPC_KEY_BASE): SHM, MSG, then the ones a candidate may leak.
IPC_KEY_BASE = 0x4E000000 | (int(RUN_MARK[-6:], 16) << 4)
SHM_KEY, MSG_KEY, LEAK_KEY = IPC_KEY_BASE, IPC_KEY_BASE + 1, IPC_KEY_BASE + 4
TRIGGER = 'raise ValueError("trigger")'
OUTPUT_CAP = 1_000_000  # nbrefine.sandbox.trial.OUTPUT_CAP

BIG_SETUP = """\
import mmap
import numpy as np
from multiprocessing import shared_memory
big_mm = np.memmap(@BIG@ + "/big.bin", dtype="uint8", mode="w+", shape=(300 << 20,))
big_shm = shared_memory.SharedMemory(create=True, size=300 << 20)
rw_file = open(@BIG@ + "/rofile.bin", "w+b")
rw_file.write(b"R" * 4096)
rw_file.flush()
ro_map = mmap.mmap(rw_file.fileno(), 0, access=mmap.ACCESS_READ)
"""
BIG_PROBE = "[bytes(big_mm[:8]).hex(), bytes(big_shm.buf[:8]).hex(), ro_map[:8].hex()]"
BIG_CLEANUP = "big_shm.close(); big_shm.unlink(); del big_mm, ro_map; rw_file.close()"

# The kernel's home folder: credential files a trial must not read.
HOME_FILES = {
    ".netrc": "machine example.com login bob password netrc-secret-4242\n",
    ".ssh/id_rsa": "-----BEGIN OPENSSH PRIVATE KEY-----\nssh-secret-4242\n",
    ".aws/credentials": "[default]\naws_secret_access_key = aws-secret-4242\n",
    ".config/gcloud/credentials.db": "gcloud-secret-4242\n",
    ".git-credentials": "https://bob:git-secret-4242@example.com\n",
}

ORIGINAL_FILES = {
    "a.txt": b"alpha\n",
    "b.txt": b"bravo\n",
    "sub/c.txt": b"charlie\n",
    "data.bin": b"DATA-BIN-0000000",  # 16 bytes, mapped by the kernel's np.memmap
}

SETUP = (
    ADVERSARIAL_SETUP
    + """\
%config Refine.max_attempts = 1
%config Refine.timeout = 3.0
%config Refine.memory_limit_mb = 4096
"""
)

STATE_SETUP = """\
import os, sys, json, sqlite3, mmap, builtins
import numpy as np
import pandas as pd
os.chdir(@CWD@)
_adv_watched = (@OUTSIDE@, @CWD@, @DBDIR@)  # the kernel's open files there: offsets, flags
lst = [1, 2, 3]
dct = {"a": 1, "b": [1, 2]}
df = pd.DataFrame({"x": [1, 2, 3], "y": ["p", "q", "r"]})
arr = np.arange(12, dtype="int64")
n = 41
canary = bytearray(b"CANARY-0")
shared = mmap.mmap(-1, 16)
shared.write(b"SHARED-MMAP-0000")
mm = np.memmap(@DATA@, dtype="uint8", mode="r+", shape=(16,))
conn = sqlite3.connect(@DB@)
conn.execute("CREATE TABLE IF NOT EXISTS t (v INTEGER)")
conn.commit()
"""

# Defines _adv_fingerprint() in the kernel (an underscore name: not among the user names).
PROBE = """\
def _adv_fingerprint():
    import builtins as _b, hashlib as _h, os as _os, signal as _s, sys as _sys

    g = get_ipython().user_ns

    def h(obj):
        data = bytes(obj) if isinstance(obj, (bytes, bytearray, memoryview)) else repr(obj).encode()
        return _h.sha256(data).hexdigest()[:24]

    def safe(fn):
        try:
            return fn()
        except Exception as err:
            return f"ERROR {type(err).__name__}: {err}"

    def open_files():
        import fcntl as _f, stat as _st

        found = {}
        for name in _os.listdir("/proc/self/fd"):
            try:
                target = _os.readlink(f"/proc/self/fd/{name}")
                mode = _os.fstat(int(name)).st_mode
                if target.startswith(_adv_watched) and (_st.S_ISREG(mode) or _st.S_ISDIR(mode)):
                    offset = _os.lseek(int(name), 0, _os.SEEK_CUR)
                    found[name] = [target, offset, _f.fcntl(int(name), _f.F_GETFL)]
            except OSError:
                continue
        return found

    skip = {"In", "Out", "get_ipython", "exit", "quit", "open"}
    names = sorted(k for k in g if not k.startswith("_") and k not in skip)
    pd = _sys.modules["pandas"]
    watched = ("json", "os", "sys", "builtins", "numpy", "pandas", "sqlite3", "nbrefine", "socket")
    return {
        "pid": _os.getpid(),
        "names": names,
        "ids": {k: id(g[k]) for k in names},
        "lst": safe(lambda: h(g["lst"])),
        "dct": safe(lambda: [h(g["dct"]), id(g["dct"]["b"]), h(g["dct"]["b"])]),
        "df": safe(lambda: [
            int(pd.util.hash_pandas_object(g["df"], index=True).sum()),
            [str(c) for c in g["df"].columns],
            repr(g["df"].dtypes),
        ]),
        "arr": safe(lambda: [h(g["arr"].tobytes()), list(g["arr"].shape), str(g["arr"].dtype)]),
        "n": safe(lambda: repr(g["n"])),
        "canary": safe(lambda: bytes(g["canary"]).decode()),
        "shared": safe(lambda: bytes(g["shared"][:]).decode()),
        "mm": safe(lambda: bytes(g["mm"]).decode()),
        "conn": safe(lambda: [g["conn"].total_changes, g["conn"].in_transaction]),
        "cwd": _os.getcwd(),
        "environ": h(sorted(_os.environ.items())),
        # ipykernel rebinds builtins.input to a fresh bound method on every execute request
        "builtins": h(sorted((k, id(getattr(_b, k))) for k in dir(_b) if k != "input")),
        "input": getattr(_b.input, "__qualname__", repr(_b.input)),
        "ns_builtins": id(g.get("__builtins__")),
        "modules": {m: id(_sys.modules.get(m)) for m in watched},
        "json_attrs": safe(lambda: h(sorted((k, id(v)) for k, v in vars(_sys.modules["json"]).items()))),
        "sigint": repr(_s.getsignal(_s.SIGINT)),
        "open_files": safe(open_files),
    }
"""

SESSION_EXPR = """(lambda s: None if s is None else {
    "status": s.status,
    "message": s.message,
    "render": s.render_text(),
    "printed": s.render_text(failure=False),  # the text view after the one-line failure
    "attempts": [
        {
            "status": a.outcome.status if a.outcome is not None else None,
            "layers": list(a.outcome.layers) if a.outcome is not None else [],
            "detail": a.outcome.detail if a.outcome is not None else a.note,
            "error_type": a.error_type,
            "error_message": a.error_message,
            "stdout": a.outcome.stdout[:4000] if a.outcome is not None else "",
            "stdout_len": len(a.outcome.stdout) if a.outcome is not None else 0,
            "duration_s": a.outcome.duration_s if a.outcome is not None else 0.0,
            "note": a.note,
        }
        for a in s.attempts
    ],
})(__import__("nbrefine").last_session())"""


# --------------------------------------------------------------------------- processes


CONNECTION_FILES: set[str] = set()  # of every kernel this module started


def marked_processes() -> dict[int, str]:
    """Processes whose environment carries this run's marker, or whose command line names one of
    our kernels' connection files (a trial's fork may have wiped its environment block)."""
    needle = f"NBREFINE_ADV_RUN={RUN_MARK}".encode()
    names = [os.path.basename(path).encode() for path in CONNECTION_FILES]
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                environ = fh.read()
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmdline = fh.read()
        except OSError:
            continue
        if needle in environ or any(name in cmdline for name in names):
            stat = read_proc_stat(int(entry))
            found[int(entry)] = stat[0] if stat else "?"
    return found


def pid_ones(kernel_pid: int) -> dict[int, str]:
    """pid 1 of a PID namespace that one of this kernel's snapshots prepared for its trials (a
    small interpreter of its own, with no environment to carry this run's marker)."""
    needle = b"nbrefine-pid1 of snapshot "
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmdline = fh.read()
        except OSError:
            continue
        if needle in cmdline and cmdline.rstrip(b"\0").endswith(f" of {kernel_pid}".encode()):
            stat = read_proc_stat(int(entry))
            found[int(entry)] = stat[0] if stat else "?"
    return found


# --------------------------------------------------------------------------- the kernel


Kernel = RealKernel


# --------------------------------------------------------------------------- the world


class _Counter:
    """A socket served by a thread that counts what arrives: connections or datagrams."""

    def __init__(self, sock: socket.socket, name: str) -> None:
        self.sock = sock
        self.sock.settimeout(0.1)
        self.count = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def _take_one(self) -> None:
        conn, _ = self.sock.accept()
        conn.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                self._take_one()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                self.count += 1

    def connections(self, settle: float = 0.05) -> int:
        time.sleep(settle)
        with self._lock:
            return self.count

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self.sock.close()


class CountingServer(_Counter):
    """A loopback TCP server that accepts and counts connections (and closes them)."""

    def __init__(self) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)
        self.port = sock.getsockname()[1]
        super().__init__(sock, "adv-counting-server")


class UnixCountingServer(_Counter):
    """The same, on a unix socket with a path (like docker.sock, D-Bus or an ipc kernel)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(str(path))
        sock.listen(128)
        super().__init__(sock, "adv-unix-server")


class UnixDatagramCounter(_Counter):
    """A unix datagram socket with a path (like /dev/log or systemd's notify socket): counts datagrams."""

    def __init__(self, path: Path) -> None:
        self.path = path
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.bind(str(path))
        super().__init__(sock, "adv-dgram-server")

    def _take_one(self) -> None:
        self.sock.recv(65536)


_IPC_STABLE = {"shm": ("size",), "msg": ("cbytes", "qnum"), "sem": ("nsems",)}
_IPC_ID = {"shm": "shmid", "msg": "msqid", "sem": "semid"}


def sysv_objects() -> dict[str, dict[str, dict[str, str]]]:
    """The host's SysV IPC objects under this run's keys (shm, msg, sem), with their stable fields."""
    found: dict[str, dict[str, dict[str, str]]] = {}
    for kind, stable in _IPC_STABLE.items():
        found[kind] = {}
        try:
            with open(f"/proc/sysvipc/{kind}") as fh:
                header, *lines = fh.read().splitlines()
        except OSError:
            continue
        names = header.split()
        for line in lines:
            row = dict(zip(names, line.split(), strict=False))
            if IPC_KEY_BASE <= int(row["key"]) < IPC_KEY_BASE + 16:
                found[kind][f"key {int(row['key']):#x} id {row[_IPC_ID[kind]]}"] = {k: row[k] for k in stable}
    return found


def remove_sysv_objects() -> None:
    """IPC_RMID whatever a red run left under this run's keys (the host's namespace)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    remove = {"shm": libc.shmctl, "msg": libc.msgctl, "sem": libc.semctl}
    for kind, objects in sysv_objects().items():
        for label in objects:
            ident = int(label.rsplit(" ", 1)[1])
            if kind == "sem":
                remove[kind](ident, 0, 0)  # semctl(id, semnum, IPC_RMID)
            else:
                remove[kind](ident, 0, None)


@dataclass
class World:
    root: Path
    outside: Path
    cwd: Path
    db: Path
    server: CountingServer
    home: Path
    big: Path
    userver: UnixCountingServer
    dgram: UnixDatagramCounter
    rows: list[dict[str, Any]] = field(default_factory=list)

    @property
    def history(self) -> Path:
        """The kernels' IPython history database (IPYTHONDIR is ``root/ipython``)."""
        return self.root / "ipython" / "profile_default" / "history.sqlite"

    @property
    def elsewhere(self) -> Path:
        """A history database a user put elsewhere (HistoryManager.hist_file)."""
        return self.root / "elsewhere" / "kept-history.db"

    def plant_history(self, database: Path) -> None:
        """An earlier session typed HISTORY_TOKEN: written from this process, so that the kernel
        never holds it in memory (only its history database does)."""
        with contextlib.closing(sqlite3.connect(database, timeout=20)) as con, con:
            session = (con.execute("SELECT MAX(session) FROM history").fetchone()[0] or 0) + 1000
            source = f"token = {HISTORY_TOKEN!r}"
            con.execute("INSERT INTO history VALUES (?, 1, ?, ?)", (session, source, source))

    def substitute(self, code: str, kernel_pid: int) -> str:
        return (
            code.replace("@BIGSETUP@", BIG_SETUP)
            .replace("@OUTSIDE@", str(self.outside))
            .replace("@CWD@", str(self.cwd))
            .replace("@DB@", str(self.db))
            .replace("@PORT@", str(self.server.port))
            .replace("@KPID@", str(kernel_pid))
            .replace("@HOME@", str(self.home))
            .replace("@USOCK@", str(self.userver.path))
            .replace("@BIG@", repr(str(self.big)))
            .replace("@UDGRAM@", str(self.dgram.path))
            .replace("@SHMKEY@", hex(SHM_KEY))
            .replace("@MSGKEY@", hex(MSG_KEY))
            .replace("@LEAKKEY@", hex(LEAK_KEY))
            .replace("@RUN@", RUN_MARK)
            .replace("@ELSEWHERE@", repr(str(self.elsewhere)))
        )

    def restore(self) -> None:
        """Put the test-owned folders back as they were (after an escape changed them)."""
        keep = {self.outside / rel for rel in ORIGINAL_FILES} | {
            (self.outside / rel).parent for rel in ORIGINAL_FILES
        }
        for folder in (self.outside, self.cwd):
            for path in sorted(folder.rglob("*"), reverse=True):  # children before their folders
                if path in keep:
                    continue
                if path.is_dir() and not path.is_symlink():
                    path.rmdir()
                else:
                    path.unlink()
        for rel, content in ORIGINAL_FILES.items():
            path = self.outside / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            if path.exists():
                path.chmod(0o644)
                for name in os.listxattr(path):
                    os.removexattr(path, name)
            if not path.exists() or path.read_bytes() != content:
                path.write_bytes(content)

    def files(self) -> dict[str, Any]:
        """Every entry under the outside folder and the kernel's cwd: type, mode, mtime, content, xattrs."""
        state: dict[str, Any] = {}
        folders = (("outside", self.outside), ("cwd", self.cwd), ("db", self.db.parent), ("home", self.home))
        for label, folder in folders:
            for path in sorted(folder.rglob("*")):
                st = path.lstat()
                entry: dict[str, Any] = {"mode": oct(st.st_mode), "uid": st.st_uid}
                if path.is_file() and not path.is_symlink():
                    entry["sha"] = hashlib.sha256(path.read_bytes()).hexdigest()[:24]
                    if label != "db":
                        entry["mtime"] = st.st_mtime_ns
                with contextlib.suppress(OSError):
                    entry["xattrs"] = sorted(os.listxattr(path, follow_symlinks=False))
                state[f"{label}/{path.relative_to(folder).as_posix()}"] = entry
        return state

    def process(self, pid: int) -> dict[str, Any]:
        """Scheduling and limits of the kernel process, as another process can change them."""
        try:
            with open(f"/proc/{pid}/limits") as fh:
                limits = fh.read()
            return {
                "nice": os.getpriority(os.PRIO_PROCESS, pid),
                "ioprio": _ioprio(pid),
                "affinity": sorted(os.sched_getaffinity(pid)),
                "limits": limits,
            }
        except OSError as err:
            return {"error": str(err)}

    def db_rows(self) -> int:
        with contextlib.closing(sqlite3.connect(f"file:{self.db}?mode=ro", uri=True)) as con:
            return int(con.execute("SELECT COUNT(*) FROM t").fetchone()[0])


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("adversarial")
    names = ("outside", "kernel-cwd", "db", "home", "big", "elsewhere")
    outside, cwd, dbdir, home, big, elsewhere = (root / n for n in names)
    for folder in (outside, cwd, dbdir, home, big, elsewhere):
        folder.mkdir()
    for rel, content in HOME_FILES.items():
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).write_text(content)
    (home / ".ssh" / "id_rsa").chmod(0o600)
    server = CountingServer()
    userver = UnixCountingServer(root / "service.sock")
    dgram = UnixDatagramCounter(root / "datagram.sock")
    w = World(root, outside, cwd, dbdir / "kernel.sqlite", server, home, big, userver, dgram)
    w.restore()
    yield w
    server.close()
    userver.close()
    dgram.close()
    remove_sysv_objects()
    if w.rows:
        width = max(len(r["name"]) for r in w.rows)
        print("\n\nadversarial cases:")
        for r in w.rows:
            layers = ",".join(r["layers"]) or "-"
            print(f"  {r['name']:<{width}}  {r['status']:<13} {r['seconds']:5.2f}s  {layers}")


@pytest.fixture(scope="module", params=["tcp", "ipc"])
def module_kernel(request: pytest.FixtureRequest, fake: FakeAnthropic, world: World) -> Iterator[Kernel]:
    """A kernel on each transport ipykernel offers: tcp, and ipc (unix sockets with a path)."""
    kernel = adversarial_kernel(
        fake.base_url,
        request.param,
        MY_SERVICE_TOKEN=SERVICE_TOKEN,
        DB_PASSWORD="env-db-password-4242",
        NBREFINE_ADV_RUN=RUN_MARK,
        HOME=str(world.home),
        IPYTHONDIR=str(world.root / "ipython"),
        NBREFINE_TEST_IPC_DIR=str(world.root),
    )
    CONNECTION_FILES.add(kernel.km.connection_file)
    yield kernel
    kernel.shutdown()


ORIGINAL_PROCESS: dict[int, dict[str, Any]] = {}


def _ioprio(pid: int) -> int:
    import ctypes

    if platform.machine() != "x86_64":
        return -1
    libc = ctypes.CDLL(None, use_errno=True)
    return int(libc.syscall(252, 1, pid))  # ioprio_get(IOPRIO_WHO_PROCESS, pid)


def _q(path: Path) -> str:
    return repr(str(path))


def restore_process(pid: int, original: dict[str, Any]) -> None:
    """Undo what an escaped candidate did to the kernel process's scheduling and limits."""
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, pid, original["nice"])
        os.sched_setaffinity(pid, original["affinity"])
        resource.prlimit(pid, resource.RLIMIT_NOFILE, original["nofile"])


@pytest.fixture
def kernel(module_kernel: Kernel, fake: FakeAnthropic, world: World) -> Iterator[Kernel]:
    module_kernel.ensure_healthy()
    CONNECTION_FILES.add(module_kernel.km.connection_file)
    if module_kernel.pid not in ORIGINAL_PROCESS:
        ORIGINAL_PROCESS[module_kernel.pid] = {
            "nice": os.getpriority(os.PRIO_PROCESS, module_kernel.pid),
            "affinity": os.sched_getaffinity(module_kernel.pid),
            "nofile": resource.prlimit(module_kernel.pid, resource.RLIMIT_NOFILE),
        }
    restore_process(module_kernel.pid, ORIGINAL_PROCESS[module_kernel.pid])
    world.restore()
    module_kernel.ok(SETUP)
    state = (
        STATE_SETUP.replace("@CWD@", _q(world.cwd))
        .replace("@DATA@", _q(world.outside / "data.bin"))
        .replace("@DB@", _q(world.db))
        .replace("@OUTSIDE@", _q(world.outside))
        .replace("@DBDIR@", _q(world.db.parent))
    )
    module_kernel.ok(state + "\n" + PROBE)
    fake.reset()
    yield module_kernel
    fake.reset()


# --------------------------------------------------------------------------- checks


def snapshot_state(kernel: Kernel, world: World) -> dict[str, Any]:
    return {
        "kernel": kernel.value("_adv_fingerprint()"),
        "files": world.files(),
        "kernel_process": world.process(kernel.pid),
        "db_rows": world.db_rows(),
        "connections": world.server.connections(),
        "unix_connections": world.userver.connections(0),
        "unix_datagrams": world.dgram.connections(0),
        "sysvipc": sysv_objects(),
    }


def kept_open(before: dict[str, Any], after: dict[str, Any]) -> None:
    """Compare the offsets and flags of the files the kernel held open all through the case only:
    the kernel itself closes the previous case's (its memmap, its sqlite connection) whenever it
    lets go of the previous session, and no trial can open or close a descriptor of the kernel's."""
    files = [state["kernel"].get("open_files") for state in (before, after)]
    if not all(isinstance(found, dict) for found in files):
        return
    first, second = files
    common = {fd for fd in first if fd in second and first[fd][0] == second[fd][0]}
    for state in (before, after):
        state["kernel"]["open_files"] = {
            fd: v for fd, v in state["kernel"]["open_files"].items() if fd in common
        }


def diff(before: Any, after: Any, path: str = "") -> list[str]:
    if isinstance(before, dict) and isinstance(after, dict):
        out = []
        for key in sorted(set(before) | set(after), key=str):
            if key not in before:
                out.append(f"{path}/{key}: appeared {after[key]!r}"[:300])
            elif key not in after:
                out.append(f"{path}/{key}: disappeared (was {before[key]!r})"[:300])
            else:
                out.extend(diff(before[key], after[key], f"{path}/{key}"))
        return out
    if before != after:
        return [f"{path}: {before!r} -> {after!r}"[:300]]
    return []


def describe(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            cmdline = fh.read().replace(b"\0", b" ").decode(errors="replace")[:120]
        with open(f"/proc/{pid}/wchan") as fh:
            wchan = fh.read()
    except OSError as err:
        return f"gone ({err})"
    stat = read_proc_stat(pid)
    return f"{stat} {cmdline!r} wchan={wchan} children={children_of(pid)}"


def _resource_tracker(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return b"multiprocessing.resource_tracker" in fh.read()
    except OSError:
        return False


def wait_no_strays(kernel: Kernel, within: float = 5.0) -> str:
    """'' when no child of the kernel and no marked process (other than the kernel) is left."""
    deadline = time.monotonic() + within
    while True:
        # multiprocessing's resource tracker is the kernel's own (SharedMemory in a case's setup)
        children = {pid: st for pid, st in children_of(kernel.pid).items() if not _resource_tracker(pid)}
        marked = {
            pid: st
            for pid, st in {**marked_processes(), **pid_ones(kernel.pid)}.items()
            if pid != kernel.pid and not _resource_tracker(pid)
        }
        if not children and not marked:
            return ""
        if time.monotonic() >= deadline:
            described = {pid: describe(pid) for pid in {**children, **marked}}
            return f"stray processes: children of the kernel {children}, marked processes {described}"
        time.sleep(0.05)


def kernel_rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def interrupt_still_works(kernel: Kernel) -> str:
    """'' when Ctrl-C still interrupts a running cell with KeyboardInterrupt."""
    msg_id = kernel.kc.execute("__import__('time').sleep(5)")
    time.sleep(0.4)
    started = time.monotonic()
    kernel.km.interrupt_kernel()
    try:
        out = collect(kernel.kc, msg_id, timeout=4)
    except TimeoutError:
        kernel.broken = True
        return "the kernel did not answer within 4 s of an interrupt"
    took = time.monotonic() - started
    if out["ename"] != "KeyboardInterrupt" or took > 3:
        return f"interrupt gave {out['ename']!r} after {took:.1f} s"
    return ""


def notebook_output_problems(out: dict[str, Any], session: dict[str, Any]) -> list[str]:
    problems = []
    if LEAK in out["text"]:
        problems.append(f"candidate output leaked into the notebook: {out['text'][:500]!r}")
    if out["displays"] or out["results"]:
        problems.append(f"stray displays/results in the notebook: {out['displays']} {out['results']}")
    report = session["printed"] + "\n"
    if not out["stdout"].endswith(report):
        problems.append(
            f"the notebook's stdout does not end with the session report: {out['stdout'][-800:]!r}"
        )
    else:
        progress = out["stdout"][: -len(report)].splitlines()
        stray = [line for line in progress if not line.startswith("nbrefine:")]
        if stray:
            problems.append(f"stray lines in the notebook's stdout: {stray[:5]}")
    if out["stderr"].strip():
        problems.append(f"stray stderr in the notebook: {out['stderr'][:500]!r}")
    return problems


# --------------------------------------------------------------------------- the test


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:60]


@pytest.mark.parametrize("case", CASES, ids=[slug(c.name) for c in CASES])
def test_adversarial_candidate(case: Case, kernel: Kernel, fake: FakeAnthropic, world: World) -> None:
    code = world.substitute(case.code, kernel.pid)
    replies = [block(code)] + ([block(case.second)] if case.second is not None else [])
    fake.script(*replies)
    attempts = len(replies)
    ipc_at_start = sysv_objects()
    if case.setup:
        kernel.ok(world.substitute(case.setup, kernel.pid))
    if "history" in case.name:
        world.plant_history(world.elsewhere if "elsewhere" in case.name else world.history)
    before = snapshot_state(kernel, world)
    if "@BIGSETUP@" in case.setup:
        before["big"] = kernel.value(BIG_PROBE)
    rss_before = kernel_rss(kernel.pid)
    problems: list[str] = []

    started = time.monotonic()
    try:
        out = kernel.run(
            f"%%refine --max-attempts {attempts} --timeout 3 {case.options}\n{TRIGGER}", timeout=40
        )
    except TimeoutError as err:
        alive = kernel.km.is_alive()
        world.rows.append(
            {
                "name": case.name,
                "status": "KERNEL DIED" if not alive else "KERNEL HUNG",
                "layers": [],
                "seconds": time.monotonic() - started,
            }
        )
        print(f"\nADV {case.name:<62} {world.rows[-1]['status']}")
        pytest.fail(f"[{case.name}] the kernel stopped answering (alive={alive}): {str(err)[:1500]}")
    seconds = time.monotonic() - started

    if out["ename"] != "RefineStop":
        problems.append(
            f"the %%refine cell ended with {out['ename']!r}, not RefineStop: {out['text'][-1500:]}"
        )
    session = kernel.value(SESSION_EXPR)
    assert session is not None and session["attempts"], f"no session/attempt recorded: {out['text'][-1500:]}"
    first = session["attempts"][0]
    status, layers = first["status"], first["layers"]
    said = f"{first['error_type'] or ''}: {first['error_message'] or first['detail'] or ''}".strip(": ")
    world.rows.append(
        {"name": case.name, "status": status, "layers": layers, "seconds": seconds, "said": said}
    )
    print(
        f"\nADV {case.name:<62} {status!s:<13} {seconds:5.2f}s layers={','.join(layers) or '-'} | {said[:90]}"
    )

    # The outcome is typed as expected.
    if status not in case.status:
        problems.append(
            f"outcome {status!r}, expected one of {case.status}: {first['error_type']}: "
            f"{first['error_message']} | detail={first['detail']!r} | stdout={first['stdout'][:300]!r}"
        )
    if case.detail:
        said = f"{first['detail']} {first['error_message']}".lower()
        if case.detail.lower() not in said:
            problems.append(f"outcome detail {said!r} does not mention {case.detail!r}")
    if status == "passed" and case.status[0] != "passed":
        problems.append("the candidate's trial PASSED: the session offers it as a fix")
    if seconds > 20:
        problems.append(f"the %%refine cell took {seconds:.1f} s")

    # Nothing reached the live kernel or the machine.
    after = snapshot_state(kernel, world)
    expected_connections = before["connections"] + case.connections
    if case.connections:
        deadline = time.monotonic() + 2
        while after["connections"] < expected_connections and time.monotonic() < deadline:
            after["connections"] = world.server.connections(0.05)
    if "@BIGSETUP@" in case.setup:
        after["big"] = kernel.value(BIG_PROBE)
        kernel.ok(BIG_CLEANUP)
    grown = kernel_rss(kernel.pid) - rss_before
    if grown > 200 << 20:
        problems.append(f"the kernel grew by {grown >> 20} MiB during the case")
    kept_open(before, after)
    changes = diff(before, {**after, "connections": after["connections"] - case.connections})
    problems.extend(f"changed: {c}" for c in changes)
    problems.extend(notebook_output_problems(out, session))

    # The kernel still answers at once, with nothing stray on its channels.
    try:
        started = time.monotonic()
        reply = kernel.run("1+1", timeout=1.0)
        if reply["results"] != ["2"] or reply["stdout"] or reply["stderr"]:
            problems.append(f"1+1 answered oddly: {reply}")
        if LEAK in reply["text"]:
            problems.append("candidate output reached the notebook later")
    except TimeoutError:
        problems.append(f"the kernel did not answer 1+1 within 1 s (alive={kernel.km.is_alive()})")
    stray = wait_no_strays(kernel)
    if stray:
        problems.append(stray)

    problems.extend(case_specific(case, kernel, fake, world, session))
    if case.cleanup:
        kernel.ok(world.substitute(case.cleanup, kernel.pid))
    left = diff(ipc_at_start, sysv_objects())
    if left:
        problems.extend(f"SysV IPC object left behind: {c}" for c in left)
        remove_sysv_objects()
    assert not problems, f"[{case.name}] status={status} layers={layers}\n  " + "\n  ".join(problems)


def case_specific(
    case: Case, kernel: Kernel, fake: FakeAnthropic, world: World, session: dict[str, Any]
) -> list[str]:
    problems: list[str] = []
    first = session["attempts"][0]
    if case.name.startswith("install a SIGINT handler"):
        problem = interrupt_still_works(kernel)
        if problem:
            problems.append(problem)
    elif case.name.startswith("write to a scratch file"):
        line = next((ln for ln in first["stdout"].splitlines() if ln.startswith("SCRATCH=")), "")
        scratch_file = line[len("SCRATCH=") :]
        if not scratch_file.startswith(("/tmp/", "/var/")) or "nbrefine-trial-" not in scratch_file:
            problems.append(f"unexpected scratch path {scratch_file!r}")
        elif os.path.exists(os.path.dirname(scratch_file)):
            problems.append(f"the trial's scratch folder {os.path.dirname(scratch_file)} was left behind")
    elif case.name.startswith("insert+commit"):
        rows = world.db_rows()
        kernel.ok('conn.execute("INSERT INTO t VALUES (7)")\nconn.commit()')
        if world.db_rows() != rows + 1:
            problems.append("the kernel's own sqlite connection no longer commits")
    elif case.name.startswith("output flood"):
        if first["stdout_len"] > 2 * OUTPUT_CAP + 200:
            problems.append(f"the trial's stdout was not capped: {first['stdout_len']} characters")
    elif case.name.startswith("infinite loop"):
        if first["duration_s"] < 2.5:
            took = first["duration_s"]
            problems.append(f"a trial stopped at its 3 s timeout reports a duration of {took} s")
    elif case.name.startswith("SysV:") and "@SHMKEY@" in case.code + case.setup:
        content = kernel.value("__import__('ctypes').string_at(sysv_addr, 16).decode()")
        if content != "SYSV-ORIG-000000":
            problems.append(f"the kernel's SysV segment now holds {content!r}")
    elif case.setup == adversarial_cases._OPEN_FILES_SETUP:
        rows = kernel.value("len(list(rows_file))")
        if rows != 5000:
            problems.append(f"the kernel read {rows} of its 5,000 remaining rows after the trial")
        import fcntl

        with open(world.outside / "rows.csv") as probe:
            try:
                fcntl.flock(probe.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                problems.append("the trial's flock outlived it: the kernel's open file is locked")
    elif "history" in case.name:
        text = json.dumps(session) + "".join(json.dumps(r["json"]) for r in fake.requests)
        for shown in (HISTORY_TOKEN, HISTORY_TOKEN.encode().hex(), HISTORY_TOKEN[7:]):
            if shown in text:
                problems.append("the planted history token reached the session or a prompt")
        # The pattern is built in the kernel, so that this cell's text (its own history) never holds it.
        kept = kernel.value("len(list(get_ipython().history_manager.search('*' + 'NBHIST' + '-*')))")
        if not kept:
            problems.append(
                "the kernel's own history search no longer finds the token (its connection broke?)"
            )
    elif case.name.startswith("print a secret"):
        requests = fake.requests
        if len(requests) != 2:
            problems.append(f"expected 2 model requests, saw {len(requests)}")
        if SERVICE_TOKEN in first["stdout"]:
            problems.append("the secret env value was readable in the trial (it must be absent there)")
        for number, request in enumerate(requests, start=1):
            body = json.dumps(request["json"])
            if SERVICE_TOKEN in body:
                problems.append(f"the secret env value reached the model in request {number}")
        if len(requests) == 2:
            second = json.dumps(requests[1]["json"])
            if "token:" not in second:
                problems.append("the second prompt did not carry the output of the first trial")
        if [a["status"] for a in session["attempts"]] != ["failed", "passed"]:
            problems.append(f"attempt statuses {[a['status'] for a in session['attempts']]}")
    if first["layers"]:
        # ipcns, pidns, private-dev and (the trial's or the snapshot's) userns come from the snapshot
        # process (issue 19): no trial runs with a capability over the host, even when its
        # runner has started a thread (then it cannot make a user namespace of its own)
        required = (
            "fd-hygiene",
            "rlimits",
            "seccomp",
            "landlock",
            "audit-hook",
            "ipcns",
            "pidns",
            "private-dev",
        )
        for layer in (*required, "userns"):
            if layer not in first["layers"]:
                problems.append(f"hardening layer {layer} was not active: {first['layers']}")
        if "--allow-network" not in case.options and "netns" not in first["layers"]:
            problems.append(f"hardening layer netns was not active: {first['layers']}")
    return problems


def test_assert_operands_are_evaluated_hardened(kernel: Kernel, fake: FakeAnthropic, world: World) -> None:
    """An assert whose operand calls code (``charge(100)``) is re-evaluated to show its value in the
    prompt: that evaluation must be as hardened as a trial (here: no write outside scratch)."""
    ledger = world.outside / "charged.txt"
    kernel.ok(
        "def charge(amount):\n"
        f"    with open({str(ledger)!r}, 'a') as fh:\n"
        "        fh.write(f'charged {amount}\\n')\n"
        "    return 'declined'\n"
    )
    fake.script(block("pass"))
    out = kernel.run('%%refine --max-attempts 1 --timeout 3\nassert charge(100) == "ok"', timeout=40)
    assert out["ename"] in ("RefineStop", None), out["text"][-1500:]
    lines = ledger.read_text().splitlines()
    assert lines == ["charged 100"], f"the cell ran once, but the ledger says {lines}"
    request = json.dumps(fake.requests[0]["json"]) if fake.requests else ""
    assert "charge(100)" in request, "the prompt did not show the failing assert"
