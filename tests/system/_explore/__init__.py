"""The explorer moved to ``actors.frontends.explore`` (a public module): this package
re-exports it under its old names, so tests that import ``tests.system._explore`` keep
working."""

from actors.frontends.explore import *  # noqa: F403
from actors.frontends.explore import __all__ as _public
from actors.frontends.explore import check_replies as _replies
from actors.frontends.explore import check_sequence as _sequence

__all__ = [*_public, "_replies", "_sequence"]
