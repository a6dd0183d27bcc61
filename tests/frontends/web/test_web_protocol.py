"""``agentbus web`` on real sockets: who gets in (the token, the Host, the Origin), what a
bad frame gets, and the page as a client of the daemon — two pages on one session, a
page that goes away while an approval waits, a page that resyncs by sequence number."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio

from actors.frontends.daemon.paths import DaemonPaths
from actors.frontends.web import BridgeOptions, WebApp, serve
from tests.frontends.daemon._helpers import write_responses
from tests.frontends.web._helpers import (
    Refused,
    handshake,
    http,
    page,
    stream_response,
    web_server,
)

WRITE = {"file_path": "out.txt", "content": "approved\n"}


def scripted(home: Path) -> Path:
    """A model that asks to write a file (an approval in default mode), then says so."""
    return write_responses(
        home / "f.responses",
        stream_response("I will ", "write it.", call=("write_file", WRITE)),
        stream_response("Written."),
    )


async def test_every_http_request_needs_the_token_and_a_missing_or_wrong_one_gets_403_alone(home: Path) -> None:
    with trio.fail_after(30):
        async with web_server(home) as s:
            for target in ("/", "/?token=", "/?token=wrong", "/ws", "/favicon.ico", "/anything?token=nope"):
                for method in ("GET", "POST", "HEAD"):
                    got = await http(s.port, target, method=method)
                    assert got.status == 403, (method, target)
                    assert b"<" not in got.body and got.body.count(b"\n") <= 1, got.body  # one line, no page
            got = await http(s.port, f"/?token={s.token}")
            assert got.status == 200 and got.body.startswith(b"<!doctype html>")
            csp = got.headers["content-security-policy"]
            assert "frame-ancestors 'none'" in csp and "connect-src 'self'" in csp and "unsafe-inline" not in csp
            nonce = csp.split("'nonce-", 1)[1].split("'", 1)[0]
            assert f'<script nonce="{nonce}">'.encode() in got.body and b"{{nonce}}" not in got.body
            assert got.headers["referrer-policy"] == "no-referrer"  # the token is in the URL
            assert (await http(s.port, f"/nothing?token={s.token}")).status == 404
            assert (await http(s.port, f"/?token={s.token}", method="POST")).status == 405


async def test_another_origin_or_host_is_refused_even_with_the_token(home: Path) -> None:
    with trio.fail_after(30):
        async with web_server(home) as s:
            target = f"/?token={s.token}"
            for origin in ("http://evil.example", "null", f"http://127.0.0.1:{s.port + 1}", f"https://127.0.0.1:{s.port}"):
                got = await http(s.port, target, headers={"Origin": origin})
                assert got.status == 403 and b"another origin" in got.body, origin
                with pytest.raises(Refused) as refused:
                    await handshake(s.port, f"/ws?token={s.token}", origin=origin)
                assert refused.value.status == 403 and b"another origin" in refused.value.body
            # DNS rebinding: another site's name pointed at 127.0.0.1 is not this server.
            for host in (f"evil.example:{s.port}", "127.0.0.1", f"127.0.0.1:{s.port + 1}"):
                got = await http(s.port, target, headers={"Host": host})
                assert got.status == 403 and b"is not this server" in got.body, host
            with pytest.raises(Refused) as refused:
                await handshake(s.port, f"/ws?token={s.token}", host=f"rebound.example:{s.port}")
            assert refused.value.status == 403
            # Its own origin, by either loopback name, and a client that sends none.
            assert (await http(s.port, target, headers={"Origin": f"http://127.0.0.1:{s.port}"})).status == 200
            localhost = {"Host": f"localhost:{s.port}", "Origin": f"http://localhost:{s.port}"}
            assert (await http(s.port, target, headers=localhost)).status == 200
            async with page(s, origin=None) as p:
                assert (await p.ok("sessions"))["sessions"] == []


async def test_the_websocket_needs_the_token(home: Path) -> None:
    with trio.fail_after(30):
        async with web_server(home) as s:
            for target in ("/ws", "/ws?token=", "/ws?token=wrong", f"/ws?tok={s.token}"):
                with pytest.raises(Refused) as refused:
                    await handshake(s.port, target)
                assert refused.value.status == 403 and b"token" in refused.value.body, target
            with pytest.raises(Refused) as refused:
                await handshake(s.port, f"/other?token={s.token}")
            assert refused.value.status == 404
            async with page(s) as p:
                assert (await p.ok("sessions"))["sessions"] == []


async def test_a_bad_frame_gets_a_one_line_error_and_the_page_goes_on(home: Path) -> None:
    with trio.fail_after(30):
        async with web_server(home, scripted(home)) as s, page(s) as p:
            sid = (await p.ok("new"))["session"]["session_id"]
            bad = [
                "not json",
                "[1, 2]",
                '{"id": 1, "op": "launch"}',
                '{"id": 2}',
                '{"id": [1], "op": "sessions"}',
                '{"id": 3, "op": "prompt", "session_id": "' + sid + '", "text": "  "}',
                '{"id": 4, "op": "prompt", "session_id": "' + sid + '", "text": 7}',
                '{"id": 5, "op": "prompt", "session_id": "0000-not-opened-here", "text": "hi"}',
                '{"id": 6, "op": "answer", "session_id": "' + sid + '", "correlation_id": "c", "outcome": "maybe"}',
                '{"id": 7, "op": "answer", "session_id": "' + sid + '", "outcome": "cancel"}',
                '{"id": 8, "op": "open", "session_id": "../../etc", "from_seq": 1}',
                '{"id": 9, "op": "open", "session_id": "' + sid + '", "from_seq": "1"}',
                '{"id": 10, "op": "open", "session_id": "' + sid + '", "from_seq": 0}',
                '{"id": 11, "op": "cancel"}',
                "[" * 100_000 + "]" * 100_000,
            ]
            for text in bad:
                await p.send_text(text)
                got = await p.until(lambda f: f.get("type") == "error")
                assert got["message"] and "\n" not in got["message"], (text[:40], got)
            await p.send_bytes(b"\x00\x01")
            got = await p.until(lambda f: f.get("type") == "error")
            assert "binary" in got["message"]
            # More refusals than the daemon allows a connection (5): they were the page
            # server's, so the daemon connection is whole and the page carries on.
            assert (await p.ok("open", session_id=sid, from_seq=1))["session"]["session_id"] == sid
            await p.ok("prompt", session_id=sid, text="write it")
            asked = await p.event("ApprovalRequested")
            await p.ok("answer", session_id=sid, correlation_id=asked["msg"]["correlation_id"], outcome="proceed_once")
            ended = await p.event("TurnEnded")
            assert ended["msg"]["stop_reason"] == "end_turn"
            assert p.closed is None


async def test_two_pages_on_one_session_see_the_same_events_and_one_answers_for_both(home: Path) -> None:
    with trio.fail_after(30):
        async with web_server(home, scripted(home)) as s, page(s) as a, page(s) as b:
            sid = (await a.ok("new"))["session"]["session_id"]
            await a.ok("open", session_id=sid, from_seq=1)
            listed = (await b.ok("sessions"))["sessions"]
            assert [x["session_id"] for x in listed] == [sid]
            await b.ok("open", session_id=sid, from_seq=1)
            await a.ok("prompt", session_id=sid, text="write it")
            asked_a, asked_b = await a.event("ApprovalRequested"), await b.event("ApprovalRequested")
            assert asked_a == asked_b and asked_a["msg"]["details"]["newContent"] == "approved\n"
            cid = asked_b["msg"]["correlation_id"]
            await b.ok("answer", session_id=sid, correlation_id=cid, outcome="proceed_once")
            settled = await a.event("ApprovalSettled")
            # Each page knows its daemon address: whether it answered itself.
            hello_a, hello_b = a.frames[0], b.frames[0]
            assert hello_a["type"] == hello_b["type"] == "hello" and hello_a["address"] != hello_b["address"]
            assert settled["msg"]["outcome"] == "proceed_once" and settled["msg"]["answered_by"] == hello_b["address"]
            await a.event("TurnEnded")
            await b.event("TurnEnded")
            seqs_a, seqs_b = [e["seq"] for e in a.events()], [e["seq"] for e in b.events()]
            assert seqs_a == seqs_b == sorted(set(seqs_a))  # in order, no duplicate
            text = "".join(e["msg"]["text"] for e in a.events() if e["msg"]["type"] == "TextStreamed")
            assert text == "I will write it.Written."
            done = next(f for f in a.frames if f.get("type") == "event" and f["env"]["msg"]["type"] == "BatchSettled")
            assert list(done["shown"].values()) != [""]  # what the page shows of the result
    assert (home / "ws" / "out.txt").read_text() == "approved\n"


async def test_a_page_gone_mid_approval_loses_nothing_and_the_next_page_resyncs_and_answers(home: Path) -> None:
    with trio.fail_after(30):
        async with web_server(home, scripted(home)) as s:
            async with page(s) as first:
                sid = (await first.ok("new"))["session"]["session_id"]
                await first.ok("open", session_id=sid, from_seq=1)
                await first.ok("prompt", session_id=sid, text="write it")
                asked = await first.event("ApprovalRequested")
                seen = [e["seq"] for e in first.events()]
            # (closed without a close frame: the tab was killed)
            assert not (home / "ws" / "out.txt").exists()
            async with page(s) as again:
                # The same tab reconnecting: from the sequence number after its last.
                resumed = await again.ok("open", session_id=sid, from_seq=seen[-1] + 1)
                assert resumed["session"]["pending_approvals"] == [asked["msg"]["correlation_id"]]
                again_asked = await again.event("ApprovalRequested")  # still waiting: asked again
                assert again_asked == asked
                await again.ok("answer", session_id=sid, correlation_id=asked["msg"]["correlation_id"], outcome="proceed_once")
                ended = await again.event("TurnEnded")
                assert ended["msg"]["stop_reason"] == "end_turn"
                later = [e["seq"] for e in again.events() if e["seq"] > seen[-1]]
            async with page(s) as whole:
                await whole.ok("open", session_id=sid, from_seq=1)
                await whole.until(lambda f: f.get("type") == "caught_up")
                # The two connections together got what one from the start gets: no gap, no duplicate.
                assert seen + later == [e["seq"] for e in whole.events()]
    assert (home / "ws" / "out.txt").read_text() == "approved\n"


async def test_a_page_whose_daemon_cannot_start_is_told_so_in_one_line_and_closed(home: Path) -> None:
    run = home / "a-file"
    run.write_text("")  # the daemon's directory cannot be made: no daemon starts
    app = WebApp(token="k" * 24, bridge=BridgeOptions(workspace=home / "ws"), where=DaemonPaths(run))
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            serving = await nursery.start(serve, app)
            p = await handshake(serving.port, f"/ws?token={app.token}")
            try:
                got = await p.frame()
                assert got["type"] == "closed" and "the daemon did not start" in got["message"], got
                assert "\n" not in got["message"]
                with pytest.raises(EOFError):
                    await p.frame()
                assert p.closed == 1011
            finally:
                await p.aclose()
                serving.stop.set()


async def test_a_frame_over_the_limit_closes_only_that_socket_with_1009(home: Path) -> None:
    from actors.frontends.web._server import MAX_WS_MESSAGE

    with trio.fail_after(30):
        async with web_server(home, scripted(home)) as s, page(s) as other:
            sid = (await other.ok("new"))["session"]["session_id"]
            async with page(s) as p:
                await p.send_text(json.dumps({"id": 1, "op": "prompt", "session_id": sid, "text": "x" * MAX_WS_MESSAGE}))
                with pytest.raises(EOFError):
                    while True:
                        await p.frame()
                assert p.closed == 1009  # message too big: the page says so and reconnects
            # The other page, its session and the daemon are untouched.
            await other.ok("open", session_id=sid, from_seq=1)
            await other.ok("prompt", session_id=sid, text="write it")
            await other.event("ApprovalRequested")
