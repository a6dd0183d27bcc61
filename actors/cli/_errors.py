"""Fatal errors of the command line, with Gemini CLI's exit codes."""

from __future__ import annotations


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
