"""The daemon as a node of a cluster (``agentbus daemon --cluster URL``, issue 22).

Opt-in: without ``--cluster`` nothing here is imported and the daemon is as before.
With it, the daemon connects to NATS at start (a URL that does not answer, or refused
credentials, stop it there with a clear error) and, for every session it runs:

- holds the session's **lease** (``actors.cluster.SessionLease``, key ``s.<session>`` of
  the bucket ``AGENTBUS_LEASES_<user>``, value this node's id), taken before the session
  starts (held by another node: ``HeldElsewhere``, and the client's node sends the
  request there) and renewed every ``RENEW_EVERY_S``. A renewal that finds the lease
  gone (expired while the server was unreachable) takes it again if nobody else did; a
  lease another node took is reported, and the session stops here (it runs there);
- **mirrors its recording** into the session's ``actors.cluster.Journal``: a
  ``SessionMirror`` tails the local file (what earlier processes wrote and the stream
  lacks first, then the lines as the recorder writes them), in order, one fenced message
  for as many new lines as fit. The monitor of the session (``_core``) pokes it after each batch of
  messages; its last lines are taken when the session stops. A fenced append (another
  writer appended since) is reported and stops the mirror. ``in_stream(seq)`` waits for
  a message to be in the stream: a tunnel's connection (a client of another node) sends
  nothing before.

and, for the cluster as a whole, ``ClusterNode`` keeps **the directory**: this node's
entry in ``AGENTBUS_NODES_<user>`` (what it serves, its load; ``place`` picks a node for
a new session from them) and each session's in ``AGENTBUS_SESSIONS_<user>`` (its
registry entry, its node, ``running``/``dormant``); ``adopt_orphans`` takes over the
running sessions whose node died, from the stream (``fetch_recording``).

The local file stays the session's truth on this node (the recorder, resume, catch-up
and replay read it as before); see docs/cluster.md.
"""

from __future__ import annotations

import contextlib
import getpass
import json
import logging
import os
import socket
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import trio

from actors.frontends.daemon._core import HeldElsewhere, RequestError
from actors.recording import line_seq

if TYPE_CHECKING:
    from actors.cluster import Bucket, Journal, Lease, NatsLink, SessionLease

log = logging.getLogger("agentbus.daemon")

LEASE_TTL_S = 10.0
"""The lease bucket's TTL (``actors.cluster.lease.DEFAULT_TTL_S``)."""
RENEW_EVERY_S = LEASE_TTL_S / 3
RETRY_S = 0.5
"""Between attempts of an append or renewal the cluster could not acknowledge."""
DRAIN_S = 1.0
"""How long the mirrors get to write their sessions' last lines when the daemon stops."""


class ClusterStartError(Exception):
    """The daemon cannot join the cluster (no answer, refused credentials, no nats-py)."""


def default_node_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


@attrs.frozen(kw_only=True)
class ClusterConfig:
    url: str
    credentials: Any = None
    """``actors.cluster.Credentials`` (None: none)."""
    user: str = attrs.field(factory=getpass.getuser)
    """Names the user's stream and lease bucket (``AGENTBUS_<user>``)."""
    node_id: str = attrs.field(factory=default_node_id)
    renew_every_s: float = RENEW_EVERY_S
    lease_ttl_s: float = LEASE_TTL_S
    replicas: int = 1
    """Of the user's stream and lease bucket when the node creates them (a cluster of
    three servers: 3 keeps them through the loss of one)."""
    serves: tuple[str, ...] | None = None
    """The workspace roots whose sessions this node runs (absolute paths); None: every
    workspace; empty: none (a front that places every session on other nodes)."""

    def serves_workspace(self, workspace: str) -> bool:
        return serves(self.serves, workspace)


def serves(roots: tuple[str, ...] | None, workspace: str) -> bool:
    """Whether a node serving ``roots`` (None: every workspace) runs ``workspace``'s sessions."""
    if roots is None:
        return True
    path = Path(workspace)
    return any(path == Path(root) or Path(root) in path.parents for root in roots)


def lease_bucket(user: str) -> str:
    from actors.cluster.journal import token

    return f"AGENTBUS_LEASES_{token(user)}"


def nodes_bucket(user: str) -> str:
    from actors.cluster.journal import token

    return f"AGENTBUS_NODES_{token(user)}"


def sessions_bucket(user: str) -> str:
    from actors.cluster.journal import token

    return f"AGENTBUS_SESSIONS_{token(user)}"


@attrs.frozen(kw_only=True)
class NodeInfo:
    """What a node advertises (key ``n.<node>`` of ``AGENTBUS_NODES_<user>``, renewed
    every ``renew_every_s``; the server drops it ``lease_ttl_s`` after the last)."""

    node_id: str
    serves: tuple[str, ...] | None = None
    sessions: int = 0
    """How many sessions it runs: its load."""
    host: str = ""
    pid: int = 0
    revision: int = 0
    """Of its entry in the bucket (not advertised: what this node read)."""

    def serves_workspace(self, workspace: str) -> bool:
        return serves(self.serves, workspace)

    def encode(self) -> bytes:
        return json.dumps(
            {"node": self.node_id, "serves": None if self.serves is None else list(self.serves), "sessions": self.sessions, "host": self.host, "pid": self.pid}
        ).encode("utf-8")

    @classmethod
    def decode(cls, data: bytes) -> NodeInfo | None:
        try:
            raw = json.loads(data)
            serves = raw.get("serves")
            return cls(
                node_id=str(raw["node"]),
                serves=None if serves is None else tuple(str(x) for x in serves),
                sessions=int(raw.get("sessions", 0)),
                host=str(raw.get("host", "")),
                pid=int(raw.get("pid", 0)),
            )
        except (ValueError, KeyError, TypeError, AttributeError):
            return None


def node_key(node_id: str) -> str:
    from actors.cluster.lease import lease_key

    return "n." + lease_key(node_id)[2:]


@contextlib.asynccontextmanager
async def open_node(config: ClusterConfig) -> AsyncIterator[ClusterNode]:
    """This daemon as a node of the cluster at ``config.url`` for the block's duration;
    ``ClusterStartError`` when it cannot join."""
    try:
        from actors.cluster import ClusterError, Journal, SessionLease, open_link
    except ImportError as exc:
        raise ClusterStartError(f"--cluster needs nats-py: pip install 'agentbus[cluster]' ({exc})") from None
    try:
        async with open_link(config.url, config.credentials, name=f"agentbus daemon {config.node_id}") as link:
            try:
                bucket = await link.bucket(lease_bucket(config.user), ttl_s=config.lease_ttl_s, replicas=config.replicas)
                leases = SessionLease(bucket)
                nodes = await link.bucket(nodes_bucket(config.user), ttl_s=config.lease_ttl_s, replicas=config.replicas)
                sessions = await link.bucket(sessions_bucket(config.user), ttl_s=0, replicas=config.replicas)
                await Journal(link, config.user, "-", replicas=config.replicas).open()  # the user's stream, once
            except ClusterError as exc:
                raise ClusterStartError(f"cluster {config.url}: {exc}") from None
            log.info("node %s of the cluster at %s (user %s)", config.node_id, config.url, config.user)
            async with trio.open_nursery() as nursery:
                node = ClusterNode(config, link, leases, nursery, nodes=nodes, sessions=sessions)
                try:
                    await node.advertise_once()
                    nursery.start_soon(node.advertise)
                    yield node
                finally:
                    await node.drain()
                    with trio.CancelScope(shield=True), trio.move_on_after(1), contextlib.suppress(ClusterError):
                        await nodes.purge(node_key(config.node_id))
                    nursery.cancel_scope.cancel()
    except ClusterError as exc:
        raise ClusterStartError(f"cluster: {exc}") from None


class ClusterNode:
    """The sessions this daemon holds in the cluster: one ``SessionMirror`` each."""

    def __init__(
        self,
        config: ClusterConfig,
        link: NatsLink,
        leases: SessionLease,
        nursery: trio.Nursery,
        *,
        nodes: Bucket | None = None,
        sessions: Bucket | None = None,
    ) -> None:
        self.config = config
        self.link = link
        self.leases = leases
        self.nursery = nursery
        self.nodes = nodes
        """``AGENTBUS_NODES_<user>``: the nodes up, what they serve, their load."""
        self.sessions = sessions
        """``AGENTBUS_SESSIONS_<user>``: every session of the user the cluster knows:
        its registry entry, the node that last ran it, ``running`` or ``dormant``."""
        self.mirrors: dict[str, SessionMirror] = {}
        self._placed: dict[str, tuple[int, int]] = {}
        """Node -> (the revision of its entry when this node last placed a session
        there, how many it placed there since that revision)."""
        self.core: Any = None
        """The ``DaemonCore`` of this node (it sets itself here)."""

    # -- the directory: nodes and sessions ------------------------------------------------------------
    def info(self) -> NodeInfo:
        running = len(self.core.sessions) if self.core is not None else len(self.mirrors)
        return NodeInfo(
            node_id=self.config.node_id, serves=self.config.serves, sessions=running, host=socket.gethostname(), pid=os.getpid()
        )

    async def advertise_once(self) -> None:
        if self.nodes is not None:
            await self.nodes.put(node_key(self.config.node_id), self.info().encode())

    async def advertise(self) -> None:
        """Say this node is up, what it serves and its load, every ``renew_every_s``."""
        from actors.cluster import ClusterError

        while True:
            await trio.sleep(self.config.renew_every_s)
            try:
                await self.advertise_once()
            except ClusterError as exc:
                log.warning("cluster: this node could not advertise itself: %s", exc)

    async def live_nodes(self) -> dict[str, NodeInfo]:
        """The nodes up (advertised within the TTL, not a process of this machine that is gone)."""
        if self.nodes is None:
            return {}
        out: dict[str, NodeInfo] = {}
        for data, revision in (await self.nodes.items()).values():
            info = NodeInfo.decode(data)
            if info is not None and not gone_from_this_machine(info.node_id):
                out[info.node_id] = attrs.evolve(info, revision=revision)
        return out

    async def place(self, workspace: str) -> str | None:
        """The node a new session of ``workspace`` goes to: the least loaded of those
        that serve it (this one on a tie); None when none does."""
        nodes = await self.live_nodes()
        nodes[self.config.node_id] = self.info()
        eligible = [n for n in nodes.values() if n.serves_workspace(workspace)]
        if not eligible:
            return None

        def load(n: NodeInfo) -> int:
            # Sessions placed there since it last advertised its load count too: a
            # burst of new sessions is spread, not all sent to the node idle a moment ago.
            seen, placed = self._placed.get(n.node_id, (n.revision, 0))
            return n.sessions + (placed if seen == n.revision and n.node_id != self.config.node_id else 0)

        chosen = min(eligible, key=lambda n: (load(n), n.node_id != self.config.node_id, n.node_id))
        seen, placed = self._placed.get(chosen.node_id, (chosen.revision, 0))
        self._placed[chosen.node_id] = (chosen.revision, placed + 1 if seen == chosen.revision else 1)
        return chosen.node_id

    async def owner(self, session_id: str) -> str | None:
        """The node holding ``session_id``'s lease; None: nobody (or a process of this
        machine that is gone)."""
        who = await self.leases.owner(session_id)
        return None if who is None or gone_from_this_machine(who) else who

    async def owners(self) -> dict[str, str]:
        """Every held lease's node, by the lease's key (``lease_key``), in one pass;
        leases of processes of this machine that are gone left out."""
        return {key: who for key, who in (await self.leases.holders()).items() if not gone_from_this_machine(who)}

    async def publish_session(self, entry: Any, state: str, title: str = "") -> None:
        """The session's record in the directory (its title kept when none is given:
        a resumed run learns it again only from a new prompt)."""
        from actors.cluster import ClusterError
        from actors.cluster.lease import lease_key

        if self.sessions is None:
            return
        try:
            if not title:
                title = str(((await self.known_session(entry.session_id)) or {}).get("title", ""))
            record = {"entry": attrs.asdict(entry), "node": self.config.node_id, "state": state, "title": title}
            await self.sessions.put(lease_key(entry.session_id), json.dumps(record).encode("utf-8"))
        except ClusterError as exc:
            log.warning("session %s: the cluster's directory could not be updated: %s", entry.session_id, exc)

    async def forget_session(self, session_id: str) -> None:
        from actors.cluster.lease import lease_key

        if self.sessions is not None:
            await self.sessions.purge(lease_key(session_id))

    async def known_sessions(self) -> dict[str, dict[str, Any]]:
        """Every session in the cluster's directory: id -> ``{"entry", "node", "state"}``."""
        if self.sessions is None:
            return {}
        out: dict[str, dict[str, Any]] = {}
        for data, _ in (await self.sessions.items()).values():
            try:
                record = json.loads(data)
                out[str(record["entry"]["session_id"])] = record
            except (ValueError, KeyError, TypeError):
                continue
        return out

    async def known_session(self, session_id: str) -> dict[str, Any] | None:
        from actors.cluster.lease import lease_key

        if self.sessions is None:
            return None
        held = await self.sessions.get(lease_key(session_id))
        if held is None:
            return None
        try:
            record = json.loads(held[0])
            return record if isinstance(record, dict) and isinstance(record.get("entry"), dict) else None
        except ValueError:
            return None

    async def fetch_recording(self, session_id: str, path: Path) -> bool:
        """Make ``path`` hold the session's recording as the cluster's stream has it
        when the stream has more of it than the local file (the session ran on another
        node); True if it was written."""
        from actors.cluster import Journal

        journal = Journal(self.link, self.config.user, session_id, replicas=self.config.replicas)
        stored = [line for _, line in await journal.lines()]
        if not stored:
            return False
        local = [line for line, _ in await trio.to_thread.run_sync(complete_lines_from, path, 0)]
        if len(local) >= len(stored):
            return False
        tmp = path.with_name(path.name + ".from-cluster")
        await trio.Path(path.parent).mkdir(parents=True, exist_ok=True)
        await trio.Path(tmp).write_bytes(b"".join(line + b"\n" for line in stored))
        await trio.Path(tmp).replace(path)
        log.info("session %s: its recording (%d lines) taken from the cluster's stream", session_id, len(stored))
        return True

    async def adopt_orphans(self, adopt: Any) -> None:
        """Take over, through ``adopt(session_id, record)``, the sessions the directory
        lists as running whose lease is gone (their node died) and whose workspace this
        node serves; checked every ``renew_every_s``."""
        from actors.cluster import ClusterError

        while True:
            try:
                await self._adopt_round(adopt)
            except ClusterError as exc:
                log.warning("cluster: looking for sessions to take over: %s", exc)
            await trio.sleep(self.config.renew_every_s)

    async def _adopt_round(self, adopt: Any) -> None:
        if self.config.serves == ():
            return
        for sid, record in (await self.known_sessions()).items():
            if record.get("state") != "running" or sid in self.mirrors:
                continue
            workspace = str(record["entry"].get("workspace", ""))
            if not self.config.serves_workspace(workspace):
                continue
            if await self.owner(sid) is not None:
                continue
            log.info("session %s: its node %s is gone; taking it over", sid, record.get("node"))
            await adopt(sid, record)

    async def attach(self, session_id: str, recording: Path, entry: Any = None) -> SessionMirror:
        """Hold ``session_id`` in the cluster and mirror ``recording`` from now on; its
        earlier lines the stream lacks go first. Raises ``RequestError`` when another
        node holds the session or the cluster cannot say."""
        from actors.cluster import ClusterError, Journal, Taken

        old = self.mirrors.get(session_id)
        mirror = SessionMirror(self, session_id, recording)
        if old is not None:
            # A restart of the session on this node (a mode change): the old run has
            # stopped; its mirror hands its lease, journal and place in the file on.
            await old.stop_for_handover()
        if old is not None and old.handed_over:
            mirror.lease, mirror.journal, mirror.taken = old.lease, old.journal, old.taken
            mirror.backlog, mirror.compared = old.backlog, old.compared
            mirror.pos = old.pos
        else:
            try:
                mirror.lease = await self._acquire(session_id)
            except Taken as exc:
                raise HeldElsewhere(
                    f"session {session_id!r} is held by node {exc.owner or '?'} of the cluster "
                    f"(a node that is gone loses it within {self.config.lease_ttl_s:g} s)",
                    exc.owner,
                ) from None
            except ClusterError as exc:
                raise RequestError("failed", f"the cluster cannot take session {session_id!r}: {exc}") from None
            mirror.journal = Journal(self.link, self.config.user, session_id, replicas=self.config.replicas)
            mirror.backlog, mirror.pos = await trio.to_thread.run_sync(complete_lines, recording, 0)
        self.mirrors[session_id] = mirror
        mirror.entry = entry
        if entry is not None:
            await self.publish_session(entry, "running")
        self.nursery.start_soon(mirror.run)
        return mirror

    async def _acquire(self, session_id: str) -> Lease:
        """The session's lease; one a daemon of this machine that is gone (killed)
        holds is taken over at once rather than after its TTL."""
        from actors.cluster import LeaseLost, Taken
        from actors.cluster.lease import lease_key

        try:
            return await self.leases.acquire(session_id, self.config.node_id)
        except Taken as exc:
            if not gone_from_this_machine(exc.owner):
                raise
            key = lease_key(session_id)
            held = await self.leases.store.get(key)
            if held is not None and held[0].decode("utf-8", "replace") != exc.owner:
                # Another node took it from the dead holder first: it is that node's.
                raise Taken(str(exc), owner=held[0].decode("utf-8", "replace")) from None
            if held is not None:
                with contextlib.suppress(LeaseLost):  # another node deleted it first
                    await self.leases.store.delete(key, last=held[1])  # only that holder's revision
            log.info("session %s: its lease was held by %s, a daemon of this machine that is gone; taken over", session_id, exc.owner)
            return await self.leases.acquire(session_id, self.config.node_id)

    async def drain(self) -> None:
        """Wait (at most ``DRAIN_S``) for the mirrors of stopped sessions to finish."""
        with trio.move_on_after(DRAIN_S):
            for mirror in list(self.mirrors.values()):
                await mirror.done.wait()
        for mirror in list(self.mirrors.values()):
            if not mirror.done.is_set():
                log.warning("session %s: its last lines are not all in the cluster (the daemon is stopping)", mirror.session_id)


@attrs.define(eq=False)
class SessionMirror:
    """One session's lease and the tail of its recording into its journal."""

    node: ClusterNode
    session_id: str
    recording: Path
    lease: Lease | None = None
    journal: Journal | None = None
    pos: int = 0
    """Byte offset in the local file of the first line not in the stream yet."""
    backlog: list[tuple[bytes, int]] = attrs.field(factory=list)
    """Lines before ``pos`` read at attach, with the offset after each: those the
    stream lacks are written first."""
    compared: bool = False
    entry: Any = None
    """The session's registry entry (what the directory lists)."""
    ended_for_good: bool = False
    """Ended by a client (``EndSession``): its entry leaves the directory when it stops."""
    title: str = ""

    def titled(self, title: str) -> None:
        """The session's first prompt came: the directory lists it by it (as
        ``--resume N``/``latest`` number sessions with a prompt)."""
        self.title = title
        if self.entry is not None:
            self.node.nursery.start_soon(self.node.publish_session, self.entry, "running", title)
    taken: bool = False
    """Whether this node's journal has appended (taken the session over) yet."""
    state: str = "following"
    """``following``, ``ended`` (the session stopped, its lines all in), ``fenced``
    (another node owns the session now) or ``failed`` (the cluster refused a line)."""
    problem: str = ""
    ended: bool = False
    handed_over: bool = False
    wake: trio.Event = attrs.field(factory=trio.Event)
    done: trio.Event = attrs.field(factory=trio.Event)
    acked_seq: int = 0
    """The sequence number of the last message the stream has acknowledged."""
    _advanced: trio.Event = attrs.field(factory=trio.Event)
    _scope: trio.CancelScope | None = None
    _handover: bool = False

    # -- called by the session's monitor and run (sync: no waiting) -------------------------------
    def poke(self) -> None:
        """New lines may be in the file."""
        self.wake.set()

    def session_ended(self) -> None:
        """The session's run stopped: take its last lines, then release the lease."""
        self.ended = True
        self.wake.set()

    async def in_stream(self, seq: int) -> None:
        """Return once message ``seq`` is in the stream, or once the mirror stopped
        writing (its session ended and all is in, or it was fenced or failed: then
        waiting would be for good)."""
        while self.acked_seq < seq and not self.done.is_set() and self.state == "following":
            await self._advanced.wait()

    def _acked(self, line: bytes) -> None:
        seq = line_seq(line)
        if seq is None and b'"void"' in line[:48]:
            try:
                last = json.loads(line).get("last")
            except (ValueError, AttributeError):
                last = None
            seq = last if isinstance(last, int) else None
        if seq is not None and seq > self.acked_seq:
            self.acked_seq = seq
            self._advanced.set()
            self._advanced = trio.Event()

    def expect_handover(self) -> None:
        """The session restarts on this node (a mode change): when its run stops, the
        mirror keeps the lease and its place for the next run's (``attach``)."""
        self._handover = True

    def handover_failed(self) -> None:
        """The next run did not start: nobody takes the lease over; let it go."""
        if self.node.mirrors.get(self.session_id) is self:
            del self.node.mirrors[self.session_id]
        if self.handed_over and self.lease is not None:
            from actors.cluster import ClusterError

            async def release(lease: Lease) -> None:
                with trio.move_on_after(DRAIN_S), contextlib.suppress(ClusterError):
                    await self.node.leases.release(lease)

            self.node.nursery.start_soon(release, self.lease)

    async def stop_for_handover(self) -> None:
        self._handover = True
        if self._scope is not None:
            self._scope.cancel()
        await self.done.wait()

    # -- the mirror's task --------------------------------------------------------------------------
    async def run(self) -> None:
        from actors.cluster import ClusterError, Fenced

        try:
            with trio.CancelScope() as self._scope:
                if self._handover:
                    self._scope.cancel()
                try:
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(self._renew, nursery.cancel_scope)
                        try:
                            await self._follow()
                            self.state = "ended"
                        except Fenced as exc:
                            self._stop_writing("fenced", f"fenced: {exc}")
                        except ClusterError as exc:
                            self._stop_writing("failed", f"the cluster refused a line: {exc}")
                        nursery.cancel_scope.cancel()
                except Exception as exc:  # one session's mirror failing is its own: the daemon goes on
                    log.exception("session %s: its mirror failed", self.session_id)
                    self._stop_writing("failed", f"its mirror failed: {exc!r}")
            if self._handover and self.state in ("following", "ended"):
                self.handed_over = True
            elif self.state == "ended" and self.lease is not None:
                with trio.move_on_after(DRAIN_S), contextlib.suppress(ClusterError):
                    if self.entry is not None and self.ended_for_good:
                        await self.node.forget_session(self.session_id)
                    elif self.entry is not None:
                        await self.node.publish_session(self.entry, "dormant", self.title)
                    await self.node.leases.release(self.lease)
        finally:
            if self.node.mirrors.get(self.session_id) is self and not self.handed_over:
                del self.node.mirrors[self.session_id]
            self.done.set()
            self._advanced.set()

    def _stop_writing(self, state: str, why: str) -> None:
        if self.state in ("fenced", "failed"):
            return
        self.state, self.problem = state, why
        self._advanced.set()
        if state == "fenced" and self.node.core is not None:
            self.node.core.taken_elsewhere(self.session_id, why)
        log.error("session %s: %s; this node no longer writes it to the cluster (its local recording goes on)", self.session_id, why)

    async def _follow(self) -> None:
        assert self.journal is not None
        if not self.compared:
            await self._skip_what_the_stream_has()
        if self.backlog:
            await self._put_lines(self.backlog, backlog=True)
        while True:
            ended = self.ended
            self.wake = trio.Event()
            await self._put_lines(await trio.to_thread.run_sync(complete_lines_from, self.recording, self.pos))
            if ended:
                return
            await self.wake.wait()

    async def _put_lines(self, lines: list[tuple[bytes, int]], *, backlog: bool = False) -> None:
        """New lines (each with the offset after it) into the journal, as few messages
        as fit (one round trip for what a wake-up found, not one a line); ``backlog``:
        they are the backlog's, taken off it as they are stored (a handover mid-way
        passes on the rest)."""
        assert self.journal is not None
        lines = list(lines)
        runs = ([[lines[0][0]]] if lines and not self.taken else []) + self.journal.batches(
            [line for line, _ in lines[1 if lines and not self.taken else 0 :]]
        )  # the take-over is an append of its own
        done = 0
        for run in runs:
            await self._put(run)
            done += len(run)
            self.pos = lines[done - 1][1]
            if backlog:
                del self.backlog[: len(run)]

    async def _skip_what_the_stream_has(self) -> None:
        """Drop from the backlog what the stream already holds (an earlier run of the
        session on a node with ``--cluster``). A stream that is not a prefix of the local
        file (the session ran elsewhere too) is reported; only this run's lines follow."""
        from actors.cluster import NoQuorum, Unreachable

        assert self.journal is not None
        while True:
            try:
                stored = [line for _, line in await self.journal.lines()]
                break
            except (NoQuorum, Unreachable) as exc:
                log.warning("session %s: waiting for the cluster to read its stream: %s", self.session_id, exc)
                await trio.sleep(RETRY_S)
        local = [line for line, _ in self.backlog]
        if stored == local[: len(stored)]:
            for line in stored:
                self._acked(line)
            del self.backlog[: len(stored)]
        else:
            log.warning(
                "session %s: the cluster's stream holds %d line(s) that are not this node's recording's first ones "
                "(the session ran elsewhere?); only this run's lines follow them",
                self.session_id,
                len(stored),
            )
            self.backlog.clear()
        self.compared = True

    async def _put(self, batch: list[bytes]) -> None:
        """A run of lines into the journal in one message (one line: the take-over),
        fenced; tried again while the cluster cannot acknowledge (the journal stores a
        retried message once)."""
        from actors.cluster import NoQuorum, Unreachable

        assert self.journal is not None
        waiting = False
        while True:
            await trio.lowlevel.checkpoint()  # a handover's cancel lands here, between appends
            try:
                # One append is never cut short (a handover cancels the mirror): cut, it
                # could be stored without this mirror knowing, and the next run would
                # append its lines again in another batch (the stream would hold them
                # twice). It is bounded by the journal's request timeout.
                with trio.CancelScope(shield=True):
                    if self.taken:
                        await self.journal.append_batch(batch)
                    else:
                        await self.journal.take_over(batch[0])
                        self.taken = True
                for line in batch:
                    self._acked(line)
                return
            except (NoQuorum, Unreachable) as exc:
                if not waiting:
                    log.warning("session %s: waiting for the cluster to take its lines: %s", self.session_id, exc)
                    waiting = True
                await trio.sleep(RETRY_S)

    async def _renew(self, follow: trio.CancelScope) -> None:
        from actors.cluster import ClusterError, LeaseLost, Taken
        from actors.cluster.lease import lease_key

        node = self.node
        while True:
            await trio.sleep(node.config.renew_every_s)
            assert self.lease is not None
            try:
                self.lease = await node.leases.renew(self.lease)
                continue
            except LeaseLost:
                pass
            except ClusterError as exc:
                log.warning("session %s: its lease could not be renewed: %s", self.session_id, exc)
                continue
            # Gone (it expired while the cluster could not be reached) or taken.
            try:
                held = await node.leases.store.get(lease_key(self.session_id))
                if held is not None and held[0].decode("utf-8", "replace") == node.config.node_id:
                    self.lease = attrs.evolve(self.lease, revision=held[1])  # ours still
                    continue
                self.lease = await node.leases.acquire(self.session_id, node.config.node_id)
                log.warning("session %s: its lease had expired; taken again", self.session_id)
            except Taken as exc:
                self._stop_writing("fenced", f"its lease was taken by node {exc.owner or '?'}")
                self.lease = None
                follow.cancel()
                return
            except ClusterError as exc:
                log.warning("session %s: its lease could not be renewed: %s", self.session_id, exc)


def gone_from_this_machine(node_id: str) -> bool:
    """Whether ``node_id`` (``host:pid:random``) names a process of this machine that
    no longer runs."""
    host, _, rest = node_id.partition(":")
    pid_text = rest.partition(":")[0]
    if host != socket.gethostname() or not pid_text.isdigit() or int(pid_text) == os.getpid():
        return False
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def complete_lines(path: Path, pos: int) -> tuple[list[tuple[bytes, int]], int]:
    """(Blocking.) The complete lines of ``path`` from byte ``pos`` on, each with the
    offset after it, and the offset after the last."""
    lines = complete_lines_from(path, pos)
    return lines, lines[-1][1] if lines else pos


def complete_lines_from(path: Path, pos: int) -> list[tuple[bytes, int]]:
    """(Blocking.) The lines of ``path`` from byte ``pos`` that end with a newline (a
    line still being written is left for later), each with the offset after it."""
    try:
        with path.open("rb") as fh:
            fh.seek(pos)
            data = fh.read()
    except FileNotFoundError:
        return []
    out: list[tuple[bytes, int]] = []
    start = 0
    while (end := data.find(b"\n", start)) >= 0:
        out.append((data[start:end], pos + end + 1))
        start = end + 1
    return out


__all__ = ["ClusterConfig", "ClusterNode", "ClusterStartError", "SessionMirror", "open_node"]
