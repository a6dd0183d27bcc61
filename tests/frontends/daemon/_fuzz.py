"""Adversarial frames from a seeded generator, for the fuzz tests of the daemon's socket
and ACP's stdin: each frame is built to be refused (so each must get exactly one error
reply), from the kinds a decoder breaks on: nesting deeper than the stack, integers
longer than Python converts, lone surrogates (escaped and as bytes), bytes that are not
UTF-8, truncated frames, wrong field types, unknown tags, NaN, extra keys, random bytes,
and lines longer than the limit. ``fuzz`` is a client that sends them to the daemon and
checks each is answered with exactly one error (the socket fuzz test, ``make bench``)."""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable
from pathlib import Path

import attrs
import trio

from bus.codec import decode, encode
from bus.messages import (
    PROTOCOL_VERSION,
    Answer,
    Cancel,
    Hello,
    ListSessions,
    Message,
    Prompt,
    ProtocolError,
    SessionList,
    Subscribe,
    TextStreamed,
    Welcome,
)

Kind = Callable[[random.Random], bytes]
"""One kind of bad content (no newline in it; a line of its own once ``+ b"\\n"``)."""


def deep(rng: random.Random) -> bytes:
    depth = rng.choice([1_000, 5_000, 100_000])
    return rng.choice([b"[", b'{"a":']) * depth


def huge_integer(rng: random.Random) -> bytes:
    return b"9" * rng.randint(4_301, 20_000)


def lone_surrogate(rng: random.Random) -> bytes:
    high = rng.random() < 0.5
    unit = rng.randint(0xD800, 0xDBFF) if high else rng.randint(0xDC00, 0xDFFF)
    return json.dumps(f"a{chr(unit)}b").encode()  # json.dumps escapes it: "\udXXX"


def surrogate_bytes(rng: random.Random) -> bytes:
    return b'"' + chr(rng.randint(0xD800, 0xDFFF)).encode("utf-8", "surrogatepass") + b'"'


def not_utf8(rng: random.Random) -> bytes:
    return b'"' + bytes([rng.choice([0x80, 0xC0, 0xFE, 0xFF])]) + b'x"'


def random_bytes(rng: random.Random) -> bytes:
    data = bytes(rng.randrange(256) for _ in range(rng.randint(1, 200))).replace(b"\n", b"")
    return b"#" + data  # never blank, never JSON


def truncated(text: bytes, rng: random.Random) -> bytes:
    return text[: rng.randint(1, len(text) - 1)]


VALUES: dict[str, Kind] = {
    "deep": deep,
    "huge integer": huge_integer,
    "lone surrogate": lone_surrogate,
    "surrogate bytes": surrogate_bytes,
    "not UTF-8": not_utf8,
    "NaN": lambda rng: b"NaN",
}
"""JSON texts of values no field may hold, by name."""


def bad_value(rng: random.Random) -> tuple[str, bytes]:
    name = rng.choice(list(VALUES))
    return name, VALUES[name](rng)


def daemon_frame(rng: random.Random, session_id: str) -> bytes:
    """A frame the daemon must refuse on a connection that said hello and opened no
    session (``session_id`` is someone else's)."""
    rid = f"z{rng.randrange(10**6)}"
    good = [
        encode(ListSessions(request_id=rid, workspace="/w")),
        encode(Subscribe(session_id="nope", request_id=rid, from_seq=3)),
        encode(Prompt(session_id=session_id, request_id=rid, text="hijack")),
    ]
    base = rng.choice(good).encode()
    kind = rng.randrange(12)
    if kind == 0:
        return deep(rng)
    if kind == 1:  # a bad value in a field (of requests refused whatever the value)
        template = rng.choice(
            [
                b'{"type":"Subscribe","session_id":"nope","request_id":"%s","from_seq":%s}',
                b'{"type":"Prompt","session_id":"%s","request_id":"%%s","text":%%s}' % session_id.encode(),
            ]
        )
        return template % (rid.encode(), bad_value(rng)[1])
    if kind == 2:
        return truncated(base, rng)
    if kind == 3:  # an unknown tag
        return json.dumps({"type": rng.choice(["Bogus", "", "prompt", "__class__"]), "request_id": rid}).encode()
    if kind == 4:  # a wrong type where a number or object must be
        return json.dumps({"type": "Subscribe", "session_id": "s", "request_id": rid, "from_seq": rng.choice(["x", [1], {}])}).encode()
    if kind == 5:  # an extra key
        return base[:-1] + b',"extra":1}'
    if kind == 6:  # not an object
        return rng.choice([b"[]", b"1", b'"text"', b"null", b"true"])
    if kind == 7:  # an event, not a request
        return encode(TextStreamed(session_id=session_id, turn_id="t", text="x")).encode()
    if kind == 8:  # someone else's session
        return rng.choice(
            [
                encode(Cancel(session_id=session_id, request_id=rid)),
                encode(Answer(session_id=session_id, request_id=rid, correlation_id="c", outcome="proceed_once")),
            ]
        ).encode()
    if kind == 9:
        return random_bytes(rng)
    if kind == 10:  # a lone surrogate in the request id
        return base.replace(rid.encode(), lone_surrogate(rng)[1:-1], 1)
    return rng.choice([surrogate_bytes(rng), not_utf8(rng), lone_surrogate(rng)])


TEST_MAX_FRAME = 1 << 16
"""The frame limit of the fuzzed daemon (``running_daemon(..., max_frame=TEST_MAX_FRAME)``):
the real one (64 MiB) would make every oversized frame cost a second."""


def oversized() -> bytes:
    return b"x" * (TEST_MAX_FRAME + 1)


def acp_line(rng: random.Random, rid: str) -> tuple[bytes, bool]:
    """A line ``agentbus acp`` must answer with an error, and whether the answer carries
    ``rid`` (else its id is null: the line was not a readable request)."""
    kind = rng.randrange(9)
    request = {"jsonrpc": "2.0", "id": rid, "method": "session/prompt", "params": {"sessionId": "nope", "prompt": []}}
    text = json.dumps(request).encode()
    if kind == 0:
        return deep(rng), False
    if kind == 1:  # a value nothing may hold, as the session id
        name, bad = bad_value(rng)
        return text.replace(b'"nope"', bad), name in ("lone surrogate", "NaN", "huge integer")
    if kind == 2:
        return truncated(text, rng), False
    if kind == 3:  # no such method
        return json.dumps({**request, "method": rng.choice(["nope", "session/../x", ""])}).encode(), True
    if kind == 4:  # wrong types
        params = rng.choice([{"sessionId": 5}, {"sessionId": "nope", "prompt": "text"}, {"sessionId": "nope", "prompt": [1]}])
        return json.dumps({**request, "params": params}).encode(), True
    if kind == 5:  # not JSON-RPC (with an id to answer, or none)
        if rng.random() < 0.25:
            return json.dumps({"id": rid, "method": "session/list"}).encode(), True
        return rng.choice([b"[]", b"1", b'{"jsonrpc":"1.0"}', b'{"jsonrpc":"2.0"}']), False
    if kind == 6:
        return random_bytes(rng), False
    if kind == 7:
        return rng.choice([surrogate_bytes(rng), not_utf8(rng)]), False
    return json.dumps({**request, "method": "session/set_mode", "params": {"sessionId": "nope", "modeId": "x"}}).encode(), True


# -- a fuzzing client -----------------------------------------------------------------------------
@attrs.define
class Tally:
    """What the fuzzing clients sent and were answered."""

    frames: int = 0
    connections: int = 0
    fatal: int = 0
    codes: dict[str, int] = attrs.field(factory=dict)


class Conn:
    """One raw connection: frames out, decoded replies in (None once it closed)."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.buf = bytearray()

    async def reply(self) -> Message | None:
        while b"\n" not in self.buf:
            try:
                data = await self.stream.receive_some(1 << 16)
            except trio.BrokenResourceError:
                data = b""
            if not data:
                return None
            self.buf += data
        nl = self.buf.index(b"\n")
        line = bytes(self.buf[:nl])
        del self.buf[: nl + 1]
        return decode(line)

    async def send(self, data: bytes) -> bool:
        try:
            await self.stream.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return False  # it closed on us: what it said before is still to be read
        return True


async def fuzz(
    home: Path,
    tcp: tuple[str, int] | None,
    rng: random.Random,
    victim: str,
    stop: trio.Event,
    tally: Tally,
    *,
    token: str = "",
    limit: float = math.inf,
) -> None:
    """Connect, maybe say hello, send bad frames each followed by a sentinel request;
    check each gets exactly one error; reconnect when the daemon closes."""
    while not stop.is_set() and tally.frames < limit:
        if tcp is None:
            stream = await trio.open_unix_socket(str(home / "run" / "daemon.sock"))
        else:
            stream = await trio.open_tcp_stream(*tcp)
        tally.connections += 1
        conn = Conn(stream)
        hello = rng.random() < 0.9
        if hello:
            await conn.send((encode(Hello(request_id="h", protocol=PROTOCOL_VERSION, token=token if tcp else "")) + "\n").encode())
            assert isinstance(await conn.reply(), Welcome)
        while not stop.is_set() and tally.frames < limit:
            n = tally.frames
            tally.frames += 1
            bad = oversized() if rng.random() < 0.01 else daemon_frame(rng, victim)
            sentinel = f"ok{n}"
            await conn.send(bad + b"\n" + (encode(ListSessions(request_id=sentinel)) + "\n").encode())
            replies: list[Message] = []
            while (reply := await conn.reply()) is not None:
                if isinstance(reply, SessionList) and reply.request_id == sentinel:
                    break
                replies.append(reply)
            assert len(replies) == 1 and isinstance(replies[0], ProtocolError), (bad[:200], replies)
            error = replies[0]
            tally.codes[error.code] = tally.codes.get(error.code, 0) + 1
            if error.fatal:
                tally.fatal += 1
                assert reply is None, "a fatal error and the connection served on"
                break
            assert reply is not None, f"closed after a non-fatal {error.code}"
        await stream.aclose()
