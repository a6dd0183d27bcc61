"""One owner per session: a lease in a key-value bucket.

The key is the session; its value the owning node's id; its revision the lease's
*fencing token*. The server expires an entry ``ttl_s`` after its last write, so a node
that stops renewing (killed, cut off) loses the session after the TTL whatever the
nodes' clocks say; a renewal is a write checked against the revision the owner holds, so
a node whose lease expired and was taken learns it (``LeaseLost``) on its next renewal
and must stop writing — and if it does not, its appends are fenced by the journal
(``actors.cluster.journal``), not by its good manners.
"""

from __future__ import annotations

import re
from typing import Protocol

import attrs

from actors.cluster.errors import LeaseLost, Taken

DEFAULT_TTL_S = 10.0
RENEW_EVERY_S = DEFAULT_TTL_S / 3


class LeaseStore(Protocol):
    """What a lease needs of a key-value bucket (``actors.cluster._nats.Bucket``)."""

    async def get(self, key: str) -> tuple[bytes, int] | None: ...
    async def create(self, key: str, value: bytes) -> int: ...
    async def update(self, key: str, value: bytes, *, last: int) -> int: ...
    async def delete(self, key: str, *, last: int) -> None: ...
    async def items(self) -> dict[str, tuple[bytes, int]]: ...


@attrs.frozen
class Lease:
    session_id: str
    node_id: str
    revision: int
    """The bucket's revision of this lease's last write: its fencing token."""


def lease_key(session_id: str) -> str:
    """A bucket key for ``session_id`` (keys take ``[-/_=.a-zA-Z0-9]``; anything else
    is written as ``=XX`` hex, so distinct ids stay distinct)."""
    return "s." + re.sub(r"[^-_a-zA-Z0-9]", lambda m: "".join(f"={b:02X}" for b in m.group().encode("utf-8", "surrogatepass")), session_id)


@attrs.define
class SessionLease:
    store: LeaseStore

    async def acquire(self, session_id: str, node_id: str) -> Lease:
        """The session's lease for ``node_id``; ``Taken`` when another node holds it."""
        revision = await self.store.create(lease_key(session_id), node_id.encode("utf-8"))
        return Lease(session_id, node_id, revision)

    async def renew(self, lease: Lease) -> Lease:
        """The lease written again (its TTL starts over); ``LeaseLost`` when it changed
        since ``lease`` (expired and taken, or released)."""
        revision = await self.store.update(lease_key(lease.session_id), lease.node_id.encode("utf-8"), last=lease.revision)
        return attrs.evolve(lease, revision=revision)

    async def release(self, lease: Lease) -> None:
        """Give the session up (another node may take it at once)."""
        try:
            await self.store.delete(lease_key(lease.session_id), last=lease.revision)
        except LeaseLost:
            pass  # already someone else's (or gone): nothing of ours to release

    async def holders(self) -> dict[str, str]:
        """Every held lease's node, by its key (``lease_key``), read in one pass."""
        return {key: value.decode("utf-8", "replace") for key, (value, _) in (await self.store.items()).items() if value}

    async def owner(self, session_id: str) -> str | None:
        held = await self.store.get(lease_key(session_id))
        return held[0].decode("utf-8", "replace") if held and held[0] else None


__all__ = ["DEFAULT_TTL_S", "RENEW_EVERY_S", "Lease", "LeaseStore", "SessionLease", "Taken", "lease_key"]
