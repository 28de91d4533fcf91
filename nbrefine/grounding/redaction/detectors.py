"""Secrets found by detect-secrets (Yelp): spans of credentials in a text, by its plugins.

detect-secrets is a well-kept detector of secrets in source code: one plugin per kind of
credential (AWS, GitHub, GitLab, Slack, Stripe, OpenAI, PyPI, npm, SendGrid, Twilio, Mailchimp,
Discord, Telegram, Square, Azure storage keys, IBM Cloud, Cloudant, SoftLayer, Artifactory,
JWTs, private keys, passwords in URLs), a keyword plugin (``password = "…"``, ``"secret": "…"``)
and a high-entropy one (random base64 strings in quotes). :func:`find` runs them on a text and
maps each finding back to the exact span of the secret in it, so that only the secret is
replaced, never the whole line.

Used through its plugin classes (``analyze_string``), never through its scanning machinery: no
global settings are changed, no file is read, and no plugin's ``verify`` runs (verifying a
secret would send it over the network). Its heuristic filters (sequential strings, UUIDs,
templated values, ``$VAR`` references, indirect references such as ``key = get_key()``) are
applied as detect-secrets applies them. Left out: the public IP address plugin (addresses are
not credentials, and hiding them garbles tracebacks) and the hex high-entropy plugin (git SHAs
and checksums are everywhere in ordinary output).

Speed: on the 16 KB prompt of ``tests/grounding/test_redactor.py``, detect-secrets' own ``scan_line``, line by
line, takes about 200 ms, and its plugins run on the whole text about 20 ms. So each plugin
runs only if a cheap substring test says it could match (its prefix, a keyword; the slow
assignment patterns of IBM, Cloudant and SoftLayer also need a long enough token), the keyword
plugin only on the lines holding one of its keywords, and the entropy of a quoted string is
computed only if it is long enough to pass: about 2 ms.

The plugins are imported when the first :class:`~.redactor.Redactor` is made (they import
``requests``: about 0.1 s), so that trials forked from the kernel find them loaded.

May import: the standard library, ``detect_secrets`` and :mod:`.rules` (a helper).
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from .rules import _lines_with

# Substrings at least one of which a text must hold for a plugin to run: every pattern of the
# plugin requires one of them. A hint with an upper-case letter is looked for as it is (the
# plugin's pattern is case-sensitive), the others in the lower-cased text. ``None``: the plugin
# always runs (it is cheap). tests/grounding/test_redactor.py checks that every plugin has an entry here
# and the corpus of token shapes that each still finds what it should.
_HINTS: dict[str, tuple[str, ...] | None] = {
    "AWSKeyDetector": ("A3T", "ABIA", "ACCA", "AKIA", "ASIA", "aws"),
    "ArtifactoryDetector": ("AKC", "AP"),
    "AzureStorageKeyDetector": ("accountkey=",),
    "BasicAuthDetector": ("://",),
    "CloudantDetector": ("key", "pw", "pass", "token", "cloudant.com"),  # and _RUNS
    "DiscordBotTokenDetector": None,
    "GitHubTokenDetector": ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    "GitLabTokenDetector": ("gl", "GR1348941"),
    "IbmCloudIamDetector": ("key", "pwd", "pass", "token"),
    "IbmCosHmacDetector": ("secret",),
    "JwtTokenDetector": ("eyj",),
    "MailchimpDetector": ("-us",),
    "NpmDetector": (":_authtoken",),
    "OpenAIDetector": ("t3blbkfj",),
    "PrivateKeyDetector": ("private key", "putty-user-key-file"),
    "PypiTokenDetector": ("pypi-",),
    "SendGridDetector": ("sg.",),
    "SlackDetector": ("xox", "hooks.slack.com"),
    "SoftlayerDetector": ("key", "pwd", "pass", "token", "softlayer.com"),
    "SquareOAuthDetector": ("sq0csp-",),
    "StripeDetector": ("k_live_",),
    "TelegramBotTokenDetector": (":",),
    "TwilioKeyDetector": ("AC", "SK"),
}
# Plugins whose every pattern needs a run of this many letters, digits, `_` or `-` (their keys:
# Cloudant's 24 letters, IBM's 44 or 48 characters, SoftLayer's 64): their patterns are slow.
_RUNS = {"CloudantDetector": 24, "IbmCloudIamDetector": 44, "IbmCosHmacDetector": 48, "SoftlayerDetector": 64}
_LEFT_OUT = frozenset({"IPPublicDetector"})  # see the module docstring
# The keyword plugin's keywords, lower-cased (detect_secrets.plugins.keyword.DENYLIST, shortened
# to what each starts with): a line without any of them is not given to it.
_KEYWORD_HINTS = ("key", "pass", "pwd", "secret", "contras")
_ENTROPY_HINTS = ('"', "'")
_MIN_ENTROPY_VALUE = 23
_MAX_ENTROPY_VALUE = 256  # longer quoted base64 strings are data (images, pickles), not keys
# Base64 of the headers of binary files (PNG, JPEG, GIF, PDF, ZIP, gzip, WebP/RIFF): data.
_DATA_PREFIXES = ("iVBORw0KGgo", "/9j/", "R0lGOD", "JVBERi0", "UEsDB", "H4sI", "UklGR")
_CLASSES = (str.islower, str.isupper, str.isdigit)
_RUN_RE = re.compile(r"[A-Za-z0-9_\-]{24,}")
_EDGE = " \t\r\n\"'`=:,;"  # what a pattern may take on either side of the secret
_TOKEN_CHAR = re.compile(r"[A-Za-z0-9_\-]")
_HAS_DIGIT = re.compile(r"[0-9]")

KIND_SHAPE = "shape"  # a credential of a known service, or a random string
KIND_KEYWORD = "keyword"  # a value given to a credential keyword
ENTROPY_PLUGIN = "Base64HighEntropyString"


@dataclass(frozen=True)
class Finding:
    """``text[start:end]`` is a secret, found by the detect-secrets plugin ``plugin``."""

    start: int
    end: int
    plugin: str
    kind: str


@dataclass(frozen=True)
class _Plugins:
    shapes: tuple[tuple[str, Any, tuple[str, ...] | None], ...]  # (name, plugin, hints)
    keyword: Any
    entropy: Any
    filters: tuple[Callable[[str], bool], ...]  # secret -> filtered out (all plugins)
    indirect: Callable[[str], bool]  # line -> a value read from a call or a subscript
    likely_id: Callable[..., bool]  # (secret, line, plugin) -> an identifier, not a secret


@functools.cache
def _plugins() -> _Plugins:
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
    from detect_secrets.filters import heuristic
    from detect_secrets.plugins.base import RegexBasedDetector
    from detect_secrets.plugins.high_entropy_strings import Base64HighEntropyString
    from detect_secrets.plugins.keyword import KeywordDetector

    shapes = []
    classes: list[Any] = list(get_mapping_from_secret_type_to_class().values())
    for cls in sorted(classes, key=lambda c: str(c.__name__)):
        if cls.__name__ in _HINTS and issubclass(cls, RegexBasedDetector):
            shapes.append((cls.__name__, cls(), _HINTS[cls.__name__]))
    return _Plugins(
        shapes=tuple(shapes),
        keyword=KeywordDetector(),
        entropy=Base64HighEntropyString(),
        filters=(
            heuristic.is_sequential_string,
            heuristic.is_potential_uuid,
            heuristic.is_templated_secret,
            heuristic.is_prefixed_with_dollar_sign,
            heuristic.is_not_alphanumeric_string,
        ),
        indirect=heuristic.is_indirect_reference,
        likely_id=heuristic.is_likely_id_string,
    )


def load() -> None:
    """Import the plugins now (a redactor does when it is made), not in the middle of a trial:
    a forked trial then finds them loaded."""
    _plugins()


def plugin_names() -> list[str]:
    """The detect-secrets plugins in use, by class name."""
    p = _plugins()
    return [name for name, _, _ in p.shapes] + [type(p.keyword).__name__, type(p.entropy).__name__]


def unhinted_plugins() -> list[str]:
    """Regex plugins of detect-secrets without an entry in :data:`_HINTS` (so not used)."""
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
    from detect_secrets.plugins.base import RegexBasedDetector

    classes: list[type] = list(get_mapping_from_secret_type_to_class().values())
    return sorted(
        cls.__name__
        for cls in classes
        if issubclass(cls, RegexBasedDetector)
        and cls.__name__ not in _HINTS
        and cls.__name__ not in _LEFT_OUT
    )


def find(text: str, *, shapes_only: bool = False) -> list[Finding]:
    """The secrets detect-secrets' plugins find in ``text``, as exact spans (in text order).

    ``shapes_only``: only the plugins that recognise a credential by its own shape (not the
    keyword and entropy ones, which read quoted values)."""
    if not text:
        return []
    plugins = _plugins()
    low = text.lower()
    found: list[Finding] = []
    longest_run = -1
    for name, plugin, hints in plugins.shapes:
        if hints is not None and not any(h in (low if h.islower() else text) for h in hints):
            continue
        if name in _RUNS:
            if longest_run < 0:
                longest_run = max((len(m) for m in _RUN_RE.findall(text)), default=0)
            if longest_run < _RUNS[name]:
                continue
        found.extend(_regex_findings(text, name, plugin, plugins.filters))
    if not shapes_only:
        if any(h in text for h in _ENTROPY_HINTS):
            found.extend(_entropy_findings(text, plugins))
        if any(h in low for h in _KEYWORD_HINTS):
            found.extend(_keyword_findings(text, plugins))
    found.sort(key=lambda f: (f.start, -f.end))
    return found


def _regex_findings(
    text: str, name: str, plugin: Any, filters: Iterable[Callable[[str], bool]]
) -> Iterable[Finding]:
    # analyze_string holds what the plugin accepts (the JWT plugin also checks the JSON inside);
    # its patterns, run again, give where each value is.
    values = {v for v in plugin.analyze_string(text) if isinstance(v, str) and v.strip(_EDGE)}
    if not values:
        return
    for regex in plugin.denylist:
        for m in regex.finditer(text):
            group = next((i for i in range(1, (m.lastindex or 0) + 1) if m.group(i)), 0)
            value = m.group(group)
            if value not in values:
                continue
            start, end = _trim(text, *m.span(group))
            secret = text[start:end]
            if not secret or any(f(secret) for f in filters):
                continue
            if name == "ArtifactoryDetector" and not _HAS_DIGIT.search(secret):
                continue  # an upper-case word (``APACHECONF``), not a key
            if name == "PrivateKeyDetector":  # it finds the header: the key is the block under it
                start, end = _key_block(text, start, end)
            else:
                start, end = _widen(text, start, end)
            yield Finding(start, end, name, KIND_SHAPE)


def _trim(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start] in _EDGE:
        start += 1
    while end > start and text[end - 1] in _EDGE:
        end -= 1
    return start, end


def _widen(text: str, start: int, end: int) -> tuple[int, int]:
    """A span widened to the whole token: some patterns take a fixed-length prefix of a key
    (``sk_live_`` and 24 characters, of a key of 100); the rest must not be left in sight."""
    while start > 0 and _TOKEN_CHAR.match(text, start - 1) and _TOKEN_CHAR.match(text, start):
        start -= 1
    while end < len(text) and _TOKEN_CHAR.match(text, end) and _TOKEN_CHAR.match(text, end - 1):
        end += 1
    return start, end


_BLOCK_END_RE = re.compile(r"-----END[A-Z0-9 ]{0,40}-----|---- END SSH2[A-Z ]{0,40}----")
_BLOCK_BODY_RE = re.compile(r"(?:[A-Za-z0-9+/=:\- \t\r\n]|\\[nr])*")


def _key_block(text: str, start: int, end: int) -> tuple[int, int]:
    """A private key's whole block from its header: to its END line, else to the end of the
    base64 under it (a block cut short, or a PuTTY key file's lines)."""
    dashes = text.rfind("-----", max(0, start - 5), start)
    start = dashes if dashes != -1 else text.rfind("\n", 0, start) + 1
    close = _BLOCK_END_RE.search(text, end, end + 20000)
    if close is not None:
        return start, close.end()
    line_end = text.find("\n", end)
    body = _BLOCK_BODY_RE.match(text, end if line_end == -1 else line_end + 1)
    return start, max(end, body.end() if body else end)


def _has_run(value: str, n: int = 8) -> bool:
    """Whether ``value`` holds ``n`` consecutive characters in order (``abcdefgh``, ``01234567``)."""
    low = value.lower()
    run = 1
    for a, b in itertools.pairwise(low):
        run = run + 1 if ord(b) == ord(a) + 1 else 1
        if run >= n:
            return True
    return False


def _line_at(text: str, pos: int) -> str:
    start = text.rfind("\n", 0, pos) + 1
    end = text.find("\n", pos)
    return text[start : end if end != -1 else len(text)]


def _entropy_findings(text: str, plugins: _Plugins) -> Iterable[Finding]:
    plugin = plugins.entropy
    for m in plugin.regex.finditer(text):
        value = m.group(2)
        # Below 23 characters the entropy cannot pass the plugin's 4.5 bits (log2(22) < 4.5).
        if not _MIN_ENTROPY_VALUE <= len(value) <= _MAX_ENTROPY_VALUE or value.startswith(_DATA_PREFIXES):
            continue
        if sum(any(f(ch) for ch in value) for f in _CLASSES) < 2:
            continue  # `"abcdefghilmnopqrstuvwxyz"`: a generated key mixes cases and digits
        if "\\" in value or _has_run(value):
            continue  # a Windows path or a regex (the plugin's charset has `\`); an alphabet
        if plugin.calculate_shannon_entropy(value) <= plugin.entropy_limit:
            continue
        if any(f(value) for f in plugins.filters) or plugins.likely_id(
            value, _line_at(text, m.start()), plugin
        ):
            continue
        yield Finding(m.start(2), m.end(2), type(plugin).__name__, KIND_SHAPE)


def _keyword_findings(text: str, plugins: _Plugins) -> Iterable[Finding]:
    plugin = plugins.keyword
    for start, end in _lines_with(text, _KEYWORD_HINTS):
        line = text[start:end]
        if not plugins.indirect(line):
            yield from (
                Finding(start + s, start + e, type(plugin).__name__, KIND_KEYWORD)
                for s, e in _keyword_spans(line, plugin, plugins)
            )


def _keyword_spans(line: str, plugin: Any, plugins: _Plugins) -> list[tuple[int, int]]:
    """Where the keyword plugin's values are in ``line``. It gives the first value of each of its
    patterns; the line is searched again with the values found blanked, for the others."""
    spans: list[tuple[int, int]] = []
    work = line
    for _ in range(8):
        new = []
        for value in dict.fromkeys(plugin.analyze_string(work)):
            if not isinstance(value, str) or not value or any(f(value) for f in plugins.filters):
                continue
            if plugins.likely_id(value, work, plugin):
                continue
            at = _quoted_at(work, value)
            if at is not None:
                new.append((at, at + len(value)))
        if not new:
            break
        for start, end in new:
            spans.append((start, end))
            work = work[:start] + "\x00" * (end - start) + work[end:]
    return spans


def _quoted_at(line: str, value: str) -> int | None:
    """Where ``value`` stands between quotes in ``line`` (the keyword plugin requires them)."""
    for quote in ("'", '"', "`"):
        at = line.find(quote + value + quote)
        if at != -1:
            return at + 1
    return None
