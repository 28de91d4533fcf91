"""The text rules of redaction: shapes of real credentials (API keys, tokens, JWTs, PEM keys,
``Bearer …``, passwords in URLs, AWS secret keys near AWS context, long random tokens), literals
given to credential names (``password = "…"``, ``"token": "…"``, ``%env``, HTTP headers), which
environment variables are public settings, and the normalised form remembered values are matched in.

May import: the standard library and the sibling modules of this package.
"""

from __future__ import annotations

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
_CANDIDATE_RE = re.compile(r"(?<![A-Za-z0-9+/=_\-])[A-Za-z0-9+/=_\-]{32,}(?![A-Za-z0-9+/=_\-])")
_HEX_RE = re.compile(r"[0-9a-fA-F\-_]+")
_SHAPE_MARKER = _marker(_LABEL_SHAPE)
# Substrings without which a rule cannot match (checked before running the rule's regex).
_HEADER_HINTS = ("authorization", "cookie", "api-key")
_NAME_STEMS = (
    "key", "token", "secret", "pass", "pwd", "auth", "cred", "cookie", "bearer", "session", "priv",
    "login", "logon", "signin",
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
_TUPLE_TARGETS_RE = re.compile(r"[ \t]*(?:[\w.]+[ \t]*,[ \t]*)+")
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


def _entropy(text: str) -> float:
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in Counter(text).values())


def _random_token(tok: str) -> bool:
    """A long token that looks machine-generated rather than like a word, path or identifier."""
    if len(tok) < 32 or _HEX_RE.fullmatch(tok):
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
