"""Bad input on the socket: each kind gets a protocol error, persistence gets the
connection closed, a client that never reads is dropped; the daemon and every other
session carry on. A hypothesis test fuzzes the socket with generated frames."""

from __future__ import annotations

import hashlib
import json
import tempfile
from pathlib import Path

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actors.frontends.daemon._protocol import OUTCOMES
from bus.codec import decode, encode
from bus.messages import (
    PROTOCOL_VERSION,
    Answer,
    CallTool,
    Cancel,
    CreateSession,
    Hello,
    ListSessions,
    LoadSession,
    Message,
    Prompt,
    ProtocolError,
    SessionList,
    SetMode,
    Subscribe,
    TextStreamed,
    TurnEnded,
    TurnStarted,
    Unsubscribe,
)
from tests.frontends.daemon._helpers import (
    client_of,
    running_daemon,
    text_response,
    write_responses,
)

SMALL_FRAME = 1 << 16
"""The frame limit of these tests' daemons (the real one, 64 MiB, would make each oversized
frame cost a second)."""


class Raw:
    """A hand-driven connection: frames out, decoded replies in."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.buf = b""

    async def send(self, data: bytes) -> None:
        await self.stream.send_all(data)

    async def reply(self) -> Message | None:
        while b"\n" not in self.buf:
            data = await self.stream.receive_some(1 << 16)
            if not data:
                return None
            self.buf += data
        line, self.buf = self.buf.split(b"\n", 1)
        return decode(line)


async def raw(home: Path) -> Raw:
    return Raw(await trio.open_unix_socket(str(home / "run" / "daemon.sock")))


def frame(msg: Message) -> bytes:
    return (encode(msg) + "\n").encode()


async def test_each_kind_of_bad_input_is_refused_and_persistence_closes_the_connection(home: Path) -> None:
    with trio.fail_after(20):
        async with running_daemon(home, max_frame=SMALL_FRAME):
            c = await raw(home)
            await c.send(frame(Hello(request_id="h", protocol=PROTOCOL_VERSION)))
            assert (await c.reply()).__class__.__name__ == "Welcome"
            bad = [
                b"{not json\n",
                b"x" * (SMALL_FRAME + 1) + b"\n",
                json.dumps({"type": "Bogus", "request_id": "u"}).encode() + b"\n",
                frame(Prompt(session_id="someone-elses", request_id="p", text="hi")),
            ]
            codes = []
            for data in bad:
                await c.send(data)
                err = await c.reply()
                assert isinstance(err, ProtocolError)
                codes.append(err.code)
                await c.send(frame(ListSessions(request_id="still")))  # still served
                assert isinstance(await c.reply(), SessionList)
            assert codes == ["bad_frame", "frame_too_large", "bad_frame", "not_yours"]
            await c.send(b"[]\n")
            last = await c.reply()
            assert isinstance(last, ProtocolError) and last.fatal and last.code == "too_many_errors"
            assert await c.reply() is None  # closed
            await c.stream.aclose()
            # A frame before the hello closes at once.
            c = await raw(home)
            await c.send(frame(ListSessions(request_id="x")))
            first = await c.reply()
            assert isinstance(first, ProtocolError) and first.code == "hello_required"
            assert await c.reply() is None
            await c.stream.aclose()


@pytest.mark.parametrize(
    "fields",
    [
        {"type": "ListSessions", "request_id": None},
        {"type": "ListSessions", "request_id": 5},
        {"type": "ListSessions", "request_id": ["a"]},
        {"type": "CreateSession", "request_id": "c", "workspace": 5},
        {"type": "CreateSession", "request_id": "c", "workspace": "/", "fake_chunk_delay_ms": "5"},
        {"type": "CreateSession", "request_id": "c", "workspace": "/", "fake_chunk_delay_ms": True},
        {"type": "Subscribe", "request_id": "s", "session_id": 123, "from_seq": 1},
    ],
    ids=lambda fields: f"{fields['type']} {next(k for k in reversed(fields) if k != 'type')}",
)
async def test_a_field_of_the_wrong_type_is_a_bad_frame_not_converted(home: Path, fields: dict[str, object]) -> None:
    """A null request id was answered as "None", a number of milliseconds in a string
    taken, a session named 123 created: cattrs converts what it can."""
    with trio.fail_after(20):
        async with running_daemon(home):
            c = await raw(home)
            await c.send(frame(Hello(request_id="h", protocol=PROTOCOL_VERSION)))
            assert (await c.reply()).__class__.__name__ == "Welcome"
            await c.send(json.dumps(fields).encode() + b"\n")
            err = await c.reply()
            assert isinstance(err, ProtocolError) and err.code == "bad_frame", err
            await c.send(frame(ListSessions(request_id="still")))
            assert isinstance(await c.reply(), SessionList)  # the connection goes on
            await c.stream.aclose()


@pytest.mark.parametrize(
    ("fields", "why"),
    [
        ({"type": "ListSessions", "workspace": "/tmp/\u0000"}, "workspace: a path cannot hold a NUL character"),
        ({"type": "CreateSession", "workspace": "/" + "w" * 5000}, "workspace: the path is longer than the system allows"),
        ({"type": "CreateSession", "workspace": "/tmp", "fake_responses": "f\u0000"}, "fake_responses: a path cannot hold a NUL"),
    ],
    ids=["nul", "long", "nul fake"],
)
async def test_a_path_no_system_call_takes_is_refused_as_invalid(
    home: Path, fields: dict[str, object], why: str, caplog: pytest.LogCaptureFixture
) -> None:
    with trio.fail_after(20):
        async with running_daemon(home):
            c = await raw(home)
            await c.send(frame(Hello(request_id="h", protocol=PROTOCOL_VERSION)))
            assert (await c.reply()).__class__.__name__ == "Welcome"
            await c.send(json.dumps({**fields, "request_id": "r"}).encode() + b"\n")
            err = await c.reply()
            assert isinstance(err, ProtocolError) and err.code == "invalid" and err.message.startswith(why), err
            await c.stream.aclose()
    assert "Traceback" not in caplog.text


async def test_a_client_that_never_reads_is_dropped_and_the_session_goes_on(home: Path) -> None:
    words = [" ".join(hashlib.sha256(f"{i}.{j}".encode()).hexdigest()[:14] for j in range(27)) for i in range(200)]
    fake = write_responses(home / "long.responses", text_response(*words), text_response("again"))
    with trio.fail_after(30):
        async with running_daemon(home, send_frames=4, subscription_capacity=8, stall_timeout_s=0.5, socket_send_buffer=4096) as daemon:
            async with client_of(home) as good:
                sid = (await good.create_session(str(home / "ws"), fake_responses=str(fake), model="gemini-2.5-flash")).session_id
                sleeper = await raw(home)
                await sleeper.send(
                    frame(Hello(request_id="h", protocol=PROTOCOL_VERSION, client="sleeper"))
                    + frame(Subscribe(session_id=sid, request_id="s", from_seq=1, full=True))
                )
                await good.subscribe(sid, from_seq=1)
                await good.prompt(sid, "go")
                await own_turn_end(good, None)
                # It is dropped for not reading (unless that happened already)...
                for conn in [c for c in daemon.connections.values() if c.client == "sleeper"]:
                    await conn.done.wait()
                # ... and what it finally reads ends in EOF.
                try:
                    while await sleeper.stream.receive_some(1 << 16):
                        pass
                except trio.BrokenResourceError:
                    pass
                status = await good.status()
                assert [c.client for c in status.connections] == ["test"]
                assert daemon.connections
                await good.prompt(sid, "again")
                await own_turn_end(good, None)
                await sleeper.stream.aclose()


async def test_a_response_of_the_wrong_shape_fails_its_turn_not_the_daemon(home: Path) -> None:
    """The gateway serves every session of the daemon: a chunk it could not read used
    to stop it, and the daemon with it."""
    bad = home / "bad.responses"
    bad.write_text(json.dumps({"method": "generateContentStream", "response": [{"candidates": 5}]}) + "\n")
    good_fake = write_responses(home / "good.responses", text_response("fine"))
    with trio.fail_after(30):
        async with running_daemon(home), client_of(home) as client:
            good = (await client.create_session(str(home / "ws"), fake_responses=str(good_fake), model="gemini-2.5-flash")).session_id
            broken = (await client.create_session(str(home / "ws"), fake_responses=str(bad), model="gemini-2.5-flash")).session_id
            await client.subscribe(broken, from_seq=1)
            prompt_id = (await client.prompt(broken, "hi")).prompt_id
            failed = await own_turn_end(client, prompt_id)
            assert failed.stop_reason == "error" and failed.error is not None
            assert "the response cannot be used: candidates is a number, not a list" in failed.error.message
            await client.subscribe(good, from_seq=1)
            prompt_id = (await client.prompt(good, "hi")).prompt_id
            assert (await own_turn_end(client, prompt_id)).stop_reason == "end_turn"
            assert (await client.prompt(broken, "again")).prompt_id  # that session goes on too


async def test_a_prompt_of_parts_that_are_not_parts_is_refused_and_its_session_goes_on(home: Path) -> None:
    """Such a prompt was taken: its session died of it, and its recording could not be
    loaded again (the history held the bad part)."""
    from actors.frontends.daemon.client import DaemonError
    from bus.messages import new_id

    fake = write_responses(home / "f.responses", text_response("first"), text_response("second"))
    bad: list[tuple[str, tuple[object, ...]]] = [
        ("parts", (1,)),
        ("parts", (None,)),
        ("parts", ("x",)),
        ("parts", ({"text": 5},)),
        ("parts", ({"text": "ok"}, {"inlineData": {"mimeType": "image/png", "data": 5}})),
        ("attachments", ([],)),
        ("attachments", ({"fileData": "gs://x"},)),
    ]
    with trio.fail_after(30):
        async with running_daemon(home), client_of(home) as client:
            sid = (await client.create_session(str(home / "ws"), fake_responses=str(fake), model="gemini-2.5-flash")).session_id
            await client.subscribe(sid, from_seq=1)
            for i, (field, value) in enumerate(bad):
                # Each from a connection of its own: refused frames count toward a
                # connection's limit (MAX_ERRORS).
                async with client_of(home, f"sender-{i}") as sender:
                    await sender.load_session(sid)
                    try:
                        await sender.request(Prompt(session_id=sid, request_id=new_id(), text="hi", **{field: value}))
                    except DaemonError as exc:
                        assert exc.code == "invalid" and "a prompt's parts are Gemini API parts: part " in str(exc), exc
                    else:
                        raise AssertionError(f"{field}={value!r} was taken")
            prompt_id = (await client.prompt(sid, "hi", parts=({"text": "hi"},))).prompt_id
            assert (await own_turn_end(client, prompt_id)).stop_reason == "end_turn"
            await client.end_session(sid)
            await client.load_session(sid, fake_responses=str(fake))  # its recording reads back
            await client.subscribe(sid, from_seq=1)
            prompt_id = (await client.prompt(sid, "again")).prompt_id
            assert (await own_turn_end(client, prompt_id)).stop_reason == "end_turn"


async def own_turn_end(client: object, prompt_id: str | None) -> TurnEnded:
    from bus import Envelope

    mine: set[str] = set()
    async for event in client.events:  # type: ignore[attr-defined]
        if not isinstance(event, Envelope):
            continue
        msg = event.message
        if isinstance(msg, TurnStarted) and (prompt_id is None or msg.prompt_id == prompt_id):
            mine.add(msg.turn_id)
        if isinstance(msg, TurnEnded) and msg.turn_id in mine:
            return msg
    raise AssertionError("closed")


# -- fuzzing ---------------------------------------------------------------------------------------------
ids = st.text(max_size=6)
sids = st.sampled_from(["GOOD", "nope", ""]) | st.text(max_size=8)
requests = st.one_of(
    st.builds(Hello, request_id=ids, protocol=st.integers(0, 2), client=st.text(max_size=5)),
    st.builds(ListSessions, request_id=ids, workspace=st.text(max_size=10)),
    st.builds(CreateSession, request_id=ids, workspace=st.sampled_from(["", "relative", "/nonexistent/x"])),
    st.builds(LoadSession, session_id=sids, request_id=ids),
    st.builds(Subscribe, session_id=sids, request_id=ids, from_seq=st.none() | st.integers(-3, 50), full=st.booleans()),
    st.builds(Unsubscribe, session_id=sids, request_id=ids),
    st.builds(Prompt, session_id=sids, request_id=ids, text=st.text(max_size=20)),
    st.builds(Cancel, session_id=sids, request_id=ids, tool_request_id=st.sampled_from(["", "t"])),
    st.builds(Answer, session_id=sids, request_id=ids, correlation_id=ids, outcome=st.sampled_from(OUTCOMES) | ids),
    st.builds(SetMode, session_id=st.sampled_from(["nope", ""]), request_id=ids, approval_mode=ids),
    st.builds(
        CallTool,
        session_id=sids,
        request_id=ids,
        name=st.sampled_from(["read_file", "glob", "no_such_tool"]),
        args=st.dictionaries(st.sampled_from(["file_path", "pattern", "x"]), st.text(max_size=8), max_size=2),
    ),
    st.builds(TextStreamed, session_id=sids, turn_id=ids, text=ids),
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
frames_st = st.lists(
    st.one_of(
        st.binary(max_size=64).map(lambda b: b + b"\n"),
        st.binary(max_size=64),
        json_values.map(lambda v: json.dumps(v).encode() + b"\n"),
        requests.map(lambda m: (encode(m) + "\n").encode()),
        st.just(b"y" * (SMALL_FRAME + 3) + b"\n"),
    ),
    min_size=1,
    max_size=10,
)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(hello=st.booleans(), frames=frames_st)
def test_fuzzed_frames_never_stop_the_daemon_serving_a_well_behaved_client(home: Path, hello: bool, frames: list[bytes]) -> None:
    root = Path(tempfile.mkdtemp(dir=home, prefix="f"))
    (root / "ws").mkdir()
    fake = write_responses(root / "f.responses", *[text_response(f"answer {i}") for i in range(40)])

    async def scenario() -> None:
        with trio.fail_after(30):
            async with running_daemon(root, max_frame=SMALL_FRAME), client_of(root, "good") as good:
                sid = (await good.create_session(str(root / "ws"), fake_responses=str(fake), model="gemini-2.5-flash")).session_id
                await good.subscribe(sid)
                fuzz = await raw(root)
                data = frame(Hello(request_id="h", protocol=PROTOCOL_VERSION)) if hello else b""
                data += b"".join(f.replace(b'"GOOD"', json.dumps(sid).encode()) for f in frames)
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(drain, fuzz)
                    try:
                        await fuzz.send(data)
                        await fuzz.stream.send_eof()
                    except (trio.BrokenResourceError, trio.ClosedResourceError):
                        pass  # the daemon closed it: fine
                await fuzz.stream.aclose()
                accepted = await good.prompt(sid, "still there?")
                ended = await own_turn_end(good, accepted.prompt_id)
                assert ended.stop_reason in ("end_turn", "cancelled")
                assert (await good.list_sessions()).sessions

    trio.run(scenario)


async def drain(c: Raw) -> None:
    """Read what the daemon answers until it closes the connection (or stops writing)."""
    with trio.move_on_after(2):
        try:
            while await c.stream.receive_some(1 << 16):
                pass
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
