"""The loopback fakes of the model APIs the tests (and bench/) run the real SDKs against.

``server.py`` is the one HTTP server they share; ``anthropic_api.py`` (the Messages API and
Message Batches) and ``openai_api.py`` (Chat Completions) say what their API answers. The
tests import them as ``fakes.*`` (``tests/`` is on ``pythonpath`` in pyproject.toml).
"""

from __future__ import annotations

from fakes.anthropic_api import FakeAnthropic
from fakes.server import DEFAULT_REPLY, FakeServer

__all__ = ["DEFAULT_REPLY", "FakeAnthropic", "FakeServer", "TimedFake", "block"]

#: The fake Anthropic API whose ``arrivals`` (times) and ``timeline`` ((time, method, path)) say
#: when each request arrived: every fake records them (server.py); the name stays for the batch tests.
TimedFake = FakeAnthropic


def block(code: str, explanation: str = "Here is the fix.") -> dict[str, str]:
    """A reply spec: a short explanation and one python block."""
    return {"text": f"{explanation}\n\n```python\n{code}\n```"}
