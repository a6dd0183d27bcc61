"""Fatal errors of the command line, with Gemini CLI's exit codes, and how any failure
that reaches the top ends the process (one line, the real cause)."""

from __future__ import annotations

import os
import select
from typing import TextIO


class FatalError(Exception):
    """Ends the run: ``message`` to stderr (or the JSON error object), ``exit_code``."""

    exit_code = 1
    type_name = "Error"

    def __init__(self, message: str, *, exit_code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        if exit_code is not None:
            self.exit_code = exit_code


class FatalAuthenticationError(FatalError):
    exit_code = 41


class FatalInputError(FatalError):
    exit_code = 42
    type_name = "FatalInputError"


class FatalConfigError(FatalError):
    exit_code = 52
    type_name = "FatalConfigError"


class FatalTurnLimitedError(FatalError):
    exit_code = 53
    type_name = "FatalTurnLimitedError"


class FatalCancellationError(FatalError):
    exit_code = 130
    type_name = "FatalCancellationError"


class UsageError(FatalError):
    """Bad command-line arguments: the message and the usage go to stderr, exit 1."""

    exit_code = 1


def leaf_errors(exc: BaseException) -> list[BaseException]:
    """The exceptions inside ``exc``'s (nested) exception groups, in order; ``[exc]``
    for a plain exception."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in leaf_errors(inner)]
    return [exc]


def cause_of(exc: BaseException) -> BaseException:
    """The exception a failure is about: exception groups unwrapped to their first
    ``Exception`` (a cancellation or an interrupt beside it is its consequence)."""
    leaves = leaf_errors(exc)
    return next((leaf for leaf in leaves if isinstance(leaf, Exception)), leaves[0])


def error_text(exc: BaseException) -> str:
    """What went wrong, in the cause's own words (never "Exceptions from Trio nursery")."""
    cause = cause_of(exc)
    message = getattr(cause, "message", None)
    if isinstance(message, str) and message:
        text = message
    elif isinstance(cause, OSError) and cause.strerror:
        text = f"{cause.strerror}: {cause.filename}" if cause.filename is not None else cause.strerror
    else:
        text = str(cause) or type(cause).__name__
    return text


class DaemonError(Exception):
    """A daemon refused a request (``code`` as in ``ProtocolError``), or the connection failed."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{message} [{code}]")
        self.code = code
        self.message = message


def exit_status(exc: BaseException, prog: str, stderr: TextIO) -> int | None:
    """How the command line ends on ``exc`` that reached the top: one line on
    ``stderr`` and the exit status, or None for a failure nobody foresaw (a bug: its
    traceback is the report).

    A reader that closed our standard output (``agentbus … | head``) ends the run
    quietly with status 0, as Gemini CLI does on EPIPE.
    """
    from actors.recording import SessionInUseError, recorder_error_in

    leaves = leaf_errors(exc)
    if isinstance(exc, SystemExit):
        return None
    if any(isinstance(leaf, BrokenPipeError) for leaf in leaves) and _stdout_reader_gone():
        _discard_stdout()
        return 0
    cause = cause_of(exc)
    if isinstance(cause, KeyboardInterrupt):
        return 130
    if isinstance(cause, FatalError):
        stderr.write(f"{cause.message}\n")
        return cause.exit_code
    failure = recorder_error_in(exc)
    if isinstance(failure, SessionInUseError):  # taken by another process since we checked
        stderr.write(f"{prog}: {failure}\n")
        return FatalInputError.exit_code
    if failure is not None:
        stderr.write(f"{prog}: {failure}; the session was stopped\n")
        return 1
    if isinstance(cause, DaemonError | OSError):
        stderr.write(f"{prog}: {error_text(cause)}\n")
        return DAEMON_EXIT_CODES.get(cause.code, 1) if isinstance(cause, DaemonError) else 1
    return None


DAEMON_EXIT_CODES = {
    "auth_required": FatalAuthenticationError.exit_code,  # as a headless run without credentials
    "unknown_session": FatalInputError.exit_code,  # as headless's --resume of no such session
    "in_use": FatalInputError.exit_code,  # as headless's --resume of a session another run holds
}
"""A daemon refusal that ends a client: the exit code a headless run has for the same
cause (any other: 1)."""


def _stdout_reader_gone() -> bool:
    """Standard output is a pipe whose reading end is closed (the write end polls as
    an error), not some other pipe the failure came from."""
    try:
        poller = select.poll()
        poller.register(1, 0)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (OSError, ValueError):
        return False


def _discard_stdout() -> None:
    """Point file descriptor 1 at /dev/null, so the interpreter's last flush of what
    is still buffered does not fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
    finally:
        os.close(devnull)
