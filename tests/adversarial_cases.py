"""The adversarial candidates that tests/adversarial/test_adversarial.py trial-runs from a real kernel.

Each case is the code a (hostile or careless) model could return as its "fix". The test scripts
the fake Anthropic API to reply with it, runs a failing ``%%refine`` cell so that exactly that
candidate is trial-run, and checks that nothing reached the live kernel or the machine.

Placeholders, substituted by the test: ``@OUTSIDE@`` (a test-owned folder outside the trial's
scratch folder, holding ``a.txt``, ``b.txt``, ``sub/c.txt`` and ``data.bin``), ``@CWD@`` (the
kernel's working directory, also test-owned), ``@DB@`` (the kernel's sqlite database),
``@PORT@`` (the test's loopback TCP server), ``@KPID@`` (the kernel's pid), ``@HOME@`` (the kernel's
home folder, holding credential files), ``@USOCK@`` (the test's unix socket server), and
``@BIGSETUP@`` (kernel code that maps 300 MiB files and shared memory as ``big_mm``, ``big_shm``,
``ro_map``).
Issue 19 adds ``@UDGRAM@`` (the test's unix datagram socket), ``@SHMKEY@`` / ``@MSGKEY@`` (SysV keys of
a segment and a message queue the kernel holds, see ``_SYSV_SETUP``), ``@LEAKKEY@`` (the first of 16
SysV keys a candidate may try to leave objects under) and ``@RUN@`` (this run's marker); the keys
are this run's own, so the test sees exactly what a case left in the host's IPC namespace.

Markers that must never show up in the notebook are built at run time (``"ADV" + "-LEAK"``), so
the candidate's text, which nbrefine does show, never contains them.

The kernel state every case starts from (see ``STATE_SETUP`` in the test): ``lst``, ``dct``,
``df`` (pandas), ``arr`` (numpy), ``n``, ``canary`` (a bytearray), ``shared`` (an anonymous
``mmap.mmap``), ``mm`` (an ``np.memmap`` of ``@OUTSIDE@/data.bin`` opened ``r+``), ``conn`` (a
sqlite3 connection to ``@DB@`` with a table ``t``).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CASES", "Case"]


@dataclass(frozen=True)
class Case:
    name: str
    code: str
    #: acceptable outcome statuses of the (first) trial; the first one is what we expect
    status: tuple[str, ...]
    options: str = ""
    #: substring expected in the outcome's detail or error message (case-insensitive)
    detail: str = ""
    #: connections the loopback server may count during this case
    connections: int = 0
    #: a second candidate for the next attempt (then --max-attempts 2)
    second: str | None = None
    #: kernel code run before the %%refine cell (e.g. a %config line)
    setup: str = ""
    #: kernel code run after the case's checks (closes what ``setup`` opened)
    cleanup: str = ""
    note: str = ""


def _c(name: str, code: str, *status: str, **kw: object) -> Case:
    return Case(name, code.strip("\n"), tuple(status), **kw)  # type: ignore[arg-type]


_LIBC = "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"


def _must(call: str, what: str) -> str:
    """Code that runs a libc ``call`` and raises OSError (errno) when it fails."""
    return f"if {call} != 0:\n    raise OSError(ctypes.get_errno(), {what!r})\n"


# ---- the forged result: a pickle written into the trial's result pipe ---------------------------

# Evaluated in the *kernel* when it unpickles the snapshot's answer.
_KERNEL_EXPR = (
    "(__import__('IPython').get_ipython().user_ns.__setitem__('pwned_by_trial', 1), "
    "open('@OUTSIDE@/pwned-in-kernel.txt', 'w').write('x'), "
    "__import__('socket').create_connection(('127.0.0.1', @PORT@)).close(), "
    "__import__('nbrefine.sandbox', fromlist=['TrialOutcome']).TrialOutcome('passed'))[-1]"
)
# Evaluated in the (unhardened) *snapshot process* when it unpickles the trial's answer; returns
# an object whose pickle makes the kernel evaluate _KERNEL_EXPR.
_SNAPSHOT_EXPR = (
    "(open('@OUTSIDE@/pwned-in-snapshot.txt', 'w').write('x'), "
    "type('Relay', (), {'__reduce__': lambda self: (eval, (" + repr(_KERNEL_EXPR) + ",))})())[-1]"
)
_FORGE = f"""
import os, pickle, stat, struct
class Payload:
    def __reduce__(self):
        return (eval, ({_SNAPSHOT_EXPR!r},))
data = pickle.dumps(Payload())
"""

# Writes a pickle into every pipe the trial holds (the result pipe among them), then leaves.
_PIPE_WRITE = """
import os, stat, struct
message = struct.pack("!Q", len(data)) + data
for name in os.listdir("/proc/self/fd"):
    try:
        if int(name) > 2 and stat.S_ISFIFO(os.fstat(int(name)).st_mode):
            os.write(int(name), message)
    except OSError:
        pass
os._exit(0)
"""

CASES: list[Case] = [
    # ---- the live namespace ---------------------------------------------------------------------
    _c("delete globals", "del lst, dct, df, arr, n, pd, np\nglobals().clear()", "passed"),
    _c(
        "rebind globals",
        'lst = "rebound"\ndct = None\ndf = 0\narr = None\nn = -1\npd = None\nconn = None\nprint = None',
        "passed",
    ),
    _c(
        "mutate list/dict/DataFrame/array in place",
        """
lst.append(99)
lst[0] = -1
dct["b"].append(3)
dct.clear()
df.loc[0, "x"] = -1
df["z"] = 0
df.drop(columns=["y"], inplace=True)
arr[:] = 0
canary[:] = b"MUTATED!"
""",
        "passed",
    ),
    _c(
        "rebind builtins",
        "import builtins\nbuiltins.len = lambda x: 0\nbuiltins.sorted = None\nbuiltins.open = None\n"
        "del builtins.abs",
        "passed",
    ),
    _c(
        "edit the __builtins__ dict",
        "b = __builtins__ if isinstance(__builtins__, dict) else vars(__builtins__)\n"
        'b["len"] = None\nb["max"] = lambda *a: 0\ndel b["min"]',
        "passed",
    ),
    _c(
        "monkeypatch an imported module (json)",
        """
import json, sys, types
json.dumps = lambda *a, **k: "patched"
json.loads = None
sys.modules["json"] = types.ModuleType("json")
sys.modules.pop("pandas")
""",
        "passed",
    ),
    # ---- files -------------------------------------------------------------------------------------
    _c("write a new file outside scratch", 'open("@OUTSIDE@/new.txt", "w").write("x")', "refused"),
    _c("overwrite a file outside scratch", 'open("@OUTSIDE@/a.txt", "w").write("x")', "refused"),
    _c("delete a file outside scratch", 'import os\nos.remove("@OUTSIDE@/a.txt")', "refused"),
    _c(
        "rename a file outside scratch",
        'import os\nos.rename("@OUTSIDE@/a.txt", "@OUTSIDE@/renamed.txt")',
        "refused",
    ),
    _c("rmtree outside scratch", 'import shutil\nshutil.rmtree("@OUTSIDE@/sub")', "refused"),
    _c(
        "os.open with O_CREAT outside scratch",
        'import os\nfd = os.open("@OUTSIDE@/created.bin", os.O_CREAT | os.O_WRONLY, 0o644)\n'
        'os.write(fd, b"x")',
        "refused",
    ),
    _c(
        "relative write in the kernel's cwd (a private overlay: the real folder is untouched)",
        'open("relative.txt", "w").write("x")\nassert open("relative.txt").read() == "x"',
        "passed",
    ),
    _c("os.chmod outside scratch", 'import os\nos.chmod("@OUTSIDE@/a.txt", 0)', "refused"),
    _c(
        "write to a scratch file (allowed)",
        """
import os, tempfile
path = os.path.join(tempfile.gettempdir(), "ok.txt")
with open(path, "w") as fh:
    fh.write("hello")
assert open(path).read() == "hello"
print("SCRATCH=" + path)
""",
        "passed",
    ),
    _c(
        "ctypes unlink outside (bypasses the audit hook)",
        _LIBC + _must('libc.unlink(b"@OUTSIDE@/a.txt")', "unlink refused"),
        "failed",
        detail="unlink refused",
    ),
    _c(
        "ctypes truncate outside (bypasses the audit hook)",
        _LIBC + _must('libc.truncate(b"@OUTSIDE@/a.txt", ctypes.c_long(0))', "truncate refused"),
        "failed",
        detail="truncate refused",
    ),
    _c(
        "ctypes hard link of an outside file into scratch, then write",
        _LIBC
        + "import os, tempfile\n"
        + 'alias = os.path.join(tempfile.gettempdir(), "alias.txt")\n'
        + _must('libc.link(b"@OUTSIDE@/a.txt", alias.encode())', "link refused")
        + 'with open(alias, "w") as fh:\n    fh.write("overwritten through a hard link")\n',
        "failed",
        detail="link refused",
    ),
    _c(
        "ctypes chmod outside (bypasses the audit hook)",
        _LIBC + _must('libc.chmod(b"@OUTSIDE@/a.txt", 0)', "chmod refused"),
        "failed",
        "refused",
        detail="refused",
        note="Landlock does not cover chmod/chown/utimes; only the audit hook does",
    ),
    _c(
        "os.setxattr on a file outside scratch",
        'import os\nos.setxattr("@OUTSIDE@/a.txt", "user.nbrefine_adv", b"pwned")',
        "refused",
        "failed",
        note="os.setxattr is not among the audit hook's path events; Landlock does not cover xattrs",
    ),
    _c(
        "atexit handler that writes outside scratch",
        """
import atexit
def _later():
    with open("@OUTSIDE@/atexit.txt", "w") as fh:
        fh.write("x")
atexit.register(_later)
""",
        "passed",
    ),
    # ---- process-wide state ------------------------------------------------------------------------
    _c("change the working directory", 'import os\nos.chdir("/")\nos.chdir("@OUTSIDE@")', "passed"),
    _c(
        "change os.environ",
        'import os\nos.environ["ADV_INJECTED"] = "1"\ndel os.environ["PATH"]\n'
        'os.environ["HOME"] = "/nowhere"\nos.putenv("LD_PRELOAD", "/nonexistent.so")',
        "passed",
    ),
    # ---- network -----------------------------------------------------------------------------------
    _c(
        "socket connect to the loopback server",
        'import socket\ns = socket.socket()\ns.settimeout(2)\ns.connect(("127.0.0.1", @PORT@))',
        "refused",
        detail="socket",
    ),
    _c(
        "urllib to the loopback server",
        'import urllib.request\nurllib.request.urlopen("http://127.0.0.1:@PORT@/", timeout=2).read()',
        "refused",
        detail="socket",
    ),
    _c(
        "ctypes connect to the loopback server (bypasses the audit hook)",
        _LIBC
        + "import socket, struct\n"
        + "fd = libc.socket(socket.AF_INET, socket.SOCK_STREAM, 0)\n"
        + 'addr = struct.pack("=H", socket.AF_INET) + struct.pack("!H", @PORT@)\n'
        + 'addr += socket.inet_aton("127.0.0.1") + bytes(8)\n'
        + _must("libc.connect(fd, addr, len(addr))", "connect failed"),
        "failed",
        detail="connect failed",
    ),
    _c(
        "socket connect with --allow-network (opt-in works)",
        'import socket\ns = socket.create_connection(("127.0.0.1", @PORT@), timeout=2)\ns.close()',
        "passed",
        options="--allow-network",
        connections=1,
    ),
    # ---- processes ---------------------------------------------------------------------------------
    _c("subprocess.run", 'import subprocess\nsubprocess.run(["true"])', "refused", detail="subprocess"),
    _c("os.system", 'import os\nos.system("true")', "refused", detail="os.system"),
    _c("os.popen", 'import os\nos.popen("true").read()', "refused", detail="subprocess"),
    _c(
        "fork bomb with os.fork",
        "import os\nwhile True:\n    if os.fork() == 0:\n        while True:\n            pass",
        "refused",
        detail="os.fork",
    ),
    _c(
        "fork bomb with ctypes libc.fork (bypasses the audit hook)",
        _LIBC
        + """
import os, time
made = 0
for _ in range(64):
    pid = libc.fork()
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    if pid < 0:
        raise OSError(ctypes.get_errno(), "libc fork refused")
    made += 1
raise ValueError(f"case fork: {made} processes started")
""",
        "failed",
        detail="fork refused",
    ),
    _c(
        "ctypes execv (bypasses the audit hook)",
        _LIBC
        + 'argv = (ctypes.c_char_p * 2)(b"/bin/true", None)\n'
        + 'libc.execv(b"/bin/true", argv)\nraise OSError(ctypes.get_errno(), "execv refused")',
        "failed",
        detail="execv refused",
    ),
    _c(
        "thread left running (non-daemon busy loop)",
        "import threading\ndef spin():\n    while True:\n        pass\n"
        "threading.Thread(target=spin, daemon=False).start()",
        "passed",
    ),
    # ---- resources ---------------------------------------------------------------------------------
    _c(
        "memory bomb: bytearray growth",
        "b = bytearray()\nwhile True:\n    b += bytes(1 << 26)",
        "memory_limit",
        # At the default 4 GiB, growing (and copying) a bytearray that far takes longer than the 3 s
        # timeout: the outcome is then "timeout". A smaller limit makes the memory limit the one hit.
        setup="%config Refine.memory_limit_mb = 512",
    ),
    _c(
        "lift the memory rlimit, then allocate past it",
        """
import resource
import numpy as np
resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
untouched = np.empty(2 << 30, dtype=np.uint8)  # 2 GiB of address space, never touched
""",
        "failed",
        "memory_limit",
        "refused",
        setup="%config Refine.memory_limit_mb = 512",
        note="needs CAP_SYS_RESOURCE (root): then the limit can be lifted",
    ),
    _c(
        "memory bomb: numpy 64 GiB",
        "import numpy as np\nbig = np.ones(64 << 30, dtype=np.uint8)",
        "memory_limit",
    ),
    _c("infinite loop", "while True:\n    pass", "timeout"),
    _c("output flood: print forever", 'while True:\n    print("ADV" + "-LEAK " * 2000)', "output_limit"),
    _c(
        "output flood: os.write to fd 1 forever",
        'import os\nchunk = ("ADV" + "-LEAK " * 10000).encode()\nwhile True:\n    os.write(1, chunk)',
        "failed",
        "output_limit",
        detail="too large",
    ),
    # ---- ending the process ------------------------------------------------------------------------
    _c("os._exit(0)", "import os\nos._exit(0)", "exited"),
    _c("sys.exit(2)", "import sys\nsys.exit(2)", "exited", detail="sys.exit(2)"),
    _c(
        "segfault through ctypes.string_at(0)",
        "import ctypes\nctypes.string_at(0)",
        "crashed",
        detail="SIGSEGV",
    ),
    _c("raise KeyboardInterrupt", "raise KeyboardInterrupt", "interrupted"),
    _c("SIGINT to itself", "import os, signal\nos.kill(os.getpid(), signal.SIGINT)", "interrupted"),
    # ---- signals -----------------------------------------------------------------------------------
    _c(
        "install a SIGINT handler",
        "import signal\nsignal.signal(signal.SIGINT, lambda *a: None)\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)",
        "passed",
    ),
    _c(
        "SIGKILL to the parent (snapshot)",
        "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)",
        "refused",
    ),
    _c("SIGTERM to the kernel", "import os, signal\nos.kill(@KPID@, signal.SIGTERM)", "refused"),
    _c(
        "ctypes kill(kernel, SIGTERM) (bypasses the audit hook)",
        _LIBC + "import signal\n" + _must("libc.kill(@KPID@, signal.SIGTERM)", "kill refused"),
        "failed",
        detail="kill refused",
    ),
    _c(
        "process_vm_writev into the kernel's memory",
        _LIBC
        + """
class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
payload = ctypes.create_string_buffer(b"PWNED!!!", 8)
target = ctypes.addressof((ctypes.c_char * 8).from_buffer(canary))  # same address in the kernel
local, remote = iovec(ctypes.addressof(payload), 8), iovec(target, 8)
libc.process_vm_writev.restype = ctypes.c_ssize_t
done = libc.process_vm_writev(@KPID@, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
if done != 8:
    raise OSError(ctypes.get_errno(), "process_vm_writev refused")
""",
        "failed",
        detail="process_vm_writev refused",
    ),
    _c(
        "renice the kernel (setpriority)",
        "import os\nos.setpriority(os.PRIO_PROCESS, @KPID@, 19)",
        "failed",
        "refused",
    ),
    _c(
        "pin the kernel to one CPU (sched_setaffinity)",
        "import os\nos.sched_setaffinity(@KPID@, {0})",
        "failed",
        "refused",
    ),
    _c(
        "lower the kernel's open-files limit (prlimit)",
        "import resource\nsoft, hard = resource.prlimit(@KPID@, resource.RLIMIT_NOFILE)\n"
        "resource.prlimit(@KPID@, resource.RLIMIT_NOFILE, (soft - 1, hard))",
        "failed",
        "refused",
    ),
    # Capability probes: the kernel checks the capability before the arguments, so EPERM means
    # "not allowed" and EINVAL means "allowed, but these arguments are invalid" (nothing happens).
    _c(
        "reboot(2) capability probe (invalid magic: never reboots)",
        _LIBC
        + """
import errno
result = libc.syscall(169, 0, 0, 0, None)  # SYS_reboot on x86_64, magic1 = 0 is invalid
if result != 0 and ctypes.get_errno() == errno.EPERM:
    raise PermissionError("reboot refused (EPERM)")
print("reboot passed the capability check: errno", ctypes.get_errno())
""",
        "failed",
        detail="refused (EPERM)",
    ),
    _c(
        "sethostname capability probe (invalid length: changes nothing)",
        _LIBC
        + """
import errno
result = libc.sethostname(b"x", 100000)
if result != 0 and ctypes.get_errno() == errno.EPERM:
    raise PermissionError("sethostname refused (EPERM)")
print("sethostname passed the capability check: errno", ctypes.get_errno())
""",
        "failed",
        detail="refused (EPERM)",
    ),
    # ---- shared handles --------------------------------------------------------------------------
    _c(
        "insert+commit through the kernel's sqlite connection",
        'conn.execute("INSERT INTO t VALUES (99)")\nconn.commit()',
        "failed",
    ),
    _c(
        "insert+commit through a new sqlite connection to the kernel's DB",
        'import sqlite3\nc = sqlite3.connect("@DB@")\nc.execute("INSERT INTO t VALUES (98)")\nc.commit()',
        "failed",
        "refused",
    ),
    _c(
        "write junk to every inherited fd",
        """
import os
junk = ("ADV" + "-LEAK junk on an inherited fd\\n").encode()
wrote = []
for name in os.listdir("/proc/self/fd"):
    try:
        os.write(int(name), junk)
        wrote.append(name)
    except OSError:
        pass
print("wrote to fds", wrote)
raise ValueError("case fds")
""",
        "failed",
        "exited",
        "refused",  # the junk reached the result pipe: refused as a report, never unpickled
        "sandbox_error",
    ),
    _c(
        "signal every inherited eventfd (the kernel's zmq mailboxes)",
        """
import os
one = (1).to_bytes(8, "little")
signalled = []
for name in os.listdir("/proc/self/fd"):
    try:
        if "eventfd" in os.readlink(f"/proc/self/fd/{name}"):
            os.write(int(name), one)
            signalled.append(name)
    except OSError:
        pass
print("signalled eventfds", signalled)
raise ValueError("case eventfd")
""",
        "failed",
    ),
    _c(
        "send on the kernel's iopub socket (Session.send, unpatched)",
        """
from jupyter_client.session import Session
ip = get_ipython()
Session.send(ip.kernel.session, ip.kernel.iopub_socket, "stream",
             {"name": "stdout", "text": "ADV" + "-LEAK via iopub\\n"})
raise ValueError("case iopub")
""",
        "failed",
        "exited",
        "crashed",
        "timeout",
    ),
    _c(
        "write into a shared anonymous mmap the kernel holds",
        'shared.seek(0)\nshared.write(b"PWNED-BY-TRIAL!!")',
        "passed",
        "failed",
        "crashed",
    ),
    _c(
        "write into an np.memmap (mode r+) the kernel holds",
        'mm[:] = ord("P")',
        "passed",
        "failed",
        "crashed",
    ),
    _c(
        "forge the trial's result: a pickle on the result pipe",
        _FORGE + _PIPE_WRITE,
        "refused",
        "failed",
        "exited",
        "crashed",
        "sandbox_error",
        note="the report is unpickled with an allowlist: a forged pickle is refused, not run",
    ),
    # ---- secrets -------------------------------------------------------------------------------------
    _c(
        "print a secret env var (the next prompt must be redacted)",
        'import os\nprint("token:", os.environ.get("MY_SERVICE_TOKEN", "absent"))\n'
        'raise ValueError("case secret")',
        "failed",
        second="pass",
    ),
]


# ---- issue 10: syscalls from the 32-bit ABI (int 0x80) and the x32 range ------------------------------

# A candidate that runs 32-bit system calls from a 64-bit process: an executable page below 4 GiB
# (MAP_32BIT) holding `push rbx; mov eax..edi, imm32; int 0x80; pop rbx; ret`. The seccomp filter
# must not let these through just because their architecture is not the native one.
_INT80 = """
import ctypes, struct
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
c_int = ctypes.c_int
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, c_int, c_int, c_int, ctypes.c_long]
_page = libc.mmap(None, 4096, 7, 0x22 | 0x40, -1, 0)  # RWX, private, anonymous, MAP_32BIT
low = _page + 2048  # a buffer below 4 GiB for pointer arguments

def int80(nr, *args):
    code = b"\\x53\\xb8" + nr.to_bytes(4, "little")
    for op, value in zip((b"\\xbb", b"\\xb9", b"\\xba", b"\\xbe", b"\\xbf"), list(args) + [0] * 5):
        code += op + (value & 0xFFFFFFFF).to_bytes(4, "little")
    code += b"\\xcd\\x80\\x5b\\xc3"
    ctypes.memmove(_page, code, len(code))
    result = ctypes.CFUNCTYPE(ctypes.c_int)(_page)()
    if result < 0:
        raise OSError(-result, f"int 0x80 syscall {nr} refused")
    return result
"""

# A hand-made pickle of TrialOutcome(status="passed") (allowlisted class, no nbrefine import).
_FORGED_PASS = (
    "import pickle\n"
    "data = (b'\\x80\\x04cnbrefine.sandbox.trial\\nTrialOutcome\\n)\\x81}(\\x8c\\x06status\\x8c\\x06passed'\n"
    "        b'\\x8c\\x06layers)ub.')\n"
)
# A 40-byte pickle that allocates 2 GiB where it is unpickled: builtins.bytes(2**31 - 1).
_BYTES_BOMB = "data = b'\\x80\\x04cbuiltins\\nbytes\\nJ\\xff\\xff\\xff\\x7f\\x85R.'\n"

ISSUE_10_CASES: list[Case] = [
    _c(
        "int 0x80 prlimit64 the kernel's open-files limit to 40",
        _INT80 + "ctypes.memmove(low, struct.pack('QQ', 40, 40), 16)\nint80(340, @KPID@, 7, low, 0)",
        "crashed",
        detail="SIGSYS",
    ),
    _c(
        "int 0x80 prlimit64 the kernel's CPU limit to 1 s",
        _INT80 + "ctypes.memmove(low, struct.pack('QQ', 1, 1), 16)\nint80(340, @KPID@, 0, low, 0)",
        "crashed",
        detail="SIGSYS",
    ),
    _c(
        "int 0x80 setpriority the kernel",
        _INT80 + "int80(97, 0, @KPID@, 19)",
        "crashed",
        detail="SIGSYS",
    ),
    _c(
        "int 0x80 chmod 06777 a file outside scratch",
        _INT80 + "ctypes.memmove(low, b'@OUTSIDE@/a.txt\\x00', len(b'@OUTSIDE@/a.txt') + 1)\n"
        "int80(15, low, 0o6777)",
        "crashed",
        detail="SIGSYS",
    ),
    _c(
        "int 0x80 utime a file outside scratch",
        _INT80 + "ctypes.memmove(low, b'@OUTSIDE@/b.txt\\x00', len(b'@OUTSIDE@/b.txt') + 1)\n"
        "ctypes.memmove(low + 512, struct.pack('ii', 1, 1), 8)\nint80(30, low, low + 512)",
        "crashed",
        detail="SIGSYS",
    ),
    _c(
        "int 0x80 fork + setsid: a process that outlives the trial",
        _INT80
        + """
import os, time
pid = int80(2)
if pid == 0:
    int80(66)  # setsid
    time.sleep(30)
    os._exit(0)
raise ValueError(f"forked {pid} through int 0x80")
""",
        "crashed",
        detail="SIGSYS",
    ),
    _c(
        "x32 syscall range: prlimit64 of the kernel",
        _LIBC
        + "import struct\nlimits = ctypes.create_string_buffer(struct.pack('QQ', 40, 40))\n"
        + _must("libc.syscall(0x40000000 | 302, @KPID@, 7, limits, None)", "x32 prlimit64 refused"),
        "crashed",
        detail="SIGSYS",
    ),
    _c(
        "io_uring_setup (syscalls done on the trial's behalf)",
        _LIBC
        + "params = ctypes.create_string_buffer(120)\nfd = libc.syscall(425, 4, params)\n"
        + "if fd < 0:\n    raise OSError(ctypes.get_errno(), 'io_uring refused')\n"
        + "raise ValueError(f'an io_uring instance was created (fd {fd})')",
        "failed",
        detail="io_uring refused",
    ),
    _c(
        "fork with --allow-subprocess: setsid child outlives the trial",
        """
import os, time
pid = os.fork()
if pid == 0:
    try:
        os.setsid()
    except OSError:
        pass
    time.sleep(30)
    os._exit(0)
""",
        "passed",
        options="--allow-subprocess",
    ),
    _c(
        "renice every process of the user (setpriority PRIO_USER 0)",
        "import os\nos.setpriority(os.PRIO_USER, 0, 19)",
        "failed",
        "refused",
    ),
    _c(
        "io priority of every process of the user (ioprio_set IOPRIO_WHO_USER 0)",
        _LIBC + _must("libc.syscall(251, 3, 0, (3 << 13) | 7)", "ioprio_set refused"),  # IDLE class
        "failed",
        detail="ioprio_set refused",
    ),
    # ---- unix sockets and the kernel's own channels --------------------------------------------------
    _c(
        "ctypes connect to a unix socket with a path",
        _LIBC
        + "import struct\nfd = libc.socket(1, 1, 0)\n"
        + "if fd < 0:\n    raise OSError(ctypes.get_errno(), 'unix socket refused')\n"
        + "addr = struct.pack('=H', 1) + b'@USOCK@'.ljust(108, b'\\x00')\n"
        + _must("libc.connect(fd, addr, len(addr))", "unix socket refused"),
        "failed",
        detail="unix socket refused",
    ),
    _c(
        "the kernel's session key and connection file in the trial",
        """
leaks = []
ip = get_ipython()
if getattr(getattr(ip, "kernel", None), "session", None) is not None and ip.kernel.session.key:
    leaks.append("kernel.session.key")
from ipykernel.kernelapp import IPKernelApp
app = IPKernelApp.instance()
if app.session.key:
    leaks.append("IPKernelApp.session.key")
if app.shell_port or app.connection_file:
    leaks.append(f"connection details: port {app.shell_port}, file {app.connection_file!r}")
try:
    with open(app.connection_file) as fh:
        if "key" in fh.read():
            leaks.append("connection file")
except OSError:
    pass
if leaks:
    raise ValueError(f"readable in the trial: {leaks}")
""",
        "passed",
    ),
    _c(
        "signed execute_request to the live kernel's shell socket (zmq)",
        """
import time, zmq
from jupyter_client.session import Session
from ipykernel.kernelapp import IPKernelApp
app = IPKernelApp.instance()
session = Session(key=app.session.key, signature_scheme=app.session.signature_scheme)
ctx = zmq.Context()
sock = ctx.socket(zmq.DEALER)
sock.linger = 0
sep = "-" if app.transport == "ipc" else ":"
sock.connect(f"{app.transport}://{app.ip}{sep}{app.shell_port}")
code = "pwned_via_shell = 1\\nopen('@OUTSIDE@/pwned-via-shell.txt', 'w').write('x')"
session.send(sock, "execute_request", {"code": code, "silent": True, "store_history": False,
             "user_expressions": {}, "allow_stdin": False, "stop_on_error": False})
time.sleep(1.0)
sock.close()
ctx.term()
""",
        "passed",
        "failed",
    ),
    _c(
        "pyzmq in a trial (libzmq's threads set their own scheduling)",
        """
import zmq
ctx = zmq.Context()
a, b = ctx.socket(zmq.PAIR), ctx.socket(zmq.PAIR)
a.bind("inproc://nbrefine-trial")
b.connect("inproc://nbrefine-trial")
a.send(b"x")
assert b.recv() == b"x"
a.close()
b.close()
ctx.term()
""",
        "passed",
    ),
    # ---- shared mappings of any size ------------------------------------------------------------------
    _c(
        "shared map: 300 MiB np.memmap(w+), made writable again and written",
        _LIBC
        + """
import numpy as np
addr, size = big_mm.ctypes.data, big_mm.nbytes
libc.mprotect(ctypes.c_void_p(addr & ~4095), ctypes.c_size_t(size + (addr & 4095)), 3)
big_mm[:5] = np.frombuffer(b"PWNED", dtype="uint8")
big_mm.flush()
""",
        "passed",
        setup="@BIGSETUP@",
    ),
    _c(
        "shared map: 300 MiB SharedMemory, made writable again and written",
        _LIBC
        + """
addr = ctypes.addressof(ctypes.c_char.from_buffer(big_shm.buf))
libc.mprotect(ctypes.c_void_p(addr & ~4095), ctypes.c_size_t(big_shm.size + (addr & 4095)), 3)
big_shm.buf[:5] = b"PWNED"
""",
        "passed",
        setup="@BIGSETUP@",
    ),
    _c(
        "shared map: mmap(ACCESS_READ) of a w+b file, mprotected and written",
        _LIBC
        + """
start = None
for line in open("/proc/self/maps"):
    if line.rstrip().endswith("rofile.bin"):
        start, end = (int(x, 16) for x in line.split()[0].split("-"))
        break
assert start is not None, "the read-only mapping is not there"
libc.mprotect(ctypes.c_void_p(start), ctypes.c_size_t(end - start), 3)
ctypes.memmove(start, b"PWNED", 5)
""",
        "passed",
        setup="@BIGSETUP@",
    ),
    # ---- secrets: nothing to steal in the trial --------------------------------------------------------
    _c(
        "secret env values in the trial (environ, /proc/*/environ)",
        """
import os
leaks = [k for k in ("MY_SERVICE_TOKEN", "ANTHROPIC_API_KEY", "DB_PASSWORD") if os.environ.get(k)]
for path in ("/proc/self/environ", "/proc/@KPID@/environ", f"/proc/{os.getppid()}/environ"):
    try:
        with open(path, "rb") as fh:
            blob = fh.read()
    except OSError:
        continue
    if b"MY_SERVICE_TOKEN=" in blob or b"DB_PASSWORD=" in blob:
        leaks.append(path)
if leaks:
    raise ValueError(f"secret env values readable in the trial: {leaks}")
""",
        "passed",
    ),
    _c(
        "home credential files and .env in the trial",
        """
import os
leaks = []
for path in ("@HOME@/.netrc", "@HOME@/.ssh/id_rsa", "@HOME@/.aws/credentials",
             "@HOME@/.config/gcloud/credentials.db", "@HOME@/.git-credentials", "@CWD@/.env",
             os.path.expanduser("~/.netrc")):
    try:
        with open(path) as fh:
            fh.read()
        leaks.append(path)
    except OSError:
        pass
if leaks:
    raise ValueError(f"credential files readable in the trial: {leaks}")
""",
        "passed",
        setup='open(".env", "w").write("DB_PASSWORD=env-file-secret-4242\\n")',
    ),
    _c(
        "ordinary reads still work (files, new imports, /proc/self)",
        """
import os
assert open("@OUTSIDE@/a.txt").read() == "alpha\\n"
assert sorted(os.listdir("@OUTSIDE@"))[:2] == ["a.txt", "b.txt"]
import xml.dom.minidom, fractions, decimal
assert "VmRSS" in open("/proc/self/status").read()
assert os.path.expanduser("~") == "@HOME@"
""",
        "passed",
    ),
    # ---- forged reports -----------------------------------------------------------------------------
    _c(
        "forge a passed TrialOutcome on the result pipe, then os._exit",
        _FORGED_PASS + _PIPE_WRITE,
        "refused",
        "exited",
        "failed",
    ),
    _c(
        "a 40-byte pickle that allocates 2 GiB where it is unpickled",
        _BYTES_BOMB + _PIPE_WRITE,
        "refused",
        "exited",
    ),
    # ---- scratch ------------------------------------------------------------------------------------
    _c(
        "fill the scratch folder (many files under the per-file limit)",
        """
import os, tempfile
chunk = bytes(32 << 20)
total = 0
for i in range(64):
    with open(os.path.join(tempfile.gettempdir(), f"fill-{i}.bin"), "wb") as fh:
        fh.write(chunk)
    total += len(chunk)
raise ValueError(f"wrote {total >> 20} MiB into scratch")
""",
        "failed",
        detail="no space",
    ),
]

CASES.extend(ISSUE_10_CASES)


# ---- issue 19: what fork shares with the kernel besides memory --------------------------------------

_SYSV = _LIBC + (
    "libc.shmat.restype = ctypes.c_void_p\n"
    "libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]\n"
)
# The kernel creates and attaches a SysV segment (content SYSV-ORIG-000000) and creates a message
# queue, under this run's keys; the case's cleanup removes both.
_SYSV_SETUP = (
    "import ctypes as _adv_ct\n"
    "_adv_libc = _adv_ct.CDLL(None, use_errno=True)\n"
    "_adv_libc.shmat.restype = _adv_ct.c_void_p\n"
    "_adv_libc.shmat.argtypes = [_adv_ct.c_int, _adv_ct.c_void_p, _adv_ct.c_int]\n"
    "sysv_shmid = _adv_libc.shmget(@SHMKEY@, 4096, 0o1600)\n"
    "sysv_addr = _adv_libc.shmat(sysv_shmid, None, 0)\n"
    "_adv_ct.memmove(sysv_addr, b'SYSV-ORIG-000000', 16)\n"
    "sysv_msqid = _adv_libc.msgget(@MSGKEY@, 0o1600)\n"
    "assert sysv_shmid >= 0 and sysv_msqid >= 0 and sysv_addr not in (None, 2**64 - 1)\n"
)
_SYSV_CLEANUP = (
    "_adv_libc.shmdt(_adv_ct.c_void_p(sysv_addr))\n"
    "_adv_libc.shmctl(sysv_shmid, 0, None)\n"  # IPC_RMID
    "_adv_libc.msgctl(sysv_msqid, 0, None)\n"
)

# The kernel holds a file of 5,000 rows open, one row read, and a folder open (an fd and a scandir).
_OPEN_FILES_SETUP = (
    "import os as _adv_os\n"
    "with open('@OUTSIDE@/rows.csv', 'w') as _adv_fh:\n"
    "    _adv_fh.write('id,value\\n' + ''.join(f'{i},{i * i}\\n' for i in range(5000)))\n"
    "rows_file = open('@OUTSIDE@/rows.csv')\n"
    "rows_header = next(rows_file)\n"
    "folder_fd = _adv_os.open('@OUTSIDE@', _adv_os.O_RDONLY | _adv_os.O_DIRECTORY)\n"
)
_OPEN_FILES_CLEANUP = "rows_file.close()\n__import__('os').close(folder_fd)\n"

# Reading the IPython history database: every way a candidate that read nbrefine's source would try.
# The test plants NBHIST-<token> there as the input of an earlier session; finding it is the leak.
_READ_HISTORY = """
import glob, os, sqlite3
needle = "NBHIST" + "-"
leaks = []
hm = get_ipython().history_manager
paths = {str(hm.hist_file)}
for base in (os.environ.get("IPYTHONDIR", ""), os.path.expanduser("~/.ipython"), "@HOME@/.ipython"):
    if base:
        paths.update(glob.glob(os.path.join(base, "profile_*", "history.sqlite*")))
for path in sorted(paths):
    try:
        with open(path, "rb") as fh:
            data = fh.read()
        if needle.encode() in data:
            leaks.append(f"the file {path}")
            at = data.index(needle.encode())
            print("HEX", data[at : at + 48].hex())
    except OSError:
        pass
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        rows = con.execute("SELECT source_raw FROM history").fetchall()
        con.close()
        if any(needle in (row[0] or "") for row in rows):
            leaks.append(f"a new sqlite connection to {path}")
    except Exception:
        pass
for name in os.listdir("/proc/self/fd"):
    try:
        data = os.pread(int(name), 1 << 24, 0)
    except OSError:
        continue
    if needle.encode() in data:
        leaks.append(f"the inherited fd {name}")
        at = data.index(needle.encode())
        print("HEX", data[at : at + 48].hex())
try:
    found = [row for row in hm.search("*" + needle + "*", raw=True)]
    if found:
        leaks.append(f"history_manager.search ({len(found)} rows)")
        print("HEX", str(found[0][2]).encode().hex())
except Exception:
    pass
if leaks:
    raise ValueError(f"the history of earlier sessions is readable: {leaks}")
"""

ISSUE_19_CASES: list[Case] = [
    # ---- item 4: SysV IPC is the host's -------------------------------------------------------------
    _c(
        "SysV: shmget the kernel's segment by key, shmat, write",
        _SYSV
        + """
shmid = libc.shmget(@SHMKEY@, 0, 0)
if shmid < 0:
    raise OSError(ctypes.get_errno(), "shmget refused")
addr = libc.shmat(shmid, None, 0)
if addr in (None, ctypes.c_void_p(-1).value):
    raise OSError(ctypes.get_errno(), "shmat refused")
ctypes.memmove(addr, b"PWNED-BY-TRIAL!!", 16)
raise ValueError(f"wrote into the kernel's segment {shmid}")
""",
        "failed",
        detail="refused",
        setup=_SYSV_SETUP,
        cleanup=_SYSV_CLEANUP,
    ),
    _c(
        "SysV: write through the segment the kernel attached (inherited mapping, mprotect)",
        _SYSV
        + """
start = None
for line in open("/proc/self/maps"):
    if "/SYSV" in line:
        start, end = (int(x, 16) for x in line.split()[0].split("-"))
        break
assert start is not None, "the kernel's attachment is not in the trial"
libc.mprotect(ctypes.c_void_p(start), ctypes.c_size_t(end - start), 3)
ctypes.memmove(start, b"PWNED-BY-TRIAL!!", 16)
""",
        "passed",
        setup=_SYSV_SETUP,
        cleanup=_SYSV_CLEANUP,
    ),
    _c(
        "SysV: msgsnd to the kernel's message queue",
        _SYSV
        + """
class Message(ctypes.Structure):
    _fields_ = [("mtype", ctypes.c_long), ("mtext", ctypes.c_char * 16)]
queue = libc.msgget(@MSGKEY@, 0)
if queue < 0:
    raise OSError(ctypes.get_errno(), "msgget refused")
message = Message(1, b"PWNED-BY-TRIAL")
if libc.msgsnd(queue, ctypes.byref(message), 16, 0o4000) != 0:  # IPC_NOWAIT
    raise OSError(ctypes.get_errno(), "msgsnd refused")
raise ValueError(f"a message is in the kernel's queue {queue}")
""",
        "failed",
        detail="refused",
        setup=_SYSV_SETUP,
        cleanup=_SYSV_CLEANUP,
    ),
    _c(
        "SysV: leave 4 x 32 MiB segments, a semaphore set and a queue behind",
        _SYSV
        + """
made = []
for number in range(4):
    shmid = libc.shmget(@LEAKKEY@ + number, 32 << 20, 0o1600)
    if shmid >= 0:
        addr = libc.shmat(shmid, None, 0)
        if addr not in (None, ctypes.c_void_p(-1).value):
            ctypes.memset(addr, 1, 32 << 20)
        made.append(f"shm {shmid}")
semaphores = libc.semget(@LEAKKEY@ + 8, 4, 0o1600)
if semaphores >= 0:
    made.append(f"sem {semaphores}")
queue = libc.msgget(@LEAKKEY@ + 9, 0o1600)
if queue >= 0:
    made.append(f"msg {queue}")
if made:
    raise ValueError(f"created {made}")
raise OSError(ctypes.get_errno(), "every SysV IPC call refused")
""",
        "failed",
        detail="refused",
    ),
    _c(
        "POSIX message queue: mq_open",
        _LIBC
        + """
name = b"/nbrefine-adv-@RUN@"
queue = libc.mq_open(name, 0o100 | 0o2, 0o600, None)  # O_CREAT | O_RDWR
if queue < 0:
    raise OSError(ctypes.get_errno(), "mq_open refused")
libc.mq_close(queue)
libc.mq_unlink(name)  # so that a red run leaves nothing in the host's mqueue filesystem
raise ValueError("a POSIX message queue was created")
""",
        "failed",
        detail="refused",
    ),
    # ---- item 5: open file descriptions are shared with the kernel ---------------------------------------
    _c(
        "seek and read a file the kernel has open (its offset is shared)",
        """
import os
rows_file.seek(0)
rest = rows_file.read()
assert rest.count("\\n") == 5001, rest.count("\\n")
os.lseek(folder_fd, 0, os.SEEK_END)
list(os.scandir(folder_fd))
""",
        "passed",
        setup=_OPEN_FILES_SETUP,
        cleanup=_OPEN_FILES_CLEANUP,
    ),
    _c(
        "flock and F_SETFL a file the kernel has open (locks and flags of its open file)",
        """
import fcntl, os
fcntl.flock(rows_file.fileno(), fcntl.LOCK_EX)
flags = fcntl.fcntl(rows_file.fileno(), fcntl.F_GETFL)
fcntl.fcntl(rows_file.fileno(), fcntl.F_SETFL, flags | os.O_NONBLOCK | os.O_APPEND)
""",
        "passed",
        setup=_OPEN_FILES_SETUP,
        cleanup=_OPEN_FILES_CLEANUP,
    ),
    # ---- item 6: unix datagrams reach paths -------------------------------------------------------------
    _c(
        "ctypes socketpair(AF_UNIX, SOCK_DGRAM) + sendto a datagram socket with a path",
        _LIBC
        + """
import struct
pair = (ctypes.c_int * 2)()
if libc.socketpair(1, 2, 0, pair) != 0:  # AF_UNIX, SOCK_DGRAM
    raise OSError(ctypes.get_errno(), "datagram socketpair refused")
addr = struct.pack("=H", 1) + b"@UDGRAM@".ljust(108, b"\\x00")
message = b"ADV-DATAGRAM"
if libc.sendto(pair[0], message, len(message), 0, addr, len(addr)) < 0:
    raise OSError(ctypes.get_errno(), "sendto refused")
raise ValueError("a datagram reached a socket with a path")
""",
        "failed",
        detail="refused",
    ),
    _c(
        "ctypes socketpair(AF_UNIX, SOCK_DGRAM) + connect to a path, then send",
        _LIBC
        + """
import struct
pair = (ctypes.c_int * 2)()
if libc.socketpair(1, 2 | 0o2000000, 0, pair) != 0:  # AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC
    raise OSError(ctypes.get_errno(), "datagram socketpair refused")
addr = struct.pack("=H", 1) + b"@UDGRAM@".ljust(108, b"\\x00")
if libc.connect(pair[0], addr, len(addr)) != 0:
    raise OSError(ctypes.get_errno(), "connect refused")
if libc.send(pair[0], b"ADV-DATAGRAM", 12, 0) < 0:
    raise OSError(ctypes.get_errno(), "send refused")
raise ValueError("a datagram reached a socket with a path")
""",
        "failed",
        detail="refused",
    ),
    _c(
        "ctypes socketpair(AF_UNIX, SOCK_SEQPACKET)",
        _LIBC
        + """
pair = (ctypes.c_int * 2)()
if libc.socketpair(1, 5, 0, pair) != 0:  # AF_UNIX, SOCK_SEQPACKET
    raise OSError(ctypes.get_errno(), "seqpacket socketpair refused")
raise ValueError("a seqpacket socketpair was made")
""",
        "failed",
        detail="refused",
    ),
    _c(
        "stream socketpairs still work (asyncio's self-pipe)",
        """
import asyncio, socket
a, b = socket.socketpair()
a.sendall(b"ping")
got = b.recv(4)  # not inside the assert: its operands are evaluated again after a pass
assert got == b"ping"
async def main():
    await asyncio.sleep(0)
    return 7
assert asyncio.run(main()) == 7
""",
        "passed",
    ),
    # ---- item 8: the IPython history database --------------------------------------------------------
    _c(
        "read the IPython history database (earlier sessions): file, sqlite, inherited fds",
        _READ_HISTORY,
        "passed",
    ),
    _c(
        "read a history database kept elsewhere (HistoryManager.hist_file set by the user)",
        _READ_HISTORY,
        "passed",
        setup=(
            "_adv_hm = get_ipython().history_manager\n"
            "_adv_hist_saved = (_adv_hm.hist_file, _adv_hm.db)\n"
            "_adv_hm.hist_file = __import__('pathlib').Path(@ELSEWHERE@)\n"
            "_adv_hm.init_db()\n"
        ),
        cleanup=("_adv_hm.db.close()\n_adv_hm.hist_file, _adv_hm.db = _adv_hist_saved\n"),
    ),
    # ---- item 9: devices, other processes, watching files ------------------------------------------------
    _c(
        "/dev/userfaultfd: a userfaultfd although the syscall is denied",
        _LIBC
        + """
fd = libc.open(b"/dev/userfaultfd", 0o2000000)  # O_RDONLY | O_CLOEXEC
if fd < 0:
    fd = libc.open(b"/dev/userfaultfd", 0o2000002)  # O_RDWR | O_CLOEXEC
if fd < 0:
    raise OSError(ctypes.get_errno(), "/dev/userfaultfd refused")
uffd = libc.ioctl(fd, 0xAA00, 0o2000000)  # USERFAULTFD_IOC_NEW
if uffd < 0:
    raise OSError(ctypes.get_errno(), "USERFAULTFD_IOC_NEW refused")
raise ValueError(f"a userfaultfd was made (fd {uffd})")
""",
        "failed",
        detail="refused",
    ),
    _c(
        "/dev/kvm: create a virtual machine",
        _LIBC
        + """
fd = libc.open(b"/dev/kvm", 0o2000000)
if fd < 0:
    fd = libc.open(b"/dev/kvm", 0o2000002)
if fd < 0:
    raise OSError(ctypes.get_errno(), "/dev/kvm refused")
vm = libc.ioctl(fd, 0xAE01, 0)  # KVM_CREATE_VM
if vm < 0:
    raise OSError(ctypes.get_errno(), "KVM_CREATE_VM refused")
raise ValueError(f"a virtual machine was made (fd {vm})")
""",
        "failed",
        detail="refused",
    ),
    _c(
        "raw block devices: read the disk the home folder is on (or mknod one)",
        _LIBC
        + """
import os, stat, tempfile
home = os.stat("@HOME@").st_dev
found = set()
try:
    with open(f"/sys/dev/block/{os.major(home)}:{os.minor(home)}/uevent") as fh:
        found |= {"/dev/" + ln.split("=", 1)[1].strip() for ln in fh if ln.startswith("DEVNAME=")}
except OSError:
    pass
try:
    found |= {f"/dev/{n}" for n in os.listdir("/dev") if stat.S_ISBLK(os.lstat(f"/dev/{n}").st_mode)}
except OSError:
    pass
node = os.path.join(tempfile.gettempdir(), "disk")
if libc.mknod(node.encode(), stat.S_IFBLK | 0o600, os.makedev(os.major(home), os.minor(home))) == 0:
    found.add(node)
buffer = ctypes.create_string_buffer(4096)
read = []
for path in sorted(found):
    fd = libc.open(path.encode(), 0o2000000)
    if fd >= 0 and libc.read(fd, buffer, 4096) > 0:
        read.append(path)
if read:
    raise ValueError(f"read raw block devices: {read}")
raise OSError(ctypes.get_errno(), f"raw block devices refused ({len(found)} tried)")
""",
        "failed",
        detail="refused",
    ),
    _c(
        "pidfd_open(kernel)",
        _LIBC
        + """
fd = libc.syscall(434, @KPID@, 0)  # pidfd_open
if fd < 0:
    raise OSError(ctypes.get_errno(), "pidfd_open refused")
raise ValueError(f"a pidfd of the kernel (fd {fd})")
""",
        "failed",
        detail="refused",
    ),
    _c(
        "list /proc/<kernel>/fd (and see the kernel in /proc)",
        """
import os
seen = []
for path in ("/proc/@KPID@/fd", "/proc/@KPID@", "/proc/@KPID@/task"):
    try:
        seen.append(f"{path}: {len(os.listdir(path))} entries")
    except OSError:
        pass
if os.path.exists("/proc/@KPID@/status"):
    seen.append("/proc/@KPID@/status exists")
if seen:
    raise ValueError(f"the kernel is visible in the trial's /proc: {seen}")
raise OSError("the kernel's /proc entry refused")
""",
        "failed",
        detail="refused",
    ),
    _c(
        "inotify watch on the home folder",
        _LIBC
        + """
fd = libc.inotify_init1(0)
if fd < 0:
    raise OSError(ctypes.get_errno(), "inotify refused")
if libc.inotify_add_watch(fd, b"@HOME@", 0xFFF) < 0:
    raise OSError(ctypes.get_errno(), "inotify_add_watch refused")
raise ValueError("the trial watches the home folder")
""",
        "failed",
        detail="refused",
    ),
    _c(
        "ordinary /dev and /proc use still works (null, zero, urandom, /dev/fd, own /proc)",
        """
import os
assert open("/dev/null", "rb").read() == b""
assert open("/dev/zero", "rb").read(4) == bytes(4)
assert len(open("/dev/urandom", "rb").read(8)) == 8
with open("/dev/null", "w") as sink:
    sink.write("x")
assert "0" in os.listdir("/dev/fd")
assert os.readlink("/proc/self") == str(os.getpid())
assert "VmRSS" in open(f"/proc/{os.getpid()}/status").read()
os.kill(os.getpid(), 0)
""",
        "passed",
    ),
]

CASES.extend(ISSUE_19_CASES)
