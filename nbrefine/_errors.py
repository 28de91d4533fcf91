"""nbrefine's own exceptions.

Each one also inherits a built-in, so callers that already catch ``RuntimeError``
or ``ValueError`` keep working (the same idea as nbclient's
``CellTimeoutError(TimeoutError, ...)``). None of them subclasses ``BaseException``
directly, except :class:`Terminated`, which must pass through every ``except Exception``.
Messages are one line: they are shown to the user as they are.

May import: nothing but built-ins: every layer imports it."""

from __future__ import annotations

__all__ = [
    "BadInputError",
    "KernelCallError",
    "KernelDiedError",
    "NbrefineError",
    "PolicyLockedError",
    "PolicyRefusal",
    "ProviderAuthError",
    "ProviderConfigError",
    "ProviderError",
    "ProviderOverloadedError",
    "ProviderRateLimitError",
    "ProviderReplyError",
    "ProviderTimeoutError",
    "ProviderUnavailableError",
    "RefineStop",
    "SandboxError",
    "SessionStateError",
    "Terminated",
    "UnverifiedFixError",
]


class NbrefineError(Exception):
    """Base class of every error nbrefine raises on purpose."""


class ProviderError(NbrefineError, RuntimeError):
    """The model provider could not give a reply. ``str(err)`` is a one-line reason."""


class ProviderConfigError(ProviderError, ValueError):
    """The provider is not usable as configured (no API key, unknown provider, bad model)."""


class ProviderAuthError(ProviderError, PermissionError):
    """The provider rejected the credentials (HTTP 401/403)."""


class ProviderRateLimitError(ProviderError):
    """Rate limited (HTTP 429) and still limited after the client's retries."""


class ProviderOverloadedError(ProviderError):
    """The service is overloaded (HTTP 529) or failing (5xx) after the client's retries."""


class ProviderUnavailableError(ProviderError, ConnectionError):
    """The service could not be reached, or the connection broke."""


class ProviderTimeoutError(ProviderError, TimeoutError):
    """The provider did not answer within the request timeout."""


class ProviderReplyError(ProviderError, ValueError):
    """The provider answered, but the reply is unusable (stream cut short, malformed)."""


class SandboxError(NbrefineError, RuntimeError):
    """The trial sandbox could not be started or talked to."""


class BadInputError(NbrefineError, ValueError):
    """Bad usage or input of a command (a missing file, not a notebook, an unknown kernel, a bad
    option): one line for the user; ``nbrefine`` exits with status 2."""


class KernelCallError(NbrefineError, RuntimeError):
    """A call of the in-kernel API (``nbrefine.ipython.kernel_api``) failed: an unknown name, bad
    arguments, or an error inside the kernel. Raised in the kernel and, from the execute reply,
    again by the driver outside it (``nbrefine.headless.kernel.KernelDriver.call``); one line."""


class KernelDiedError(NbrefineError, RuntimeError):
    """The kernel a headless run drives died (``str(err)``: its last words on stderr, if any)."""


class Terminated(BaseException):
    """SIGTERM while a command runs: unwinds like Ctrl-C, so kernels are shut down on the way out."""


class PolicyRefusal(NbrefineError, PermissionError):
    """A candidate tried something the trial sandbox does not allow.

    Raised inside model-written code, so it is first of all a ``PermissionError``: what the OS
    would raise, and what the candidate's own ``except PermissionError`` sees."""

    def __init__(self, action: str, hint: str) -> None:
        super().__init__(f"refused by the trial sandbox: {action} ({hint})")
        self.action = action


class PolicyLockedError(NbrefineError, PermissionError):
    """A request would loosen a locked teaching policy. ``str(err)`` is one kind line."""


class SessionStateError(NbrefineError, ValueError):
    """The session cannot do what was asked in its current state (e.g. accept with no fix)."""


class UnverifiedFixError(SessionStateError):
    """Accept was asked for a fix that is not verified where it would run: a proposal that
    changes the checks, or a fix that fails from the live state. ``accept(anyway=True)`` is the
    explicit second choice that applies it all the same."""


class RefineStop(NbrefineError, RuntimeError):
    """Raised at the end of a ``%%refine`` cell that failed, so that "Run All" stops there.

    ``_render_traceback_`` makes IPython print our one line instead of a traceback."""

    def _render_traceback_(self) -> list[str]:
        return [str(self)]
