"""The NATS adapter: nats-py (asyncio) bridged into trio, and NATS's errors as ours.

This is the one module of the cluster where asyncio runs. ``open_link`` opens a
trio-asyncio loop for the connection's lifetime (as the gateway does for google-genai)
and every call crosses the bridge once (``aio_as_trio``); nothing of asyncio leaks out:
callers see trio coroutines and ``actors.cluster.errors``. nats-py is the official
client; a trio-native one would save the bridge's hop per call (see docs/cluster.md for
what one append costs through it).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import attrs
import nats
import trio
import trio_asyncio
from nats import errors as nats_errors
from nats.js import api as js_api
from nats.js import errors as js_errors

from actors.cluster.errors import (
    ClusterError,
    Fenced,
    LeaseLost,
    NoQuorum,
    Taken,
    TooLarge,
    Unauthorized,
    Unreachable,
)

_T = TypeVar("_T")
EXPECTED_LAST_SUBJECT_SEQ = "Nats-Expected-Last-Subject-Sequence"
WRONG_LAST_SEQUENCE = (10071, 10164)
"""JetStream's error codes for an append whose expected last sequence is not the last
(with the actual one; without it, as a clustered stream may say)."""
NO_PEERS = 10005
"""JetStream's error code for a stream it cannot place: too few of its servers are up."""
DUPLICATE_IN_PROCESS = 10158
"""An append tried again while its earlier try is still in the stream's hands."""
CONNECT_TIMEOUT_S = 5.0
REQUEST_TIMEOUT_S = 5.0
LISTING_BATCH = 256
"""Values fetched at once when a bucket is listed."""
UNAVAILABLE_RETRY_S = 2.0
"""How long a read the server refuses as "JetStream temporarily unavailable" is asked
again (its leaders being chosen: a cluster just started said so to about one listing
in fifty), before it fails as ``NoQuorum``."""
LISTING_IDLE_S = 30.0
"""The server drops a listing's consumer this long after its last use (a listing
deletes it itself; this is for one cut short)."""


@attrs.frozen(kw_only=True)
class Credentials:
    """What a NATS server may ask of a client (all optional)."""

    user: str = ""
    password: str = attrs.field(default="", repr=False)
    token: str = attrs.field(default="", repr=False)
    nkey_seed_file: str = ""
    """A file holding an nkey seed (``SU...``), as ``nats-server`` users are given."""
    tls_ca_file: str = ""
    tls_cert_file: str = ""
    tls_key_file: str = ""


@attrs.frozen
class StoredMessage:
    seq: int
    data: bytes
    headers: dict[str, str]


@attrs.frozen
class CoreMessage:
    """A message of core NATS (no stream): what ``Inbox.receive`` gives."""

    subject: str
    data: bytes
    reply: str = ""
    headers: dict[str, str] = attrs.field(factory=dict)


class Inbox:
    """A subscription to a subject (core NATS: what arrives while it is open)."""

    def __init__(self, link: NatsLink, sub: Any, subject: str) -> None:
        self._link = link
        self._sub = sub
        self.subject = subject

    async def receive(self) -> CoreMessage:
        """The next message; ``Unreachable`` once the connection is closed."""
        msg = await self._link._call(f"receiving on {self.subject}", self._sub.next_msg, timeout=None)
        return CoreMessage(str(msg.subject), bytes(msg.data or b""), str(msg.reply or ""), dict(msg.headers or {}))

    async def close(self) -> None:
        with trio.CancelScope(shield=True), trio.move_on_after(2):
            try:
                await self._link._call(f"unsubscribing from {self.subject}", self._sub.unsubscribe)
            except ClusterError:
                pass  # the connection is gone: so is the subscription


class NatsLink:
    """One connection to a NATS server, usable from trio."""

    def __init__(self, nc: Any, js: Any, loop: Any, url: str) -> None:
        self._nc = nc
        self._js = js
        self._loop = loop
        self.url = url

    @property
    def max_payload(self) -> int:
        """The largest message the server takes (its ``max_payload``)."""
        return int(self._nc.max_payload)

    async def _call(self, what: str, fn: Callable[..., Awaitable[_T]], *args: Any, **kwargs: Any) -> _T:
        try:
            result: _T = await trio_asyncio.aio_as_trio(fn, loop=self._loop)(*args, **kwargs)
            return result
        except ClusterError:
            raise
        except Exception as exc:
            raise translate(exc, what, self.url) from exc

    async def _read(self, what: str, fn: Callable[..., Awaitable[_T]], *args: Any, **kwargs: Any) -> _T:
        """``_call`` for a read, asked again for ``UNAVAILABLE_RETRY_S`` while the server
        says JetStream is unavailable for now (it did nothing then)."""
        deadline = trio.current_time() + UNAVAILABLE_RETRY_S
        pause = 0.05
        while True:
            try:
                return await self._call(what, fn, *args, **kwargs)
            except NoQuorum as exc:
                if not isinstance(exc.__cause__, js_errors.ServiceUnavailableError):
                    raise
                if trio.current_time() + pause > deadline:
                    raise
            await trio.sleep(pause)
            pause = min(pause * 2, 0.5)

    # -- core NATS --------------------------------------------------------------------------------
    async def publish(self, subject: str, data: bytes, *, headers: dict[str, str] | None = None) -> None:
        if len(data) > self.max_payload:
            raise TooLarge(f"a message of {len(data)} bytes is over the server's limit ({self.max_payload} bytes)")
        await self._call(f"publishing on {subject}", self._nc.publish, subject, data, headers=headers or None)

    async def request(self, subject: str, data: bytes, *, wait_s: float = REQUEST_TIMEOUT_S) -> bytes:
        """``data`` to whoever answers on ``subject``; the answer. Nobody subscribed:
        ``Unreachable``; no answer in ``wait_s`` (NATS's own timer): ``NoQuorum``."""
        try:
            msg = await self._call(f"asking {subject}", self._nc.request, subject, data, timeout=wait_s)
        except NoQuorum as exc:
            if isinstance(exc.__cause__, nats_errors.NoRespondersError):
                raise Unreachable(f"nobody answers on {subject}") from None
            raise
        return bytes(msg.data or b"")

    async def subscribe(self, subject: str, *, queue: str = "") -> Inbox:
        sub = await self._call(f"subscribing to {subject}", self._nc.subscribe, subject, queue=queue)
        return Inbox(self, sub, subject)

    async def flush(self) -> None:
        await self._call("flushing", self._nc.flush, timeout=REQUEST_TIMEOUT_S)

    # -- streams --------------------------------------------------------------------------------
    async def ensure_stream(self, name: str, subjects: list[str], *, replicas: int = 1) -> None:
        """The stream ``name`` over ``subjects`` (created if absent)."""
        config = js_api.StreamConfig(
            name=name, subjects=subjects, num_replicas=replicas, storage=js_api.StorageType.FILE, allow_direct=True
        )
        await self._call(f"creating stream {name}", self._js.add_stream, config)

    async def delete_stream(self, name: str) -> None:
        await self._call(f"deleting stream {name}", self._js.delete_stream, name)

    async def append(self, subject: str, data: bytes, *, expected_last: int | None, headers: dict[str, str] | None = None) -> int:
        """Store ``data`` on ``subject``; its sequence number in the stream. With
        ``expected_last``, only if that is the subject's last sequence (0: none yet),
        else ``Fenced``."""
        sent = dict(headers or {})
        if expected_last is not None:
            sent[EXPECTED_LAST_SUBJECT_SEQ] = str(expected_last)
        if len(data) > self.max_payload:
            raise TooLarge(f"a message of {len(data)} bytes is over the server's limit ({self.max_payload} bytes)")
        try:
            ack = await self._call(f"appending to {subject}", self._js.publish, subject, data, headers=sent or None, timeout=REQUEST_TIMEOUT_S)
        except _NoStream:
            # Either no stream takes the subject any more, or its stream has no leader
            # (a cluster short of servers): JetStream's metadata tells which.
            try:
                await self._call(f"finding the stream of {subject}", self._js.find_stream_name_by_subject, subject)
            except _NotFound:
                raise ClusterError(f"appending to {subject}: no stream takes it (was the stream deleted?)") from None
            raise NoQuorum(f"appending to {subject}: its stream has no leader now (too few servers are up)") from None
        return int(ack.seq)

    async def last_message(self, stream: str, subject: str) -> StoredMessage | None:
        """``subject``'s last message; None if it has none."""
        try:
            msg = await self._read(f"reading {subject}", self._js.get_last_msg, stream, subject)
        except _NotFound:
            return None
        return StoredMessage(int(msg.seq), bytes(msg.data or b""), dict(msg.headers or {}))

    async def read(self, stream: str, subject: str, from_seq: int = 1) -> AsyncIterator[StoredMessage]:
        """``subject``'s messages from stream sequence ``from_seq`` on, in order."""
        seq = max(1, from_seq)
        while True:
            try:
                msg = await self._read(f"reading {subject}", self._js.get_msg, stream, seq=seq, subject=subject, next=True)
            except _NotFound:
                return
            yield StoredMessage(int(msg.seq), bytes(msg.data or b""), dict(msg.headers or {}))
            seq = int(msg.seq) + 1

    # -- key-value buckets ------------------------------------------------------------------------
    async def bucket(self, name: str, *, ttl_s: float, replicas: int = 1) -> Bucket:
        """The key-value bucket ``name`` (created if absent) whose entries the server
        expires ``ttl_s`` after their last write."""
        config = js_api.KeyValueConfig(bucket=name, ttl=ttl_s, replicas=replicas, history=1)
        kv = await self._call(f"opening bucket {name}", self._js.create_key_value, config)
        return Bucket(self, kv, name)


class Bucket:
    def __init__(self, link: NatsLink, kv: Any, name: str) -> None:
        self._link = link
        self._kv = kv
        self.name = name

    async def get(self, key: str) -> tuple[bytes, int] | None:
        try:
            entry = await self._link._read(f"reading {self.name}/{key}", self._kv.get, key)
        except _NotFound:
            return None
        return bytes(entry.value or b""), int(entry.revision)

    async def put(self, key: str, value: bytes) -> int:
        return int(await self._link._call(f"writing {self.name}/{key}", self._kv.put, key, value))

    async def items(self) -> dict[str, tuple[bytes, int]]:
        """Every key with its value and revision (deleted and expired ones left out),
        read in one pass.

        Not nats-py's ``watchall``: its "no more values" marker can come before the
        values (when the consumer's info, saying none are pending, is read before the
        pushed values are), so a listing came back empty now and then under load
        (``test_cluster_placement`` in CI: "no node serves the workspace"); and each
        listing left an ordered consumer on the server until its inactivity timeout, so
        a burst of listings ran into the server's consumer limit. Here a pull consumer
        is made for the listing: its count of pending values is exact when it is made
        (nothing is sent before it is asked for); it is read up to that count, or until
        nothing is pending (a key deleted meanwhile, seen in that read, is left out), and
        deleted. A read that times out while values are still pending is an error, not a
        shorter listing."""
        js = self._link._js
        stream = f"KV_{self.name}"
        prefix = f"$KV.{self.name}."

        async def collect() -> dict[str, tuple[bytes, int]]:
            config = js_api.ConsumerConfig(
                deliver_policy=js_api.DeliverPolicy.LAST_PER_SUBJECT,
                ack_policy=js_api.AckPolicy.NONE,
                filter_subject=prefix + ">",
                inactive_threshold=LISTING_IDLE_S,
                # One replica in memory, as nats-py's ordered consumers: a consumer of a
                # replicated bucket is otherwise replicated as the bucket is, and making
                # one waits for a raft group of its own to elect a leader (in a cluster
                # just started, that came back "JetStream system temporarily unavailable").
                num_replicas=1,
                mem_storage=True,
            )
            info = await js.add_consumer(stream, config=config)
            out: dict[str, tuple[bytes, int]] = {}
            try:
                left = int(info.num_pending or 0)
                if not left:
                    return out
                pull = await js.pull_subscribe_bind(info.name, stream)
                try:
                    while left > 0:
                        try:
                            msgs = await pull.fetch(batch=min(left, LISTING_BATCH), timeout=REQUEST_TIMEOUT_S)
                        except nats_errors.TimeoutError:
                            if (await js.consumer_info(stream, info.name)).num_pending:
                                raise  # the server is slow or gone: no partial listing
                            return out  # what was pending expired meanwhile
                        for msg in msgs:
                            key = msg.subject[len(prefix) :]
                            headers = msg.headers or {}
                            if headers.get("KV-Operation") in ("DEL", "PURGE") or "Nats-Marker-Reason" in headers:
                                out.pop(key, None)
                            else:
                                out[key] = (bytes(msg.data or b""), int(msg.metadata.sequence.stream))
                        left -= len(msgs)
                        if not msgs or msgs[-1].metadata.num_pending == 0:
                            break
                    return out
                finally:
                    await pull.unsubscribe()
            finally:
                try:
                    await js.delete_consumer(stream, info.name)
                except Exception:  # noqa: BLE001 - the server drops it after LISTING_IDLE_S
                    pass

        return await self._link._read(f"listing {self.name}", collect)

    async def create(self, key: str, value: bytes) -> int:
        """Write ``key`` if nobody holds it; its revision. Held: ``Taken``."""
        try:
            return int(await self._link._call(f"taking {self.name}/{key}", self._kv.create, key, value))
        except _WrongRevision:
            held = await self.get(key)
            owner = held[0].decode("utf-8", "replace") if held else ""
            raise Taken(f"{self.name}/{key} is held by {owner or 'another node'}", owner=owner) from None

    async def update(self, key: str, value: bytes, *, last: int) -> int:
        """Write ``key`` if its revision is still ``last``; the new revision. Else
        ``LeaseLost``."""
        try:
            return int(await self._link._call(f"renewing {self.name}/{key}", self._kv.update, key, value, last=last))
        except _WrongRevision:
            raise LeaseLost(f"{self.name}/{key} changed since revision {last} (expired or taken over)") from None

    async def purge(self, key: str) -> None:
        """Remove ``key`` whoever wrote it (a node taking its own entry down)."""
        await self._link._call(f"removing {self.name}/{key}", self._kv.purge, key)

    async def delete(self, key: str, *, last: int) -> None:
        try:
            await self._link._call(f"releasing {self.name}/{key}", self._kv.delete, key, last=last)
        except (_WrongRevision, _NotFound):
            raise LeaseLost(f"{self.name}/{key} changed since revision {last}") from None


class _NotFound(ClusterError):
    pass


class _WrongRevision(ClusterError):
    pass


class _NoStream(ClusterError):
    pass


def translate(exc: BaseException, what: str, url: str) -> ClusterError:
    """A NATS error as a ``ClusterError`` saying what failed and why."""
    if isinstance(exc, js_errors.KeyWrongLastSequenceError):
        return _WrongRevision(str(exc))
    if isinstance(exc, js_errors.KeyNotFoundError | js_errors.KeyDeletedError | js_errors.NotFoundError | js_errors.NoKeysError):
        return _NotFound(str(exc))
    if isinstance(exc, js_errors.ServiceUnavailableError):
        return NoQuorum(f"{what}: JetStream is not available now (its leaders being chosen, or too few servers up)")
    if isinstance(exc, js_errors.APIError):
        if exc.err_code in WRONG_LAST_SEQUENCE:
            found = re.search(r"(\d+)\s*$", exc.description or "")
            return Fenced(
                f"{what}: another writer appended since (the stream's last is {found.group(1) if found else 'newer'})",
                actual=int(found.group(1)) if found else None,
            )
        if exc.err_code == DUPLICATE_IN_PROCESS:
            return NoQuorum(f"{what}: an earlier try of it is still being stored; try again")
        if exc.code == 503 or exc.err_code == NO_PEERS:
            return NoQuorum(f"{what}: JetStream is not available ({exc.description}); too few servers are up")
        if exc.code in (401, 403):
            return Unauthorized(f"{what}: {exc.description}")
        return ClusterError(f"{what}: {exc.description or exc} (code {exc.err_code or exc.code})")
    if isinstance(exc, js_errors.NoStreamResponseError):
        return _NoStream(f"{what}: no stream answered")
    if isinstance(exc, nats_errors.MaxPayloadError):
        return TooLarge(f"{what}: {exc}")
    if isinstance(exc, nats_errors.NoRespondersError | nats_errors.TimeoutError | asyncio.TimeoutError):
        return NoQuorum(f"{what}: no JetStream answer in time (a stream without a quorum, or no server up)")
    if isinstance(exc, nats_errors.AuthorizationError):
        return Unauthorized(f"{url}: the server refused the credentials")
    if isinstance(exc, nats_errors.ConnectionClosedError | nats_errors.NoServersError | OSError):
        return Unreachable(f"{what}: no NATS server answers at {url} ({exc or type(exc).__name__})")
    return ClusterError(f"{what}: {type(exc).__name__}: {exc}")


@asynccontextmanager
async def open_link(url: str, credentials: Credentials | None = None, *, name: str = "agentbus") -> AsyncIterator[NatsLink]:
    """A connection to the NATS server at ``url`` (or any of a comma-separated list: a
    cluster's servers, reconnected to in turn when one goes) for the block's duration."""
    try:
        async with _link(url, credentials or Credentials(), name) as link:
            yield link
    except BaseExceptionGroup as group:
        # trio-asyncio's loop runs in nurseries: an error of ours (or of the block)
        # comes out of them alone in nested groups; it is raised as itself.
        lone: BaseException = group
        while isinstance(lone, BaseExceptionGroup) and len(lone.exceptions) == 1:
            lone = lone.exceptions[0]
        if isinstance(lone, BaseExceptionGroup):
            raise
        raise lone from lone.__cause__


@asynccontextmanager
async def _link(url: str, creds: Credentials, name: str) -> AsyncIterator[NatsLink]:
    async with trio_asyncio.open_loop() as loop:
        auth_failed: list[BaseException] = []

        async def error_cb(exc: Exception) -> None:
            if isinstance(exc, nats_errors.AuthorizationError) or "authorization" in str(exc).lower():
                auth_failed.append(exc)

        options: dict[str, Any] = {
            "servers": [u.strip() for u in url.split(",") if u.strip()],
            "name": name,
            "connect_timeout": CONNECT_TIMEOUT_S,
            "allow_reconnect": True,
            "max_reconnect_attempts": -1,
            "reconnect_time_wait": 0.5,
            "error_cb": error_cb,
        }
        if creds.user:
            options["user"], options["password"] = creds.user, creds.password
        if creds.token:
            options["token"] = creds.token
        if creds.nkey_seed_file:
            options["nkeys_seed"] = creds.nkey_seed_file
        if creds.tls_ca_file or creds.tls_cert_file:
            import ssl

            ctx = ssl.create_default_context(cafile=creds.tls_ca_file or None)
            if creds.tls_cert_file:
                ctx.load_cert_chain(creds.tls_cert_file, creds.tls_key_file or None)
            options["tls"] = ctx

        async def connect() -> Any:
            # A first connection tries each server twice, then fails (nats-py would
            # otherwise go on for minutes: its reconnection budget applies here too).
            return await nats.connect(**{**options, "max_reconnect_attempts": 1})

        try:
            nc = await trio_asyncio.aio_as_trio(connect, loop=loop)()
        except Exception as exc:
            if auth_failed or "authorization" in str(exc).lower():
                raise Unauthorized(f"{url}: the server refused the credentials") from exc
            raise translate(exc, "connecting", url) from exc
        # From here on a server restarting (or a cluster's other servers) is waited for.
        nc.options["max_reconnect_attempts"] = -1
        try:
            yield NatsLink(nc, nc.jetstream(timeout=REQUEST_TIMEOUT_S), loop, url)
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(2):
                try:
                    await trio_asyncio.aio_as_trio(nc.close, loop=loop)()
                except Exception:  # closing a connection already gone
                    pass
