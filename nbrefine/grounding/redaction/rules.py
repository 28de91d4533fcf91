"""The text rules of redaction: shapes of real credentials (API keys, tokens, JWTs, PEM keys,
``Bearer …``, passwords in URLs, AWS secret keys near AWS context, long random tokens), literals
given to credential names (``password = "…"``, ``"token": "…"``, ``%env``, HTTP headers), which
environment variables are public settings, and the normalised form remembered values are matched in.

Most shapes of services' credentials are also recognised by detect-secrets (:mod:`.detectors`);
the rules here are kept where they reach further (``sk-ant-…``/``sk-proj-…`` keys, ``sk_test_``,
``github_pat_``, ``hf_``, ``AIza…``, ``npm_`` tokens, whole PEM blocks, ``Bearer …``, 40-character
AWS secret keys without quotes), and added for what it does not see at all: unquoted
``key=value`` fields (JDBC, ODBC, libpq DSNs, query parameters, log lines, ``.env`` lines),
``.netrc`` lines, ``sshpass -p``/``curl -u``, passwords given by position to ``login(...)`` and
in (host, port, user, password) tuples, and ``os.environ.setdefault("…_PASS", "…")``.

May import: the standard library, the sibling modules of this package and
:mod:`nbrefine.grounding.markers`.
"""

from __future__ import annotations

import builtins
import math
import re
from collections import Counter
from typing import Any

from ..markers import _LABEL_SHAPE, _marker

_PUBLIC_ENV_NAMES = frozenset(
    {
        *("PATH", "HOME", "PWD", "OLDPWD", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "LANGUAGE"),
        *("TZ", "TMPDIR", "TEMP", "TMP", "HOSTNAME", "DISPLAY", "EDITOR", "VISUAL", "PAGER", "SHLVL", "_"),
        *("VIRTUAL_ENV", "MPLBACKEND", "COLORTERM", "CLICOLOR", "FORCE_COLOR", "NO_COLOR", "LS_COLORS"),
        *("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OPENBLAS_CORETYPE"),
        *("OPENBLAS_L2_SIZE", "NBREFINE_PROVIDER", "NBREFINE_MODEL", "ANTHROPIC_BASE_URL"),
        *("MAIL", "HISTFILE", "MANPATH", "INFOPATH"),
    }
)
_PUBLIC_ENV_PREFIXES = ("LC_", "XDG_", "PYTHON", "CONDA_", "JUPYTER_", "JPY_", "PIP_", "PYENV", "IPYTHON")
_TRIVIAL_ENV_VALUES = frozenset({"true", "false", "1", "0", "yes", "no", "on", "off", "none", "null"})

# Shapes of real credentials. Hex strings (git SHAs, checksums) and UUIDs are deliberately not
# matched: they are everywhere in ordinary output and are rarely credentials on their own.
_B = r"(?<![A-Za-z0-9_\-])"  # token start boundary
_E = r"(?![A-Za-z0-9_\-])"  # token end boundary
# (substrings without which the shape cannot occur, the shape)
_SHAPES: tuple[tuple[tuple[str, ...], re.Pattern[str]], ...] = tuple(
    (hints, re.compile(pattern))
    for hints, pattern in (
        (
            ("PRIVATE KEY",),
            r"-----BEGIN[A-Z0-9 ]{0,40} PRIVATE KEY( BLOCK)?-----"
            r"(?:(?:(?!-----)[\s\S]){0,20000}-----END[A-Z0-9 ]{0,40} PRIVATE KEY( BLOCK)?-----"
            r"|(?:[A-Za-z0-9+/=\s]|\\[nr])*)",
        ),
        (("sk-",), _B + r"sk-(?:ant-|proj-|live-|test-)?[A-Za-z0-9_\-]{20,}"),
        (("k_live_", "k_test_"), _B + r"[rs]k_(?:live|test)_[A-Za-z0-9]{16,}"),
        (("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), _B + r"gh[pousr]_[A-Za-z0-9]{30,}"),
        (("github_pat_",), _B + r"github_pat_[A-Za-z0-9_]{22,}"),
        (("xox",), _B + r"xox[abposr]-[A-Za-z0-9\-]{10,}"),
        (("AKIA", "ASIA"), r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}(?![A-Za-z0-9])"),
        (("AIza",), _B + r"AIza[0-9A-Za-z_\-]{35}"),
        (("hf_",), _B + r"hf_[A-Za-z0-9]{30,}"),
        (("npm_",), _B + r"npm_[A-Za-z0-9]{36}" + _E),
        (("eyJ",), _B + r"eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}" + _E),
    )
)
_BEARER_RE = re.compile(r"(?i:\bbearer)\s+(?P<tok>[A-Za-z0-9\-._~+/]{16,}=*)")
# The password runs to the LAST `@` before the query, fragment or end of the URL
# (`mysql://root:x@y@db`, `postgresql://svc:a/b@db`); the user name may be empty (`redis://:pw@cache`).
_URL_PASSWORD_RE = re.compile(
    r"(?P<pre>\b[A-Za-z][A-Za-z0-9+.\-]{1,20}://[^/\s:@'\"<>]{0,100}:)"
    r"(?P<pw>[^\s'\"<>?#]{1,200})@(?=[A-Za-z0-9\[_\-])"
)
# A port and a path that holds an `@` (`http://host:8080/@scope/pkg`), or a placeholder, is not a password.
_URL_NOT_PASSWORD_RE = re.compile(r"[0-9]{1,5}/.*|\$?\{[^{}]*\}|%\(?\w*\)?s")
# AWS secret access keys: 40 base64 characters. Alone they cannot be told from other tokens, so
# only near an access key id or an aws_secret_access_key-like name, and never all-hex (git SHAs).
_AWS_SECRET_RE = re.compile(r"(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")
_AWS_HINT_RE = re.compile(r"(?i:AKIA|ASIA|aws_secret|secret_?access_?key|aws)")
_AWS_HINTS = ("akia", "asia", "aws", "secretaccesskey", "secret_access_key")
_AWS_NEAR = 300  # characters between the key and its hint
# Base64 of the headers of binary files (PNG, JPEG, GIF, PDF, ZIP, gzip, RIFF): data, not keys.
_DATA_PREFIXES = ("iVBORw0KGgo", "/9j/", "R0lGOD", "JVBERi0", "UEsDB", "H4sI", "UklGR")
_CANDIDATE_RE = re.compile(r"(?<![A-Za-z0-9+/=_\-])[A-Za-z0-9+/=_\-]{32,}(?![A-Za-z0-9+/=_\-])")
_HEX_RE = re.compile(r"[0-9a-fA-F\-_]+")
_SHAPE_MARKER = _marker(_LABEL_SHAPE)
# Substrings without which a rule cannot match (checked before running the rule's regex).
_HEADER_HINTS = ("authorization", "cookie", "api-key")
_NAME_STEMS = (
    "key", "token", "secret", "pass", "pwd", "auth", "cred", "cookie", "bearer", "session", "priv",
    "login", "logon", "signin", "pw", "pat", "sas",
)  # fmt: skip


_STRING_TOKEN_RE = re.compile(r"(?P<pre>[A-Za-z]{0,2})(?P<q>'{3}|\"{3}|'|\")(?P<body>.*)(?P=q)", re.S)


_LIT = (
    r"(?P<pre>[rRbBuUfF]{0,2})"
    r"(?:(?P<q3>'''|\"\"\")(?P<b3>[\s\S]{0,5000}?)(?P=q3)|(?P<q1>['\"])(?P<b1>(?:\\.|(?!(?P=q1))[^\\\n]){0,5000})(?P=q1))"
)
# `name = "lit"`, `name: str = "lit"`, `f(name="lit")`, `name == "lit"`, `obj.name = "lit"`
# Spaces and tabs only, never a newline: in the history block `In [2], defines db_password, host:`
# sits above `    db_password = "…"`, and `host: db_password = "…"` must not read as one statement.
_ASSIGN_RE = re.compile(
    r"(?<![\w])(?P<name>[A-Za-z_][A-Za-z0-9_]{0,80})[ \t]*(?::[ \t]*[\w.\[\], |]{1,60}?[ \t]*)?"
    r"(?::=|[!=]=|=)[ \t]*" + _LIT
)
# `"name": "lit"` (dict literals, JSON), `["name"] = "lit"` (subscript assignment)
_KEYED_RE = re.compile(
    r"(?P<kq>['\"])(?P<name>[A-Za-z_][\w\-. ]{0,80})(?P=kq)[ \t]*(?::|\][ \t]*=)[ \t]*" + _LIT
)
# `name = ("user", "lit")` — e.g. requests' auth tuples: every literal of the tuple
_TUPLE_RE = re.compile(
    r"(?<![\w])(?P<name>[A-Za-z_][A-Za-z0-9_]{0,80})[ \t]*=[ \t]*[(\[]\s*"
    r"(?P<items>(?:[rRbBuU]{0,2}(?:'[^'\\\n]{0,500}'|\"[^\"\\\n]{0,500}\")\s*,\s*){1,3}"
    r"[rRbBuU]{0,2}(?:'[^'\\\n]{0,500}'|\"[^\"\\\n]{0,500}\"))\s*,?\s*[)\]]"
)
_NAME_PATH_RE = re.compile(r"[A-Za-z_][\w.]*(?:\[(?:'[^'\n]*'|\"[^\"\n]*\"|\d+)\])*")
_TUPLE_ITEM_RE = re.compile(r"(?P<pre>[rRbBuU]{0,2})(?P<q>['\"])(?P<b>[^'\"\\\n]*)(?P=q)")
# `%env NAME=value`, `%set_env NAME value`, `export NAME=value`
_SHELL_RE = re.compile(
    r"(?P<pre>(?:%env|%set_env|\bexport)\s+(?P<name>[A-Za-z_][A-Za-z0-9_]{0,80})(?:\s*=\s*|\s+))"
    r"(?P<val>['\"]?[^\s'\"]+['\"]?)"
)
# HTTP header lines: `Authorization: Basic dXNlcjpwYXNz`
_HEADER_RE = re.compile(
    r"(?m)^(?P<pre>[ \t]*(?:Authorization|Cookie|(?i:proxy-authorization|set-cookie|x-api-key|api-key))"
    r"[ \t]*:[ \t]*)(?P<val>\S[^\n]*)$"
)
_ALNUM_RE = re.compile(r"[^\W_]")
_NON_ALNUM_RE = re.compile(r"[\W_]+")


# ---- what detect-secrets does not see (see the module docstring) ----------------------------

# `key=value` and `key: value` without quotes around the value, the key a credential name (the last
# dotted part: `spring.datasource.password=`): JDBC `;password=…;` and `?user=bob&password=…&`, ODBC
# `Pwd=…;` and `PWD={…}`, libpq `password=… dbname=…` and `password='…'`, query parameters
# (`?access_token=…&`, `&sig=…`), log lines (`password=…`, `password: …`), YAML and `.env` lines,
# `--password=…`. Whether the value is code instead (`password=pw)` in a call, `token =
# tokenizer(text)`, `password: str`) is decided by Redactor._kv_secret.
_KV_RE = re.compile(
    r"(?<![\w.$])(?P<key>[A-Za-z_][\w\-]{0,60}(?:\.[A-Za-z_][\w\-]{0,60}){0,6})"
    r"[ \t]*(?P<op>=|:)(?![=:/])[ \t]*"
    r"(?P<val>\{(?:\}\}|[^}\n]){1,200}\}|'(?:\\.|[^'\\\n]){1,200}'|[^\s'\"`<>;&,(){}\[\]#|]{1,500})"
)
_KV_HINTS = ("=", ":")
# In code that parses, only a whole line of `key=value` (no spaces) or `key: value` (a `.env` or YAML
# line pasted into a cell) is read so; elsewhere `password = pw` is a name.
_CONFIG_LINE_RE = re.compile(
    r"(?m)^[ \t]*(?P<key>[A-Za-z_][\w\-]{0,60}(?:\.[A-Za-z_][\w\-]{0,60}){0,6})(?P<op>=|:(?=[ \t]))[ \t]*"
    r"(?P<val>[^\s'\"`#=][^\s'\"`#]{0,500})[ \t]*$"
)
# Short field names of DSNs and query strings that hold a secret (ODBC `PWD`, SAS `sig`).
_KV_FIELDS = frozenset({"pwd", "pw", "pass", "passwd", "sig", "signature", "x-amz-signature"})
# Values that say something about a credential rather than being one.
_KV_NOT_VALUES = frozenset(
    {
        *("required", "missing", "invalid", "expired", "empty", "hidden", "masked", "redacted", "unset"),
        *("set", "str", "bytes", "int", "optional", "any", "secretstr", "string", "sensitive", "***"),
        *("incorrect", "wrong", "ok", "valid", "revoked", "unknown", "default", "omitted", "n/a"),
    }
)
_PLACEHOLDER_RE = re.compile(
    r"\*+|[xX]{3,}|\.{3}|…|<[^<>]*>|\$\{?\w+\}?|%\(\w+\)[sd]|%[sd]|\?|:\w+|\$\d+|\{\{.*\}\}|\{\w*\}"
)
_IDENTIFIER_RE = re.compile(r"[A-Za-z_]\w*")
_DOTTED_RE = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
_CONSTANT_RE = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")  # API_KEY: a constant or environment name
_AUTH_SCHEMES = frozenset({"basic", "bearer", "token", "digest", "negotiate", "ntlm", "bot", "apikey"})
_BUILTIN_NAMES = frozenset(dir(builtins))
# After a bare value, what makes it code: a call, subscript or attribute, an assignment, an operation.
_CODE_AFTER_RE = re.compile(r"[ \t]*(?:[(\[.]|=(?!=)|[+*/%][ \t]*[\w(])")
_STRING_PREFIX_RE = re.compile(r"[rRbBfFuU]{1,2}")  # `auth = f"Bearer {token}"`: not a value
# .netrc: `machine api.example.com login bob password …`
_NETRC_RE = re.compile(
    r"\b(?P<pre>(?:machine[ \t]+\S+|default)[ \t]+(?:(?:login|account)[ \t]+\S+[ \t]+){0,2}"
    r"(?:password|passwd)[ \t]+)(?P<val>\S+)"
)
# `sshpass -p 'pw' ssh …`, `curl -u bob:pw …`
_SHELL_PASSWORD_RE = re.compile(
    r"\b(?:sshpass[ \t]+(?:-[a-oq-zA-Z]\S*[ \t]+)*-p[ \t]*"
    r"|curl\b[^\n]*?[ \t](?:-u|--user)[ \t]*['\"]?[^:\s'\"]+:)"
    r"(?P<val>'[^'\n]+'|\"[^\"\n]+\"|[^\s'\"]+)"
)
_SHELL_PASSWORD_HINTS = ("sshpass", "curl")
_QUOTED = r"(?P<{q}>['\"])(?P<{b}>(?:\\.|(?!(?P={q}))[^\\\n]){{1,500}})(?P={q})"
_ARG = r"(?:[A-Za-z_][\w.]{0,100}|'[^'\\\n]{0,200}'|\"[^\"\\\n]{0,200}\")"
# `smtp.login(user, "pw")`, `ftp.login("bob", "pw")`, `HTTPBasicAuth("bob", "pw")`, `pop.pass_("pw")`:
# the callee's password parameter, by position, when the callee cannot be looked up.
_LOGIN_CALL_RE = re.compile(
    r"\b(?:(?:login|log_in|logon|signin|sign_in|authenticate|HTTPBasicAuth|HTTPDigestAuth|HTTPProxyAuth"
    r"|BasicAuth|DigestAuth)\([ \t]*"
    + _ARG
    + r"[ \t]*,|pass_\()[ \t]*"
    + _QUOTED.format(q="q", b="pw")
    + r"[ \t]*[,)]"
)
_LOGIN_CALL_HINTS = ("login", "log_in", "logon", "signin", "sign_in", "authenticate", "auth(", "pass_(")
# ('db.internal', 5432, 'bob', 'pw'): a (host, port, user, password) tuple, list or call's arguments.
_CREDENTIAL_TUPLE_RE = re.compile(
    r"[(\[][ \t]*(?:(?P<hq>['\"])(?P<host>[a-z0-9][a-z0-9.\-]{0,252})(?P=hq)"
    r"|(?P<hostname>[A-Za-z_][\w.]{0,60}))"
    r"[ \t]*,[ \t]*(?P<port>[0-9]{1,5})[ \t]*,[ \t]*"
    r"(?:(?P<uq>['\"])[^'\"\\\n]{1,64}(?P=uq)|(?P<username>[A-Za-z_][\w.]{0,60}))[ \t]*,[ \t]*"
    + _QUOTED.format(q="q", b="pw")
)
# `os.environ.setdefault("WAREHOUSE_PASS", "…")`, `os.putenv("DB_PASS", "…")`
_SETENV_RE = re.compile(
    r"\b(?:setdefault|putenv|setenv)\([ \t]*(?P<kq>['\"])(?P<name>[A-Za-z_][\w\-.]{0,80})(?P=kq)[ \t]*,[ \t]*"
    + _QUOTED.format(q="q", b="val")
)
_SETENV_HINTS = ("setdefault", "putenv", "setenv")


# Names of identifiers and digests (`id`, `tool_use_id`, `requestId`, `sha256`, `etag`): a random
# string under one is not a secret (unless the name says so: `session_id`).
_ID_NAME_RE = re.compile(
    r"(?:^|_|-)(?:[iI][dD]s?|uuid|guid|sha\d*|md5|hash|digest|checksum|etag)$|[a-z]Ids?$|^ID$"
)
# The name a quoted value is given to, right before it: `API_KEY_ENV = "`, `"secret_name": "`.
_KEYWORD_NAME_RE = re.compile(r"([A-Za-z_][\w\-]*)['\"\]]{0,2}[ \t]*(?:[!=]==?|:=|=>|=|:|\()[ \t]*@?['\"`]$")
# `user, password = "bob", "…"`: the names before `password`, at the start of a statement (of a
# line, after a quote or `Error: ` in a message), not in a call (`connect(host, password="…")`).
_TUPLE_TARGETS_BEFORE_RE = re.compile(r"(?:^|(?<=[\s'\"`:]))(?:[A-Za-z_][\w.]*[ \t]*,[ \t]*)+$")


def _tuple_target(text: str, start: int) -> bool:
    """Whether the name at ``text[start]`` follows other targets of a tuple assignment."""
    line_start = text.rfind("\n", 0, start) + 1
    return _TUPLE_TARGETS_BEFORE_RE.search(text, line_start, start) is not None


# What the key of a `key=value` holds when it is a credential's (see Redactor._kv_secret and
# credential_names.py).
_KV_STEMS = (
    "pass", "pw", "token", "secret", "cred", "auth", "bearer", "cookie", "key", "session", "sig", "sas",
)  # fmt: skip


def _lines_with(text: str, stems: tuple[str, ...]) -> list[tuple[int, int]]:
    """The (start, end) of the lines of ``text`` holding one of ``stems`` (any case), in order."""
    low = text.lower()
    if len(low) != len(text):
        low = text
    starts: set[int] = set()
    for stem in stems:
        at = low.find(stem)
        while at != -1:
            start = low.rfind("\n", 0, at) + 1
            starts.add(start)
            end = low.find("\n", at)
            if end == -1:
                break
            at = low.find(stem, end)
    out = []
    for start in sorted(starts):
        end = text.find("\n", start)
        out.append((start, len(text) if end == -1 else end))
    return out


_SHORT_NUMBER_RE = re.compile(r"[-+]?[0-9]{1,5}(?:\.[0-9]+)?")  # `token = -1`, `pwd: 5`: not secrets
# Identifiers made of words (snake_case, CamelCase, CONSTANT_CASE): names, not passwords.
_WORD_IDENTIFIER_RE = re.compile(r"_*[a-z]+(?:_+[a-z]+)*_*|_*(?:[A-Z][a-z]+)+|_*[A-Z]+(?:_+[A-Z]+)*_*")
# After a word given to a key, what makes it a name in code: `signature=signature,` `f(token=tok)`.
_NAME_AFTER_RE = re.compile(r"[ \t]*(?:[,)\]}]|(?:if|else|or|and|for|in|is|not)\b)")
_KEY_LIKE_RE = re.compile(r"[A-Za-z_][\w.\-]*=")  # `cookie: cookie=…`: the value is the next key
_WORD_VALUE_RE = re.compile(r"[A-Za-z][a-z]*|(?:[A-Z][a-z]+)+")  # after `key:`, a word of prose or a type
_KV_GENERATED = frozenset({"key", "sig", "signature"})  # keys holding a secret only if it looks generated
_AUTH_TOKEN_RE = re.compile(r"[ \t]+([^\s'\"<>;&,]{4,})")  # the credential after `Basic`, `Bearer`...


def _unquoted_span(m: re.Match[str], group: str) -> tuple[int, int]:
    """The span of a match's group, without the quotes around it if it has them."""
    start, end = m.span(group)
    if end - start >= 2 and m.string[start] in "'\"" and m.string[end - 1] == m.string[start]:
        return start + 1, end - 1
    return start, end


def _inside_quotes(line: str, end: int) -> bool:
    """Whether ``line[end]`` stands inside a quoted string (quotes counted from the line start)."""
    quote = ""
    i = 0
    while i < end:
        ch = line[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        i += 1
    return bool(quote)


def _open_brackets(line: str, end: int) -> bool:
    """Whether a bracket opened before ``line[end]`` is still open (outside quotes): a call's
    keyword argument, a dict entry, a slice."""
    depth = 0
    quote = ""
    for i, ch in enumerate(line[:end]):
        if quote:
            if ch == quote and line[i - 1] != "\\":
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}" and depth:
            depth -= 1
    return depth > 0


def _entropy(text: str) -> float:
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in Counter(text).values())


def _random_token(tok: str) -> bool:
    """A long token that looks machine-generated rather than like a word, path or identifier."""
    if len(tok) < 32 or _HEX_RE.fullmatch(tok) or tok.startswith(_DATA_PREFIXES):
        return False
    letters = sum(ch.isalpha() for ch in tok)
    digits = sum(ch.isdigit() for ch in tok)
    if not letters or not digits or letters < len(tok) // 4:
        return False
    separators = len(tok) - letters - digits
    if separators > max(2, len(tok) // 10):
        return False  # paths, snake_case identifiers, dates
    digit_runs = len(re.findall(r"[0-9]+", tok))
    return digit_runs >= 3 and _entropy(tok) >= 3.7


def _normalise(text: str) -> str:
    """Letters and digits only, lower-cased (unless lowering changes the length)."""
    low = text.lower()
    return _NON_ALNUM_RE.sub("", low if len(low) == len(text) else text)


def _random_looking(norm: str) -> bool:
    """A normalised secret that is machine-made rather than words or a path: long, letters and
    digits mixed. Only such values are matched in part (a path's pieces are ordinary text)."""
    if len(norm) < 16:
        return False
    digits = sum(ch.isdigit() for ch in norm)
    return 2 <= digits <= len(norm) - 4 and len(set(norm)) >= 8


def _whole_word(text: str, start: int, end: int) -> bool:
    return (start == 0 or not text[start - 1].isalnum()) and (end == len(text) or not text[end].isalnum())


_SPREAD_KEEP_RE = re.compile(r"(['\"`\n])")  # kept around a spread-out secret: lines and quotes


def _splice(text: str, spans: list[tuple[int, int, str]]) -> str:
    """``text`` with each span (merged where they overlap) replaced by its marker.

    Quotes and line breaks inside a span are kept, and so is every piece without a letter or
    digit, so a secret spread over a list of quoted chunks stays a list of quoted markers and
    code stays code: ``['Xk7pQ9', '-zW3mN']`` becomes ``['<redacted…>', '<redacted…>']``."""
    spans.sort()
    merged: list[list[Any]] = []
    for start, end, label in spans:
        if merged and start < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end, label])
    out: list[str] = []
    pos = 0
    for start, end, label in merged:
        out.append(text[pos:start])
        for part in _SPREAD_KEEP_RE.split(text[start:end]):
            out.append(_marker(label) if _ALNUM_RE.search(part) else part)
        pos = end
    out.append(text[pos:])
    return "".join(out)


def _literal_forms(value: str) -> list[str]:
    """The value as it appears raw and inside a Python repr (escaped)."""
    forms = [value]
    escaped = repr(value)[1:-1]
    if escaped != value:
        forms.append(escaped)
    return forms
