"""Secrets must never reach the model: issue 10, items 4 (second layer), 5 and 6, and issue 19,
item 7 (the first prompt's leaks of common token shapes), end to end.

A real ipykernel runs ``%%refine`` against the loopback fake of the Anthropic API
(tests/fakes/anthropic_api.py), through the real ``anthropic`` SDK. Each test reproduces a leak
seen in the issue and then asserts that no request body the fake received holds the secret,
neither verbatim nor in a normalised form (letters and digits only, case-folded: what a
candidate gets by printing the secret with spaces between its characters, in 6-character
chunks on separate lines, as a list of chunks, upper-cased...).

Part of the adversarial suite (tests/adversarial/test_adversarial.py holds the sandbox escapes).
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterator
from typing import Any

import pytest
from fakes import FakeAnthropic, block
from kernel_io import ADVERSARIAL_SETUP, RealKernel, adversarial_kernel

pytestmark = pytest.mark.timeout(180)

ENV_PASSWORD = "envpw-" + secrets.token_hex(8)  # DB_PASSWORD in the kernel's environment
API_KEY = "sk-ant-api03-" + secrets.token_urlsafe(30)  # ANTHROPIC_API_KEY (the fake ignores it)

SETUP = ADVERSARIAL_SETUP + "%config Refine.timeout = 5.0\n"

PROMPTS_EXPR = "[p for p in __import__('nbrefine').last_session().prompts]"
STDOUTS_EXPR = (
    "[(a.outcome.stdout if a.outcome is not None else '')"
    " for a in __import__('nbrefine').last_session().attempts]"
)


def normalised(text: str) -> str:
    return re.sub(r"[\W_]+", "", text).lower()


def strings_of(value: Any) -> Iterator[str]:
    """Every string in a decoded JSON body (the text the model reads, with no JSON escapes)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings_of(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings_of(item)


def leaked(secret: str, requests: list[dict[str, Any]]) -> list[str]:
    """Where ``secret`` (or its normalised form) appears in the requests' bodies.

    The texts of a request are also checked joined: the prompt is sent as two blocks (the part
    that providers may cache, then the rest), and a secret could straddle the two."""
    found = []
    for number, request in enumerate(requests, start=1):
        texts = list(strings_of(request["json"]))
        for text in texts:
            if secret in text:
                found.append(f"request {number}: verbatim in {_around(text, text.find(secret))!r}")
            elif normalised(secret) in normalised(text):
                found.append(f"request {number}: normalised form in a {len(text)}-character text")
        if not found and normalised(secret) in normalised("".join(texts)):
            found.append(f"request {number}: across two blocks of the body")
    return found


def _around(text: str, at: int) -> str:
    return text[max(0, at - 80) : at + 80]


def user_text(requests: list[dict[str, Any]]) -> str:
    return "\n".join(s for r in requests for s in strings_of(r["json"].get("messages", [])))


@pytest.fixture(scope="module", params=["tcp", "ipc"])
def module_kernel(request: pytest.FixtureRequest, fake: FakeAnthropic) -> Iterator[RealKernel]:
    """A kernel on each transport ipykernel offers, like the rest of the adversarial suite."""
    kernel = adversarial_kernel(
        fake.base_url, request.param, ANTHROPIC_API_KEY=API_KEY, DB_PASSWORD=ENV_PASSWORD
    )
    yield kernel
    kernel.shutdown()


@pytest.fixture
def kernel(module_kernel: RealKernel, fake: FakeAnthropic) -> Iterator[RealKernel]:
    module_kernel.ensure_healthy()
    module_kernel.ok(SETUP)
    fake.reset()
    yield module_kernel
    fake.reset()


def refine(kernel: RealKernel, cell: str, attempts: int) -> dict[str, Any]:
    out = kernel.run(f"%%refine --max-attempts {attempts} --timeout 5\n{cell}", timeout=90)
    assert out["ename"] == "RefineStop", out["text"][-2000:]
    assert kernel.run("1+1", timeout=1.0)["results"] == ["2"], "the kernel did not answer within 1 s"
    return out


# --------------------------------------------------------------------------- item 4, second layer


HOSTILE = """\
s = db_password
print(" ".join(s))
print("\\n".join(s[i:i + 6] for i in range(0, len(s), 6)))
print([s[i:i + 6] for i in range(0, len(s), 6)])
print(s.upper())
import os
e = os.environ.get("DB_PASSWORD", "")
print(" ".join(e))
k = os.environ.get("ANTHROPIC_API_KEY", "")
print("\\n".join(k[i:i + 6] for i in range(0, len(k), 6)))
print("half:", s[-12:])
shown = "-".join(s)
assert shown == "", " , ".join(s)
"""


def test_a_candidate_prints_a_user_secret_in_normalised_forms(
    kernel: RealKernel, fake: FakeAnthropic
) -> None:
    user_password = "userpw-" + secrets.token_hex(8)
    kernel.ok(f'db_password = "{user_password}"')
    fake.script(block(HOSTILE), block("pass"))
    refine(kernel, 'raise ValueError("trigger")', attempts=2)
    requests = fake.requests
    assert len(requests) == 2, f"expected 2 model requests, saw {len(requests)}"
    stdout = kernel.value(STDOUTS_EXPR)[0]
    assert " ".join(user_password) in stdout, "the candidate did not print the secret (vacuous test)"
    feedback = user_text(requests[1:])
    assert "What happened when attempt 1 ran" in feedback and "stdout:" in feedback
    assert "AssertionError" in feedback
    problems = []
    for secret in (user_password, ENV_PASSWORD, API_KEY, user_password[-12:]):
        problems += [f"{secret[:6]}…: {where}" for where in leaked(secret, requests)]
    assert not problems, "\n".join(problems)
    # session.prompts are what was sent: the same holds there.
    prompts = "\n".join(kernel.value(PROMPTS_EXPR))
    assert normalised(user_password) not in normalised(prompts)


# --------------------------------------------------------------------------- items 5 and 6: the first prompt


def test_the_first_prompt_carries_no_secret_from_history_values_or_messages(
    kernel: RealKernel, fake: FakeAnthropic
) -> None:
    pw = {
        key: f"{key}-{secrets.token_hex(6)}"
        for key in ("smtp", "col1", "col2", "dc", "redis", "pg", "my", "pos")
    }
    aws_secret = secrets.token_urlsafe(40).replace("-", "/").replace("_", "+")[:40]
    aws_id = "AKIA" + secrets.token_hex(8).upper()
    # Issue 19, item 7: shapes seen leaking into the first prompt with no hostile candidate.
    shape = {
        key: f"{key}-{secrets.token_hex(6)}"
        for key in ("qs", "jdbc", "odbc", "libpq", "pgurl", "log", "envpw", "smtp", "ftp", "tuple")
    }
    shape["pypi"] = "pypi-AgEIcHlwaS5vcmc" + secrets.token_urlsafe(60)
    cells = [
        'db_password = "MINIMAL-pw-4242"\nhost = "db.local"',  # item 5: exactly the case
        "def connect(host, port, user, password):\n"
        '    raise ConnectionError("login failed for " + user + ": password=" + password)',
        f'smtp_login = ("mailer", "{pw["smtp"]}")',
        "import pandas as pd\n"
        f'users = pd.DataFrame({{"user": ["ann", "bob"], "password": ["{pw["col1"]}", "{pw["col2"]}"]}})',
        "from dataclasses import dataclass\n\n@dataclass\nclass Creds:\n    user: str\n    password: str\n\n"
        f'creds = Creds("u", "{pw["dc"]}")',
        f'REDIS_URL = "redis://:{pw["redis"]}@cache"\n'
        f'PG_URL = "postgresql://svc:a/{pw["pg"]}@db"\n'
        f'MY_URL = "mysql://root:x@{pw["my"]}@db"',
        f'aws_conf = "[default]\\naws_access_key_id = {aws_id}\\naws_secret_access_key = {aws_secret}\\n"',
        "def ping(host, port, user, password):\n    return host\n\n"
        f'last = ping("db", 5432, "bob", "{pw["pos"]}")',
        f'api_url = "https://graph.example.com/v1/me?fields=id&access_token={shape["qs"]}"\n'
        f'jdbc_url = "jdbc:sqlserver://db.internal:1433;user=bob;password={shape["jdbc"]};encrypt=true"\n'
        f'odbc = "DRIVER={{ODBC Driver 18}};SERVER=db.internal;UID=bob;Pwd={shape["odbc"]};"\n'
        f'dsn = "host=db user=bob password={shape["libpq"]} dbname=app"\n'
        f'pg_url = "postgresql://bob:{shape["pgurl"]}@db.internal/app"',
        f'log_line = "2024-05-01 ERROR auth: login failed user=bob password={shape["log"]}"\n'
        "print(log_line)\n"
        f'upload = "twine upload -u __token__ -p {shape["pypi"]} dist/*"',
        f'import os\nos.environ["MY_SERVICE_PW"] = "{shape["envpw"]}"',
        "def send_report(smtp, ftp, user):\n"
        f'    smtp.login(user, "{shape["smtp"]}")\n'
        f'    ftp.login("bob", "{shape["ftp"]}")',
        f'db_args = ("db.internal", 5432, "bob", "{shape["tuple"]}")',
    ]
    for cell in cells:
        kernel.ok(cell)
    fake.script(block("pass"))
    failing = (
        "print(len(db_password), host, len(smtp_login), users.shape, creds.user, last)\n"
        "urls = [REDIS_URL, PG_URL, MY_URL, aws_conf]\n"
        "shapes = [api_url, jdbc_url, odbc, dsn, pg_url, log_line, upload, send_report, db_args]\n"
        'conn = connect(host, 5432, "bob", db_password)'
    )
    refine(kernel, failing, attempts=1)
    requests = fake.requests
    assert len(requests) == 1, f"expected 1 model request, saw {len(requests)}"
    text = user_text(requests)
    # Not vacuous: the prompt has the history block (with the header) and the error.
    assert "defines db_password, host:" in text, text[:3000]
    assert "ConnectionError" in text and "login failed for bob: password=" in text, text
    for needle in ("smtp_login", "users", "creds", "REDIS_URL", "aws_conf", "last"):
        assert needle in text
    # ...and what surrounds each of item 7's shapes (the values section, the history block).
    for needle in (
        "access_token=", "jdbc:sqlserver://db.internal:1433;user=bob;password=", "UID=bob;Pwd=",
        "host=db user=bob password=", "postgresql://bob:", "login failed user=bob password=",
        "twine upload -u __token__ -p ", 'os.environ["MY_SERVICE_PW"] = ', "smtp.login(user, ",
        'ftp.login("bob", ', "'db.internal', 5432, 'bob', ",
    ):  # fmt: skip
        assert needle in text, (needle, text[:6000])
    problems = []
    for name, secret in [
        ("db_password", "MINIMAL-pw-4242"), ("aws secret", aws_secret), *pw.items(), *shape.items()
    ]:  # fmt: skip
        problems += [f"{name}: {where}" for where in leaked(secret, requests)]
    assert not problems, "\n".join(problems)
