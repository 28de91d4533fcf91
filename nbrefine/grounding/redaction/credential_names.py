"""Credential names: whether a variable, key, attribute or column name says it holds a secret
(``API_KEY``, ``db_password``, ``githubToken``; not ``max_tokens``, ``sort_key``, ``PWD``), and login
names whose tuple or list value is a (user, password) pair.

May import: the standard library only.
"""

from __future__ import annotations

import functools
import re

_LOGIN_WORDS = frozenset({"login", "logins", "logon", "signin"})


@functools.lru_cache(maxsize=8192)
def is_login_name(name: str) -> bool:
    """``smtp_login``, ``dbLogins``: a name whose tuple or list value is a (user, password) pair."""
    low = name.lower()
    if "log" not in low and "sign" not in low:
        return False
    return any(part in _LOGIN_WORDS for part in re.split(r"[^a-z]+", _snake(name)) if part)


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def _wordset(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Words that make a name a credential name on their own (compared with word parts).
_SECRET_WORDS = _wordset(
    """
    token secret secrets password passwords passwd pwd pw passphrase passkey credential credentials creds
    auth oauth bearer cookie cookies authorization apikey apikeys accesskey secretkey privatekey privkey
    sessionkey authtoken accesstoken refreshtoken clientsecret sessionid
    """
)
# A word part ending like this is a credential word too ("githubtoken", "dbpassword").
_SECRET_SUFFIXES = ("password", "passwd", "secret", "token", "apikey", "accesskey", "secretkey", "privatekey")
# "key"/"keys"/"tokens"/"id" are credentials only right after one of these words
# ("api_key", "privateKey", "access_tokens", "session_id"; not "key", "sort_key", "tokens").
_KEY_QUALIFIERS = _wordset(
    """
    api private priv access secret session auth client signing encryption master license ssh gpg pgp
    service account app consumer subscription admin bot webhook openai anthropic aws gcp azure stripe
    github slack hf deploy x
    """
)
_QUALIFIED = {
    "key": _KEY_QUALIFIERS,
    "keys": _KEY_QUALIFIERS,
    "tokens": _wordset("access refresh auth api bearer session oauth github id"),
    "id": frozenset({"session"}),
}
# Words that mark a name as *about* a credential rather than holding one ("max_token", "token_ids",
# "password_length", "auth_url", "secret_name").
_NEUTRAL_WORDS = _wordset(
    """
    n num number max min count counts len length limit limits size ids idx index indices type types
    usage budget url uri endpoint file path dir env var name names field fields prompt policy expiry
    expires expiration ttl timeout required enabled method mode scope scopes hint format pattern regex
    label placeholder column col kind position pos offset offsets mask masks embedding embeddings
    """
)
_WORD_RE = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")


# The shell's working directory variables: paths, not passwords, whatever "pwd" means elsewhere.
_NOT_CREDENTIAL_NAMES = frozenset({"PWD", "OLDPWD"})
# Ending the name of an environment variable (``DB_PASS``, ``AZURE_SAS``) these words say it holds
# a secret too; in ordinary names they do not (``pass_rate``, ``first_pass``).
_ENV_SECRET_WORDS = frozenset({"pass", "sas"})


@functools.lru_cache(maxsize=8192)
def _secret_name(name: str) -> bool:
    if name in _NOT_CREDENTIAL_NAMES:
        return False
    words = [w.lower() for w in _WORD_RE.findall(name)]
    if not words or any(w in _NEUTRAL_WORDS for w in words):
        return False
    for i, word in enumerate(words):
        if word in _SECRET_WORDS:
            return True
        if any(word.endswith(s) and len(word) > len(s) for s in _SECRET_SUFFIXES):
            return True
        qualifiers = _QUALIFIED.get(word)
        if qualifiers is not None and i > 0 and words[i - 1] in qualifiers:
            return True
    return False


@functools.lru_cache(maxsize=8192)
def _secret_env_name(name: str) -> bool:
    """Whether the name of an environment variable says it holds a secret: every credential
    name, and also ``DB_PASS``, ``WAREHOUSE_PASS`` (upper case only)."""
    if _secret_name(name):
        return True
    if name in _NOT_CREDENTIAL_NAMES or not name.isupper():
        return False
    words = [w.lower() for w in _WORD_RE.findall(name)]
    if not words or any(w in _NEUTRAL_WORDS for w in words):
        return False
    return words[-1] in _ENV_SECRET_WORDS


@functools.lru_cache(maxsize=8192)
def _has_neutral_word(name: str) -> bool:
    """Whether a name is about a credential rather than one: ``password_length``, ``API_KEY_ENV``."""
    return any(w.lower() in _NEUTRAL_WORDS for w in _WORD_RE.findall(name))
