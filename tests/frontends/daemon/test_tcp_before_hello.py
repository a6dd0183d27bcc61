"""TCP connections that never say hello cannot lock out the clients that present the
token (issue 17, defect 11): those waiting for their hello are a bounded pool of their
own, a new connection takes the place of the oldest one waiting (told why), and a
client with the token gets in while the pool stays full."""

from __future__ import annotations

from pathlib import Path

import trio
import trio.lowlevel

from actors.frontends.daemon import TcpListen
from actors.frontends.daemon._server import MAX_TCP_BEFORE_HELLO
from actors.frontends.daemon.client import TcpAddress, open_client
from bus.codec import decode
from bus.messages import Message, ProtocolError
from tests.frontends.daemon._helpers import client_of, running_daemon

TOKEN = "the-daemons-token-for-this-test"
EXTRA = 8


async def everything_sent(stream: trio.SocketStream) -> list[Message]:
    data = b""
    while chunk := await stream.receive_some(1 << 16):
        data += chunk
    return [decode(line) for line in data.splitlines() if line.strip()]


async def test_silent_tcp_connections_cannot_lock_out_clients_with_the_token(home: Path) -> None:
    with trio.fail_after(30):
        async with running_daemon(home, tcp=TcpListen(port=0, token=TOKEN)) as daemon:
            [(host, port)] = daemon.tcp_addresses
            silent = [await trio.open_tcp_stream(host, port) for _ in range(MAX_TCP_BEFORE_HELLO + EXTRA)]
            while daemon.accepted < len(silent):
                await trio.lowlevel.checkpoint()  # until the daemon has accepted them all
            assert sum(c.waits_for_hello for c in daemon.connections.values()) == MAX_TCP_BEFORE_HELLO
            # The oldest made room for the newer ones, and were told so.
            for stream in silent[:EXTRA]:
                [error] = await everything_sent(stream)
                assert isinstance(error, ProtocolError) and error.fatal and error.code == "bad_token"
                assert "newer connections" in error.message
            # With the pool full, clients with the token get in, one after the other.
            for _ in range(3):
                async with open_client(TcpAddress(host=host, port=port, token=TOKEN), client="tcp") as client:
                    await client.list_sessions()
            assert sum(c.waits_for_hello for c in daemon.connections.values()) <= MAX_TCP_BEFORE_HELLO
            async with client_of(home) as local:
                await local.list_sessions()  # the Unix socket is served meanwhile
            for stream in silent:
                await stream.aclose()


async def test_a_client_holding_the_token_is_never_dropped_for_newcomers(home: Path) -> None:
    with trio.fail_after(30):
        async with running_daemon(home, tcp=TcpListen(port=0, token=TOKEN)) as daemon:
            [(host, port)] = daemon.tcp_addresses
            async with open_client(TcpAddress(host=host, port=port, token=TOKEN), client="first") as first:
                silent = [await trio.open_tcp_stream(host, port) for _ in range(2 * MAX_TCP_BEFORE_HELLO)]
                while daemon.accepted < len(silent) + 1:
                    await trio.lowlevel.checkpoint()
                await first.list_sessions()  # still connected, still served
                for stream in silent:
                    await stream.aclose()


async def test_a_request_sent_right_behind_the_hello_is_answered(home: Path) -> None:
    """A client that writes its Hello and a request larger than a Hello may be in one
    go gets its answer (the request used to be dropped as too large before the hello,
    without its id, and the client waited for ever)."""
    from bus.codec import encode
    from bus.messages import PROTOCOL_VERSION, Hello, ListSessions, SessionList, Welcome

    with trio.fail_after(30):
        async with running_daemon(home, tcp=TcpListen(port=0, token=TOKEN)) as daemon:
            [(host, port)] = daemon.tcp_addresses
            async with await trio.open_tcp_stream(host, port) as stream:
                hello = encode(Hello(request_id="h", protocol=PROTOCOL_VERSION, client="raw", token=TOKEN))
                big = "big-" + "x" * 8000  # (a path that long would be refused: it can name no file)
                request = encode(ListSessions(request_id=big))
                await stream.send_all(f"{hello}\n{request}\n".encode())
                got: list[Message] = []
                data = b""
                while not any(isinstance(m, SessionList) for m in got):
                    chunk = await stream.receive_some(1 << 16)
                    assert chunk, f"closed after {got}"
                    data += chunk
                    *lines, rest = data.split(b"\n")
                    data = rest
                    got += [decode(line) for line in lines if line.strip()]
                assert isinstance(got[0], Welcome)
                answer = next(m for m in got if isinstance(m, SessionList))
                assert answer.request_id == big
