"""A client connection from one node of a cluster to another, over NATS (issue 22).

A client attached to node B asks for a session that node A runs: B opens a *tunnel* to
A and speaks the native protocol through it, as a client of A would over A's socket.
On A the tunnel is an ordinary ``ConnectionActor`` whose stream is a ``TunnelStream``;
so everything a client can do on A's socket (subscribe with catch-up by sequence number,
prompt, approve, cancel, call tools, terminals) works from B without a second
implementation.

Subjects (``<u>``: the user's token, ``<n>``: a node's, ``<t>``: the tunnel's id):

- ``agentbus.<u>.node.<n>.open``: request/reply; B asks A to open tunnel ``<t>``
  (JSON ``{"tunnel": t, "client": name, "peer": B's node id}``), A answers
  ``{"ok": true}`` once it listens;
- ``agentbus.<u>.tunnel.<t>.in``: B's frames to A; ``agentbus.<u>.tunnel.<t>.out``:
  A's frames to B. Bytes of the protocol's newline-ended frames, cut where a message
  would exceed the server's limit; B forwards complete lines only.
- header ``Agentbus-Tunnel``: ``close`` (either side ends it), ``ping`` (B, every
  ``PING_S`` when idle) and ``pong`` (A's answer). A side that hears nothing for
  ``DEAD_S`` takes the other for gone (a node killed says nothing).

Only nodes with the user's NATS credentials reach these subjects: the cluster's
credentials (and the server's subject permissions) are the tunnel's authentication, as
the socket's file mode is the local daemon's.
"""

from __future__ import annotations

import contextlib
import json
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import trio

if TYPE_CHECKING:
    from actors.cluster import Inbox, NatsLink

log = logging.getLogger("agentbus.daemon")

HEADER = "Agentbus-Tunnel"
SEQ = "Agentbus-Seq"
PING_S = 2.0
DEAD_S = 7.0
OPEN_WAIT_S = 5.0
CHUNK_ROOM = 4096
"""Bytes left under the server's message limit for the headers of a chunk."""


def _subject(user: str, *parts: str) -> str:
    from actors.cluster.journal import token

    return ".".join(("agentbus", token(user), *parts))


def open_subject(user: str, node_id: str) -> str:
    from actors.cluster.journal import token

    return _subject(user, "node", token(node_id), "open")


def tunnel_subjects(user: str, tunnel: str) -> tuple[str, str]:
    """(B to A, A to B) of tunnel ``tunnel``."""
    return _subject(user, "tunnel", tunnel, "in"), _subject(user, "tunnel", tunnel, "out")


class TunnelLost(Exception):
    """The node at the other end went away (closed, or silent for ``DEAD_S``)."""


class _Numbering:
    """Each side numbers the chunks it sends (header ``Agentbus-Seq``); the other takes
    a missing number for what it is — core NATS dropped a message (a reconnection, a
    slow consumer) — and ends the tunnel rather than hand its client a gap: the client's
    node then subscribes again from the last event its client got."""

    def __init__(self) -> None:
        self.sent = 0
        self.received = 0
        self._sending = trio.Lock()

    async def publish(self, link: NatsLink, subject: str, data: bytes) -> None:
        step = max(1024, link.max_payload - CHUNK_ROOM)
        async with self._sending:  # one frame's chunks together, numbered in order
            for start in range(0, len(data), step):
                # Counted once handed over: a ping never announces a chunk not yet sent.
                await link.publish(subject, data[start : start + step], headers={SEQ: str(self.sent + 1)})
                self.sent += 1

    def missed(self, headers: dict[str, str]) -> bool:
        """Whether a ping (or pong), which says how many chunks its side had sent, shows
        that some did not arrive (the last ones before a silence: no later chunk would)."""
        sent = headers.get(SEQ, "")
        return sent.isdigit() and int(sent) > self.received

    def in_order(self, headers: dict[str, str]) -> bool:
        """Whether a chunk with ``headers`` is the next one (and count it)."""
        self.received += 1
        return headers.get(SEQ) == str(self.received)


# -- A's side: the tunnel as a connection's stream ----------------------------------------------
class _Closer:
    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        self.closed = True


class TunnelStream:
    """What ``ConnectionActor`` reads and writes on A: ``receive_some``/``send_all``
    over the tunnel's subjects (the subset of ``trio.SocketStream`` it uses)."""

    def __init__(self, link: NatsLink, inbox: Inbox, out_subject: str) -> None:
        self.link = link
        self.inbox = inbox
        self.out_subject = out_subject
        self.socket = _Closer()
        self._pending = b""
        self._numbering = _Numbering()

    def setsockopt(self, *_args: Any) -> None:
        pass

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        from actors.cluster import ClusterError

        while not self._pending:
            if self.socket.closed:
                return b""
            with trio.move_on_after(DEAD_S) as waited:
                try:
                    msg = await self.inbox.receive()
                except ClusterError:
                    return b""
            if waited.cancelled_caught:
                log.info("tunnel %s: the other node is silent; closing", self.out_subject)
                return b""
            kind = msg.headers.get(HEADER)
            if kind == "close":
                return b""
            if kind == "ping":
                if self._numbering.missed(msg.headers):
                    log.warning("tunnel %s: chunks from the other node were lost; closing", self.out_subject)
                    return b""
                try:
                    await self.link.publish(self.out_subject, b"", headers={HEADER: "pong", SEQ: str(self._numbering.sent)})
                except ClusterError:
                    return b""
                continue
            if not self._numbering.in_order(msg.headers):
                log.warning("tunnel %s: a chunk from the other node was lost; closing", self.out_subject)
                return b""
            self._pending = msg.data
        n = len(self._pending) if max_bytes is None else max_bytes
        data, self._pending = self._pending[:n], self._pending[n:]
        return data

    async def send_all(self, data: bytes) -> None:
        from actors.cluster import ClusterError

        if self.socket.closed:
            raise trio.ClosedResourceError("tunnel closed")
        try:
            await self._numbering.publish(self.link, self.out_subject, data)
        except ClusterError as exc:
            raise trio.BrokenResourceError(str(exc)) from None


async def serve_tunnels(
    link: NatsLink,
    user: str,
    node_id: str,
    run_connection: Callable[[TunnelStream, str], Awaitable[None]],
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Answer other nodes' requests to open a tunnel to this one, running each as a
    connection (``run_connection(stream, peer)``) until either side ends it."""
    from actors.cluster import ClusterError

    service = await link.subscribe(open_subject(user, node_id))
    await link.flush()
    task_status.started()
    try:
        async with trio.open_nursery() as nursery:
            while True:
                try:
                    msg = await service.receive()
                except ClusterError as exc:  # the connection closed: the daemon is stopping
                    log.warning("cluster: no more tunnels to this node: %s", exc)
                    return
                try:
                    ask = json.loads(msg.data)
                    tunnel = str(ask["tunnel"])
                    peer = str(ask.get("peer", "?"))
                    if not tunnel.isalnum() or len(tunnel) > 64:
                        raise ValueError("bad tunnel id")
                except (ValueError, KeyError, TypeError, AttributeError) as exc:
                    if msg.reply:
                        with contextlib.suppress(ClusterError):
                            await link.publish(msg.reply, json.dumps({"ok": False, "error": f"bad open request: {exc}"}).encode())
                    continue
                inbound, outbound = tunnel_subjects(user, tunnel)
                try:
                    inbox = await link.subscribe(inbound)
                    await link.flush()
                    if msg.reply:
                        await link.publish(msg.reply, b'{"ok": true}')
                except ClusterError as exc:
                    log.warning("tunnel from %s: %s", peer, exc)
                    continue
                nursery.start_soon(_run_tunnel, link, TunnelStream(link, inbox, outbound), peer, run_connection)
    finally:
        await service.close()


async def _run_tunnel(
    link: NatsLink, stream: TunnelStream, peer: str, run_connection: Callable[[TunnelStream, str], Awaitable[None]]
) -> None:
    from actors.cluster import ClusterError

    try:
        await run_connection(stream, peer)
    finally:
        stream.socket.closed = True
        with trio.CancelScope(shield=True), trio.move_on_after(2):
            try:
                await link.publish(stream.out_subject, b"", headers={HEADER: "close"})
            except ClusterError:
                pass
            await stream.inbox.close()


# -- B's side -------------------------------------------------------------------------------------
class Tunnel:
    """B's end of a tunnel to node ``node_id``: ``send`` frames, ``run`` delivers A's
    frames as complete lines until the tunnel ends (``TunnelLost`` if A went away)."""

    def __init__(self, link: NatsLink, user: str, node_id: str) -> None:
        self.link = link
        self.user = user
        self.node_id = node_id
        self.id = uuid.uuid4().hex
        self.inbound, self.outbound = tunnel_subjects(user, self.id)
        self._inbox: Inbox | None = None
        self._closed = False
        self._gone = False
        self._numbering = _Numbering()

    async def open(self, client: str, peer: str) -> None:
        from actors.cluster import ClusterError

        self._inbox = await self.link.subscribe(self.outbound)
        await self.link.flush()
        ask = json.dumps({"tunnel": self.id, "client": client, "peer": peer}).encode()
        try:
            answer = json.loads(await self.link.request(open_subject(self.user, self.node_id), ask, wait_s=OPEN_WAIT_S))
        except (ClusterError, ValueError) as exc:
            await self._inbox.close()
            raise TunnelLost(f"node {self.node_id} does not answer: {exc}") from None
        if not isinstance(answer, dict) or not answer.get("ok"):
            await self._inbox.close()
            raise TunnelLost(f"node {self.node_id} refused a tunnel: {answer!r}")

    async def send(self, data: bytes) -> None:
        from actors.cluster import ClusterError

        if self._closed:
            raise TunnelLost(f"the tunnel to node {self.node_id} is closed")
        try:
            await self._numbering.publish(self.link, self.inbound, data)
        except ClusterError as exc:
            raise TunnelLost(f"node {self.node_id}: {exc}") from None

    async def run(self, deliver: Callable[[list[bytes]], Awaitable[None]]) -> None:
        """Deliver A's frames (complete lines, each with its newline) until A closes the
        tunnel (returns) or goes silent (``TunnelLost``, raised as itself: the reason
        is kept while the pinging task is cancelled, and raised once it is)."""
        lost: str | None = None
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._ping, nursery.cancel_scope)
            try:
                await self._receive(deliver)
            except TunnelLost as exc:
                lost = str(exc)
            finally:
                self._closed = True
                nursery.cancel_scope.cancel()
        if lost is not None:
            raise TunnelLost(lost)
        if self._gone:
            raise TunnelLost(f"node {self.node_id} is gone (its process ended)")

    async def _receive(self, deliver: Callable[[list[bytes]], Awaitable[None]]) -> None:
        from actors.cluster import ClusterError

        assert self._inbox is not None
        inbox = self._inbox
        buffer = b""
        while True:
            with trio.move_on_after(DEAD_S) as waited:
                try:
                    msg = await inbox.receive()
                except ClusterError as exc:
                    raise TunnelLost(f"node {self.node_id}: {exc}") from None
            if waited.cancelled_caught:
                raise TunnelLost(f"node {self.node_id} is silent (gone?)")
            kind = msg.headers.get(HEADER)
            if kind == "close":
                return
            if kind == "pong" and self._numbering.missed(msg.headers):
                raise TunnelLost(f"chunks from node {self.node_id} were lost")
            if kind == "pong" or not msg.data:
                continue
            if not self._numbering.in_order(msg.headers):
                raise TunnelLost(f"a chunk from node {self.node_id} was lost")
            buffer += msg.data
            end = buffer.rfind(b"\n")
            if end >= 0:
                lines = buffer[: end + 1].splitlines(keepends=True)
                buffer = buffer[end + 1 :]
                await deliver(lines)

    async def _ping(self, tunnel: trio.CancelScope) -> None:
        from actors.cluster import ClusterError
        from actors.frontends.daemon._cluster import gone_from_this_machine

        while True:
            await trio.sleep(PING_S)
            if gone_from_this_machine(self.node_id):
                # A node of this machine that died is known at once, not after DEAD_S.
                self._gone = True
                tunnel.cancel()
                return
            try:
                await self.link.publish(self.inbound, b"", headers={HEADER: "ping", SEQ: str(self._numbering.sent)})
            except ClusterError:
                return

    async def close(self) -> None:
        from actors.cluster import ClusterError

        if self._inbox is None:
            return
        self._closed = True
        with trio.CancelScope(shield=True), trio.move_on_after(2):
            try:
                await self.link.publish(self.inbound, b"", headers={HEADER: "close"})
            except ClusterError:
                pass
            await self._inbox.close()
