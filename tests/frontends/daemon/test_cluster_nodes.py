"""Nodes of one cluster (``--cluster``): a session is placed on the node that serves its
workspace, and a client attached to any node lists, follows, prompts, approves and
cancels it there (through a tunnel over NATS). Real nats-server, two daemons."""

from __future__ import annotations

import getpass
import json
import logging
import signal
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from actors.cluster import Credentials, Journal, NoQuorum, open_link
from actors.cluster.servers import NatsServer
from actors.frontends.daemon import Daemon, serve
from actors.frontends.daemon._cluster import ClusterConfig, ClusterStartError, open_node
from actors.frontends.daemon.client import DaemonError
from actors.recording import line_seq
from bus.codec import encode
from bus.messages import ApprovalRequested, SessionOpened, TextStreamed, TurnEnded
from tests.cluster import conftest as cluster_fixtures
from tests.frontends.daemon._helpers import (
    call_response,
    client_of,
    config_for,
    events_until,
    text_response,
    write_responses,
)
from tests.frontends.daemon._procs import daemon_process

nats_server = cluster_fixtures.nats_server
USER = getpass.getuser()  # as a node started from the command line names it


@contextmanager
def logged(needle: str) -> Iterator[trio.Event]:
    """An event set when the daemon logs a line containing ``needle`` (logged in trio's
    thread, as the daemon's tasks log)."""
    seen = trio.Event()

    class Watch(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if needle in record.getMessage():
                seen.set()

    watch = Watch()
    logger = logging.getLogger("agentbus.daemon")
    logger.addHandler(watch)
    old_level = logger.level
    logger.setLevel(min(old_level or logging.INFO, logging.INFO))
    try:
        yield seen
    finally:
        logger.removeHandler(watch)
        logger.setLevel(old_level)


@asynccontextmanager
async def node(
    root: Path, url: str, node_id: str, *, options: dict[str, Any] | None = None, **cluster: Any
) -> AsyncIterator[Daemon]:
    config = attrs.evolve(
        config_for(root),
        **(options or {}),
        cluster=ClusterConfig(url=url, **{"user": USER, "node_id": node_id, "renew_every_s": 0.5, **cluster}),
    )
    async with trio.open_nursery() as nursery:
        daemon: Daemon = await nursery.start(serve, config)
        try:
            yield daemon
        finally:
            daemon.stop("test over")


async def test_a_session_placed_on_the_node_that_serves_it_is_driven_from_another(home: Path, nats_server: NatsServer) -> None:
    ws = home / "ws"
    fake = write_responses(
        home / "f.responses",
        call_response("write_file", {"file_path": "notes.txt", "content": "milk\n"}),
        text_response("done ", "there"),
        text_response("second"),
    )
    with trio.fail_after(60):
        async with node(home / "b", nats_server.url, "node-b", serves=(str(ws),)) as b, node(
            home / "a", nats_server.url, "node-a", serves=()
        ) as a, client_of(home / "a") as client:
            ready = await client.create_session(str(ws), fake_responses=str(fake), approval_mode="default", model="gemini-2.5-flash")
            sid = ready.session_id
            assert sid in b.core.sessions and sid not in a.core.sessions
            listed = {s.session_id: s.state for s in (await client.list_sessions()).sessions}
            assert listed.get(sid) == "running"
            await client.subscribe(sid, from_seq=1)
            await client.prompt(sid, "run it")
            asked = await events_until(client, lambda m: isinstance(m, ApprovalRequested))
            question = asked[-1].message
            assert isinstance(question, ApprovalRequested)
            await client.answer(sid, question.correlation_id, "proceed_once")
            turn = await events_until(client)
            assert (ws / "notes.txt").read_text() == "milk\n"
            settled = [e.message for e in turn if type(e.message).__name__ == "ApprovalSettled"]
            assert settled and settled[0].outcome == "proceed_once"
            assert "done there" in "".join(getattr(e.message, "text", "") for e in turn)
            seqs = [e.seq for e in asked + turn]
            assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
            # Cancel through node a: the turn on node b ends cancelled.
            await client.prompt(sid, "again")
            await client.cancel(sid)
            ended = (await events_until(client))[-1].message
            assert isinstance(ended, TurnEnded)
            # The mode of the session is set where it runs.
            await client.set_mode(sid, "yolo")
            assert b.core.sessions[sid].entry.approval_mode == "yolo"
            live = b.core.sessions[sid]
            await client.end_session(sid)
            await live.stopped.wait()
            assert sid not in b.core.sessions
            await live.mirror.done.wait()
            # Ended for good: no node lists it any more (a daemon stopping would leave it dormant).
            assert sid not in {s.session_id for s in (await client.list_sessions()).sessions}


async def test_a_workspace_no_node_serves_is_refused_clearly(home: Path, nats_server: NatsServer) -> None:
    with trio.fail_after(30):
        async with node(home / "a", nats_server.url, "node-a", serves=(str(home / "elsewhere"),)), client_of(home / "a") as client:
            with pytest.raises(DaemonError, match="no node of the cluster serves the workspace"):
                await client.create_session(str(home / "ws"))
            assert (await client.list_sessions()).sessions == ()


async def test_a_node_killed_mid_stream_its_session_resumes_on_another_and_the_client_follows_on(
    home: Path, nats_server: NatsServer
) -> None:
    """kill -9 of the node running a session while it streams: every message the client
    got is in the cluster's stream, another node serving the workspace takes the session
    over from it, and the client (on a third node) keeps its subscription: it follows
    on from where it was, without a duplicate, and its next prompt is answered there."""
    ws = home / "ws"
    fake = write_responses(
        home / "f.responses",
        text_response(*(f"chunk{i} " for i in range(40))),
        text_response("after ", "the move"),
    )
    (home / "b" / "ws").mkdir(parents=True)
    with trio.fail_after(90):
        async with daemon_process(home / "b", "--cluster", nats_server.url) as b, node(
            home / "a", nats_server.url, "node-a", serves=()
        ), client_of(home / "a") as client:
            ready = await client.create_session(
                str(ws), fake_responses=str(fake), model="gemini-2.5-flash", fake_chunk_delay_ms=50
            )
            sid = ready.session_id
            async with node(home / "c", nats_server.url, "node-c") as c:
                await client.subscribe(sid, from_seq=1)
                await client.prompt(sid, "stream")
                seen = await events_until(client, lambda m: isinstance(m, TextStreamed) and "chunk3" in m.text)
                b.proc.send_signal(signal.SIGKILL)
                killed_at = trio.current_time()
                await b.proc.wait()
                # The client follows on: the session, resumed on node c, opens again.
                more = await events_until(client, lambda m: isinstance(m, SessionOpened))
                took = trio.current_time() - killed_at
                assert sid in c.core.sessions
                await client.prompt(sid, "and now?")
                after = await events_until(client)
                # Node c answers (its fake backend reads the file from its start, as a
                # resumed session's does): the whole answer this time.
                assert "chunk39" in "".join(getattr(e.message, "text", "") for e in after)
                assert c.core.sessions[sid].mirror.node.config.node_id == "node-c"
            seqs = [e.seq for e in seen + more + after]
            assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs), seqs
            async with open_link(nats_server.url) as link:
                stored = {line_seq(line): line for _, line in await Journal(link, getpass.getuser(), sid).lines()}
            for env in seen:  # every message the client got before the kill is in the stream
                assert env.seq in stored and encode(env.message) in stored[env.seq].decode(), env
            print(f"failover: kill -9 -> session open on node c in {took:.2f} s")


async def test_with_no_node_left_for_its_workspace_a_session_waits_interrupted_until_one_joins(
    home: Path, nats_server: NatsServer
) -> None:
    ws = home / "ws"
    fake = write_responses(home / "f.responses", text_response("one"), text_response("two"))
    (home / "b" / "ws").mkdir(parents=True)
    with trio.fail_after(60):
        async with node(home / "a", nats_server.url, "node-a", serves=()), client_of(home / "a") as client:
            async with daemon_process(home / "b", "--cluster", nats_server.url) as b:
                ready = await client.create_session(str(ws), fake_responses=str(fake), model="gemini-2.5-flash")
                sid = ready.session_id
                b.proc.send_signal(signal.SIGKILL)
                await b.proc.wait()
            listed = {s.session_id: s.state for s in (await client.list_sessions()).sessions}
            assert listed[sid] == "interrupted"
            with pytest.raises(DaemonError, match="no node of the cluster serves the workspace"):
                await client.load_session(sid)
            with logged(f"session {sid}: taken over") as taken:
                async with node(home / "c", nats_server.url, "node-c") as c:
                    await taken.wait()  # its first take-over round
                    assert sid in c.core.sessions
                    listed = {s.session_id: s.state for s in (await client.list_sessions()).sessions}
                    assert listed[sid] == "running"
                    await client.subscribe(sid)
                    await client.prompt(sid, "still there?")
                    assert isinstance((await events_until(client))[-1].message, TurnEnded)


ACCOUNTS = """
accounts {
  ANN: { jetstream: enabled, users: [ { user: ann, password: "ann-secret" } ] }
  BOB: { jetstream: enabled, users: [ { user: bob, password: "bob-secret" } ] }
}
"""


async def test_a_user_reaches_only_their_sessions_one_nats_account_each(home: Path, nursery: trio.Nursery) -> None:
    """The NATS server keeps each user's subjects, streams and buckets apart (an
    account each, docs/cluster.md): bob's node neither lists nor opens ann's session,
    and a node without credentials is refused."""
    cluster_fixtures.binary_or_skip()
    config = home / "accounts.conf"
    config.write_text(ACCOUNTS)
    server = NatsServer(name="accounts", store=home / "nats", extra=("-c", str(config)))
    await server.start(nursery)
    ws = home / "ws"
    fake = write_responses(home / "f.responses", text_response("for ann"))
    with trio.fail_after(60):
        async with node(
            home / "ann", server.url, "ann-node", user="ann", credentials=Credentials(user="ann", password="ann-secret")
        ), node(
            home / "bob", server.url, "bob-node", user="bob", credentials=Credentials(user="bob", password="bob-secret")
        ), client_of(home / "ann") as ann, client_of(home / "bob") as bob:
            sid = (await ann.create_session(str(ws), fake_responses=str(fake), model="gemini-2.5-flash")).session_id
            assert sid in {s.session_id for s in (await ann.list_sessions()).sessions}
            assert sid not in {s.session_id for s in (await bob.list_sessions()).sessions}
            with pytest.raises(DaemonError):
                await bob.subscribe(sid)
            with pytest.raises(DaemonError):
                await bob.prompt(sid, "let me in")
        with pytest.raises(ClusterStartError, match="refused the credentials|[Aa]uthoriz"):
            async with open_node(ClusterConfig(url=server.url, user="ann", node_id="anon-node")):
                pass
    await server.stop()


async def test_frames_over_the_servers_message_limit_cross_a_tunnel_whole(home: Path, nats_server: NatsServer) -> None:
    """A prompt of 3 MB (NATS takes 1 MB a message) reaches the session on the other
    node whole, and its echo comes back whole; the stream holds it as parts."""
    ws = home / "ws"
    fake = write_responses(home / "f.responses", text_response("got it"))
    text = "x" * (3 << 20) + "-end ✓"
    with trio.fail_after(60):
        async with node(home / "b", nats_server.url, "node-b", serves=(str(ws),)) as b, node(
            home / "a", nats_server.url, "node-a", serves=()
        ), client_of(home / "a") as client:
            sid = (await client.create_session(str(ws), fake_responses=str(fake), model="gemini-2.5-flash")).session_id
            await client.subscribe(sid)
            await client.prompt(sid, text)
            turn = await events_until(client)
            echoed = [e.message for e in turn if type(e.message).__name__ == "SubmitPrompt"]
            assert echoed and echoed[0].display_text == text
            assert sid in b.core.sessions


nats_cluster = cluster_fixtures.nats_cluster


async def answered_again(ask: Any) -> None:
    while True:
        try:
            await ask()
            return
        except DaemonError as exc:
            assert "try again" in exc.message, exc.message


@pytest.mark.slow
async def test_sessions_go_on_with_one_server_of_three_and_wait_loudly_for_quorum_with_one(
    home: Path, nats_cluster: list[NatsServer], nursery: trio.Nursery
) -> None:
    """Three NATS servers, replicas 3, the session on node b, its client on node a.
    One server killed (-9): turns go on. A second killed: the stream cannot take lines
    (node b says so) and the client gets nothing it would lose; both back: the turn the
    client had not seen arrives, and every event it saw is in the stream."""
    urls = ",".join(s.url for s in nats_cluster)
    ws = home / "ws"
    fake = write_responses(home / "f.responses", *(text_response(f"answer {i}") for i in range(3)))
    seen: list[Any] = []
    with trio.fail_after(150):
        async with node(home / "b", urls, "node-b", serves=(str(ws),), replicas=3), node(
            home / "a", urls, "node-a", serves=(), replicas=3
        ), client_of(home / "a") as client:
            sid = (await client.create_session(str(ws), fake_responses=str(fake), model="gemini-2.5-flash")).session_id
            await client.subscribe(sid, from_seq=1)
            await client.prompt(sid, "one")
            seen += await events_until(client)
            nats_cluster[0].kill()
            # A request caught in the nodes' reconnection fails ("try again"); an
            # idempotent one is asked until answered, then the turn goes on.
            await answered_again(lambda: client.list_mcp_servers(sid))
            await client.prompt(sid, "two")
            seen += await events_until(client)
            nats_cluster[1].kill()
            await answered_again(lambda: client.list_mcp_servers(sid))
            with logged("waiting for the cluster to take its lines") as waiting:
                await client.prompt(sid, "three")
                await waiting.wait()  # node b's mirror says so
            assert "answer 2" not in "".join(getattr(e.message, "text", "") for e in seen)
            await nats_cluster[0].start(nursery)
            await nats_cluster[1].start(nursery)
            seen += await events_until(client)
            assert "answer 2" in "".join(getattr(e.message, "text", "") for e in seen)
        async with open_link(urls) as link:
            while True:  # the restarted servers elect JetStream's leader in their own time
                try:
                    stored = {line_seq(line) for _, line in await Journal(link, USER, sid).lines()}
                    break
                except NoQuorum:
                    await trio.sleep(0.2)
    assert {e.seq for e in seen} <= stored
    seqs = [e.seq for e in seen]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)


async def test_a_stream_deleted_under_a_running_session_is_reported_and_the_session_goes_on(
    home: Path, nats_server: NatsServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="agentbus.daemon")
    ws = home / "ws"
    fake = write_responses(home / "f.responses", text_response("one"), text_response("two"))
    with trio.fail_after(60):
        async with node(home / "b", nats_server.url, "node-b", serves=(str(ws),)) as b, node(
            home / "a", nats_server.url, "node-a", serves=()
        ), client_of(home / "a") as client:
            sid = (await client.create_session(str(ws), fake_responses=str(fake), model="gemini-2.5-flash")).session_id
            await client.subscribe(sid, from_seq=1)
            await client.prompt(sid, "one")
            await events_until(client)
            mirror = b.core.sessions[sid].mirror
            async with open_link(nats_server.url) as link:
                await link.delete_stream(Journal(link, USER, sid).stream)
            await client.prompt(sid, "two")
            turn = await events_until(client)
            assert "two" in "".join(getattr(e.message, "text", "") for e in turn)
            assert mirror.state == "failed" and "was the stream deleted" in mirror.problem
            assert "was the stream deleted" in caplog.text and sid in b.core.sessions


async def test_a_tunnel_takes_the_sockets_frame_rules(home: Path, nats_server: NatsServer) -> None:
    """Frames through a tunnel are checked as a socket's are: a request before the
    hello, garbage, bad UTF-8, deep nesting and a frame over the size limit are each
    answered with the socket's error; the node goes on serving (a
    well-formed hello on a new tunnel is welcomed)."""
    from actors.frontends.daemon._protocol import MAX_FRAME
    from actors.frontends.daemon._tunnel import Tunnel, open_subject

    hello = b'{"type":"Hello","request_id":"h","protocol":1,"client":"fuzz"}\n'
    cases = [
        (b'{"type":"ListSessions","request_id":"1"}\n', b"hello_required"),
        (hello + b"\xff\xfe not json\n", b"bad_frame"),
        (hello + b"[" * 5000 + b"\n", b"bad_frame"),
        (hello + b"x" * (MAX_FRAME + 10) + b"\n", b"frame_too_large"),
    ]
    with trio.fail_after(90):
        async with node(home / "b", nats_server.url, "node-b"), open_link(nats_server.url) as link:
            for frames, code in cases:
                answered = trio.Event()

                async def deliver(lines: list[bytes], code: bytes = code, answered: trio.Event = answered) -> None:
                    if any(code in line for line in lines):
                        answered.set()

                tunnel = Tunnel(link, USER, "node-b")
                await tunnel.open("fuzz", "test")
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(tunnel.run, deliver)
                    await tunnel.send(frames)
                    await answered.wait()  # the socket's error, whether or not it ends the tunnel
                    await tunnel.close()
                    nursery.cancel_scope.cancel()
            for bad in (b"[1]", b"\xff", b'{"tunnel": "../x"}', b'"x"', b"{}"):
                answer = json.loads(await link.request(open_subject(USER, "node-b"), bad))
                assert answer["ok"] is False and "bad open request" in answer["error"]
            tunnel = Tunnel(link, USER, "node-b")
            await tunnel.open("fuzz", "test")
            welcomed = trio.Event()

            async def welcome(lines: list[bytes]) -> None:
                if any(b"Welcome" in line for line in lines):
                    welcomed.set()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(tunnel.run, welcome)
                await tunnel.send(hello)
                await welcomed.wait()
                await tunnel.close()
                nursery.cancel_scope.cancel()


@pytest.mark.slow
async def test_a_node_of_another_machine_that_dies_is_known_by_its_silence_and_its_lease(
    home: Path, nats_server: NatsServer
) -> None:
    """No process of this machine to look for (its id names another host): the client's
    node learns it is gone when its tunnel falls silent, another node when its lease
    expires (``--cluster-lease-ttl``); that node takes the session over from the stream
    and the client follows on, as across machines."""
    ttl = 3.0
    ws = home / "ws"
    fake = write_responses(home / "f.responses", text_response(*(f"chunk{i} " for i in range(40))), text_response("again"))
    (home / "b" / "ws").mkdir(parents=True)
    timing = {"lease_ttl_s": ttl, "renew_every_s": ttl / 3}
    with trio.fail_after(90):
        async with node(home / "a", nats_server.url, "node-a", serves=(), **timing), client_of(home / "a") as client:
            async with daemon_process(
                home / "b", "--cluster", nats_server.url, "--cluster-node-id", "machine-2:b", "--cluster-lease-ttl", str(ttl)
            ) as b:
                sid = (
                    await client.create_session(str(ws), fake_responses=str(fake), model="gemini-2.5-flash", fake_chunk_delay_ms=50)
                ).session_id
                async with node(home / "c", nats_server.url, "node-c", **{**timing, "renew_every_s": 0.5}) as c:
                    await client.subscribe(sid, from_seq=1)
                    await client.prompt(sid, "stream")
                    seen = await events_until(client, lambda m: isinstance(m, TextStreamed) and "chunk3" in m.text)
                    b.proc.send_signal(signal.SIGKILL)
                    await b.proc.wait()
                    more = await events_until(client, lambda m: isinstance(m, SessionOpened))
                    assert sid in c.core.sessions
                    await client.prompt(sid, "and now?")
                    after = await events_until(client)
            seqs = [e.seq for e in seen + more + after]
            assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)


async def test_a_live_model_session_placed_on_another_node_uses_the_clients_credentials(
    home: Path, nats_server: NatsServer
) -> None:
    """The live backend across nodes: the client's credentials (its auth environment)
    go with the new session through the tunnel, and the node that runs it calls the
    model with them (the real google-genai SDK over HTTP to the fake Gemini server)."""
    from actors.gateway import FakeEntry, live_backend
    from tests.fakes.gemini_server import FakeGeminiServer

    server = FakeGeminiServer([FakeEntry("generateContentStream", text_response("live ", "from b")["response"], 0)])
    ws = home / "ws"
    live = {"live_backend": lambda env, auth_type: live_backend(env, auth_type=auth_type)}
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            await nursery.start(server.run)
            async with node(home / "b", nats_server.url, "node-b", serves=(str(ws),), options=live) as b, node(
                home / "a", nats_server.url, "node-a", serves=()
            ), client_of(home / "a") as client:
                auth = {"GEMINI_API_KEY": "key-0123456789abcdef", "GOOGLE_GEMINI_BASE_URL": server.base_url}
                sid = (await client.create_session(str(ws), model="gemini-2.5-flash", auth_env=auth)).session_id
                assert sid in b.core.sessions
                await client.subscribe(sid)
                await client.prompt(sid, "hi")
                envs = await events_until(client)
            nursery.cancel_scope.cancel()
    assert "live from b" in "".join(getattr(e.message, "text", "") for e in envs)
