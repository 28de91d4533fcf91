"""Secrets in code, found from its structure.

Text patterns see ``password = "…"``; they cannot see ``connect("db", 5432, "bob", "…")`` (the
callee's fourth parameter is ``password``), ``Creds("u", "…")`` (a dataclass whose second field is
``password``), ``user, password = "bob", "…"`` or a DataFrame built with a ``password`` column.
Parsing the code can. The callee's parameters come from a function, class, dataclass or namedtuple
defined in the same code, or from the namespace (read with ``inspect.getattr_static``, so no
property or ``__getattr__`` of the user's runs). Also here: blanking those literals in the code.

May import: the standard library, the sibling modules of this package and
:mod:`nbrefine.grounding.markers`.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
from collections.abc import (
    Callable,
    Iterator,
    Mapping,
    Sequence,
)
from dataclasses import dataclass
from typing import Any

from ..markers import _CREDENTIAL_MARKER, _MARKER_RE
from .credential_names import _secret_env_name, is_login_name

_MAX_ITEMS = 256  # literals taken from one container value
_PAIR_NAME_CHARS = 16  # the first item of a pair shorter than this is taken as a user name
# The positional parameters of logins whose callee is not known (not defined in the code, not in
# the namespace): smtplib, imaplib, ftplib and poplib's login methods, requests' and aiohttp's
# basic auth objects. A login given a single argument is given a token (``login("hf_…")``).
_LOGIN_NAMES = ("login", "log_in", "logon", "signin", "sign_in", "authenticate")
_AUTH_CLASSES = ("HTTPBasicAuth", "HTTPDigestAuth", "HTTPProxyAuth", "BasicAuth", "DigestAuth")
_LOGIN_PARAMS: dict[str, tuple[str, ...]] = {
    **{name: ("user", "password") for name in (*_LOGIN_NAMES, *_AUTH_CLASSES)},
    "pass_": ("password",),
}
_SETENV_CALLS = frozenset({"setdefault", "putenv", "setenv"})  # (name, value): os.environ.setdefault...
_HOST_RE = re.compile(r"[a-z0-9][a-z0-9.\-]{0,252}")
_HOST_NAME_RE = re.compile(r"(?i)host|server|addr|endpoint")  # names of variables holding one
_USER_NAME_RE = re.compile(r"(?i)user|login|name|uid|account|principal")
# Ports of the services a notebook logs in to: FTP, SSH, mail, LDAP, databases, brokers, caches.
_SERVICE_PORTS = frozenset(
    {21, 22, 23, 25, 110, 143, 389, 465, 587, 636, 993, 995, 1433, 1521, 2181, 3306, 5432, 5439, 5672}
    | {5984, 6379, 7687, 8080, 8123, 8443, 9000, 9042, 9092, 9200, 11211, 15672, 27017, 50000}
)


def credential_host(host: str, port: int) -> bool:
    """Whether ``(host, port, ...)`` starts a (host, port, user, password) tuple: a lower-case
    host name (``db.internal``, ``localhost``, ``10.0.0.5``; ``db`` with a service's port such as
    5432), not a record such as ``("Alice", 30, "NYC", "engineer")``."""
    if not (0 < port < 65536 and _HOST_RE.fullmatch(host)):
        return False
    return "." in host or host == "localhost" or port in _SERVICE_PORTS


def credential_tuple_password(value: object) -> str | None:
    """The password of a (host, port, user, password, ...) tuple or list, e.g.
    ``("db.internal", 5432, "bob", "pw")``, or ``None`` if ``value`` is not shaped so."""
    if type(value) not in (tuple, list) or not 4 <= len(value) <= 8:  # type: ignore[arg-type]
        return None
    host, port, user, password = value[:4]  # type: ignore[index]
    if not (type(host) is str and type(port) is int and type(user) is str and type(password) is str):
        return None
    if not (credential_host(host, port) and 0 < len(user) <= 64 and password):
        return None
    return password


@dataclass(frozen=True)
class SecretLiteral:
    """A string literal holding a secret: ``code[start:end]`` is the whole literal expression."""

    start: int
    end: int
    value: str
    remember: bool  # redact it wherever it appears (False: the user name of a (user, password) pair)


def secret_literals(
    code: str, is_secret_name: Callable[[str], bool], namespace: Mapping[str, Any] | None = None
) -> list[SecretLiteral] | None:
    """The secret literals of ``code`` in source order, or ``None`` when it does not parse."""
    tree = _parse_python(code)
    if tree is None:
        return None
    finder = _Finder(is_secret_name, namespace or {}, _local_signatures(tree))
    try:
        finder.visit(tree)
    except RecursionError:
        return None
    offsets = _Offsets(code)
    out: dict[tuple[int, int], SecretLiteral] = {}
    for node, remember in finder.found:
        span = offsets.span(node)
        if span is None:
            continue
        raw = node.value
        value = (
            raw if isinstance(raw, str) else raw.decode("utf-8", "replace") if isinstance(raw, bytes) else ""
        )
        previous = out.get(span)
        out[span] = SecretLiteral(span[0], span[1], value, remember or bool(previous and previous.remember))
    return [out[key] for key in sorted(out)]


def _parse_python(code: str) -> ast.Module | None:
    """``code`` parsed; IPython lines (``%magic``, ``!cmd``, ``x = !cmd``) are blanked out first
    if needed, keeping every offset, so the rest of a notebook cell is still read as Python."""
    for attempt in (code, _IPYTHON_LINE_RE.sub(lambda m: " " * len(m.group(0)), code)):
        try:
            return ast.parse(attempt)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
    return None


_IPYTHON_LINE_RE = re.compile(r"(?m)^[ \t]*(?:[%!].*|[\w., \t]+?=[ \t]*[%!].*)$")


class _Offsets:
    """ast positions (line, UTF-8 byte column) to character offsets in the code."""

    def __init__(self, code: str) -> None:
        self.lines: list[str] = []
        self.starts: list[int] = []
        pos = 0
        for match in re.finditer(r"[^\r\n]*(?:\r\n|\r|\n|$)", code):
            if match.start() == len(code) and self.lines and not match.group():
                break
            self.starts.append(pos)
            self.lines.append(match.group())
            pos = match.end()

    def offset(self, lineno: int, col: int) -> int | None:
        if not 0 < lineno <= len(self.lines):
            return None
        line = self.lines[lineno - 1]
        chars = len(line.encode("utf-8")[:col].decode("utf-8", "replace"))
        return self.starts[lineno - 1] + chars

    def span(self, node: ast.expr) -> tuple[int, int] | None:
        if node.end_lineno is None or node.end_col_offset is None:
            return None
        start = self.offset(node.lineno, node.col_offset)
        end = self.offset(node.end_lineno, node.end_col_offset)
        return None if start is None or end is None or end <= start else (start, end)


def _local_signatures(tree: ast.Module) -> dict[str, list[str]]:
    """Positional parameter names of the functions, classes and namedtuples the code defines."""
    out: dict[str, list[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.setdefault(node.name, [a.arg for a in [*node.args.posonlyargs, *node.args.args]])
        elif isinstance(node, ast.ClassDef):
            params = _class_params(node)
            if params is not None:
                out[node.name] = params
        elif (
            isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
        ):
            fields = _namedtuple_call_fields(node.value)
            if fields is not None:
                out[node.targets[0].id] = fields
    return out


def _class_params(node: ast.ClassDef) -> list[str] | None:
    for item in node.body:
        if isinstance(item, ast.FunctionDef) and item.name == "__init__":
            return [a.arg for a in [*item.args.posonlyargs, *item.args.args]][1:]
    fields = [
        item.target.id
        for item in node.body
        if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) and item.simple
    ]
    return fields or None  # a dataclass, NamedTuple, attrs or pydantic model: fields in order


def _namedtuple_call_fields(value: ast.expr) -> list[str] | None:
    """``namedtuple("Login", "user token")`` / ``NamedTuple("Login", [("user", str), ...])``."""
    if not (isinstance(value, ast.Call) and len(value.args) >= 2):
        return None
    func = value.func
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    if name not in ("namedtuple", "NamedTuple"):
        return None
    spec = value.args[1]
    if isinstance(spec, ast.Constant) and isinstance(spec.value, str):
        return spec.value.replace(",", " ").split()
    if isinstance(spec, (ast.List, ast.Tuple)):
        names = []
        for item in spec.elts:
            if isinstance(item, ast.Constant) and isinstance(item.value, str):
                names.append(item.value)
            elif isinstance(item, ast.Tuple) and item.elts and isinstance(item.elts[0], ast.Constant):
                names.append(str(item.elts[0].value))
        return names
    return None


def _runtime_params(obj: object, bound: bool) -> list[str] | None:
    """Positional parameter names of a live callable, without running the user's code."""
    try:
        if inspect.isclass(obj):
            if dataclasses.is_dataclass(obj):
                return [f.name for f in dataclasses.fields(obj) if f.init]
            fields = obj.__dict__.get("_fields")
            if isinstance(fields, tuple) and all(isinstance(f, str) for f in fields):
                return list(fields)
        signature = inspect.signature(obj)  # type: ignore[arg-type]
    except Exception:  # builtins without a signature, odd callables: nothing to say
        return None
    names = []
    for param in signature.parameters.values():
        if param.kind not in (param.POSITIONAL_ONLY, param.POSITIONAL_OR_KEYWORD):
            break
        names.append(param.name)
    return names[1:] if bound else names


def _resolve(func: ast.expr, namespace: Mapping[str, Any]) -> tuple[object, bool] | None:
    """The live object a call's ``func`` names (``f``, ``mod.f``, ``obj.method``), and whether bound."""
    chain: list[str] = []
    while isinstance(func, ast.Attribute):
        chain.append(func.attr)
        func = func.value
    if not isinstance(func, ast.Name) or len(chain) > 4:
        return None
    try:
        if func.id not in namespace:
            return None
        obj: object = namespace[func.id]
        bound = False
        for attr in reversed(chain):
            if inspect.ismodule(obj) or inspect.isclass(obj):
                obj = inspect.getattr_static(obj, attr)
                bound = False
            else:  # an instance: the method is looked up on its class
                obj = inspect.getattr_static(type(obj), attr)
                bound = inspect.isfunction(obj)
            if isinstance(obj, (staticmethod, classmethod)):
                bound = isinstance(obj, classmethod)
                obj = obj.__func__
    except Exception:
        return None
    return obj, bound


def _callee_name(func: ast.expr) -> str:
    """``login`` for ``login(...)``, ``smtp.login(...)`` and ``IMAP4_SSL(host).login(...)``."""
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


def _name_of(target: ast.expr) -> str | None:
    """The name a value is stored under: ``x``, ``obj.x``, ``d["x"]``."""
    if isinstance(target, ast.Name):
        return target.id
    if isinstance(target, ast.Attribute):
        return target.attr
    if isinstance(target, ast.Subscript):
        key = target.slice
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            return key.value
    return None


def _strings(node: ast.expr | None, budget: list[int]) -> Iterator[ast.Constant]:
    """The string literals a value expression is made of (containers and ``+`` followed; calls not:
    ``getpass("Password: ")`` holds no secret)."""
    if node is None or budget[0] <= 0:
        return
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)):
        budget[0] -= 1
        yield node
    elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        for item in node.elts:
            yield from _strings(item, budget)
    elif isinstance(node, ast.Dict):
        for item in node.values:
            yield from _strings(item, budget)
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        yield from _strings(node.left, budget)
        yield from _strings(node.right, budget)


class _Finder(ast.NodeVisitor):
    def __init__(
        self,
        is_secret_name: Callable[[str], bool],
        namespace: Mapping[str, Any],
        local: dict[str, list[str]],
    ) -> None:
        self.is_secret = is_secret_name
        self.namespace = namespace
        self.local = local
        self.found: list[tuple[ast.Constant, bool]] = []

    # ---- recording

    def _take(self, value: ast.expr | None) -> None:
        literals = list(_strings(value, [_MAX_ITEMS]))
        pair = isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == 2 and len(literals) == 2
        for i, node in enumerate(literals):
            # ("user", "password"): the first is a user name unless it looks like a key itself.
            text = node.value if isinstance(node.value, str) else ""
            self.found.append((node, not (pair and i == 0 and len(text) < _PAIR_NAME_CHARS)))

    def _bind(self, target: ast.expr, value: ast.expr | None) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts):
                for sub_target, sub_value in zip(target.elts, value.elts, strict=True):
                    self._bind(sub_target, sub_value)
            return
        name = _name_of(target)
        env = isinstance(target, ast.Subscript) and _callee_name(target.value) == "environ"
        if name is not None and self._secret_holder(name, value, env):
            self._take(value)

    def _secret_holder(self, name: str, value: ast.expr | None, env: bool = False) -> bool:
        if self.is_secret(name) or (env and _secret_env_name(name)):  # env: environ["DB_PASS"]
            return True
        # smtp_login = ("mailer", "pw"): a login holding a pair or list is a credential.
        return isinstance(value, (ast.Tuple, ast.List)) and is_login_name(name)

    # ---- statements

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._bind(target, node.value)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self._bind(node.target, node.value)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._bind(node.target, node.value)
        self.generic_visit(node)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self._bind(node.target, node.value)
        self.generic_visit(node)

    # ---- expressions

    def visit_Compare(self, node: ast.Compare) -> None:
        operands = [node.left, *node.comparators]
        if any(_name_of(op) is not None and self.is_secret(_name_of(op) or "") for op in operands):
            for op in operands:
                if isinstance(op, ast.Constant):
                    self._take(op)
        self.generic_visit(node)

    def visit_Dict(self, node: ast.Dict) -> None:
        for key, value in zip(node.keys, node.values, strict=True):
            if (
                isinstance(key, ast.Constant)
                and isinstance(key.value, str)
                and self._secret_holder(key.value, value)
            ):
                self._take(value)
        self.generic_visit(node)

    def visit_Tuple(self, node: ast.Tuple) -> None:
        self._credential_items(node.elts)
        self.generic_visit(node)

    def visit_List(self, node: ast.List) -> None:
        self._credential_items(node.elts)
        self.generic_visit(node)

    def _credential_items(self, items: Sequence[ast.expr]) -> None:
        """(host, port, user, password, ...): the password, when it is a literal."""
        if not 4 <= len(items) <= 8:
            return
        host, port, user, password = items[:4]
        if not (
            isinstance(port, ast.Constant)
            and type(port.value) is int
            and 0 < port.value < 65536
            and isinstance(password, ast.Constant)
            and isinstance(password.value, str)
        ):
            return
        if isinstance(host, ast.Constant):
            if not (isinstance(host.value, str) and credential_host(host.value, port.value)):
                return
        elif _name_of(host) is None or not _HOST_NAME_RE.search(_name_of(host) or ""):
            return  # `(x, 1, total, "Overful")`: not a host
        if isinstance(user, ast.Constant):
            if not (isinstance(user.value, str) and 0 < len(user.value) <= 64):
                return
        elif not _USER_NAME_RE.search(_name_of(user) or ""):
            return  # `print("row", 22, df.shape, "total=")`: not a user
        self._take(password)

    def visit_Call(self, node: ast.Call) -> None:
        for keyword in node.keywords:
            if keyword.arg is not None and self._secret_holder(keyword.arg, keyword.value):
                self._take(keyword.value)
        self._credential_items(node.args)
        callee = _callee_name(node.func)
        if (
            callee in _SETENV_CALLS
            and len(node.args) >= 2
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
            and self._secret_holder(node.args[0].value, node.args[1], env=True)
        ):
            self._take(node.args[1])
        params = self._params(node.func)
        if params is None and callee in _LOGIN_PARAMS:
            params = list(_LOGIN_PARAMS[callee]) if len(node.args) != 1 else ["token"]
        if params:
            for arg, param in zip(node.args, params, strict=False):
                if isinstance(arg, ast.Starred):
                    break
                if self.is_secret(param):
                    self._take(arg)
        self._frame_columns(node)
        self.generic_visit(node)

    def _params(self, func: ast.expr) -> list[str] | None:
        if isinstance(func, ast.Name) and func.id in self.local:
            return self.local[func.id]
        resolved = _resolve(func, self.namespace)
        if resolved is None:
            return None
        return _runtime_params(*resolved)

    def _frame_columns(self, node: ast.Call) -> None:
        """``DataFrame([[..., "pw"], ...], columns=[..., "password"])``: the cells of secret columns."""
        columns = next((k.value for k in node.keywords if k.arg == "columns"), None)
        if not isinstance(columns, (ast.List, ast.Tuple)):
            return
        secret = {
            i
            for i, col in enumerate(columns.elts)
            if isinstance(col, ast.Constant) and isinstance(col.value, str) and self.is_secret(col.value)
        }
        data = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "data"), None)
        if not secret or not isinstance(data, (ast.List, ast.Tuple)):
            return
        for row in data.elts[:_MAX_ITEMS]:
            if isinstance(row, (ast.List, ast.Tuple)):
                for i in secret:
                    if i < len(row.elts):
                        self._take(row.elts[i])


def _parses(code: str) -> bool:
    try:
        ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def _blank_literals(code: str, found: Sequence[SecretLiteral]) -> str:
    """Each secret literal's body (every string token in its span) replaced by the marker."""
    out: list[str] = []
    pos = 0
    for literal in found:
        if literal.start < pos:
            continue
        out.append(code[pos : literal.start])
        out.append(_LITERAL_BODY_RE.sub(_blank_body, code[literal.start : literal.end]))
        pos = literal.end
    out.append(code[pos:])
    return "".join(out)


_LITERAL_BODY_RE = re.compile(
    r"(?P<pre>[A-Za-z]{0,2})(?P<q>'{3}|\"{3}|'|\")(?P<body>(?:\\.|(?!(?P=q)).)*?)(?P=q)", re.S
)


def _blank_body(m: re.Match[str]) -> str:
    if not m.group("body") or _MARKER_RE.fullmatch(m.group("body")):
        return m.group(0)
    return f"{m.group('pre')}{m.group('q')}{_CREDENTIAL_MARKER}{m.group('q')}"


def _unescaped(body: str) -> str:
    """A literal's body as the string it stands for (as written when that cannot be read)."""
    if "\\" not in body:
        return body
    try:
        value = ast.literal_eval(f'"""{body}"""') if '"""' not in body else body
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return body
    return value if isinstance(value, str) else body
