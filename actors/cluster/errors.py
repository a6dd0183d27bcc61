"""What can go wrong talking to the cluster, each saying what and why."""

from __future__ import annotations


class ClusterError(Exception):
    """A cluster operation failed; ``str()`` says what and why, for a user."""


class Unreachable(ClusterError):
    """No NATS server answers at the URL (or the connection was lost)."""


class Unauthorized(ClusterError):
    """The server refused the credentials, or the user may not use that subject."""


class NoQuorum(ClusterError):
    """JetStream could not acknowledge: the stream or bucket has no leader (too few of
    its servers are up). Nothing was stored; the operation may be retried."""


class Fenced(ClusterError):
    """An append named a last sequence that is no longer the subject's last: another
    writer (a newer owner) has written since. Nothing was stored."""

    def __init__(self, message: str, *, actual: int | None = None) -> None:
        super().__init__(message)
        self.actual = actual


class Taken(ClusterError):
    """A lease is held by another node."""

    def __init__(self, message: str, *, owner: str = "") -> None:
        super().__init__(message)
        self.owner = owner


class LeaseLost(ClusterError):
    """A renewal found the lease changed since this node's revision (it expired and
    another node took it, or it was deleted)."""


class TooLarge(ClusterError):
    """A message is larger than the server accepts even in parts."""
