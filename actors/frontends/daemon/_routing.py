"""A client's requests for sessions other nodes run (``--cluster``, issue 22).

Each connection of a node has one ``Routes``. A request for a session this node does not
run goes to the node that does (the holder of its lease), through a ``_tunnel.Tunnel``
the connection opens to that node on first need: the request is sent as the client sent
it, and everything the other node answers (replies, events, questions) comes back to the
client as its own. A new session goes to the node ``ClusterNode.place`` picks (the least
loaded that serves its workspace); a session nobody runs is resumed here when this node
serves its workspace, else on a node that does.

When a node goes away (killed: its tunnel falls silent), the requests waiting for its
answer are answered ``failed``, and each subscription through it is taken up again
where it stopped: once another node has taken the session over (``adopt_orphans``), the
connection subscribes there from the sequence number after the last event its client
got (the new node resumed the session from the cluster's stream, numbered on), so the
client follows on without a gap and without reconnecting.
"""

from __future__ import annotations

import contextlib
import logging
import re
from typing import TYPE_CHECKING, Any

import attrs
import trio

from actors.cluster import ClusterError, NoQuorum
from actors.frontends.daemon._cluster import gone_from_this_machine
from actors.frontends.daemon._core import RequestError
from actors.recording import line_seq
from bus import CodecError
from bus.codec import decode, encode
from bus.messages import (
    CreateSession,
    DaemonStatus,
    DaemonStopping,
    Hello,
    ListSessions,
    LoadSession,
    ProtocolError,
    SessionReady,
    StopDaemon,
    Subscribe,
    Subscribed,
    SubscriptionEnded,
    Unsubscribe,
    Welcome,
    new_id,
)
from bus.messages.client import PROTOCOL_VERSION

if TYPE_CHECKING:
    from actors.frontends.daemon._connection import ConnectionActor
    from actors.frontends.daemon._tunnel import Tunnel

log = logging.getLogger("agentbus.daemon")

TAKE_OVER_WAIT_S = 60.0
"""How long a subscription whose node went away waits for another node to take its
session over (a lease expires ``lease_ttl_s`` after its node's last renewal)."""
OWNER_POLL_S = 0.5
_SESSION_OF = re.compile(rb'"session_id":"((?:[^"\\]|\\.)*)"')


def _root(session_id: str) -> str:
    return session_id.split(".", 1)[0]


@attrs.define(eq=False)
class _Remote:
    node_id: str
    tunnel: Tunnel
    subscriptions: dict[str, Subscribe] = attrs.field(factory=dict)
    last_seq: dict[str, int] = attrs.field(factory=dict)
    """The last event's sequence number the client got, by session."""
    pending: dict[str, Any] = attrs.field(factory=dict)
    """Requests sent through the tunnel and not answered yet, by request id."""
    opened: set[str] = attrs.field(factory=set)
    """Sessions this tunnel's connection has opened (the other node answers only for
    those, as for any client)."""
    internal: set[str] = attrs.field(factory=set)
    """Request ids of the connection's own (its hello, subscriptions taken up again),
    whose answers the client does not get."""


class Routes:
    def __init__(self, conn: ConnectionActor, node: Any) -> None:
        self.conn = conn
        self.node = node
        self.remotes: dict[str, _Remote] = {}
        self.routes: dict[str, str] = {}
        """Root session id -> the node its requests go to."""
        self._opening: dict[str, trio.Event] = {}
        self.closing = False
        """The client's connection is closing: nothing more is sent to it."""
        self._rerouted: set[Any] = set()
        """Request ids sent on to a session's owner after another node refused them."""

    @property
    def me(self) -> str:
        return str(self.node.config.node_id)

    # -- deciding -----------------------------------------------------------------------------------
    async def route(self, msg: Any) -> bool:
        """Send ``msg`` to the node that should answer it; False: this node answers."""
        try:
            return await self._route(msg)
        except ClusterError as exc:
            raise RequestError("failed", f"the cluster cannot say where this goes now ({exc}); try again") from None

    async def _route(self, msg: Any) -> bool:
        match msg:
            case Hello() | ListSessions() | DaemonStatus() | StopDaemon():
                return False
            case CreateSession():
                workspace = await trio.to_thread.run_sync(_resolved, msg.workspace)
                placed = await self._place(workspace)
                if placed == self.me:
                    return False
                await self.send(placed, msg)
                return True
        sid = getattr(msg, "session_id", "") or ""
        if not sid:
            return False
        root = _root(sid)
        core = self.conn.core
        if core.runs_here(root):
            self.routes.pop(root, None)
            return False
        target: str | None = self.routes.get(root)
        if target is None or target not in self.remotes or gone_from_this_machine(target):
            cached, target = target, None
            try:
                target = await self.node.owner(root)
            except NoQuorum:
                if cached is None or gone_from_this_machine(cached):
                    raise
                target = cached  # the cluster cannot say now: where it last was
        if target is None or target == self.me:
            if not isinstance(msg, LoadSession | Subscribe):
                return False
            # Nobody runs it: here if this node serves its workspace, else where one does.
            record = await self.node.known_session(root)
            if record is None or self.node.config.serves_workspace(str(record["entry"].get("workspace", ""))):
                return False
            target = await self._place(str(record["entry"].get("workspace", "")))
            if target == self.me:
                return False
        await self.send(str(target), msg)
        return True

    async def _place(self, workspace: str) -> str:
        target = await self.node.place(workspace)
        if target is None:
            raise RequestError("failed", f"no node of the cluster serves the workspace {workspace!r} (yet)")
        return str(target)

    # -- sending --------------------------------------------------------------------------------------
    async def send(self, node_id: str, msg: Any) -> None:
        from actors.frontends.daemon._tunnel import TunnelLost

        remote = await self._remote(node_id)
        rid = getattr(msg, "request_id", None)
        if isinstance(rid, str):
            remote.pending[rid] = msg
        sid = getattr(msg, "session_id", "") or ""
        frames = b""
        if sid:
            root = _root(sid)
            self.routes[root] = node_id
            self.conn.rules.sessions.add(sid)
            if root not in remote.opened:
                remote.opened.add(root)
                if not isinstance(msg, LoadSession | Subscribe):
                    # A tunnel opened anew (its node changed, or the old one was lost):
                    # the session is opened on it first, as the client opened it here.
                    load = LoadSession(session_id=root, request_id=new_id())
                    remote.internal.add(load.request_id)
                    frames = (encode(load) + "\n").encode("utf-8")
        if isinstance(msg, Subscribe):
            remote.subscriptions[msg.session_id] = msg
        elif isinstance(msg, Unsubscribe):
            remote.subscriptions.pop(msg.session_id, None)
        try:
            await remote.tunnel.send(frames + (encode(msg) + "\n").encode("utf-8"))
        except TunnelLost as exc:
            if isinstance(rid, str):
                remote.pending.pop(rid, None)
            raise RequestError("failed", f"node {node_id} of the cluster cannot be reached: {exc}") from None

    async def _remote(self, node_id: str) -> _Remote:
        from actors.frontends.daemon._tunnel import Tunnel, TunnelLost

        while node_id in self._opening:
            await self._opening[node_id].wait()
        remote = self.remotes.get(node_id)
        if remote is not None:
            return remote
        opened = self._opening[node_id] = trio.Event()
        try:
            tunnel = Tunnel(self.node.link, self.node.config.user, node_id)
            try:
                await tunnel.open(self.conn.client, self.me)
            except TunnelLost as exc:
                raise RequestError("failed", f"node {node_id} of the cluster cannot be reached: {exc}") from None
            remote = _Remote(node_id, tunnel)
            hello = new_id()
            remote.internal.add(hello)
            try:
                await tunnel.send(
                    (encode(Hello(request_id=hello, protocol=PROTOCOL_VERSION, client=self.conn.client or "agentbus")) + "\n").encode()
                )
            except TunnelLost as exc:
                await tunnel.close()
                raise RequestError("failed", f"node {node_id} of the cluster cannot be reached: {exc}") from None
            self.remotes[node_id] = remote
            assert self.conn._nursery is not None
            self.conn._nursery.start_soon(self._run, remote)
            return remote
        finally:
            del self._opening[node_id]
            opened.set()

    # -- receiving ------------------------------------------------------------------------------------
    async def _run(self, remote: _Remote) -> None:
        from actors.frontends.daemon._tunnel import TunnelLost

        why = "it closed the tunnel"
        try:
            await remote.tunnel.run(lambda lines: self._deliver(remote, lines))
        except TunnelLost as exc:
            why = str(exc)
        finally:
            if self.remotes.get(remote.node_id) is remote:
                del self.remotes[remote.node_id]
            for root in [r for r, n in self.routes.items() if n == remote.node_id]:
                del self.routes[root]
        log.info("%s: the tunnel to node %s ended: %s", self.conn.address, remote.node_id, why)
        from actors.frontends.daemon._connection import _Closed

        if self.closing:
            return
        try:
            for rid in remote.pending:
                await self.conn._send(
                    ProtocolError(request_id=rid, code="failed", message=f"node {remote.node_id} of the cluster went away ({why}); try again")
                )
        except _Closed:
            return  # this client's connection is closing too
        for sid, sub in remote.subscriptions.items():
            after = remote.last_seq.get(sid)
            assert self.conn._nursery is not None
            self.conn._nursery.start_soon(self._take_up, sid, sub, after, remote.node_id)

    async def _deliver(self, remote: _Remote, lines: list[bytes]) -> None:
        out: list[bytes] = []
        for line in lines:
            seq = line_seq(line)
            if seq is not None:
                found = _SESSION_OF.search(line, 0, 512)
                if found is not None:
                    remote.last_seq[found.group(1).decode("utf-8", "replace")] = seq
                out.append(line)
                continue
            try:
                msg = decode(line)
            except CodecError:
                out.append(line)
                continue
            rid = getattr(msg, "request_id", None)
            if isinstance(rid, str) and rid in remote.internal:
                remote.internal.discard(rid)
                if isinstance(msg, ProtocolError):
                    log.warning("%s: node %s refused: %s", self.conn.address, remote.node_id, msg.message)
                continue
            if isinstance(msg, DaemonStopping | Welcome):
                continue  # the other node's, not this client's daemon's
            if isinstance(msg, ProtocolError) and msg.code == "busy" and isinstance(rid, str) and rid in remote.pending:
                # Refused because another node took the session meanwhile (a take-over
                # race): the request goes to that node instead, once.
                sent = remote.pending.pop(rid)
                if await self._send_to_owner(remote, sent):
                    continue
            if isinstance(rid, str):
                remote.pending.pop(rid, None)
            if isinstance(msg, SessionReady):
                self.routes[_root(msg.session_id)] = remote.node_id
                self.conn.rules.sessions.add(msg.session_id)
            elif isinstance(msg, Subscribed):
                remote.last_seq.setdefault(msg.session_id, msg.from_seq - 1)
            elif isinstance(msg, SubscriptionEnded):
                remote.subscriptions.pop(msg.session_id, None)
            out.append(line)
        if out:
            from actors.frontends.daemon._connection import _Closed
            from actors.frontends.daemon._tunnel import TunnelLost

            try:
                await self.conn._send_frame(b"".join(out))
            except _Closed:
                self.closing = True
                raise TunnelLost("this client's connection is closing") from None

    async def _send_to_owner(self, refused_by: _Remote, msg: Any) -> bool:
        """Send ``msg``, which ``refused_by`` refused as busy, to the session's owner if
        that is another node (and this request was not sent on already); whether it was."""
        rid = getattr(msg, "request_id", None)
        sid = getattr(msg, "session_id", "") or ""
        if not sid or rid in self._rerouted:
            return False
        if isinstance(msg, Subscribe) and refused_by.subscriptions.get(sid) is msg:
            del refused_by.subscriptions[sid]
        try:
            owner = await self.node.owner(_root(sid))
        except ClusterError:
            return False
        if owner is None or owner == refused_by.node_id:
            return False
        self._rerouted.add(rid)
        if owner == self.me:
            return False  # this node's now: the client asks again and it answers
        try:
            await self.send(owner, msg)
        except RequestError:
            return False
        return True

    async def _take_up(self, sid: str, sub: Subscribe, after: int | None, gone: str) -> None:
        """Subscribe again to ``sid`` after its tunnel to ``gone`` ended: on the node that
        holds it now (another that took it over, or the same one when only the tunnel
        was lost), from the event after the last its client got."""
        from actors.frontends.daemon._tunnel import TunnelLost

        start = None if after is None else after + 1
        root = _root(sid)
        with trio.move_on_after(TAKE_OVER_WAIT_S):
            while True:
                live = self.conn.core.sessions.get(root)
                if live is not None:  # this node took it over
                    assert self.conn._nursery is not None
                    await self.conn._nursery.start(self.conn._follow, live, attrs.evolve(sub, from_seq=start), False)
                    return
                try:
                    owner = await self.node.owner(root)
                except ClusterError as exc:  # no quorum now: try where it was
                    log.info("%s: session %s: %s", self.conn.address, sid, exc)
                    owner = gone
                if owner is not None and owner != self.me and not gone_from_this_machine(owner):
                    again = attrs.evolve(sub, from_seq=start, request_id=new_id())
                    try:
                        remote = await self._remote(owner)
                        remote.internal.add(again.request_id)
                        remote.opened.add(root)
                        remote.subscriptions[sid] = sub
                        if start is not None:
                            remote.last_seq[sid] = start - 1
                        await remote.tunnel.send((encode(again) + "\n").encode("utf-8"))
                    except (RequestError, TunnelLost) as exc:  # that node is not there (yet)
                        log.info("%s: session %s: node %s: %s", self.conn.address, sid, owner, exc)
                    else:
                        self.routes[root] = owner
                        log.info("%s: session %s followed again on node %s from %s", self.conn.address, sid, owner, start)
                        return
                await trio.sleep(OWNER_POLL_S)
        from actors.frontends.daemon._connection import _Closed

        with contextlib.suppress(_Closed):
            await self.conn._send(
                SubscriptionEnded(session_id=sid, reason=f"its node {gone} went away and no node took it over in time")
            )

    async def close(self) -> None:
        for remote in list(self.remotes.values()):
            await remote.tunnel.close()


def _resolved(workspace: str) -> str:
    """The workspace as the node that runs it will (an invalid one: as given, and that
    node says why)."""
    from pathlib import Path

    path = Path(workspace)
    return str(path.resolve()) if path.is_absolute() else workspace
