"""The :class:`Redactor`: finds secrets so they never leave the kernel in a prompt.

It remembers every value found to be secret and redacts it wherever it appears, also spread out
(separators removed, case folded) and, for random-looking values, in part. See the class docstring
for the rule and the kinds of secrets.

May import: the standard library, the sibling modules of this package and
:mod:`nbrefine.grounding.summaries` (a redacted summary is a summary made with a redactor);
detect-secrets only through :mod:`.detectors`.
"""

from __future__ import annotations

import contextlib
import functools
import io
import itertools
import keyword
import os
import re
import tokenize
import types
from collections import Counter, deque
from collections.abc import (
    Callable,
    Iterable,
    Iterator,
    Mapping,
)
from typing import Any

from .._objects import _dataclass_fields, _default_repr, _is, _Libs, _namedtuple_fields, _type_name
from ..markers import (
    _CREDENTIAL_MARKER,
    _LABEL_CREDENTIAL,
    _LABEL_KNOWN,
    _LABEL_SHAPE,
    _MARKER_RE,
    REDACTED,
    _marker,
    _marker_labels,
)
from ..summaries import ValueSummary, redacted_summary
from . import detectors
from .codesecrets import (
    _HOST_NAME_RE,
    _USER_NAME_RE,
    _blank_literals,
    _parses,
    _unescaped,
    credential_host,
    credential_tuple_password,
    secret_literals,
)
from .credential_names import _has_neutral_word, _secret_env_name, _secret_name, is_login_name
from .rules import (
    _ALNUM_RE,
    _ASSIGN_RE,
    _AUTH_SCHEMES,
    _AUTH_TOKEN_RE,
    _AWS_HINT_RE,
    _AWS_HINTS,
    _AWS_NEAR,
    _AWS_SECRET_RE,
    _BEARER_RE,
    _BUILTIN_NAMES,
    _CANDIDATE_RE,
    _CODE_AFTER_RE,
    _CONFIG_LINE_RE,
    _CONSTANT_RE,
    _CREDENTIAL_TUPLE_RE,
    _DOTTED_RE,
    _HEADER_HINTS,
    _HEADER_RE,
    _HEX_RE,
    _ID_NAME_RE,
    _IDENTIFIER_RE,
    _KEY_LIKE_RE,
    _KEYED_RE,
    _KEYWORD_NAME_RE,
    _KV_FIELDS,
    _KV_GENERATED,
    _KV_HINTS,
    _KV_NOT_VALUES,
    _KV_RE,
    _KV_STEMS,
    _LOGIN_CALL_HINTS,
    _LOGIN_CALL_RE,
    _NAME_AFTER_RE,
    _NAME_PATH_RE,
    _NAME_STEMS,
    _NETRC_RE,
    _NON_ALNUM_RE,
    _PLACEHOLDER_RE,
    _PUBLIC_ENV_NAMES,
    _PUBLIC_ENV_PREFIXES,
    _SETENV_HINTS,
    _SETENV_RE,
    _SHAPE_MARKER,
    _SHAPES,
    _SHELL_PASSWORD_HINTS,
    _SHELL_PASSWORD_RE,
    _SHELL_RE,
    _SHORT_NUMBER_RE,
    _STRING_PREFIX_RE,
    _STRING_TOKEN_RE,
    _TRIVIAL_ENV_VALUES,
    _TUPLE_ITEM_RE,
    _TUPLE_RE,
    _URL_NOT_PASSWORD_RE,
    _URL_PASSWORD_RE,
    _WORD_IDENTIFIER_RE,
    _WORD_VALUE_RE,
    _inside_quotes,
    _lines_with,
    _literal_forms,
    _normalise,
    _open_brackets,
    _random_looking,
    _random_token,
    _splice,
    _tuple_target,
    _unquoted_span,
    _whole_word,
)

# Remembered secrets (see Redactor.remember). Thresholds, in characters:
# - under _MIN_REMEMBERED a value is redacted only where it was found (the literal, the field):
#   "pw" or "1234" matched everywhere would blank ordinary text;
# - under _WHOLE_WORD_BELOW it is matched only as a whole token ("hunter2", not inside "hunter22");
# - with at least _MIN_NORMALISED letters and digits it is also matched in normalised form: letters
#   and digits only, case-folded, so `" ".join(s)`, 6-character chunks on separate lines, a list of
#   chunks or `s.upper()` are caught. Below that, a spread-out match would hit ordinary text (8
#   letters and digits in a row make a random value one in 36**8 ≈ 2.8e12; a 6-character secret
#   spread over a traceback would match words and numbers far too often).
_MIN_REMEMBERED = 4
_WHOLE_WORD_BELOW = 8
_MIN_NORMALISED = 8
_MAX_REMEMBERED = 4096  # longer strings (a whole file under a secret name) are not remembered
_PREFIX_MIN = 4  # a cut that leaves this many leading letters and digits of a secret shows none
# A random-looking secret (an API key, a generated token: see _random_looking) is also caught in
# part: any run of _FRAGMENT of its letters and digits, found through anchors of _ANCHOR.
_FRAGMENT = 12
_ANCHOR = 8
_NAMESPACE_NAMES = 20000  # names of a namespace looked at
_CONTAINER_ITEMS = 64  # items of a container looked into for secrets
_FRAME_ROWS = 256  # values of a DataFrame's credential-named column remembered
_LEARN_ITEMS = 3000  # items looked at inside the values of a namespace (a few ms at most)
# Values with nothing inside to look at (a namespace is mostly these).
_PLAIN_TYPES = frozenset(
    {int, float, bool, complex, str, bytes, type(None), types.ModuleType, types.FunctionType, type}
)


def _strings_in(value: object, depth: int = 2) -> Iterator[str]:
    """The strings a value held under a credential name is made of (bounded, no user code run
    except ``__dict__`` reads of plain objects)."""
    if isinstance(value, str):
        if len(value) <= _MAX_REMEMBERED:
            yield value
    elif isinstance(value, (bytes, bytearray)):
        if len(value) <= _MAX_REMEMBERED:
            yield bytes(value).decode("utf-8", "replace")
    elif type(value) is int:
        if abs(value) >= 10**5:  # a PIN-like number; small ints are everywhere
            yield str(value)
    elif depth <= 0:
        return
    elif isinstance(value, dict):
        for item in itertools.islice(value.values(), _CONTAINER_ITEMS):
            yield from _strings_in(item, depth - 1)
    elif isinstance(value, (list, tuple, set, frozenset, deque)):
        for item in itertools.islice(value, _CONTAINER_ITEMS):
            yield from _strings_in(item, depth - 1)
    elif _default_repr(type(value)):
        try:
            attrs = object.__getattribute__(value, "__dict__")
        except Exception:
            return
        if isinstance(attrs, dict):
            for item in itertools.islice(attrs.values(), _CONTAINER_ITEMS):
                yield from _strings_in(item, depth - 1)


def _pair_user(value: object) -> bool:
    """``("mailer", "pw")``: a (user name, password) pair whose first item is a plain user name."""
    return (
        isinstance(value, (tuple, list))
        and len(value) == 2
        and all(isinstance(v, str) for v in value)
        and len(value[0]) < 16
        and not _random_token(value[0])
    )


def _bearer_token(token: str) -> bool:
    return any(ch.isdigit() for ch in token) or (token.lower() != token and token.upper() != token)


def _looks_like_secret(text: str) -> bool:
    if any(not _URL_NOT_PASSWORD_RE.fullmatch(m.group("pw")) for m in _URL_PASSWORD_RE.finditer(text)):
        return True
    if any(any(h in text for h in hints) and shape.search(text) for hints, shape in _SHAPES):
        return True
    if any(_bearer_token(m.group("tok")) for m in _BEARER_RE.finditer(text)):
        return True
    if any(_random_token(m.group(0)) for m in _CANDIDATE_RE.finditer(text)):
        return True
    return bool(detectors.find(text, shapes_only=True))


# Every redactor judges the whole environment, one per refine session (and per cell a
# ``%%refine`` batch runs): the verdicts depend on the name and value alone, so they are kept.
@functools.lru_cache(maxsize=4096)
def _env_value_is_secret(name: str, value: str, min_len: int) -> bool:
    if len(value) < max(1, min_len):
        return False
    if value.isdigit() and len(value) < 10:
        return False
    if value.strip().lower() in _TRIVIAL_ENV_VALUES:
        return False
    if _secret_name(name) or _looks_like_secret(value):
        return True
    # Well-known settings, plain words (LOG_LEVEL=WARNING) and paths (HOME, PWD, PATH) are
    # not secrets: blanking them would only garble tracebacks and messages.
    if name in _PUBLIC_ENV_NAMES or name.startswith(_PUBLIC_ENV_PREFIXES):
        return False
    if re.fullmatch(r"[A-Za-z]{1,12}", value):
        return False
    return not (value.startswith(("/", "~", "./")) or re.fullmatch(r"[A-Za-z]:\\.*", value))


class Redactor:
    """Finds secrets so they never leave the kernel in a prompt.

    Secrets are (1) values of environment variables and any ``extra_secret_values``,
    found anywhere in text; (2) strings shaped like real credentials (API keys, tokens,
    JWTs, PEM private keys, ``Bearer …``, passwords in URLs, AWS secret keys near AWS
    context, long random tokens), found by detect-secrets' plugins (:mod:`.detectors`) and
    our rules; (3) values given to credentials: literals in code, read from its structure by
    :meth:`redact_code` (also by position: ``smtp.login(user, "…")``, ``("db", 5432, "bob",
    "…")``) or from text by patterns, and unquoted fields of DSNs, query strings, log and
    config lines (``;Pwd=…;``, ``?access_token=…``, ``password=…``, ``.netrc``); (4) values of
    the namespace's credentials (:meth:`learn_namespace`). The rule: once a value is known to
    be secret it is remembered (:meth:`remember`) and redacted wherever it appears, also
    spread out (separators removed, case folded) and, for random-looking values, in part.
    Each is replaced by a marker starting with :data:`REDACTED`; :attr:`hits` counts what
    was replaced, by kind, never by value. One redactor serves one refine session.
    """

    def __init__(
        self,
        environ: Mapping[str, str] | None = None,
        *,
        min_env_value_len: int = 6,
        extra_secret_values: Iterable[str] = (),
    ) -> None:
        detectors.load()
        env = dict(os.environ if environ is None else environ)
        self._hits: Counter[str] = Counter()
        self._labels: dict[str, str] = {}  # exact forms -> label
        self._norm: dict[str, str] = {}  # normalised forms (letters and digits) -> label
        self._anchors: list[tuple[str, int, str, str]] = []  # (anchor, where in form, form, label)
        self._longest_value = 0
        self._version = 0  # bumped whenever a new secret is remembered
        self._namespace: Mapping[str, object] | None = None  # for the callees of code (not pickled)
        self._learned: int | None = None  # id of the namespace last learned from
        self._looked_into: set[int] = set()  # ids of namespace values already looked into
        self._lines: dict[str, str] = {}  # lines of code that held a secret -> as redacted
        # The markers this redactor makes: only these are passed over when redacting again.
        self._own = {_marker(label) for label in (_LABEL_CREDENTIAL, _LABEL_SHAPE, _LABEL_KNOWN)}
        # Secret-looking names first so a value shared by several variables is labelled by the
        # most telling one.
        for name in sorted(env, key=lambda k: (not self.is_secret_name(k), k)):
            value = env[name]
            if not isinstance(value, str) or not _env_value_is_secret(name, value, min_env_value_len):
                continue
            self._add(value, f"env {name}")
        for value in extra_secret_values:
            if isinstance(value, str) and value.strip():
                self._add(value, _LABEL_KNOWN)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_namespace"] = None  # never pickle the user's namespace along (spawn trials)
        return state

    def _add(self, value: str, label: str) -> None:
        self._own.add(_marker(label))
        known = len(self._labels) + len(self._norm)
        for form in _literal_forms(value):
            self._labels.setdefault(form, label)
            self._longest_value = max(self._longest_value, len(form))
        norm = _normalise(value)
        if len(norm) >= _MIN_NORMALISED and norm not in self._norm:
            self._norm[norm] = label
            if _random_looking(norm):
                # Anchors every few characters: any run of _FRAGMENT letters and digits of the
                # value contains one whole (see _fragment_hits).
                step = _FRAGMENT - _ANCHOR + 1
                for at in range(0, len(norm) - _ANCHOR + 1, step):
                    self._anchors.append((norm[at : at + _ANCHOR], at, norm, label))
                if (len(norm) - _ANCHOR) % step:
                    self._anchors.append((norm[-_ANCHOR:], len(norm) - _ANCHOR, norm, label))
        if len(self._labels) + len(self._norm) != known:
            self._version += 1

    # ---- remembered secrets -----------------------------------------------------------

    def remember(self, value: object, label: str = _LABEL_KNOWN) -> None:
        """Redact ``value`` wherever it appears from now on (in every form, see :meth:`redact_text`).

        ``value`` is a string or anything holding strings (a tuple, a dict's values, a plain
        object's attributes). Called for everything found to be secret: values of credential
        names, literals in code, passwords in URLs, credential-shaped tokens. A (user name,
        password) pair remembers only the password; values shorter than 4 characters, blank,
        trivial (``none``, ``true``) or all digits under 6 are redacted only where found.
        """
        items = [value[1]] if _pair_user(value) else _strings_in(value)  # type: ignore[index]
        for item in items:
            text = item.strip() if isinstance(item, str) else ""
            if len(text) < _MIN_REMEMBERED or REDACTED in text or text.lower() in _TRIVIAL_ENV_VALUES:
                continue
            if text.isdigit() and len(text) < 6:
                continue
            self._add(text, label)

    def learn_namespace(self, namespace: Mapping[str, object]) -> None:
        """Remember the secrets ``namespace`` holds, and use it to resolve callees in code.

        Remembered: the values of credential-named variables (and of ``*_login`` tuples),
        and, one or two levels into other values, what sits under credential-named dict
        keys, dataclass/namedtuple fields, plain object attributes and DataFrame columns.
        Bounded: every credential-named variable is taken, then other values are looked into
        for at most 3,000 items in all (64 of a container, 256 values of a column).
        """
        self._namespace = namespace
        if self._learned == id(namespace):
            return
        self._learned = id(namespace)
        try:
            items = [
                (name, value)
                for name, value in itertools.islice(namespace.items(), _NAMESPACE_NAMES)
                if isinstance(name, str) and not name.startswith("_")
            ]
        except Exception:
            return
        deeper = []
        for name, value in items:  # the cheap, decisive part first: credential names
            t = type(value)
            if _secret_name(name) or ((t is tuple or t is list) and is_login_name(name)):
                with contextlib.suppress(Exception):  # a hostile object: what it hides stays
                    self.remember(value)
            elif t not in _PLAIN_TYPES and id(value) not in self._looked_into:
                deeper.append(value)
        budget = [_LEARN_ITEMS]
        libs = _Libs()
        for value in deeper:
            if budget[0] <= 0:
                break
            # The kernel's namespace and its copy from before the cell ran share most values.
            self._looked_into.add(id(value))
            with contextlib.suppress(Exception):
                self._learn_inside(value, libs, 2, budget)

    def _learn(self, name: str, value: object, libs: _Libs, depth: int, budget: list[int]) -> None:
        budget[0] -= 1
        t = type(value)
        if name and (_secret_name(name) or ((t is tuple or t is list) and is_login_name(name))):
            self.remember(value)
        elif depth > 0 and t not in _PLAIN_TYPES and budget[0] > 0:
            self._learn_inside(value, libs, depth, budget)

    def _learn_inside(self, value: object, libs: _Libs, depth: int, budget: list[int]) -> None:
        """What sits under credential names inside ``value`` (dict keys, fields, attributes, columns)."""
        t = type(value)
        if t is dict:
            for key, item in itertools.islice(value.items(), _CONTAINER_ITEMS):  # type: ignore[attr-defined]
                if isinstance(key, str):
                    self._learn(key, item, libs, depth - 1, budget)
        elif _is(t, libs.DataFrame):
            self._learn_frame(value)
        elif t is list or t is tuple:
            password = credential_tuple_password(value)  # ('db.internal', 5432, 'bob', 'pw')
            if password is not None:
                self.remember(password)
            # Records (dicts, objects) are looked into; a list that starts with a number or a
            # string is taken to hold only those.
            if value and type(value[0]) not in _PLAIN_TYPES:  # type: ignore[index]
                for item in itertools.islice(value, 16):  # type: ignore[call-overload]
                    budget[0] -= 1
                    self._learn("", item, libs, depth - 1, budget)
        else:
            fields = _namedtuple_fields(t) or _dataclass_fields(t)
            if fields is not None:
                for field_name in fields:
                    if _secret_name(field_name):
                        self.remember(getattr(value, field_name, None))
            elif _default_repr(t):
                attrs = object.__getattribute__(value, "__dict__")
                if isinstance(attrs, dict):
                    for key, item in itertools.islice(attrs.items(), _CONTAINER_ITEMS):
                        if isinstance(key, str) and _secret_name(key):
                            self.remember(item)

    def _learn_frame(self, frame: Any) -> None:
        for column in list(frame.columns[:_CONTAINER_ITEMS]):
            if isinstance(column, str) and _secret_name(column):
                for item in frame[column].head(_FRAME_ROWS).tolist():
                    self.remember(item)

    def is_secret_env(self, name: str, value: str) -> bool:
        """Whether an environment variable holds a secret (what trials must not see): any value
        under a credential-like name, however short, and every value the redactor would hide."""
        return bool(value) and (self.is_secret_name(name) or _env_value_is_secret(name, value, 6))

    # ---- names ------------------------------------------------------------------------

    def is_secret_name(self, name: str) -> bool:
        """Whether a variable/key/attribute name says it holds a credential.

        Matched on word parts (snake_case, camelCase, kebab-case), case-insensitively:
        ``API_KEY``, ``db_password``, ``githubToken``, ``AWS_SECRET_ACCESS_KEY``,
        ``auth_header``, ``X-Api-Key`` are; ``monkey``, ``keyboard``, ``tokenizer``,
        ``max_tokens``, ``n_tokens``, ``token_ids``, ``sort_key``, a bare ``key`` and the shell's
        ``PWD``/``OLDPWD`` (a working directory) are not.
        """
        return _secret_name(name) if isinstance(name, str) else False

    # ---- values -----------------------------------------------------------------------

    def looks_like_secret_value(self, text: str) -> bool:
        """Whether ``text`` contains something shaped like a real credential."""
        return _looks_like_secret(text)

    @property
    def hits(self) -> dict[str, int]:
        """How often each kind of secret was redacted, e.g. ``{"env MY_TOKEN": 2}`` (never values)."""
        return dict(self._hits)

    def _count_markers(self, text: str, before: str = "") -> None:
        """Count the markers in ``text`` that were not already in ``before``.

        Hits are counted from what actually leaves: a secret seen only in a look-ahead
        window, or replaced twice by overlapping rules, counts once or not at all.
        """
        if REDACTED not in text:
            return
        found = Counter(_marker_labels(text))
        if before and REDACTED in before:
            found.subtract(_marker_labels(before))
        for label, n in found.items():
            if n > 0:
                self._hits[label] += n

    @staticmethod
    def _mark(label: str) -> str:
        return _marker(label)

    def _outside_markers(self, fn: Callable[[str], str], text: str) -> str:
        """``fn`` applied to the parts of ``text`` that are not this redactor's markers.

        Only markers it makes count: a candidate printing ``<redacted:{secret}>`` does not
        get its secret treated as a marker and passed over."""
        if REDACTED not in text:
            return fn(text)
        out: list[str] = []
        plain: list[str] = []
        for i, part in enumerate(_MARKER_RE.split(text)):
            if i % 2 and part in self._own:
                out.append(fn("".join(plain)))
                out.append(part)
                plain = []
            else:
                plain.append(part)
        out.append(fn("".join(plain)))
        return "".join(out)

    def _replace_values(self, text: str) -> str:
        """Every known secret value replaced, leftmost first and longest first where they overlap.

        ``str.find`` per value is far faster than one big regex alternation.
        """
        spans: list[tuple[int, int, str]] = []
        for value, label in self._labels.items():
            start = text.find(value)
            while start != -1:
                if len(value) >= _WHOLE_WORD_BELOW or _whole_word(text, start, start + len(value)):
                    spans.append((start, -len(value), label))
                start = text.find(value, start + 1)
        if not spans:
            return text
        spans.sort()
        out: list[str] = []
        pos = 0
        for start, neg_len, label in spans:
            if start < pos:
                continue
            out.append(text[pos:start])
            out.append(_marker(label))
            pos = start - neg_len
        out.append(text[pos:])
        return "".join(out)

    def redact_text(self, text: str) -> str:
        """``text`` with every secret replaced by a ``<redacted:…>`` marker.

        Order: environment/remembered values (longest first), then the same values in
        normalised form (letters and digits only, case-folded; values with at least 8 of
        them), credential shapes, then literals given to credential names. Whatever a rule
        finds is remembered, and its other occurrences are redacted in the same pass. Text
        inside existing markers is never touched, so redacting twice changes nothing and
        counts nothing twice.
        """
        out = self._redact(text)
        self._count_markers(out, text)
        return out

    def _redact(self, text: str) -> str:
        if not text:
            return text
        version = self._version
        text = self._redact_rules(self._redact_values(text))
        if self._version != version:  # a rule found a new secret: redact its other occurrences too
            text = self._redact_values(text)
        return text

    def _redact_values(self, text: str) -> str:
        for line, redacted in self._lines.items():
            if line in text:
                text = text.replace(line, redacted)
        if self._labels:
            text = self._outside_markers(self._replace_values, text)
        if self._norm:
            text = self._replace_normalised(text)
        return text

    def _normalised_view(self, text: str) -> str:
        """``text`` lower-cased (if that keeps its length) with markers blanked: same offsets."""
        low = text.lower()
        if len(low) != len(text):
            low = text
        if REDACTED in text:
            pieces: list[str] = []
            pos = 0
            for m in _MARKER_RE.finditer(text):
                if m.group(0) in self._own:
                    pieces += [low[pos : m.start()], " " * (m.end() - m.start())]
                    pos = m.end()
            pieces.append(low[pos:])
            low = "".join(pieces)
        return low

    def _replace_normalised(self, text: str) -> str:
        """Remembered values found with separators, whitespace, quotes or case changed.

        One normalised copy of the text and ``str.find`` per value: linear in the text. The
        offsets back into the text are computed only when something was found.
        """
        view = self._normalised_view(text)
        norm = _NON_ALNUM_RE.sub("", view)
        if len(norm) < _MIN_NORMALISED:
            return text
        hits: list[tuple[int, int, str]] = []
        for form, label in self._norm.items():
            at = norm.find(form)
            while at != -1:
                hits.append((at, at + len(form), label))
                at = norm.find(form, at + 1)
        if self._anchors and len(norm) >= _FRAGMENT:
            hits.extend(self._fragment_hits(norm))
        if not hits:
            return text
        where = [m.start() for m in _ALNUM_RE.finditer(view)]
        return _splice(text, [(where[a], where[b - 1] + 1, label) for a, b, label in hits])

    def _fragment_hits(self, norm: str) -> list[tuple[int, int, str]]:
        """Runs of at least _FRAGMENT letters and digits of a random-looking secret (a candidate
        printing half an API key), found from anchors and extended both ways."""
        hits: list[tuple[int, int, str]] = []
        for anchor, offset, form, label in self._anchors:
            at = norm.find(anchor)
            while at != -1:
                start, pos = at, offset
                while start > 0 and pos > 0 and norm[start - 1] == form[pos - 1]:
                    start, pos = start - 1, pos - 1
                end, pos = at + _ANCHOR, offset + _ANCHOR
                while end < len(norm) and pos < len(form) and norm[end] == form[pos]:
                    end, pos = end + 1, pos + 1
                if end - start >= _FRAGMENT:
                    hits.append((start, end, label))
                at = norm.find(anchor, end)
        return hits

    def guard_cut(self, head: str) -> str:
        """``head``, the start of a text that was cut, without a trailing beginning of a secret.

        A secret straddling a cut is not found whole in either part; this drops the part
        before the cut when its last letters and digits (4 or more) begin a remembered value.
        """
        if not self._norm or not head:
            return head
        tail_start = max(0, len(head) - 4 * max((len(f) for f in self._norm), default=0) - 64)
        view = self._normalised_view(head[tail_start:])
        where = [m.start() for m in _ALNUM_RE.finditer(view)]
        norm = "".join(view[i] for i in where)
        best: tuple[int, str] | None = None
        for form, label in self._norm.items():
            first = max(0, len(norm) - len(form) + 1)
            at = norm.find(form[0], first)
            while at != -1 and len(norm) - at >= _PREFIX_MIN:
                if form.startswith(norm[at:]):
                    if best is None or at < best[0]:
                        best = (at, label)
                    break
                at = norm.find(form[0], at + 1)
        if best is None:
            return head
        return head[: tail_start + where[best[0]]] + _marker(best[1])

    def _own_shapes(self, text: str, low: str) -> str:
        """AWS keys and the token shapes of :data:`_SHAPES` (``low``: ``text`` lower-cased)."""
        if "AKIA" in text or "ASIA" in text or any(hint in low for hint in _AWS_HINTS):
            text = self._aws(text)
        for hints, shape in _SHAPES:
            if any(hint in text for hint in hints):
                text = self._outside_markers(functools.partial(shape.sub, self._shape_repl), text)
        return text

    def _redact_rules(self, text: str) -> str:
        # Each rule runs only if a cheap substring test says it could match.
        low = text.lower()
        text = self._own_shapes(text, low)
        if "://" in text:
            text = self._outside_markers(lambda t: _URL_PASSWORD_RE.sub(self._url_repl, t), text)
        if "bearer" in low:
            text = self._outside_markers(lambda t: _BEARER_RE.sub(self._bearer_repl, t), text)
        text = self._outside_markers(lambda t: _CANDIDATE_RE.sub(self._candidate_repl, t), text)
        if any(hint in low for hint in _HEADER_HINTS):
            text = _HEADER_RE.sub(self._header_repl, text)
        if "%env" in low or "%set_env" in low or "export" in low:
            text = _SHELL_RE.sub(self._shell_repl, text)
        if any(stem in low for stem in _NAME_STEMS):
            text = _TUPLE_RE.sub(self._tuple_repl, text)
            text = _ASSIGN_RE.sub(self._literal_repl, text)
            text = _KEYED_RE.sub(self._literal_repl, text)
        return self._outside_markers(self._more_rules, text)

    # What detect-secrets finds, and our rules for what it does not see (see rules.py).

    def _more_rules(self, text: str) -> str:
        if not text:
            return text
        low = text.lower()
        spans: list[tuple[int, int, str]] = [
            (f.start, f.end, _LABEL_SHAPE if f.kind == detectors.KIND_SHAPE else _LABEL_CREDENTIAL)
            for f in detectors.find(text)
            if (f.kind == detectors.KIND_SHAPE and f.plugin != detectors.ENTROPY_PLUGIN)
            or self._named_finding(text, f.start, f.kind)
        ]
        if any(h in text for h in _KV_HINTS):
            spans += self._kv_spans(text)
        if "machine" in low or "default" in low:
            spans += [(*m.span("val"), _LABEL_CREDENTIAL) for m in _NETRC_RE.finditer(text)]
        if any(h in low for h in _SHELL_PASSWORD_HINTS):
            spans += [
                (*_unquoted_span(m, "val"), _LABEL_CREDENTIAL) for m in _SHELL_PASSWORD_RE.finditer(text)
            ]
        if any(h in low for h in _LOGIN_CALL_HINTS):
            spans += [(*m.span("pw"), _LABEL_CREDENTIAL) for m in _LOGIN_CALL_RE.finditer(text)]
        if "," in text:
            spans += [
                (*m.span("pw"), _LABEL_CREDENTIAL)
                for m in _CREDENTIAL_TUPLE_RE.finditer(text)
                if (
                    credential_host(m.group("host"), int(m.group("port")))
                    if m.group("host") is not None
                    else bool(_HOST_NAME_RE.search(m.group("hostname")))
                )
                and (m.group("username") is None or _USER_NAME_RE.search(m.group("username")))
            ]
        if any(h in low for h in _SETENV_HINTS):
            spans += [
                (*m.span("val"), _LABEL_CREDENTIAL)
                for m in _SETENV_RE.finditer(text)
                if _secret_env_name(m.group("name"))
            ]
        spans = [(a, b, label) for a, b, label in spans if b > a and _ALNUM_RE.search(text, a, b)]
        if not spans:
            return text
        for start, end, _ in spans:
            value = _unescaped(text[start:end])
            if not _WORD_IDENTIFIER_RE.fullmatch(value):  # a word is hidden where found, not everywhere
                self.remember(value)
        return _splice(text, spans)

    @staticmethod
    def _named_finding(text: str, start: int, kind: str) -> bool:
        """Whether a quoted value found by detect-secrets' keyword or high-entropy plugin is a
        secret by our reading of the name it is given to: not when the name is about a
        credential (``API_KEY_ENV = "…"``, ``password_length: "…"``: see credential_names.py), nor
        ``user, password = "bob", "…"`` ("bob" is the user's; code: see redact_code); a random
        string is not one under an identifier's name (``"id": "toolu_01D7FLrfh4…"``)."""
        line_start = text.rfind("\n", 0, start) + 1
        name = _KEYWORD_NAME_RE.search(text, line_start, start)
        if name is None:
            return True
        if kind != detectors.KIND_KEYWORD:
            return _secret_name(name.group(1)) or not _ID_NAME_RE.search(name.group(1))
        if _tuple_target(text, name.start()):
            return False
        return _secret_env_name(name.group(1)) or not _has_neutral_word(name.group(1))

    def _shapes_only(self, text: str) -> str:
        """The rules that recognise a credential by its own shape, not by where it stands."""
        text = self._own_shapes(text, text.lower())
        text = self._outside_markers(lambda t: _CANDIDATE_RE.sub(self._candidate_repl, t), text)

        def found(t: str) -> str:
            spans = [(f.start, f.end, _LABEL_SHAPE) for f in detectors.find(t, shapes_only=True)]
            # A line of a `.env` or YAML file pasted into a cell: `MY_SERVICE_PW=dotenv-pw` parses.
            for m in _CONFIG_LINE_RE.finditer(t):
                span = self._kv_secret(m)
                if span is not None:
                    spans.append((*span, _LABEL_CREDENTIAL))
            for start, end, _ in spans:
                self.remember(t[start:end])
            return _splice(t, spans) if spans else t

        return self._outside_markers(found, text)

    def _kv_spans(self, text: str) -> list[tuple[int, int, str]]:
        spans: list[tuple[int, int, str]] = []
        for pos, end in _lines_with(text, _KV_STEMS):  # only lines with a credential word are searched
            while (m := _KV_RE.search(text, pos, end)) is not None:
                span = self._kv_secret(m)
                if span is not None:
                    spans.append((*span, _LABEL_CREDENTIAL))
                    pos = m.end()
                else:  # the value may hold fields of its own: `url='…?sig=…'`, `Error: password=…`
                    pos = m.start("val")
        return spans

    def _kv_secret(self, m: re.Match[str]) -> tuple[int, int] | None:
        """The span of the secret of a ``key=value`` match, or ``None`` if it holds none: the
        key is not a credential's, the value is a placeholder, a word about the credential
        (``password: required``), or code (``password=pw)`` in a call, ``token = tokenizer(text)``,
        ``password: str``, ``api_key = os.environ[...]``)."""
        key = m.group("key").rsplit(".", 1)[-1]
        low_key = key.lower()
        equals = m.group("op") == "="
        if not (
            _secret_name(key)
            or _secret_env_name(key)
            or (equals and (low_key in _KV_FIELDS or low_key == "key"))  # DSN fields: `Pwd=…;`, `&sig=…`
        ):
            return None
        text = m.string
        val = m.group("val")
        start, end = m.span("val")
        bare = val[0] not in "{'"
        if val[0] == "{" and not (equals and text.endswith(";", 0, m.start()) and text.startswith(";", end)):
            return None  # `{password}`, `{{ pw }}`, f-string fields, code; `;PWD={…};` is ODBC's
        if not bare:
            if _PLACEHOLDER_RE.fullmatch(val):
                return None
            start, end = start + 1, end - 1
        elif _CODE_AFTER_RE.match(text, end) or (
            _STRING_PREFIX_RE.fullmatch(val) and text[end : end + 1] in ("'", '"')
        ):
            return None  # a call, subscript, attribute, assignment or operation; a string's prefix
        else:
            while end > start and text[end - 1] in ".:!":
                end -= 1
        value = text[start:end]
        if not value.strip() or REDACTED in value or _PLACEHOLDER_RE.fullmatch(value):
            return None
        if bare and (_KEY_LIKE_RE.fullmatch(value) or text.startswith("{", m.end("val"))):
            return None  # `cookie: cookie={user_cookie}`: another key, an f-string's text
        low = value.lower()
        if low in _TRIVIAL_ENV_VALUES or low in _KV_NOT_VALUES or _SHORT_NUMBER_RE.fullmatch(value):
            return None
        if "://" in value or value.startswith(("/", "~/", "./")):
            return None
        if bare and low in _AUTH_SCHEMES:  # `Authorization: Basic dXNlcjpwYXNz`: the credential follows
            follow = _AUTH_TOKEN_RE.match(text, end)
            if follow is None or follow.group(1)[0] in "{$%" or _PLACEHOLDER_RE.fullmatch(follow.group(1)):
                return None  # `Authorization: Bearer {token}`: an f-string's field, a placeholder
            return follow.span(1)
        if low_key in _KV_GENERATED and not _random_looking(_normalise(value)):
            return None  # `key=`, `sig=` alone hold a credential only when the value looks generated
        if bare and (
            _DOTTED_RE.fullmatch(value) or (_IDENTIFIER_RE.fullmatch(value) and self._a_name(m, value))
        ):
            return None
        if bare and m.group("op") == ":" and _WORD_VALUE_RE.fullmatch(value):
            return None  # prose (`as one token: an unterminated string`), a type (`auth: AuthType`)
        return start, end

    def _a_name(self, m: re.Match[str], value: str) -> bool:
        """Whether the bare identifier ``value`` after ``key=`` is a name in code rather than a
        password in text: a keyword or builtin, a credential or constant name (``password=password``,
        ``api_key=API_KEY``), a name of the namespace, or a keyword argument or dict entry."""
        if keyword.iskeyword(value) or value in _BUILTIN_NAMES:
            return True
        spaced_before = m.string[m.start("op") - 1 : m.start("op")].isspace()
        spaced_after = m.string[m.end("op") : m.end("op") + 1].isspace()
        if m.group("op") == "=" and spaced_before and spaced_after:
            return True  # `passphrase = p0`: an assignment
        if _WORD_IDENTIFIER_RE.fullmatch(value) and (
            spaced_before or spaced_after or _NAME_AFTER_RE.match(m.string, m.end("val"))
        ):
            return True  # words placed like code (`auth =url_auth if ...`, `token=name,`)
        if _secret_name(value) or _CONSTANT_RE.fullmatch(value):
            return True
        namespace = self._namespace
        if namespace is not None:
            with contextlib.suppress(Exception):
                if value in namespace:
                    return True
        text = m.string
        line_start = text.rfind("\n", 0, m.start()) + 1
        line_end = text.find("\n", m.start())
        line = text[line_start : line_end if line_end != -1 else len(text)]
        at = m.start() - line_start
        return not _inside_quotes(line, at) and _open_brackets(line, at)

    def _shape_repl(self, m: re.Match[str]) -> str:
        self.remember(m.group(0))
        return _SHAPE_MARKER

    def _candidate_repl(self, m: re.Match[str]) -> str:
        if not _random_token(m.group(0)):
            return m.group(0)
        self.remember(m.group(0))
        return _SHAPE_MARKER

    def _url_repl(self, m: re.Match[str]) -> str:
        pw = m.group("pw")
        if _URL_NOT_PASSWORD_RE.fullmatch(pw):
            return m.group(0)
        self.remember(pw)
        return m.group("pre") + _SHAPE_MARKER + "@"

    def _aws(self, text: str) -> str:
        hints = [m.start() for m in _AWS_HINT_RE.finditer(text)]
        if not hints:
            return text

        def repl(m: re.Match[str]) -> str:
            token = m.group(0)
            if _HEX_RE.fullmatch(token) or token.lower() == token or token.upper() == token:
                return token  # git SHAs and other hex digests, plain words
            if min(abs(h - m.start()) for h in hints) > _AWS_NEAR:
                return token
            self.remember(token)
            return _SHAPE_MARKER

        return self._outside_markers(lambda t: _AWS_SECRET_RE.sub(repl, t), text)

    def _bearer_repl(self, m: re.Match[str]) -> str:
        if not _bearer_token(m.group("tok")):
            return m.group(0)
        self.remember(m.group("tok"))
        return m.group(0)[: m.start("tok") - m.start()] + self._mark(_LABEL_SHAPE)

    def _header_repl(self, m: re.Match[str]) -> str:
        if m.group("val").startswith(REDACTED) and _MARKER_RE.fullmatch(m.group("val").strip()):
            return m.group(0)
        self.remember(m.group("val"))
        return m.group("pre") + self._mark(_LABEL_CREDENTIAL)

    def _shell_repl(self, m: re.Match[str]) -> str:
        val = m.group("val").strip("'\"")
        if not _secret_env_name(m.group("name")) or not val or val.startswith(REDACTED):
            return m.group(0)
        self.remember(val)
        return m.group("pre") + self._mark(_LABEL_CREDENTIAL)

    def _tuple_repl(self, m: re.Match[str]) -> str:
        if not (self.is_secret_name(m.group("name")) or is_login_name(m.group("name"))):
            return m.group(0)
        self.remember([i.group("b") for i in _TUPLE_ITEM_RE.finditer(m.group("items"))])
        start = m.start("items") - m.start()
        end = m.end("items") - m.start()
        whole = m.group(0)
        items = _TUPLE_ITEM_RE.sub(
            lambda i: (
                i.group(0)
                if not i.group("b") or i.group("b").startswith(REDACTED)
                else f"{i.group('pre')}{i.group('q')}{self._mark(_LABEL_CREDENTIAL)}{i.group('q')}"
            ),
            m.group("items"),
        )
        return whole[:start] + items + whole[end:]

    def _literal_repl(self, m: re.Match[str]) -> str:
        name = m.group("name")
        env = m.re is _KEYED_RE and m.string.endswith("environ[", 0, m.start())  # environ["DB_PASS"] = "…"
        if not (_secret_env_name(name) if env else self.is_secret_name(name)):
            return m.group(0)
        if _tuple_target(m.string, m.start()):
            return m.group(0)  # `user, password = "bob", "…"`: "bob" is the user's (code: see redact_code)
        group = "b3" if m.group("q3") is not None else "b1"
        body = m.group(group)
        if not body or _MARKER_RE.fullmatch(body):
            return m.group(0)
        if "f" in m.group("pre").lower() and "{" in body:
            return m.group(0)  # an f-string interpolating a variable: the variable is what matters
        self.remember(_unescaped(body))
        start = m.start(group) - m.start()
        end = m.end(group) - m.start()
        whole = m.group(0)
        return whole[:start] + self._mark(_LABEL_CREDENTIAL) + whole[end:]

    # ---- code -------------------------------------------------------------------------

    def redact_code(self, code: str) -> str:
        """``code`` with every secret replaced inside its string literal, still valid Python.

        Literals the code's structure marks as secret are found by parsing it (see
        :mod:`.codesecrets`: positional arguments of credential-named parameters,
        dataclass fields, tuples under login names, DataFrame columns...) and remembered;
        then the text rules run. If their result no longer parses while the code did (an
        environment value that is also a name in the code), only string literals and
        comments are redacted instead. Code that does not parse is redacted as text.
        """
        out = self._redact_code(code)
        self._count_markers(out, code)
        return out

    def _redact_code(self, code: str) -> str:
        if not code:
            return code
        found = secret_literals(code, self.is_secret_name, self._namespace)
        if found is None:
            return self._redact(code)
        for literal in found:
            if literal.remember:
                self.remember(literal.value)
        structural = _blank_literals(code, found)
        self._remember_lines(code, structural)
        out = self._redact(structural)
        if out == structural or _parses(out):
            return out
        # Strings and comments redacted by every rule; elsewhere (names, numbers) only what has
        # the shape of a credential: `GITHUB_TOKEN = ghp_…` without quotes still parses.
        return self._shapes_only(self._redact_tokens(structural))

    def _remember_lines(self, code: str, redacted: str) -> None:
        """Lines of code that held a secret, to be shown redacted wherever they are quoted
        (the failing line, traceback frames): a secret too short to be matched everywhere
        (``connect("db", 5432, "bob", "pw")``) is still hidden there."""
        before, after = code.splitlines(), redacted.splitlines()
        if len(before) != len(after):
            return
        for old, new in zip(before, after, strict=True):
            old, new = old.strip(), new.strip()
            if old != new and len(old) >= _MIN_NORMALISED and old not in self._lines:
                self._lines[old] = new
                self._version += 1

    def _redact_tokens(self, code: str) -> str:
        """Only string literals (their bodies) and comments redacted: names and syntax untouched."""
        try:
            tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
        except (tokenize.TokenError, SyntaxError):
            return code
        starts = [0]
        for line in code.splitlines(keepends=True):
            starts.append(starts[-1] + len(line))
        out: list[str] = []
        pos = 0
        for tok in tokens:
            if tok.type not in (tokenize.STRING, tokenize.COMMENT) or tok.start[0] > len(starts) - 1:
                continue
            start = starts[tok.start[0] - 1] + tok.start[1]
            end = starts[tok.end[0] - 1] + tok.end[1]
            out.append(code[pos:start])
            out.append(self._redact_token(tok.string, tok.type == tokenize.COMMENT))
            pos = end
        out.append(code[pos:])
        return "".join(out)

    def _redact_token(self, text: str, comment: bool) -> str:
        if comment:
            return "#" + self._redact(text[1:]).replace("\n", " ")
        match = _STRING_TOKEN_RE.fullmatch(text)
        if match is None:
            return text
        body = self._redact(match.group("body"))
        if body == match.group("body"):
            return text
        candidate = f"{match.group('pre')}{match.group('q')}{body}{match.group('q')}"
        if _parses(candidate):
            return candidate
        return f"{match.group('pre')}{match.group('q')}{_CREDENTIAL_MARKER}{match.group('q')}"

    # ---- summaries --------------------------------------------------------------------

    def summarize(self, name: str, value: object, *, max_chars: int = 300) -> ValueSummary:
        """The summary of ``name = value`` with every secret redacted.

        A credential name gives the bare marker (the type is kept in ``type_name``, the
        value is not rendered). Inside containers, values under credential-named keys,
        attributes, fields and DataFrame columns are replaced in the rendering (the
        user's objects are not touched); everything else is rendered and then passed
        through :meth:`redact_text` before it is cut to ``max_chars``.
        """
        type_name = _type_name(value)
        if self.is_secret_name(name) or (is_login_name(name) and isinstance(value, (tuple, list))):
            self._hits[_LABEL_CREDENTIAL] += 1
            # `db_password`, `cfg.api_key`, `env["TOKEN"]` hold a secret; an expression that merely
            # mentions one (`"login failed: password=" + pw`) is not one as a whole.
            if _NAME_PATH_RE.fullmatch(name):
                with contextlib.suppress(Exception):  # a hostile container: it is not rendered anyway
                    self.remember(value)
            return ValueSummary(name, type_name, _CREDENTIAL_MARKER, redacted=True)
        text = redacted_summary(value, max_chars, self)
        self._count_markers(text)
        return ValueSummary(name, type_name, text, redacted=REDACTED in text)
