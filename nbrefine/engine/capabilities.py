"""What a candidate fix can do that the original cell did not, named before the fix runs.

A passed trial proves only what the candidate did in the sandbox. A candidate that reads
``/proc/self/status`` and does harm only where ``Seccomp:`` is 0 passes its trial and then runs
for real in the user's kernel; so does one that calls ``os.system`` where the trial forbids it and
ignores the error. :func:`added_capabilities` reads the candidate next to the original cell,
statically, and names each reach the original did not already have (starting a process, the
network, writing outside the working folder or to the home folder's dotfiles, deleting, code built
at run time, unpickling, native code, probing the sandbox, dumping the environment, reaching into
the interpreter's internals) so that it can be shown, and held, before anything runs.

The candidate is read as written by someone who has read this module: names are followed through
aliases (``import os as o``, ``from os import system as s``, ``x = os``), ``getattr``,
``vars(...)[...]``, ``__import__`` and strings assembled from pieces (``'ex' + 'ec'``), and what
cannot be followed (a computed attribute name, a computed path to write to) counts as the reach it
might be. IPython syntax (``!cmd``, ``%system``, ``%%bash``) is read too, and code that does not
parse is read leniently: its top-level chunks that parse, then its lines, then its names and
strings.

This is a tripwire, not a proof: Python is too dynamic for a static reading to be complete.

May import: the standard library only.
"""

from __future__ import annotations

import ast
import base64
import builtins
import codecs
import fnmatch
import functools
import posixpath
import re
import sys
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Literal, get_args

__all__ = [
    "CAPABILITIES",
    "Capability",
    "Use",
    "added_capabilities",
    "capabilities_of",
    "uses",
]

Capability = Literal[
    "process",
    "network",
    "write_outside",
    "home_dotfiles",
    "delete",
    "dynamic_code",
    "unpickle",
    "native",
    "sandbox_probe",
    "environment",
    "introspection",
]
CAPABILITIES: tuple[Capability, ...] = get_args(Capability)

_VERBS: dict[Capability, str] = {
    "process": "starts a process",
    "network": "uses the network",
    "write_outside": "writes outside the working folder",
    "home_dotfiles": "touches a dotfile in the home folder",
    "delete": "deletes files",
    "dynamic_code": "runs code it builds or looks up at run time",
    "unpickle": "unpickles data (which can run any code)",
    "native": "uses native code or raw file descriptors",
    "sandbox_probe": "probes the sandbox it runs in",
    "environment": "dumps or rewires the environment",
    "introspection": "reaches into the interpreter's internals",
}


@dataclass(frozen=True)
class Use:
    """One reach of a piece of code past computing values: ``what`` names it, with aliases
    resolved (``subprocess.run``, ``open('~/.bashrc', 'a')``, ``getattr(os, <computed>)``), and
    ``line`` is its 1-based line in that code."""

    capability: Capability
    what: str
    line: int

    def describe(self) -> str:
        """``starts a process: subprocess.run (line 3)``."""
        return f"{_VERBS[self.capability]}: {self.what} (line {self.line})"


def uses(code: str) -> list[Use]:
    """Every use of a capability in ``code``, in line order."""
    text, found = _ipython(code)
    trees, rest = _lenient(text)
    scope = _Scope.of(trees)
    for tree in trees:
        try:
            found += _Reader(scope, tree).read()
        except RecursionError:  # nested past what the reader follows: read its names instead
            rest += [(line, tree_line) for tree_line, line in _tree_lines(text, tree)]
    for line, lineno in rest:
        found += _lexed(line, lineno, scope)
    return sorted(found, key=lambda use: use.line)


def added_capabilities(original: str, candidate: str) -> list[Use]:
    """The uses in ``candidate`` the original did not already have, counted: a second
    ``os.system`` where the original had one is added."""
    had = Counter((use.capability, use.what) for use in uses(original))
    added: list[Use] = []
    for use in uses(candidate):
        key = (use.capability, use.what)
        if had[key] > 0:
            had[key] -= 1
        else:
            added.append(use)
    return added


def capabilities_of(code: str) -> frozenset[Capability]:
    """The kinds of thing ``code`` does (for "the original cell did the same kind of thing")."""
    return frozenset(use.capability for use in uses(code))


# ------------------------------------------------------------------------------ the rules

# Dotted names (aliases resolved, ``fnmatch`` patterns), first match wins; None: harmless, and
# stops the reader from counting the module the name is on (``socket.gethostname``).
_RULES: tuple[tuple[str, Capability | None], ...] = (
    ("subprocess.CalledProcessError", None),
    ("subprocess.TimeoutExpired", None),
    ("subprocess.SubprocessError", None),
    ("subprocess.PIPE", None),
    ("subprocess.DEVNULL", None),
    ("subprocess.STDOUT", None),
    ("socket.gethostname", None),
    ("socket.timeout", None),
    ("socket.error", None),
    ("socket.gaierror", None),
    ("socket.herror", None),
    ("socket.AF_*", None),
    ("socket.SOCK_*", None),
    ("multiprocessing.cpu_count", None),
    ("httpx.HTTPError", None),
    ("httpx.*Error", None),
    ("numpy.load", None),  # unpickles only with allow_pickle: see _Reader._unpickles
    ("yaml.load", None),
    ("yaml.load_all", None),
    ("torch.load", None),
    ("mmap.mmap", None),
    # process
    ("os.system", "process"),
    ("os.popen", "process"),
    ("os.exec*", "process"),
    ("os.spawn*", "process"),
    ("os.fork", "process"),
    ("os.forkpty", "process"),
    ("os.posix_spawn*", "process"),
    ("os.kill", "process"),
    ("os.killpg", "process"),
    ("os.startfile", "process"),
    ("subprocess", "process"),
    ("subprocess.*", "process"),
    ("_posixsubprocess*", "process"),
    ("pty", "process"),
    ("pty.spawn", "process"),
    ("pty.fork", "process"),
    ("multiprocessing.Process", "process"),
    ("multiprocessing.Pool", "process"),
    ("multiprocessing.Manager", "process"),
    ("multiprocessing.get_context", "process"),
    ("multiprocessing.context.*", "process"),
    ("multiprocessing.pool.*", "process"),
    ("multiprocessing.popen*", "process"),
    ("multiprocessing.spawn.*", "process"),
    ("concurrent.futures.ProcessPoolExecutor", "process"),
    ("concurrent.futures.process.*", "process"),
    ("asyncio.create_subprocess_*", "process"),
    ("asyncio.subprocess.*", "process"),
    ("webbrowser.*", "process"),
    ("os.setpriority", "process"),
    ("os.sched_set*", "process"),
    ("signal.signal", "process"),
    ("signal.set*", "process"),
    ("signal.alarm", "process"),
    ("signal.pthread_*", "process"),
    ("IPython.system*", "process"),
    ("IPython.getoutput", "process"),
    # network
    ("socket", "network"),
    ("socket.*", "network"),
    ("urllib.request", "network"),
    ("urllib.request.*", "network"),
    ("urllib.urlopen", "network"),
    ("urllib.urlretrieve", "network"),
    ("urllib2.*", "network"),
    ("urllib3.*", "network"),
    ("http.client", "network"),
    ("http.client.*", "network"),
    ("http.server.*", "network"),
    ("socketserver.*", "network"),
    ("xmlrpc.client.*", "network"),
    ("requests.get", "network"),
    ("requests.post", "network"),
    ("requests.put", "network"),
    ("requests.patch", "network"),
    ("requests.delete", "network"),
    ("requests.head", "network"),
    ("requests.options", "network"),
    ("requests.request", "network"),
    ("requests.Session", "network"),
    ("requests.session", "network"),
    ("requests.api.*", "network"),
    ("requests.sessions.*", "network"),
    ("httpx.*", "network"),
    ("aiohttp.*", "network"),
    ("smtplib.*", "network"),
    ("ftplib.*", "network"),
    ("telnetlib.*", "network"),
    ("poplib.*", "network"),
    ("imaplib.*", "network"),
    ("nntplib.*", "network"),
    ("paramiko.*", "network"),
    ("websocket.*", "network"),
    ("websockets.*", "network"),
    ("pycurl.*", "network"),
    ("ssl.wrap_socket", "network"),
    ("asyncio.open_connection", "network"),
    ("asyncio.open_unix_connection", "network"),
    ("asyncio.start_server", "network"),
    ("asyncio.start_unix_server", "network"),
    ("zmq.*", "network"),
    ("jupyter_client.*", "network"),
    # delete (the path is added to ``what`` where the name is called)
    ("os.remove", "delete"),
    ("os.unlink", "delete"),
    ("os.rmdir", "delete"),
    ("os.removedirs", "delete"),
    ("os.truncate", "delete"),
    ("shutil.rmtree", "delete"),
    ("pathlib.Path.unlink", "delete"),
    ("pathlib.Path.rmdir", "delete"),
    # dynamic_code
    ("exec", "dynamic_code"),
    ("eval", "dynamic_code"),
    ("compile", "dynamic_code"),
    ("__import__", "dynamic_code"),
    ("importlib.import_module", "dynamic_code"),
    ("importlib.__import__", "dynamic_code"),
    ("importlib.reload", "dynamic_code"),
    ("importlib.util", "dynamic_code"),
    ("importlib.util.*", "dynamic_code"),
    ("importlib.machinery.*", "dynamic_code"),
    ("importlib._bootstrap*", "dynamic_code"),
    ("runpy", "dynamic_code"),
    ("runpy.*", "dynamic_code"),
    ("code.interact", "dynamic_code"),
    ("code.Interactive*", "dynamic_code"),
    ("codeop.*", "dynamic_code"),
    ("types.FunctionType", "dynamic_code"),
    ("types.CodeType", "dynamic_code"),
    ("pydoc.locate", "dynamic_code"),
    ("operator.attrgetter", "dynamic_code"),
    ("operator.methodcaller", "dynamic_code"),
    ("IPython.run_cell*", "dynamic_code"),
    ("IPython.run_line_magic", "dynamic_code"),
    ("IPython.run_code", "dynamic_code"),
    ("IPython.run_ast_nodes", "dynamic_code"),
    ("IPython.magic", "dynamic_code"),
    ("IPython.ex", "dynamic_code"),
    ("IPython.ev", "dynamic_code"),
    ("IPython.safe_*", "dynamic_code"),
    ("atexit.register", "dynamic_code"),
    # unpickle
    ("pickle.load", "unpickle"),
    ("pickle.loads", "unpickle"),
    ("pickle.Unpickler", "unpickle"),
    ("marshal.load", "unpickle"),
    ("marshal.loads", "unpickle"),
    ("dill.load*", "unpickle"),
    ("dill.Unpickler", "unpickle"),
    ("cloudpickle.load*", "unpickle"),
    ("shelve.open", "unpickle"),
    ("shelve.Shelf", "unpickle"),
    ("shelve.DbfilenameShelf", "unpickle"),
    ("joblib.load", "unpickle"),
    ("pandas.read_pickle", "unpickle"),
    ("jsonpickle.decode", "unpickle"),
    ("yaml.unsafe_load*", "unpickle"),
    ("yaml.UnsafeLoader", "unpickle"),
    # native
    ("ctypes", "native"),
    ("ctypes.*", "native"),
    ("_ctypes*", "native"),
    ("cffi", "native"),
    ("cffi.*", "native"),
    ("os.open", "native"),
    ("os.openpty", "native"),
    ("os.write", "native"),
    ("os.writev", "native"),
    ("os.pwrite", "native"),
    ("os.read", "native"),
    ("os.dup", "native"),
    ("os.dup2", "native"),
    ("os.fdopen", "native"),
    ("os.close", "native"),
    ("os.closerange", "native"),
    ("os.lseek", "native"),
    ("os.sendfile", "native"),
    ("os.set_inheritable", "native"),
    ("os.memfd_create", "native"),
    ("fcntl.*", "native"),
    # sandbox_probe
    ("os.getppid", "sandbox_probe"),
    ("os.getuid", "sandbox_probe"),
    ("os.geteuid", "sandbox_probe"),
    ("os.getresuid", "sandbox_probe"),
    ("resource.getrlimit", "sandbox_probe"),
    ("resource.prlimit", "sandbox_probe"),
    ("resource.setrlimit", "sandbox_probe"),
    ("prctl", "sandbox_probe"),
    ("prctl.*", "sandbox_probe"),
    ("psutil.Process", "sandbox_probe"),
    ("psutil.pids", "sandbox_probe"),
    ("psutil.process_iter", "sandbox_probe"),
    ("sys.argv", "sandbox_probe"),
    ("sys.orig_argv", "sandbox_probe"),
    # introspection
    ("sys._getframe", "introspection"),
    ("sys._current_frames", "introspection"),
    ("sys.modules", "introspection"),
    ("sys.settrace", "introspection"),
    ("sys.setprofile", "introspection"),
    ("sys.gettrace", "introspection"),
    ("sys.getprofile", "introspection"),
    ("sys.addaudithook", "introspection"),
    ("sys.monitoring*", "introspection"),
    ("sys.last_*", "introspection"),
    ("inspect", "introspection"),
    ("inspect.*", "introspection"),
    ("gc.get_objects", "introspection"),
    ("gc.get_referrers", "introspection"),
    ("gc.get_referents", "introspection"),
    ("threading.settrace*", "introspection"),
    ("threading.setprofile*", "introspection"),
    ("traceback.walk_stack", "introspection"),
    ("traceback.walk_tb", "introspection"),
    ("IPython.user_*ns", "introspection"),
    ("IPython.kernel*", "introspection"),
    ("ipykernel.*", "introspection"),
    ("os.putenv", "environment"),
    ("os.unsetenv", "environment"),
)

# Attributes that reach frames, closures, globals and the class graph.
_INTROSPECTIVE = frozenset(
    {
        "__globals__",
        "__closure__",
        "__code__",
        "__builtins__",
        "__subclasses__",
        "__mro__",
        "__bases__",
        "__base__",
        "__self__",
        "__defaults__",
        "__kwdefaults__",
        "__traceback__",
        "gi_frame",
        "gi_code",
        "cr_frame",
        "cr_code",
        "ag_frame",
        "ag_code",
        "f_back",
        "f_globals",
        "f_locals",
        "f_builtins",
        "f_code",
        "f_trace",
        "tb_frame",
        "tb_next",
    }
)

# Names a string assembled at run time has no business spelling ('ex' + 'ec').
_EXTRA_WORDS = frozenset(
    {
        "run",
        "Popen",
        "call",
        "check_call",
        "check_output",
        "getoutput",
        "getstatusoutput",
        "getattr",
        "setattr",
        "delattr",
        "globals",
        "locals",
        "vars",
        "builtins",
        "environ",
        "os",
        "sys",
    }
)

# Folders under the home folder (and files anywhere) whose contents run code or hold secrets.
_DOTFILES = frozenset(
    {
        ".bashrc",
        ".bash_profile",
        ".bash_login",
        ".bash_logout",
        ".profile",
        ".zshrc",
        ".zshenv",
        ".zprofile",
        ".zlogin",
        ".cshrc",
        ".tcshrc",
        ".kshrc",
        ".inputrc",
        ".ssh",
        ".gnupg",
        ".gitconfig",
        ".git-credentials",
        ".netrc",
        ".pypirc",
        ".npmrc",
        ".condarc",
        ".config",
        ".local",
        ".jupyter",
        ".ipython",
        ".aws",
        ".azure",
        ".kube",
        ".docker",
        ".pythonrc",
    }
)
_SYSTEM_HOOKS = (
    "/etc/cron",
    "/var/spool/cron",
    "/etc/profile",
    "/etc/bash.bashrc",
    "/etc/environment",
    "/etc/ld.so.preload",
    "/etc/sudoers",
)
_HOME_ROOT = re.compile(r"(?:~[^/]*|/root|/home/[^/]+|/Users/[^/]+)(?=/|$)")
_PROBE = re.compile(
    r"/proc(?:/(?!(?:cpuinfo|meminfo|loadavg|uptime|version)\b)|$)|/sys(?:/|$)|seccomp|nonewprivs"
    r"|cap(?:eff|bnd|prm|inh|amb)\b|tracerpid|/\.dockerenv|containerenv|nbrefine",
    re.IGNORECASE,
)
_URL = re.compile(r"\s*(?:https?|ftps?|wss?|gopher|telnet|sftp)://", re.IGNORECASE)

# Calls that write to a path: the argument's index and keyword names.
_WRITERS: dict[str, tuple[int, tuple[str, ...]]] = {
    "os.makedirs": (0, ("name",)),
    "os.mkdir": (0, ("path",)),
    "os.rename": (1, ("dst",)),
    "os.replace": (1, ("dst",)),
    "os.symlink": (1, ("dst",)),
    "os.link": (1, ("dst",)),
    "os.chdir": (0, ("path",)),  # after it, every relative path is somewhere else
    "shutil.copy": (1, ("dst",)),
    "shutil.copy2": (1, ("dst",)),
    "shutil.copyfile": (1, ("dst",)),
    "shutil.copytree": (1, ("dst",)),
    "shutil.copymode": (1, ("dst",)),
    "shutil.copystat": (1, ("dst",)),
    "shutil.move": (1, ("dst",)),
    "numpy.save": (0, ("file",)),
    "numpy.savez": (0, ("file",)),
    "numpy.savez_compressed": (0, ("file",)),
    "numpy.savetxt": (0, ("fname",)),
    "os.chmod": (0, ("path",)),
    "os.chown": (0, ("path",)),
    "os.lchown": (0, ("path",)),
    "os.utime": (0, ("path",)),
    "os.mkfifo": (0, ("path",)),
    "os.mknod": (0, ("path",)),
    "shutil.chown": (0, ("path",)),
    "sqlite3.connect": (0, ("database",)),
}
# Calls that take a file away from a path (it is gone from there afterwards).
_MOVERS: dict[str, tuple[int, tuple[str, ...]]] = {
    "os.rename": (0, ("src",)),
    "os.replace": (0, ("src",)),
    "shutil.move": (0, ("src",)),
}
# Variables that change what later processes and interpreters run.
_ENV_HOOKS = re.compile(
    r"(?:LD_|DYLD_|PYTHON|JUPYTER|IPYTHON).*|PATH|HOME|SHELL|BASH_ENV|ENV|PROMPT_COMMAND|PERL5OPT|NODE_OPTIONS"
)
_PATH_WRITES = frozenset(
    {"write_text", "write_bytes", "touch", "mkdir", "symlink_to", "hardlink_to", "chmod", "lchmod"}
)
_FILE_WRITES = frozenset(
    {
        "to_csv",
        "to_excel",
        "to_parquet",
        "to_json",
        "to_pickle",
        "to_feather",
        "to_hdf",
        "to_html",
        "to_latex",
        "to_markdown",
        "to_stata",
        "to_orc",
        "savefig",
        "tofile",
    }
)
_FILE_KEYWORDS = ("path_or_buf", "path", "excel_writer", "fname", "buf", "file", "filepath")
_STR_METHODS = frozenset(
    {"lower", "upper", "strip", "lstrip", "rstrip", "replace", "title", "casefold", "swapcase"}
    | {"capitalize", "removeprefix", "removesuffix", "decode", "encode"}
)
_MONKEY = frozenset({"builtins", "__builtins__", "sys", "os", "io", "subprocess", "socket", "importlib"})
_REEXPORTED = frozenset(
    {"os", "sys", "subprocess", "socket", "builtins", "shutil", "pickle", "ctypes", "importlib"}
)
_LOOKUPS = frozenset({"__getattribute__", "__getattr__", "__setattr__", "__delattr__"})
_NAMESPACE_METHODS = frozenset({"get", "__getitem__", "setdefault", "update", "pop", "__setitem__"})
_DEFAULTS = {"np": "numpy", "pd": "pandas", "Path": "pathlib.Path", "plt": "matplotlib.pyplot"}
_RENAMES = {
    "posix": "os",
    "nt": "os",
    "posixpath": "os.path",
    "ntpath": "os.path",
    "_socket": "socket",
    "_pickle": "pickle",
    "cPickle": "pickle",
    "io.open": "open",
    "_io.open": "open",
    "codecs.open": "open",
    "pathlib.PosixPath": "pathlib.Path",
    "pathlib.WindowsPath": "pathlib.Path",
    "pathlib.PurePath": "pathlib.Path",
    "pathlib.PurePosixPath": "pathlib.Path",
    "pathlib.PureWindowsPath": "pathlib.Path",
    "IPython.core.getipython.get_ipython": "get_ipython",
    "IPython.get_ipython": "get_ipython",
}
_BUILTIN_ROOTS = ("builtins.", "__builtins__.", "__builtin__.")
_KNOWN_MODULES = frozenset(sys.stdlib_module_names) | {"numpy", "pandas", "requests", "IPython", "yaml"}
_BUILTIN_NAMES = frozenset(dir(builtins))
_DEPTH = 64  # of folding a string or path through names and calls
_LONGEST = 10_000  # characters a folded string may have
_LONGEST_NAME = 300  # characters of a dotted name followed further
_PARTS = 8  # parts of a dotted name read in a line that does not parse


@functools.lru_cache(maxsize=4096)
def _rule(name: str) -> tuple[bool, Capability | None]:
    """Whether a rule names ``name``, and the capability it says (None: harmless)."""
    match = _rules_pattern().match(name)
    return (
        (False, None) if match is None or match.lastindex is None else (True, _RULES[match.lastindex - 1][1])
    )


@functools.lru_cache(maxsize=1)
def _rules_pattern() -> re.Pattern[str]:
    """The rules as one pattern, a group each, the first that matches winning."""
    return re.compile("|".join(f"({fnmatch.translate(pattern)})" for pattern, _ in _RULES))


@functools.lru_cache(maxsize=1)
def _words() -> frozenset[str]:
    parts = {part for pattern, cap in _RULES if cap for part in pattern.split(".") if "*" not in part}
    return frozenset(parts | _EXTRA_WORDS | _INTROSPECTIVE)


@functools.lru_cache(maxsize=8192)
def _norm(name: str) -> str:
    """``name`` with the spellings of one thing made one (``posix.system`` → ``os.system``)."""
    for _ in range(3):
        for prefix in _BUILTIN_ROOTS:
            if name.startswith(prefix):
                name = name[len(prefix) :]
        for old, new in _RENAMES.items():
            if name == old or name.startswith(old + "."):
                name = new + name[len(old) :]
    return name


def _clip(text: str, limit: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _source(node: ast.AST) -> str:
    return _clip(ast.unparse(node))


_Where = Literal["local", "outside", "dotfile", "home_dotfile"]


def _classify(path: str) -> _Where:
    """Where ``path`` is: in the working folder, outside it, a dotfile named relatively (which is
    in the home folder when the notebook runs there), or a dotfile in the home folder."""
    path = path.replace("\\", "/").strip()
    home = _HOME_ROOT.match(path)
    if home:
        rest = [part for part in path[home.end() :].split("/") if part not in ("", ".")]
        return "home_dotfile" if rest and rest[0].startswith(".") and rest[0] != ".." else "outside"
    if path.startswith(_SYSTEM_HOOKS):
        return "home_dotfile"
    if path.startswith("/") or re.match(r"[A-Za-z]:", path):
        return "outside"
    parts = posixpath.normpath(path).split("/")
    if parts[0] == "..":
        return "home_dotfile" if _DOTFILES.intersection(parts) else "outside"
    return "dotfile" if parts[0] in _DOTFILES else "local"


def _home(path: str) -> str:
    for variable in ("${HOME}", "$HOME", "%USERPROFILE%"):
        if path.startswith(variable):
            return "~" + path[len(variable) :]
    return path


# ------------------------------------------------------------------------------ IPython syntax

_MAGIC = re.compile(
    r"(?P<indent>[ \t]*)(?:(?P<target>[A-Za-z_]\w*(?:[ \t]*,[ \t]*[A-Za-z_]\w*)*)[ \t]*=[ \t]*)?"
    r"(?P<sigil>!!?|%)(?P<rest>.*)"
)
_HELP = re.compile(r"[ \t]*(?:\?{1,2}[\w.]+|[\w.]+\?{1,2})[ \t]*")
_SHELL_MAGICS = frozenset({"system", "sx", "sc", "alias", "pip", "conda", "mamba", "micromamba", "uv"})
_SHELL_CELLS = frozenset(
    {"bash", "sh", "script", "system", "sx", "!", "perl", "ruby", "python", "python2", "python3", "pypy"}
)
_PYTHON_MAGICS = frozenset({"time", "timeit", "prun", "debug", "capture"})
_CODE_MAGICS = frozenset({"run", "rerun", "macro"})
_OPTIONS = re.compile(r"(?:-\w+(?:[ \t]+\d+)?[ \t]+)*")


def _ipython(code: str) -> tuple[str, list[Use]]:
    """``code`` with its IPython syntax made Python (same lines), and what that syntax does."""
    if _parse(code) is not None:
        return code, []
    lines = code.split("\n")
    found: list[Use] = []
    start = _cell_magic(lines, found)
    for index in range(start, len(lines)):
        lines[index] = _line_magic(lines[index], index + 1, found)
    return "\n".join(lines), found


def _cell_magic(lines: list[str], found: list[Use]) -> int:
    """Reads a ``%%magic`` first line; the index the Python lines start at."""
    first = next((i for i, line in enumerate(lines) if line.strip()), 0)
    head = lines[first].strip() if lines else ""
    if not head.startswith("%%"):
        return 0
    name, _, args = head[2:].partition(" ")
    lines[first] = ""
    if name in _PYTHON_MAGICS:
        return first + 1
    if name in _SHELL_CELLS:
        found.append(Use("process", f"{_clip(head)} cell", first + 1))
    elif name in ("writefile", "file"):
        where = _classify(_home(args.split()[-1])) if args.split() else "local"
        if where != "local":
            capability: Capability = "write_outside" if where == "outside" else "home_dotfiles"
            found.append(Use(capability, _clip(head), first + 1))
    lines[first:] = [""] * (len(lines) - first)
    return len(lines)


def _line_magic(line: str, lineno: int, found: list[Use]) -> str:
    """The Python that stands for an IPython line (itself when it is Python)."""
    if _HELP.fullmatch(line):
        return line[: len(line) - len(line.lstrip())] + "pass"
    match = _MAGIC.fullmatch(line)
    if match is None:
        return line
    indent, target, sigil, rest = match.group("indent", "target", "sigil", "rest")
    if sigil == "%" and not re.match(r"[A-Za-z_]", rest):
        return line
    if sigil.startswith("!") and rest.startswith("="):
        return line
    name, _, args = rest.partition(" ")
    assign = f"{target} = " if target else ""
    if sigil.startswith("!"):
        found.append(Use("process", _clip(f"{sigil}{rest.strip()}"), lineno))
    elif name in _PYTHON_MAGICS:
        return indent + assign + (_OPTIONS.sub("", args.strip(), count=1) or "None")
    else:
        _magic_use(name, args.strip(), lineno, found)
    return indent + (f"{assign}None" if target else "pass")


def _magic_use(name: str, args: str, lineno: int, found: list[Use]) -> None:
    what = _clip(f"%{name} {args}".strip())
    if name in _SHELL_MAGICS:
        found.append(Use("process", what, lineno))
    elif name in _CODE_MAGICS:
        found.append(Use("dynamic_code", what, lineno))
    elif name == "env" and not args:
        found.append(Use("environment", what, lineno))
    elif name == "store" and "-r" in args.split():
        found.append(Use("unpickle", what, lineno))
    elif name in ("cd", "pushd"):
        where = _classify(_home(args or "~"))
        if where != "local":
            found.append(Use("write_outside", what, lineno))


# ------------------------------------------------------------------------------ lenient parsing

_CONTINUES = re.compile(r"(?:else|elif|except|finally|case)\b|[)\]}]")


def _parse(code: str) -> ast.Module | None:
    try:
        return ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _lenient(code: str) -> tuple[list[ast.Module], list[tuple[str, int]]]:
    """The trees of ``code`` (its top-level chunks that parse, then its lines that do, each with
    its own line numbers), and the lines left over."""
    tree = _parse(code)
    if tree is not None:
        return [tree], []
    trees: list[ast.Module] = []
    rest: list[tuple[str, int]] = []
    for text, start in _chunks(code):
        chunk = _parse(text)
        if chunk is not None:
            trees.append(ast.increment_lineno(chunk, start - 1))
            continue
        for offset, line in enumerate(text.split("\n")):
            one = _parse(line.strip()) if line.strip() else None
            if one is not None:
                trees.append(ast.increment_lineno(one, start + offset - 1))
            elif line.strip():
                rest.append((line, start + offset))
    return trees, rest


def _chunks(code: str) -> Iterator[tuple[str, int]]:
    """Top-level chunks of ``code``, each from a line at column 0 to the next, with the line
    it starts at."""
    lines = code.split("\n")
    starts = [0]
    for index in range(1, len(lines)):
        line, before = lines[index], lines[index - 1].rstrip()
        opens = before.endswith(("\\", ",", "(", "[", "{", ":")) or before.startswith("@")
        if line[:1].strip() and not line.startswith("#") and not _CONTINUES.match(line) and not opens:
            starts.append(index)
    for start, end in zip(starts, [*starts[1:], len(lines)], strict=True):
        yield "\n".join(lines[start:end]), start + 1


def _tree_lines(code: str, tree: ast.Module) -> Iterator[tuple[int, str]]:
    lines = code.split("\n")
    numbers = {getattr(node, "lineno", 0) for node in tree.body}
    last = max((getattr(node, "end_lineno", 0) or 0 for node in tree.body), default=0)
    first = min(numbers, default=1)
    for number in range(first, min(last, len(lines)) + 1):
        yield number, lines[number - 1]


# ------------------------------------------------------------------------------ names and values


@dataclass
class _Scope:
    """What the names in a piece of code stand for: the dotted names each may be (``o`` after
    ``import os as o`` is ``os``), the modules imported with ``*``, and the value of each name
    bound exactly once (for folding strings and paths)."""

    aliases: dict[str, set[str]] = field(default_factory=dict)
    stars: set[str] = field(default_factory=set)
    values: dict[str, ast.expr] = field(default_factory=dict)
    imported: set[str] = field(default_factory=set)
    memo: dict[int, set[str]] | None = None  # names by node, once the bindings are all read
    folded: dict[int, str | None] = field(default_factory=dict)

    @classmethod
    def of(cls, trees: Iterable[ast.Module]) -> _Scope:
        scope = cls()
        counts: Counter[str] = Counter()
        assigned: list[tuple[str, ast.expr]] = []
        for tree in trees:
            for node in ast.walk(tree):
                scope._bind(node, counts, assigned)
        scope.values = {name: value for name, value in assigned if counts[name] == 1}
        for _ in range(3):  # an alias of an alias, bound later in the code
            for name, value in assigned:
                scope.aliases.setdefault(name, set()).update(scope.names(value))
        scope.memo = {}
        return scope

    def _bind(self, node: ast.AST, counts: Counter[str], assigned: list[tuple[str, ast.expr]]) -> None:
        if isinstance(node, ast.Import | ast.ImportFrom):
            self._imported(node)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                _pairs(target, node.value, counts, assigned)
        elif isinstance(node, ast.AnnAssign | ast.NamedExpr) and node.value is not None:
            _pairs(node.target, node.value, counts, assigned)
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            _pairs(node.optional_vars, node.context_expr, counts, assigned)
        elif isinstance(node, ast.AugAssign | ast.For | ast.AsyncFor | ast.comprehension):
            counts.update({name: 2 for name in _stored(node.target)})
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            counts[node.name] += 2
        elif isinstance(node, ast.arg):
            counts[node.arg] += 2

    def _imported(self, node: ast.Import | ast.ImportFrom) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = alias.name if alias.asname else alias.name.split(".")[0]
                self.aliases.setdefault(alias.asname or target, set()).add(target)
                self.imported.add(target)
            return
        module = "." * node.level + (node.module or "")
        for alias in node.names:
            if alias.name == "*":
                self.stars.add(module)
            else:
                self.aliases.setdefault(alias.asname or alias.name, set()).add(f"{module}.{alias.name}")
                self.imported.add(f"{module}.{alias.name}")

    def is_module(self, name: str) -> bool:
        return name in self.imported or name == "os.path" or ("." not in name and name in _KNOWN_MODULES)

    # ---------------------------------------------------------------- dotted names

    def names(self, node: ast.AST) -> set[str]:
        """The dotted names ``node`` may stand for (``sp.run`` → ``subprocess.run``); empty when
        it is a value the reader does not follow."""
        if self.memo is not None and id(node) in self.memo:
            return self.memo[id(node)]
        found = {_norm(name) for name in self._names(node)}
        found |= {_norm(name) for one in found for name in self._reexported(one)}
        if self.memo is not None:
            self.memo[id(node)] = found
        return found

    def _reexported(self, name: str) -> Iterator[str]:
        """A module a module holds as an attribute: ``pathlib.os.system`` is ``os.system``."""
        parts = name.split(".")
        if len(parts) > 1 and self.is_module(parts[0]):
            for index in range(1, len(parts)):
                if parts[index] in _REEXPORTED:
                    yield ".".join(parts[index:])

    def _names(self, node: ast.AST) -> set[str]:
        if isinstance(node, ast.Name):
            return self._name(node.id)
        if isinstance(node, ast.Attribute):
            bases = self.names(node.value)
            return {f"{base}.{node.attr}" for base in bases if base and len(base) < _LONGEST_NAME}
        if isinstance(node, ast.Call):
            return self._called(node)
        if isinstance(node, ast.Subscript):
            spaces = self.namespace(node.value)
            key = self.fold(node.slice)
            return {_member(space, key) for space in spaces or ()} if key else set()
        if isinstance(node, ast.NamedExpr):
            return self.names(node.value)
        return set()

    def root(self, name: str) -> set[str]:
        """The dotted names a bare ``name`` may stand for (for code read as tokens)."""
        return {_norm(one) for one in self._name(name)}

    def _name(self, name: str) -> set[str]:
        found = set(self.aliases.get(name, ())) | {_DEFAULTS.get(name, name)}
        if name not in _BUILTIN_NAMES:
            found |= {f"{module}.{name}" for module in self.stars}
        return found

    def _called(self, node: ast.Call) -> set[str]:
        funcs = self.names(node.func)
        first = self.fold(node.args[0]) if node.args else None
        if funcs & {"__import__", "importlib.import_module", "importlib.__import__"}:
            return {first} if first else set()
        if funcs & {"importlib.reload"} and node.args:
            return self.names(node.args[0])
        if "getattr" in funcs and len(node.args) >= 2:
            name = self.fold(node.args[1])
            return {f"{base}.{name}" for base in self.names(node.args[0]) if base} if name else set()
        if "get_ipython" in funcs:
            return {"IPython"}
        if isinstance(node.func, ast.Attribute) and node.func.attr in ("get", "__getitem__", "pop"):
            spaces = self.namespace(node.func.value)
            return {_member(space, first) for space in spaces or ()} if first else set()
        return set()

    def namespace(self, node: ast.AST) -> set[str] | None:
        """When ``node`` is a namespace as a dict (``vars(os)``, ``globals()``, ``os.__dict__``,
        ``sys.modules``), the dotted names its keys are under ("" for the top level)."""
        if isinstance(node, ast.Call):
            funcs = self.names(node.func)
            if "vars" in funcs and len(node.args) == 1:
                return self.names(node.args[0])
            if funcs & {"globals", "locals"} and not node.args:
                return {""}
        if isinstance(node, ast.Attribute) and node.attr in (
            "__dict__",
            "f_globals",
            "f_locals",
            "__globals__",
        ):
            return self.names(node.value) if node.attr == "__dict__" else {""}
        if isinstance(node, ast.Attribute) and node.attr == "f_builtins":
            return {"builtins"}
        if isinstance(node, ast.Name) and node.id == "__builtins__":
            return {"builtins"}
        return {""} if "sys.modules" in self.names(node) else None

    # ---------------------------------------------------------------- strings

    def fold(self, node: ast.AST | None, depth: int = 0) -> str | None:
        """The string ``node`` evaluates to, where the code spells it out (``'ex' + 'ec'``,
        ``''.join([...])``, ``bytes.fromhex(...).decode()``, a name bound once to one)."""
        if node is None or depth > _DEPTH:
            return None
        if self.memo is not None and depth == 0 and id(node) in self.folded:
            return self.folded[id(node)]
        try:
            text = self._fold(node, depth + 1)
        except (ValueError, TypeError, IndexError, KeyError, LookupError, OverflowError, MemoryError):
            return None
        text = text if text is None or len(text) <= _LONGEST else None
        if self.memo is not None and depth == 0:
            self.folded[id(node)] = text
        return text

    def _fold(self, node: ast.AST, depth: int) -> str | None:
        if isinstance(node, ast.Constant):
            return _constant(node.value)
        if isinstance(node, ast.Name):
            return self.fold(self.values.get(node.id), depth)
        if isinstance(node, ast.JoinedStr):
            parts = [self._piece(value, depth) for value in node.values]
            return None if None in parts else "".join(part or "" for part in parts)
        if isinstance(node, ast.BinOp):
            return self._binop(node, depth)
        if isinstance(node, ast.Call):
            return self._fold_call(node, depth)
        if isinstance(node, ast.Subscript):
            base = self.fold(node.value, depth)
            return None if base is None else _sliced(base, node.slice)
        return None

    def _piece(self, node: ast.AST, depth: int) -> str | None:
        if not isinstance(node, ast.FormattedValue):
            return self.fold(node, depth)
        if node.format_spec is not None:
            return None
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, int):
            return str(node.value.value)
        text = self.fold(node.value, depth)
        return repr(text) if text is not None and node.conversion == ord("r") else text

    def _binop(self, node: ast.BinOp, depth: int) -> str | None:
        left = self.fold(node.left, depth)
        if left is None:
            return None
        if isinstance(node.op, ast.Mult) and isinstance(node.right, ast.Constant):
            times = node.right.value
            return left * times if isinstance(times, int) and len(left) * times <= _LONGEST else None
        if isinstance(node.right, ast.Tuple):
            items = [self.fold(item, depth) for item in node.right.elts]
            args: tuple[str, ...] | None = None if None in items else tuple(i or "" for i in items)
        else:
            one = self.fold(node.right, depth)
            args = None if one is None else (one,)
        if args is None:
            return None
        if isinstance(node.op, ast.Add) and len(args) == 1:
            return left + args[0]
        return left % args if isinstance(node.op, ast.Mod) else None

    def _fold_call(self, node: ast.Call, depth: int) -> str | None:
        if isinstance(node.func, ast.Attribute):
            base = self.fold(node.func.value, depth)
            if base is not None:
                return self._method(base, node, depth)
        funcs = self.names(node.func)
        first = node.args[0] if node.args else None
        if "chr" in funcs and isinstance(first, ast.Constant) and isinstance(first.value, int):
            return chr(first.value)
        text = self.fold(first, depth)
        if text is None:
            return None
        if funcs & {"str", "os.fsdecode", "os.fspath"}:
            return text
        if "bytes.fromhex" in funcs:
            return bytes.fromhex(text).decode("latin-1")
        if any(name.startswith("base64.") and name.endswith("decode") for name in funcs):
            return base64.b64decode(text.encode("latin-1")).decode("latin-1")
        if "codecs.decode" in funcs and len(node.args) == 2:
            rot = self.fold(node.args[1], depth)
            return codecs.decode(text, "rot13") if rot in ("rot13", "rot_13") else None
        return None

    def _method(self, base: str, node: ast.Call, depth: int) -> str | None:
        assert isinstance(node.func, ast.Attribute)
        attr = node.func.attr
        if attr == "join" and len(node.args) == 1:
            items = self._items(node.args[0], depth)
            return None if items is None else base.join(items)
        args = [self.fold(arg, depth) for arg in node.args]
        if None in args or node.keywords:
            return None
        texts = [arg or "" for arg in args]
        if attr == "format":
            return base.format(*texts)
        if attr in ("decode", "encode"):
            return base
        return str(getattr(base, attr)(*texts)) if attr in _STR_METHODS else None

    def _items(self, node: ast.AST, depth: int) -> list[str] | None:
        if isinstance(node, ast.List | ast.Tuple):
            items = [self.fold(item, depth) for item in node.elts]
            return None if None in items else [item or "" for item in items]
        if isinstance(node, ast.Call) and len(node.args) >= 1:
            funcs = self.names(node.func)
            if "reversed" in funcs:
                text = self.fold(node.args[0], depth)
                return None if text is None else list(reversed(text))
            if "map" in funcs and len(node.args) == 2 and "chr" in self.names(node.args[0]):
                codes = node.args[1]
                if isinstance(codes, ast.List | ast.Tuple):
                    numbers = [c.value for c in codes.elts if isinstance(c, ast.Constant)]
                    ints = [n for n in numbers if isinstance(n, int)]
                    if len(ints) == len(codes.elts):
                        return [chr(n) for n in ints]
        text = self.fold(node, depth)
        return None if text is None else list(text)

    # ---------------------------------------------------------------- paths

    def fold_path(self, node: ast.AST | None, depth: int = 0) -> str | None:
        """The path ``node`` evaluates to, ``~`` standing for the home folder (``Path.home() /
        '.ssh'`` → ``~/.ssh``); None when it is computed."""
        if node is None or depth > _DEPTH:
            return None
        text = self.fold(node, depth)
        if text is not None:
            return _home(text)
        if isinstance(node, ast.Name):
            return self.fold_path(self.values.get(node.id), depth + 1)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            return self._joined([node.left, node.right], depth)
        if isinstance(node, ast.Subscript) and "os.environ" in self.names(node.value):
            return "~" if self.fold(node.slice) in ("HOME", "USERPROFILE") else None
        if isinstance(node, ast.Attribute) and node.attr == "parent":
            base = self.fold_path(node.value, depth + 1)
            return None if base is None else posixpath.dirname(base.rstrip("/")) or "."
        return self._path_call(node, depth) if isinstance(node, ast.Call) else None

    def _joined(self, parts: list[ast.expr], depth: int) -> str | None:
        texts = [self.fold_path(part, depth + 1) for part in parts]
        return None if None in texts else posixpath.join(*[text or "" for text in texts])

    def _path_call(self, node: ast.Call, depth: int) -> str | None:
        funcs = self.names(node.func)
        if funcs & {"pathlib.Path.home"}:
            return "~"
        if funcs & {"os.getcwd", "os.getcwdb", "pathlib.Path.cwd"}:
            return "."
        if funcs & {"tempfile.gettempdir", "tempfile.mkdtemp", "tempfile.gettempdirb"}:
            return "/tmp"
        if funcs & {"os.getenv", "os.environ.get"}:
            return "~" if node.args and self.fold(node.args[0]) in ("HOME", "USERPROFILE") else None
        if funcs & {"pathlib.Path", "os.path.join", "os.fspath", "str"}:
            return self._joined(node.args, depth) if node.args else "."
        if funcs & {"os.path.expanduser", "os.path.abspath", "os.path.realpath", "os.path.normpath"}:
            return self.fold_path(node.args[0], depth + 1) if node.args else None
        if funcs & {"os.path.expandvars"}:
            return self.fold_path(node.args[0], depth + 1) if node.args else None
        if isinstance(node.func, ast.Attribute):
            attr, receiver = node.func.attr, node.func.value
            if attr in ("expanduser", "resolve", "absolute", "expandvars"):
                return self.fold_path(receiver, depth + 1)
            if attr == "joinpath":
                return self._joined([receiver, *node.args], depth)
        return None


def _pairs(
    target: ast.AST, value: ast.expr, counts: Counter[str], assigned: list[tuple[str, ast.expr]]
) -> None:
    """Records what each name in ``target`` is bound to (element by element for tuples)."""
    if isinstance(target, ast.Name):
        counts[target.id] += 1
        assigned.append((target.id, value))
    elif (
        isinstance(target, ast.Tuple | ast.List)
        and isinstance(value, ast.Tuple | ast.List)
        and len(target.elts) == len(value.elts)
    ):
        for one, other in zip(target.elts, value.elts, strict=True):
            _pairs(one, other, counts, assigned)
    else:
        counts.update({name: 2 for name in _stored(target)})


def _stored(target: ast.AST) -> list[str]:
    return [node.id for node in ast.walk(target) if isinstance(node, ast.Name)]


def _member(space: str, key: str) -> str:
    return key if not space else f"{space}.{key}"


def _constant(value: object) -> str | None:
    if isinstance(value, str):
        return value
    return value.decode("latin-1") if isinstance(value, bytes) else None


def _sliced(text: str, index: ast.AST) -> str | None:
    if isinstance(index, ast.Constant) and isinstance(index.value, int):
        return text[index.value]
    if not isinstance(index, ast.Slice):
        return None
    bounds = [_small_int(part) for part in (index.lower, index.upper, index.step)]
    if any(bound is False for bound in bounds):
        return None
    lower, upper, step = (bound if isinstance(bound, int) else None for bound in bounds)
    return text[lower:upper:step]


def _small_int(node: ast.AST | None) -> int | Literal[False] | None:
    """The int a slice bound spells (None: absent; False: something else)."""
    if node is None:
        return None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _small_int(node.operand)
        return -inner if isinstance(inner, int) and inner is not False else False
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    return False


# ------------------------------------------------------------------------------ the reader


class _Reader:
    """The uses in one tree, read with what the whole code binds."""

    def __init__(self, scope: _Scope, tree: ast.Module) -> None:
        self.scope = scope
        self.tree = tree
        self.parents = {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        self.chained: set[int] = set()  # parts of a dotted name already counted
        self.strings: set[int] = set()  # strings already read as part of a larger one or a path
        self.seen: set[tuple[str, str, int]] = set()
        self.found: list[Use] = []

    def read(self) -> list[Use]:
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Call):
                self._call(node)
            if isinstance(node, ast.Name | ast.Attribute | ast.Call | ast.Subscript):
                self._reference(node)
            if isinstance(node, ast.Attribute):
                self._attribute(node)
            if isinstance(node, ast.Subscript):
                self._subscript(node)
            if isinstance(node, ast.Name) and node.id == "__builtins__":
                self._add("introspection", "__builtins__", node)
            if isinstance(node, ast.expr):
                self._string(node)
        return self.found

    def _add(self, capability: Capability | None, what: str, node: ast.AST) -> None:
        key = (str(capability), what, id(node))
        if capability is None or key in self.seen:
            return
        self.seen.add(key)
        self.found.append(Use(capability, what, getattr(node, "lineno", 1)))

    def _chain(self, node: ast.AST) -> None:
        """Marks the parts of the dotted name ``node`` as counted with it (down to a name, or to
        the call or subscript it is looked up on, which is still read as a call)."""
        self.chained.add(id(node))
        while isinstance(node, ast.Attribute):
            node = node.value
            self.chained.add(id(node))

    # ---------------------------------------------------------------- dotted names

    def _reference(self, node: ast.expr) -> None:
        if id(node) in self.chained or not isinstance(getattr(node, "ctx", ast.Load()), ast.Load):
            return
        names = sorted(self.scope.names(node))
        if {"os.environ", "os.environb"} & set(names):
            self._chain(node)
            self._environ(node)
            return
        ruled = [(name, _rule(name)[1]) for name in names if _rule(name)[0]]
        if not ruled:
            return
        self._chain(node)
        for name, capability in ruled:
            if capability is not None:
                self._add(capability, self._what(name, capability, node), node)
                return

    def _what(self, name: str, capability: Capability, node: ast.AST) -> str:
        call = self.parents.get(id(node))
        if capability == "delete" and isinstance(call, ast.Call) and call.func is node and call.args:
            return f"{name}({self._shown(call.args[0])})"
        return name

    def _environ(self, node: ast.expr) -> None:
        """``os.environ`` dumped, not one variable of it read."""
        parent = self.parents.get(id(node))
        if isinstance(parent, ast.Subscript) and parent.value is node:
            key = self.scope.fold(parent.slice)
            if isinstance(parent.ctx, ast.Load) and key is not None:
                return
            if not isinstance(parent.ctx, ast.Load) and key is not None and not _ENV_HOOKS.fullmatch(key):
                return
            shown = "<computed>" if key is None else repr(key)
            what = f"os.environ[{shown}]" + ("" if isinstance(parent.ctx, ast.Load) else " = …")
        elif isinstance(parent, ast.Attribute) and parent.attr in (
            "get",
            "setdefault",
            "pop",
            "__contains__",
        ):
            call = self.parents.get(id(parent))
            if (
                isinstance(call, ast.Call)
                and call.func is parent
                and self.scope.fold(_arg(call, 0)) is not None
            ):
                return
            what = f"os.environ.{parent.attr}(<computed>)"
        elif isinstance(parent, ast.Compare) and any(c is node for c in parent.comparators):
            if all(isinstance(op, ast.In | ast.NotIn) for op in parent.ops):
                return
            what = "os.environ"
        elif isinstance(parent, ast.Attribute):
            what = f"os.environ.{parent.attr}"
        elif isinstance(parent, ast.Call) and any(arg is node for arg in parent.args):
            what = f"{self._callee(parent)}(os.environ)"
        elif isinstance(parent, ast.For | ast.comprehension | ast.Starred | ast.Dict):
            what = "iterates os.environ"
        else:
            what = "os.environ"
        self._add("environment", what, node)

    def _callee(self, call: ast.Call) -> str:
        names = sorted(self.scope.names(call.func))
        return names[0] if names else _source(call.func)

    def _attribute(self, node: ast.Attribute) -> None:
        if node.attr in _INTROSPECTIVE and not self._inside_introspection(node):
            self._add("introspection", _source(node), node)
        if node.attr in _LOOKUPS:
            self._add("dynamic_code", _source(node), node)
        if not isinstance(node.ctx, ast.Load) and self.scope.names(node.value) & _MONKEY:
            self._add("dynamic_code", f"{_source(node)} = …", node)

    def _inside_introspection(self, node: ast.expr) -> bool:
        """Whether ``node`` is part of a longer reach already counted (``f.f_back`` in
        ``f.f_back.f_globals``)."""
        parent = self.parents.get(id(node))
        while isinstance(parent, ast.Subscript | ast.Call) and node in (
            getattr(parent, "value", None),
            getattr(parent, "func", None),
        ):
            node, parent = parent, self.parents.get(id(parent))
        return isinstance(parent, ast.Attribute) and parent.value is node and parent.attr in _INTROSPECTIVE

    def _subscript(self, node: ast.Subscript) -> None:
        spaces = self.scope.namespace(node.value)
        if spaces is None:
            return
        key = self.scope.fold(node.slice)
        shown = (
            repr(key)
            if isinstance(node.slice, ast.Constant)
            else f"<computed {key!r}>"
            if key
            else "<computed>"
        )
        self._add("dynamic_code", f"{self._space(node.value)}[{shown}]", node)

    def _space(self, node: ast.AST) -> str:
        if isinstance(node, ast.Call) and node.args:
            return f"vars({self._module(node.args[0])})"
        if isinstance(node, ast.Attribute) and node.attr == "__dict__":
            return f"{self._module(node.value)}.__dict__"
        return _source(node)

    def _module(self, node: ast.AST) -> str:
        names = sorted(name for name in self.scope.names(node) if self.scope.is_module(name))
        return names[0] if names else _source(node)

    # ---------------------------------------------------------------- calls

    def _call(self, node: ast.Call) -> None:
        funcs = self.scope.names(node.func)
        for name in sorted(funcs & {"getattr", "setattr", "delattr"}):
            self._getattr(node, name)
        if "open" in funcs:
            self._open(node)
        for writers in (_WRITERS, _MOVERS):
            for name in sorted(funcs & writers.keys()):
                index, keywords = writers[name]
                self._target(node, _arg(node, index, keywords), name, write=True, skipped=index)
        self._add(self._unpickles(node, funcs), _clip(sorted(funcs)[0]) if funcs else "", node)
        if "mmap.mmap" in funcs and not _is_constant(_arg(node, 0, ("fileno",)), -1):
            self._add("native", "mmap.mmap(<file descriptor>)", node)
        if "os.getenv" in funcs and self.scope.fold(_arg(node, 0, ("key",))) is None:
            self._add("environment", "os.getenv(<computed>)", node)
        if funcs & {"IPython.run_line_magic", "IPython.run_cell_magic", "IPython.magic"}:
            magic = (self.scope.fold(_arg(node, 0)) or "").lstrip("%").split(" ")[0]
            if magic in _SHELL_MAGICS | _SHELL_CELLS:
                self._add("process", f"%{magic}", node)
        ruled = any(_rule(name)[0] for name in funcs)
        if isinstance(node.func, ast.Attribute) and not ruled:
            self._method(node, node.func)

    def _getattr(self, node: ast.Call, name: str) -> None:
        if len(node.args) < 2:
            return
        target, attribute = node.args[0], node.args[1]
        module = self._module(target)
        on_module = any(self.scope.is_module(n) for n in self.scope.names(target))
        if isinstance(attribute, ast.Constant) and isinstance(attribute.value, str):
            if on_module:
                self._add("dynamic_code", f"{name}({module}, {attribute.value!r})", node)
            return
        folded = self.scope.fold(attribute)
        shown = f"<computed {folded!r}>" if folded is not None else "<computed>"
        self._add("dynamic_code", f"{name}({module}, {shown})", node)

    def _open(self, node: ast.Call) -> None:
        path, mode = _arg(node, 0, ("file",)), _arg(node, 1, ("mode",))
        if isinstance(path, ast.Constant) and isinstance(path.value, int):
            self._add("native", f"open({path.value})", node)
            return
        text = "r" if mode is None else self.scope.fold(mode)
        write = text is None or any(flag in text for flag in "wax+")
        self._target(node, path, "open", write=write, mode="" if mode is None else text)

    def _method(self, node: ast.Call, func: ast.Attribute) -> None:
        attr, receiver = func.attr, func.value
        if attr in _PATH_WRITES:
            self._target(node, receiver, f"Path.{attr}", write=True, on=True)
        elif attr in ("read_text", "read_bytes"):
            self._target(node, receiver, f"Path.{attr}", write=False, on=True)
        elif attr == "open" and _arg(node, 0, ("mode",)) is not None:
            mode = self.scope.fold(_arg(node, 0, ("mode",)))
            if mode is None or re.fullmatch(r"[rwxabtU+]+", mode):
                write = mode is None or any(flag in mode for flag in "wax+")
                self._target(node, receiver, "Path.open", write=write, mode=mode, on=True)
        elif attr in ("unlink", "rmdir") and not node.args:
            self._add("delete", f"Path.{attr}({self._shown(receiver, path=True)})", node)
        elif attr in ("rename", "replace") and len(node.args) == 1 and not node.keywords:
            if self._path_like(receiver):
                self._target(node, node.args[0], f"Path.{attr}", write=True)
        elif attr in _FILE_WRITES:
            path = _arg(node, 0, _FILE_KEYWORDS)
            if path is not None and not self._in_memory(path):
                self._target(node, path, f".{attr}", write=True)
        elif attr in _NAMESPACE_METHODS and self.scope.namespace(receiver) is not None:
            self._add("dynamic_code", f"{self._space(receiver)}.{attr}", node)

    def _target(
        self,
        node: ast.Call,
        path: ast.AST | None,
        label: str,
        *,
        write: bool,
        mode: str | None = "",
        on: bool = False,
        skipped: int = 0,
    ) -> None:
        """A call that reads or writes ``path``: writes outside the working folder and any touch
        of a dotfile in the home folder count (``on``: the path is the call's receiver)."""
        if path is None:
            return
        folded = self.scope.fold_path(path)
        shown = self._shown(path, path=True)
        before = "…, " if skipped else ""
        what = f"Path({shown}).{label.split('.')[-1]}" if on else f"{label}({before}{shown}{_mode(mode)})"
        if folded is not None:
            self.strings.update(id(n) for n in ast.walk(path))
            if _PROBE.search(folded):
                self._add("sandbox_probe", what, node)
            where = _classify(folded)
        elif not write:
            return
        else:
            where = "home_dotfile" if self._mentions_dotfile(path) else "outside"
        if where == "home_dotfile" or (write and where == "dotfile"):
            self._add("home_dotfiles", what, node)
        elif write and where == "outside":
            self._add("write_outside", what, node)

    def _shown(self, node: ast.AST, *, path: bool = False) -> str:
        folded = self.scope.fold_path(node) if path else self.scope.fold(node)
        return repr(folded) if folded is not None else _source(node)

    def _mentions_dotfile(self, node: ast.AST) -> bool:
        for part in ast.walk(node):
            text = _constant(part.value) if isinstance(part, ast.Constant) else None
            if text and _DOTFILES.intersection(text.replace("\\", "/").split("/")):
                return True
        return False

    def _path_like(self, node: ast.AST) -> bool:
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            return True
        if isinstance(node, ast.Call) and "pathlib.Path" in self.scope.names(node.func):
            return True
        value = self.scope.values.get(node.id) if isinstance(node, ast.Name) else None
        return value is not None and value is not node and self._path_like(value)

    def _in_memory(self, node: ast.AST) -> bool:
        value = self.scope.values.get(node.id) if isinstance(node, ast.Name) else node
        if isinstance(value, ast.Call):
            return bool(self.scope.names(value.func) & {"io.StringIO", "io.BytesIO"})
        return bool(self.scope.names(node) & {"sys.stdout", "sys.stderr"})

    def _unpickles(self, node: ast.Call, funcs: set[str]) -> Capability | None:
        if "numpy.load" in funcs:
            allow = _arg(node, 99, ("allow_pickle",))
            return "unpickle" if allow is not None and not _is_constant(allow, False) else None
        if funcs & {"yaml.load", "yaml.load_all"}:
            loader = _arg(node, 1, ("Loader",))
            safe = loader is not None and re.search(r"Safe|Base", ast.unparse(loader))
            return None if safe else "unpickle"
        if "torch.load" in funcs:
            return None if _is_constant(_arg(node, 99, ("weights_only",)), True) else "unpickle"
        return None

    # ---------------------------------------------------------------- strings

    def _string(self, node: ast.expr) -> None:
        if id(node) in self.strings or isinstance(node, ast.Name):
            return
        if isinstance(node, ast.Constant):
            text, assembled = _constant(node.value), False
        elif isinstance(node, ast.BinOp | ast.JoinedStr | ast.Call | ast.Subscript):
            parent = self.parents.get(id(node))
            if isinstance(parent, ast.expr) and self.scope.fold(parent) is not None:
                return  # the larger string is read instead
            text, assembled = self.scope.fold(node), not isinstance(node, ast.JoinedStr) or _has_pieces(node)
        else:
            return
        if text is None:
            return
        self.strings.update(id(part) for part in ast.walk(node))
        self._text(node, text, assembled)

    def _text(self, node: ast.expr, text: str, assembled: bool) -> None:
        word = text.strip()
        if assembled and (word in _words() or _rule(word)[1] is not None):
            self._add("dynamic_code", f"assembled name {word!r}", node)
        if _PROBE.search(text):
            self._add("sandbox_probe", repr(_clip(text, 50)), node)
        if word in _INTROSPECTIVE:
            self._add("introspection", repr(word), node)
        if word and not re.search(r"\s", word) and _classify(_home(word)) == "home_dotfile":
            self._add("home_dotfiles", repr(_clip(word, 50)), node)
        parent = self.parents.get(id(node))
        if _URL.match(text) and isinstance(parent, ast.Call | ast.keyword):
            call = self.parents.get(id(parent)) if isinstance(parent, ast.keyword) else parent
            if isinstance(call, ast.Call) and "print" not in self.scope.names(call.func):
                self._add("network", repr(_clip(text, 50)), node)


def _has_pieces(node: ast.expr) -> bool:
    """An f-string built from more than its text (``f'{"ex"}ec'``)."""
    return isinstance(node, ast.JoinedStr) and any(isinstance(v, ast.FormattedValue) for v in node.values)


def _arg(node: ast.Call, index: int, keywords: tuple[str, ...] = ()) -> ast.expr | None:
    if index < len(node.args) and not any(isinstance(arg, ast.Starred) for arg in node.args[: index + 1]):
        return node.args[index]
    return next((kw.value for kw in node.keywords if kw.arg in keywords), None)


def _is_constant(node: ast.AST | None, value: object) -> bool:
    return isinstance(node, ast.Constant) and node.value == value and type(node.value) is type(value)


def _mode(mode: str | None) -> str:
    if mode == "":
        return ""
    return ", <computed>" if mode is None else f", {mode!r}"


# ------------------------------------------------------------------------------ code that does not parse

_LEXEME = re.compile(
    r"(?P<comment>#.*)"
    r"|(?P<string>[rRbBuUfF]{0,2}(?:'(?:[^'\\\n]|\\.)*'|\"(?:[^\"\\\n]|\\.)*\"))"
    r"|(?P<name>[A-Za-z_]\w*(?:[ \t]*\.[ \t]*[A-Za-z_]\w*)*)"
)


def _lexed(line: str, lineno: int, scope: _Scope) -> list[Use]:
    """The uses in a line that does not parse, from its names and strings."""
    found: list[Use] = []
    for match in _LEXEME.finditer(line):
        if match.lastgroup == "string":
            text = match.group()
            body = text[text.index(text[-1]) + 1 : -1]
            if _PROBE.search(body):
                found.append(Use("sandbox_probe", repr(_clip(body, 50)), lineno))
        elif match.lastgroup == "name":
            dotted = re.sub(r"\s+", "", match.group())
            found += [Use(cap, what, lineno) for cap, what in _lexed_name(dotted, scope)]
    return found


def _lexed_name(dotted: str, scope: _Scope) -> Iterator[tuple[Capability, str]]:
    root, *rest = dotted.split(".")[:_PARTS]
    if root in ("getattr", "setattr", "delattr", "__builtins__") and not rest:
        yield ("dynamic_code" if root != "__builtins__" else "introspection"), root
    for part in rest:
        if part in _INTROSPECTIVE:
            yield "introspection", dotted
    for base in sorted(scope.root(root)):
        parts = _norm(".".join([base, *rest])).split(".")
        for size in range(len(parts), 0, -1):
            ruled, capability = _rule(".".join(parts[:size]))
            if ruled:
                if capability is not None:
                    yield capability, ".".join(parts[:size])
                    return
                break
