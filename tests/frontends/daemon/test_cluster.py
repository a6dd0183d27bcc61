"""``agentbus daemon --cluster URL``: a session run through the daemon is held by a lease
and mirrored into the cluster's stream, which ``agentbus cluster export`` writes back as
the local file; another node taking the session over fences this one. Real nats-server
(``tests/cluster/conftest.py``) and, for the command lines, real processes."""

from __future__ import annotations

import getpass
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from actors.cluster import Journal, NoQuorum, SessionLease, open_link
from actors.cluster.lease import lease_key
from actors.cluster.servers import NatsServer, free_port
from actors.frontends.daemon import Daemon, serve
from actors.frontends.daemon._cluster import (
    RENEW_EVERY_S,
    ClusterConfig,
    SessionMirror,
    default_node_id,
    lease_bucket,
    nodes_bucket,
)
from actors.recording import recording_path
from tests.cluster import conftest as cluster_fixtures
from tests.frontends.daemon._helpers import (
    client_of,
    config_for,
    events_until,
    text_response,
    write_responses,
)
from tests.frontends.daemon._procs import agentbus, daemon_process
from tests.frontends.daemon.test_cluster_nodes import logged, node

nats_server = cluster_fixtures.nats_server
USER = "ann"


@asynccontextmanager
async def node_daemon(home: Path, url: str, **cluster: Any) -> AsyncIterator[Daemon]:
    """The daemon of ``home`` as node ``node-a`` of user ann, renewing as a node does."""
    async with node(home, url, cluster.pop("node_id", "node-a"), **{"user": USER, "renew_every_s": RENEW_EVERY_S, **cluster}) as daemon:
        yield daemon


async def a_session(home: Path, turns: int) -> str:
    """A session of ``turns`` prompts (fake responses) run to its ends; its id."""
    fake = write_responses(home / "f.responses", *(text_response(f"answer {i}", " more") for i in range(turns)))
    async with client_of(home) as client:
        ready = await client.create_session(str(home / "ws"), fake_responses=str(fake), model="gemini-2.5-flash")
        await client.subscribe(ready.session_id, from_seq=1)
        for i in range(turns):
            await client.prompt(ready.session_id, f"question {i}")
            await events_until(client)
    return ready.session_id


async def test_a_session_through_a_node_exports_as_its_local_recording(home: Path, nats_server: NatsServer) -> None:
    with trio.fail_after(60):
        async with node_daemon(home, nats_server.url) as daemon:
            sid = await a_session(home, 2)
            mirror: SessionMirror = daemon.core.sessions[sid].mirror
            async with open_link(nats_server.url) as link:
                assert await SessionLease(await link.bucket(lease_bucket(USER), ttl_s=10)).owner(sid) == "node-a"
        assert mirror.state == "ended" and mirror.done.is_set()
        exported = home / "exported.jsonl"
        done = await trio.to_thread.run_sync(
            lambda: agentbus(home, "cluster", "export", sid, "--cluster", nats_server.url, "--user", USER, "-o", str(exported))
        )
        assert done.returncode == 0, done.stderr
        local = recording_path(home / "data", sid).read_bytes()
        assert exported.read_bytes() == local and local.count(b"\n") > 10
        replayed = await trio.to_thread.run_sync(lambda: agentbus(home, "replay", str(exported), "--check", "-o", "none"))
        assert replayed.returncode == 0, replayed.stdout + replayed.stderr
        async with open_link(nats_server.url) as link:  # released when the session stopped
            assert await SessionLease(await link.bucket(lease_bucket(USER), ttl_s=10)).owner(sid) is None
        to_stdout = await trio.to_thread.run_sync(
            lambda: agentbus(home, "cluster", "export", sid, "--cluster", nats_server.url, "--user", USER)
        )
        assert to_stdout.returncode == 0 and to_stdout.stdout.encode() == local
        unknown = await trio.to_thread.run_sync(
            lambda: agentbus(home, "cluster", "export", "no-such", "--cluster", nats_server.url, "--user", USER)
        )
        assert unknown.returncode == 1 and "no session 'no-such' in the cluster" in unknown.stderr


async def test_a_resumed_session_appends_its_new_part_after_what_the_stream_has(home: Path, nats_server: NatsServer) -> None:
    with trio.fail_after(60):
        async with node_daemon(home, nats_server.url):
            sid = await a_session(home, 1)
        fake = write_responses(home / "g.responses", text_response("again"))
        async with node_daemon(home, nats_server.url), client_of(home) as client:
            await client.load_session(sid, fake_responses=str(fake))
            await client.subscribe(sid)
            await client.prompt(sid, "once more")
            await events_until(client)
        async with open_link(nats_server.url) as link:
            stored = b"".join(line + b"\n" for _, line in await Journal(link, USER, sid).lines())
    local = recording_path(home / "data", sid).read_bytes()
    assert stored == local and local.count(b'"kind":"meta"') == 2


async def until_in_stream(link: object, sid: str, needle: bytes) -> list[bytes]:
    journal = Journal(link, USER, sid)  # type: ignore[arg-type]
    while True:
        lines = [line for _, line in await journal.lines()]
        if any(needle in line for line in lines):
            return lines
        await trio.sleep(0.05)


async def test_another_node_taking_the_session_over_fences_the_first(
    home: Path, nats_server: NatsServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="agentbus.daemon")
    b_meta = b'{"v": 1, "kind": "meta", "node": "node-b"}'
    with trio.fail_after(60):
        async with node_daemon(home, nats_server.url, renew_every_s=600) as daemon, open_link(nats_server.url) as link:
            fake = write_responses(home / "f.responses", text_response("one"), text_response("two"))
            async with client_of(home) as client:
                ready = await client.create_session(str(home / "ws"), fake_responses=str(fake), model="gemini-2.5-flash")
                sid = ready.session_id
                live = daemon.core.sessions[sid]
                mirror: SessionMirror = live.mirror
                await client.subscribe(sid, from_seq=1)
                await client.prompt(sid, "first")
                await events_until(client)
                await until_in_stream(link, sid, b'"TurnEnded"')
                # Node B takes the session over (A's lease given up under it) and writes.
                bucket = await link.bucket(lease_bucket(USER), ttl_s=10)
                held = await bucket.get(lease_key(sid))
                assert held is not None
                await bucket.delete(lease_key(sid), last=held[1])
                await SessionLease(bucket).acquire(sid, "node-b")
                await Journal(link, USER, sid).take_over(b_meta)
                await client.prompt(sid, "second")
                await events_until(client)
                await mirror.done.wait()
                # It runs on node B now: it stops here (one run of a session at a time).
                await live.stopped.wait()
                assert sid not in daemon.core.sessions and daemon.core.registry.get(sid) is None
            assert mirror.state == "fenced" and "fenced" in mirror.problem
            assert "fenced" in caplog.text and "no longer writes it to the cluster" in caplog.text
            lines = [line for _, line in await Journal(link, USER, sid).lines()]
            assert lines[-1] == b_meta  # nothing of A's after B's take-over
            assert await SessionLease(bucket).owner(sid) == "node-b"  # A did not release B's lease


async def test_a_lease_taken_by_another_node_is_reported_at_renewal(
    home: Path, nats_server: NatsServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="agentbus.daemon")
    with trio.fail_after(60):
        async with node_daemon(home, nats_server.url, renew_every_s=0.1) as daemon, open_link(nats_server.url) as link:
            fake = write_responses(home / "f.responses", text_response("one"))
            async with client_of(home) as client:
                ready = await client.create_session(str(home / "ws"), fake_responses=str(fake), model="gemini-2.5-flash")
                mirror: SessionMirror = daemon.core.sessions[ready.session_id].mirror
                bucket = await link.bucket(lease_bucket(USER), ttl_s=10)
                held = await bucket.get(lease_key(ready.session_id))
                assert held is not None
                await bucket.delete(lease_key(ready.session_id), last=held[1])
                await SessionLease(bucket).acquire(ready.session_id, "node-b")
                await mirror.done.wait()
    assert mirror.state == "fenced" and "taken by node node-b" in mirror.problem
    assert "taken by node node-b" in caplog.text


async def test_a_session_another_node_holds_is_refused(home: Path, nats_server: NatsServer) -> None:
    with trio.fail_after(60):
        async with node_daemon(home, nats_server.url), open_link(nats_server.url) as link, client_of(home) as client:
            await SessionLease(await link.bucket(lease_bucket(USER), ttl_s=10)).acquire("held-elsewhere", "node-b")
            fake = write_responses(home / "f.responses", text_response("one"))
            from actors.frontends.daemon.client import DaemonError

            with pytest.raises(DaemonError, match="held by node node-b"):
                await client.create_session(
                    str(home / "ws"), session_id="held-elsewhere", fake_responses=str(fake), model="gemini-2.5-flash"
                )


def test_a_cluster_url_that_does_not_answer_stops_the_daemon_at_start(home: Path) -> None:
    url = f"nats://127.0.0.1:{free_port()}"
    done = agentbus(home, "daemon", "--cluster", url, timeout=60)
    assert done.returncode == 1
    assert f"no NATS server answers at {url}" in done.stderr
    assert not (home / "run" / "daemon.sock").exists()


async def test_a_mode_change_restarts_the_session_under_the_same_lease(home: Path, nats_server: NatsServer) -> None:
    """The restarted run's mirror takes over the old one's lease, journal and place in
    the file: the stream stays the local file, the lease never left the node."""
    fake = write_responses(home / "f.responses", text_response("one"), text_response("two"))
    with trio.fail_after(60):
        async with node_daemon(home, nats_server.url) as daemon:
            async with client_of(home) as client:
                ready = await client.create_session(str(home / "ws"), fake_responses=str(fake), model="gemini-2.5-flash")
                sid = ready.session_id
                first: SessionMirror = daemon.core.sessions[sid].mirror
                await client.subscribe(sid, from_seq=1)
                await client.prompt(sid, "first")
                await events_until(client)
                await client.set_mode(sid, "yolo")
                second: SessionMirror = daemon.core.sessions[sid].mirror
                assert second is not first and first.handed_over and second.lease == first.lease
                await client.prompt(sid, "second")
                await events_until(client)
        async with open_link(nats_server.url) as link:
            stored = b"".join(line + b"\n" for _, line in await Journal(link, USER, sid).lines())
    local = recording_path(home / "data", sid).read_bytes()
    assert stored == local and local.count(b'"kind":"meta"') == 2


nats_cluster = cluster_fixtures.nats_cluster


@pytest.mark.slow
async def test_a_node_with_replicas_goes_on_when_one_server_of_three_is_killed(
    home: Path, nats_cluster: list[NatsServer]
) -> None:
    """``--cluster-replicas 3``: the session's lines and lease live on all three servers;
    one killed (-9) mid-session, the mirror waits for the new leader and the stream
    still ends up as the local file."""
    urls = ",".join(s.url for s in nats_cluster)
    fake = write_responses(home / "f.responses", text_response("one"), text_response("two"))
    with trio.fail_after(120):
        async with node_daemon(home, urls, replicas=3) as daemon:
            async with client_of(home) as client:
                ready = await client.create_session(str(home / "ws"), fake_responses=str(fake), model="gemini-2.5-flash")
                sid = ready.session_id
                mirror: SessionMirror = daemon.core.sessions[sid].mirror
                await client.subscribe(sid, from_seq=1)
                await client.prompt(sid, "first")
                await events_until(client)
                nats_cluster[0].kill()
                await client.prompt(sid, "second")
                await events_until(client)
                await client.end_session(sid)
                await mirror.done.wait()  # its last lines in, however long the new leader took
                assert mirror.state == "ended"
        async with open_link(",".join(s.url for s in nats_cluster[1:])) as link:
            while True:
                try:
                    lines = await Journal(link, USER, sid).lines()
                    break
                except NoQuorum:
                    await trio.sleep(0.1)  # a retry's pause, as NoQuorum says
            stored = b"".join(line + b"\n" for _, line in lines)
    assert stored == recording_path(home / "data", sid).read_bytes()


async def test_refused_credentials_stop_the_node_at_start(home: Path, nursery: trio.Nursery) -> None:
    from actors.cluster import Credentials
    from actors.frontends.daemon import ClusterStartError

    guarded = NatsServer(name="guarded", store=home / "g", extra=("--user", "ann", "--pass", "s3cret"))
    await guarded.start(nursery)
    config = attrs.evolve(
        config_for(home), cluster=ClusterConfig(url=guarded.url, credentials=Credentials(user="ann", password="wrong"))
    )
    with trio.fail_after(30), pytest.raises(BaseException) as refused:
        await serve(config)
    found = refused.value
    while isinstance(found, BaseExceptionGroup) and len(found.exceptions) == 1:
        found = found.exceptions[0]
    assert isinstance(found, ClusterStartError) and "refused the credentials" in str(found)
    assert not (home / "run" / "daemon.sock").exists()
    await guarded.stop()


def test_cluster_options_without_a_cluster_are_refused(home: Path) -> None:
    done = agentbus(home, "daemon", "--cluster-user", "ann", timeout=60)
    assert done.returncode == 2 and "--cluster-user go(es) with --cluster" in done.stderr


async def test_a_mirror_that_fails_leaves_the_daemon_and_its_session_running(
    home: Path, nats_server: NatsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from actors.frontends.daemon import _cluster

    def unreadable(path: Path, pos: int) -> list[tuple[bytes, int]]:
        raise OSError(5, "Input/output error")

    fake = write_responses(home / "f.responses", text_response("one"))
    with trio.fail_after(60):
        async with node_daemon(home, nats_server.url) as daemon, client_of(home) as client:
            ready = await client.create_session(str(home / "ws"), fake_responses=str(fake), model="gemini-2.5-flash")
            mirror: SessionMirror = daemon.core.sessions[ready.session_id].mirror
            monkeypatch.setattr(_cluster, "complete_lines_from", unreadable)
            await client.subscribe(ready.session_id, from_seq=1)
            await client.prompt(ready.session_id, "first")
            await events_until(client)  # the session goes on
            await mirror.done.wait()
            assert mirror.state == "failed" and "Input/output error" in mirror.problem
            assert (await client.status()).pid  # and so does the daemon


@pytest.mark.slow
async def test_a_node_killed_mid_session_is_caught_up_when_the_session_resumes(home: Path, nats_server: NatsServer) -> None:
    """kill -9 of a node: the next node on that machine takes the dead one's lease over at
    once, and the stream gets what the dead node had not mirrored before the new run's
    lines: it ends up as the local file."""
    import getpass
    import signal

    user = getpass.getuser()
    fake = write_responses(home / "f.responses", text_response("one"), text_response("two"))
    with trio.fail_after(90):
        async with daemon_process(home, "--cluster", nats_server.url) as killed, client_of(home) as client:
            ready = await client.create_session(str(home / "ws"), fake_responses=str(fake), model="gemini-2.5-flash")
            sid = ready.session_id
            await client.subscribe(sid, from_seq=1)
            await client.prompt(sid, "first")
            await events_until(client)
            killed.proc.send_signal(signal.SIGKILL)
            await killed.proc.wait()
        async with open_link(nats_server.url) as link:
            dead = await SessionLease(await link.bucket(lease_bucket(user), ttl_s=10)).owner(sid)
        assert dead is not None and f":{killed.proc.pid}:" in dead
        fake2 = write_responses(home / "g.responses", text_response("again"))
        async with node_daemon(home, nats_server.url, user=user, node_id=default_node_id()), client_of(home) as client:
            await client.load_session(sid, fake_responses=str(fake2))
            await client.subscribe(sid)
            await client.prompt(sid, "after the kill")
            await events_until(client)
        async with open_link(nats_server.url) as link:
            stored = b"".join(line + b"\n" for _, line in await Journal(link, user, sid).lines())
    local = recording_path(home / "data", sid).read_bytes()
    assert stored == local and local.count(b'"kind":"meta"') == 2


async def test_a_node_runs_live_model_sessions_beside_its_nats_link(home: Path, nats_server: NatsServer) -> None:
    """Both asyncio bridges in one daemon (nats-py's and google-genai's, each its own
    trio-asyncio loop): a live-backend session on a node is answered and mirrored."""
    from actors.gateway import FakeEntry, live_backend
    from tests.fakes.gemini_server import FakeGeminiServer

    server = FakeGeminiServer([FakeEntry("generateContentStream", text_response("live answer")["response"], 0)])
    config = attrs.evolve(
        config_for(home),
        live_backend=lambda env, auth_type: live_backend(env, auth_type=auth_type),
        cluster=ClusterConfig(url=nats_server.url, user=USER, node_id="node-a"),
    )
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            await nursery.start(server.run)
            async with trio.open_nursery() as daemons:
                daemon: Daemon = await daemons.start(serve, config)
                async with client_of(home) as client:
                    auth = {"GEMINI_API_KEY": "key-0123456789abcdef", "GOOGLE_GEMINI_BASE_URL": server.base_url}
                    ready = await client.create_session(str(home / "ws"), model="gemini-2.5-flash", auth_env=auth)
                    await client.subscribe(ready.session_id)
                    await client.prompt(ready.session_id, "hi")
                    envs = await events_until(client)
                daemon.stop("test over")
            nursery.cancel_scope.cancel()
        assert any("live answer" in getattr(e.message, "text", "") for e in envs)
        async with open_link(nats_server.url) as link:
            stored = b"".join(line + b"\n" for _, line in await Journal(link, USER, ready.session_id).lines())
    assert stored == recording_path(home / "data", ready.session_id).read_bytes()


async def test_a_lease_that_expired_with_nobody_taking_it_is_taken_again(home: Path, nats_server: NatsServer) -> None:
    """As when the cluster was out of reach for longer than the TTL: the key is gone, no
    other node took it; the next renewal takes it again and the mirror goes on."""
    fake = write_responses(home / "f.responses", text_response("one"))
    with trio.fail_after(60), logged("taken again") as taken_again:
        async with open_link(nats_server.url) as link:
            async with node_daemon(home, nats_server.url, renew_every_s=0.1) as daemon, client_of(home) as client:
                ready = await client.create_session(str(home / "ws"), fake_responses=str(fake), model="gemini-2.5-flash")
                sid = ready.session_id
                mirror: SessionMirror = daemon.core.sessions[sid].mirror
                bucket = await link.bucket(lease_bucket(USER), ttl_s=10)
                held = await bucket.get(lease_key(sid))
                assert held is not None
                await bucket.delete(lease_key(sid), last=held[1])
                await taken_again.wait()
                assert await SessionLease(bucket).owner(sid) == "node-a" and mirror.state == "following"
                await client.subscribe(sid, from_seq=1)
                await client.prompt(sid, "after")
                await events_until(client)
            stored = b"".join(line + b"\n" for _, line in await Journal(link, USER, sid).lines())
    assert stored == recording_path(home / "data", sid).read_bytes()


async def test_the_users_settings_make_the_daemon_a_node(home: Path, nats_server: NatsServer) -> None:
    """``agentbus.cluster`` in ~/.gemini/settings.json (Gemini CLI passes keys it does
    not know through): a daemon started without options joins the cluster (as one that
    chat starts does); a wrong setting stops it with the setting's name."""
    settings = home / "home" / ".gemini" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(json.dumps({"agentbus": {"cluster": {"url": nats_server.url, "serve": [str(home / "ws")]}}}))
    with trio.fail_after(30):
        async with daemon_process(home) as node:
            assert f"of the cluster at {nats_server.url}" in node.log.decode()
            async with open_link(nats_server.url) as link:
                nodes = await link.bucket(nodes_bucket(getpass.getuser()), ttl_s=10)
                (advertised,) = [json.loads(value) for value, _ in (await nodes.items()).values()]
            assert advertised["serves"] == [str((home / "ws").resolve())]
    settings.write_text(json.dumps({"agentbus": {"cluster": {"url": nats_server.url, "replicas": "three"}}}))
    done = await trio.to_thread.run_sync(lambda: agentbus(home, "daemon"))
    assert done.returncode == 2 and "agentbus.cluster.replicas must be int" in done.stderr
    settings.write_text(json.dumps({"agentbus": {"cluster": {"url": nats_server.url, "passwd": "x"}}}))
    done = await trio.to_thread.run_sync(lambda: agentbus(home, "daemon"))
    assert done.returncode == 2 and "agentbus.cluster.passwd is not a setting" in done.stderr
