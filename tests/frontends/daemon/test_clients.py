"""System tests on real Unix sockets: several clients on one session, reconnecting
with a sequence number, a stalled client, approvals answered by two clients."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import trio

from actors.frontends.daemon.client import DaemonClient
from bus import Envelope
from bus.codec import encode
from bus.messages import (
    ApprovalRequested,
    ApprovalSettled,
    ObserverLagged,
    TurnEnded,
)
from tests.frontends.daemon._helpers import (
    call_response,
    client_of,
    events_until,
    running_daemon,
    text_response,
    types,
    write_responses,
)


def approval_script(home: Path) -> Path:
    return write_responses(
        home / "approve.responses",
        call_response("write_file", {"file_path": "notes.txt", "content": "milk\n"}),
        text_response("Saved", " notes.txt."),
    )


def frames(envs: list[Envelope]) -> list[tuple[int, str]]:
    return [(e.seq, encode(e.message)) for e in envs]


async def test_two_clients_see_identical_sequences_and_the_first_answer_wins(home: Path) -> None:
    fake = approval_script(home)
    with trio.fail_after(30):
        async with running_daemon(home), client_of(home, "a") as a, client_of(home, "b") as b:
            ready = await a.create_session(str(home / "ws"), fake_responses=str(fake), model="gemini-2.5-flash")
            sid = ready.session_id
            await b.load_session(sid)
            await a.subscribe(sid, from_seq=1)
            await b.subscribe(sid, from_seq=1)
            await a.prompt(sid, "Write my note to notes.txt.")
            asked_a = await events_until(a, lambda m: isinstance(m, ApprovalRequested))
            asked_b = await events_until(b, lambda m: isinstance(m, ApprovalRequested))
            request = asked_a[-1].message
            assert isinstance(request, ApprovalRequested)
            # Both answer; b's answer is sent first and wins, a is told.
            await b.answer(sid, request.correlation_id, "proceed_once")
            await a.answer(sid, request.correlation_id, "cancel")
            rest_a = await events_until(a)
            rest_b = await events_until(b)
            all_a, all_b = asked_a + rest_a, asked_b + rest_b
            assert frames(all_a) == frames(all_b)
            settled = [e.message for e in all_a if isinstance(e.message, ApprovalSettled)]
            assert settled[0].answered_by == b.address and settled[0].outcome == "proceed_once"
            assert settled[1].outcome == ""  # a's late answer: told it was taken
            ended = all_a[-1].message
            assert isinstance(ended, TurnEnded) and ended.stop_reason == "end_turn"
            assert (home / "ws" / "notes.txt").read_text() == "milk\n"


async def test_a_client_that_disconnects_mid_turn_resumes_from_its_last_seq(home: Path) -> None:
    fake = approval_script(home)
    with trio.fail_after(30):
        async with running_daemon(home), client_of(home, "witness") as witness:
            ready = await witness.create_session(str(home / "ws"), fake_responses=str(fake), model="gemini-2.5-flash")
            sid = ready.session_id
            await witness.subscribe(sid, from_seq=1)
            async with client_of(home, "leaver") as leaver:
                await leaver.subscribe(sid, from_seq=1)
                await leaver.prompt(sid, "Write my note to notes.txt.")
                before = await events_until(leaver, lambda m: isinstance(m, ApprovalRequested))
            # Gone mid-turn. The turn goes on without it.
            asked = await events_until(witness, lambda m: isinstance(m, ApprovalRequested))
            request = asked[-1].message
            assert isinstance(request, ApprovalRequested)
            await witness.answer(sid, request.correlation_id, "proceed_once")
            everything = asked + await events_until(witness)
            async with client_of(home, "returner") as returner:
                sub = await returner.subscribe(sid, from_seq=before[-1].seq + 1)
                assert sub.next_seq > sub.from_seq  # what it missed comes from the recording
                after = await events_until(returner)
            assert frames(before + after) == frames(everything)


async def test_a_stalled_client_does_not_slow_the_others_and_resyncs_without_a_gap(home: Path) -> None:
    chunks = [" ".join(hashlib.sha256(f"{i}.{j}".encode()).hexdigest()[:14] for j in range(27)) for i in range(200)]
    fake = write_responses(home / "long.responses", text_response(*chunks))
    with trio.fail_after(60):
        async with running_daemon(home, send_frames=8, subscription_capacity=16, stall_timeout_s=60, socket_send_buffer=4096) as daemon:
            async with client_of(home, "fast") as fast:
                ready = await fast.create_session(str(home / "ws"), fake_responses=str(fake), model="gemini-2.5-flash")
                sid = ready.session_id
                # The stalled client: hello, subscribe to everything, then never read.
                stalled = await trio.open_unix_socket(str(home / "run" / "daemon.sock"))
                await stalled.send_all(
                    (encode_request("Hello", request_id="h", protocol=1, client="stalled")
                     + encode_request("LoadSession", session_id=sid, request_id="l")
                     + encode_request("Subscribe", session_id=sid, request_id="s", from_seq=1, full=True)).encode()
                )
                await fast.subscribe(sid, from_seq=1, full=True)
                await fast.prompt(sid, "talk a lot")
                seen = await events_until(fast)
                assert sum(1 for t in types(seen) if t == "TextStreamed") == len(chunks)
                # The session finished while the stalled client's buffer was full.
                conn = next(c for c in daemon.connections.values() if c.client == "stalled")
                summary = conn.summary()
                assert summary.stalled and summary.queued_frames == 8
                assert summary.lagged >= 1
                # Now it reads: it is told it lagged and gets everything, no gap, no duplicate.
                got = await read_raw_until_turn_end(stalled)
                envs = [e for e in got if isinstance(e, Envelope)]
                assert any(isinstance(e, ObserverLagged) for e in got)
                assert frames(envs) == frames(seen)
                await stalled.aclose()


def encode_request(kind: str, **fields: object) -> str:
    return json.dumps({"type": kind, **fields}) + "\n"


async def read_raw_until_turn_end(stream: trio.SocketStream) -> list[object]:
    from bus.codec import decode, decode_envelope

    buf = b""
    out: list[object] = []
    while True:
        data = await stream.receive_some(1 << 16)
        assert data, "closed"
        buf += data
        *lines, buf = buf.split(b"\n")
        for line in lines:
            if line.startswith(b'{"v":'):
                env, _ = decode_envelope(line)
                out.append(env)
                if isinstance(env.message, TurnEnded):
                    return out
            else:
                out.append(decode(line))


async def _unused(client: DaemonClient) -> None:  # keeps the import for type hints
    del client
