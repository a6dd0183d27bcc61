"""A connection's send buffer (``_connection._Outbox``): a frame goes to the socket at
once, from the task that made it, when nothing waits before it; what the socket does not
take waits for the writer, in order, bounded; closing it flushes what waits and turns
away senders."""

from __future__ import annotations

import socket

import pytest
import trio
import trio.testing

from actors.frontends.daemon._connection import WRITE_BATCH, _Closed, _Outbox


def _pair() -> tuple[trio.SocketStream, socket.socket]:
    a, b = socket.socketpair()
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    a.setblocking(False)
    b.setblocking(False)
    return trio.SocketStream(trio.socket.from_stdlib_socket(a)), b


def _drain(sock: socket.socket) -> bytes:
    out = b""
    while True:
        try:
            data = sock.recv(1 << 20)
        except BlockingIOError:
            return out
        if not data:
            return out
        out += data


async def _writer(stream: trio.SocketStream, outbox: _Outbox) -> None:
    while (batch := await outbox.take(WRITE_BATCH)) is not None:
        await stream.send_all(b"".join(batch))
        outbox.sent()


async def test_a_frame_goes_to_the_socket_at_once_when_nothing_waits() -> None:
    stream, peer = _pair()
    with peer:
        outbox = _Outbox(stream, 4)
        await outbox.put(b"one\n")
        # No checkpoint, no writer task: the client can read it already.
        assert _drain(peer) == b"one\n"
        assert not outbox.queue
        await stream.aclose()


async def test_what_the_socket_does_not_take_waits_in_order_and_the_writer_sends_it() -> None:
    stream, peer = _pair()
    frames = [bytes([65 + i % 26]) * 3000 + b"\n" for i in range(40)]
    total = sum(map(len, frames))
    got = b""

    async def read() -> None:
        nonlocal got
        while len(got) < total:
            await trio.lowlevel.wait_readable(peer)
            got += _drain(peer)
        outbox.close()  # the writer ends

    with peer, trio.fail_after(10):
        outbox = _Outbox(stream, 8)
        for frame in frames[:4]:
            outbox.put_nowait(frame)
        # The socket is full: the rest waits, none of it is written past the queue.
        assert outbox.queue
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_writer, stream, outbox)
            nursery.start_soon(read)
            for frame in frames[4:]:
                await outbox.put(frame)  # waits for room when 8 are queued
                assert len(outbox.queue) <= 8
    assert got == b"".join(frames)
    await stream.aclose()


async def test_a_full_buffer_turns_notices_away_and_closing_stops_waiting_senders() -> None:
    stream, peer = _pair()
    with peer:
        outbox = _Outbox(stream, 2)
        big = b"x" * 100_000 + b"\n"
        assert outbox.put_nowait(big)  # partly written, the rest queued
        assert outbox.put_nowait(b"a\n")
        assert not outbox.put_nowait(b"b\n")  # full: a notice is dropped, not waited for
        refused: list[bool] = []

        async def sender() -> None:
            try:
                await outbox.put(b"c\n")
            except _Closed:
                refused.append(True)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(sender)
            await trio.testing.wait_all_tasks_blocked()
            assert not refused
            outbox.close()
        assert refused == [True]
        assert not outbox.put_nowait(b"d\n")
        with pytest.raises(_Closed):
            await outbox.put(b"e\n")
        # What was queued before the close is still the writer's to send.
        got = b""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_writer, stream, outbox)
            with trio.fail_after(10):
                while not got.endswith(b"a\n"):
                    await trio.lowlevel.wait_readable(peer)
                    got += _drain(peer)
        assert got == big + b"a\n"
        await stream.aclose()
