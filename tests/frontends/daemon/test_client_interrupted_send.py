"""A request whose sending is cancelled part way (issue 17): the daemon may hold half a
frame, which the next one would join into garbage it cannot answer by request id. The
client ends the connection instead, so later requests fail at once rather than wait
forever."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from actors.frontends.daemon._protocol import FrameSplitter
from actors.frontends.daemon.client import DaemonClient, DaemonError
from bus import CodecError
from bus.codec import decode, encode
from bus.messages import Prompt, ProtocolError


async def fake_daemon(stream: trio.SocketStream, go: trio.Event) -> None:
    """Reads nothing until ``go``; then answers each frame as the daemon would: a request
    by its id, anything that does not decode without one."""
    await go.wait()
    splitter = FrameSplitter()
    while data := await stream.receive_some(1 << 16):
        for frame in splitter.feed(data):
            try:
                msg = decode(frame)  # type: ignore[arg-type]
                reply = ProtocolError(request_id=msg.request_id, code="invalid", message="answered")  # type: ignore[attr-defined]
            except (CodecError, UnicodeDecodeError, AttributeError):
                reply = ProtocolError(request_id=None, code="bad_frame", message="garbage")
            await stream.send_all((encode(reply) + "\n").encode())


async def test_a_send_cancelled_part_way_ends_the_connection_and_later_requests_fail_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ours, theirs = trio.socket.socketpair()
    client = DaemonClient(trio.SocketStream(ours))
    go = trio.Event()
    with trio.fail_after(60):
        async with trio.SocketStream(theirs) as server, trio.open_nursery() as nursery:
            nursery.start_soon(client._read)
            nursery.start_soon(fake_daemon, server, go)
            with trio.move_on_after(1) as interrupted:  # the daemon reads nothing meanwhile
                await client.request(Prompt(session_id="s", request_id="big", text="x" * (8 << 20)))
            assert interrupted.cancelled_caught
            go.set()
            with pytest.raises(DaemonError) as refused:
                await client.status()
            assert refused.value.code == "closed"
            assert "Prompt was interrupted while it was being sent" in refused.value.message
            nursery.cancel_scope.cancel()
    await client.aclose()
