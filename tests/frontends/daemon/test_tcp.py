"""TCP only when asked, and then only with a token: real sockets, a scripted model.

A client with the token runs a prompt over TCP while the Unix socket serves its user
as before; a missing or wrong token, or anything else before a valid hello, gets one
fatal protocol error and the connection is closed; a host that is not loopback is
refused unless allowed; the command-line clients (``agentbus chat --connect``,
``agentbus acp --attach --connect``) reach a TCP daemon."""

from __future__ import annotations

import os
import re
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import trio
import trio.lowlevel

from actors.frontends.acp import AcpOptions
from actors.frontends.daemon import TcpConfigError, TcpListen, serve
from actors.frontends.daemon._tcp import (
    all_loopback,
    parse_daemon_url,
    parse_host_port,
    read_token_file,
)
from actors.frontends.daemon.client import DaemonError, TcpAddress, open_client, tcp_address
from actors.frontends.daemon.paths import DaemonPaths
from bus.codec import decode, encode
from bus.messages import PROTOCOL_VERSION, Hello, ListSessions, Message, ProtocolError
from tests.frontends.acp._client import connected, fake_responses, text_chunks
from tests.frontends.acp.test_server import new_session, prompt
from tests.frontends.daemon._helpers import (
    client_of,
    config_for,
    events_until,
    running_daemon,
    text_response,
    types,
    write_responses,
)
from tests.frontends.daemon._procs import agentbus, daemon_process, env_for

TOKEN = "the-daemons-token-for-this-test"


def frame(msg: Message) -> bytes:
    return (encode(msg) + "\n").encode()


async def everything_sent(stream: trio.SocketStream) -> list[Message]:
    """What the daemon sends until it closes the connection."""
    data = b""
    while chunk := await stream.receive_some(1 << 16):
        data += chunk
    return [decode(line) for line in data.splitlines() if line.strip()]


# -- addresses and token files --------------------------------------------------------------------
def test_addresses_parse_and_only_loopback_counts_as_local() -> None:
    assert parse_host_port("7777", default_host="127.0.0.1") == ("127.0.0.1", 7777)
    assert parse_host_port("localhost:0") == ("localhost", 0)
    assert parse_host_port("[::1]:8080") == ("::1", 8080)
    assert parse_daemon_url("tcp://10.0.0.2:7777") == ("10.0.0.2", 7777)
    assert parse_daemon_url("tcp://[::1]:7777/") == ("::1", 7777)
    for bad in ("7777", "::1:80", "host:port", "host:70000", "[::1]80"):
        with pytest.raises(TcpConfigError):
            parse_host_port(bad)
    for bad in ("http://h:1", "tcp://h", "tcp://h:0", "tcp://h:1/x", "h:1"):
        with pytest.raises(TcpConfigError):
            parse_daemon_url(bad)
    assert all_loopback(["127.0.0.1", "127.8.0.1", "::1", "::1%lo"])
    assert not all_loopback(["127.0.0.1", "0.0.0.0"])
    assert not all_loopback(["::"])
    assert not all_loopback(["192.168.1.2"])
    assert not all_loopback([])


def test_a_token_file_holds_one_token_and_the_daemons_must_be_private(tmp_path: Path) -> None:
    f = tmp_path / "token"
    f.write_text(f"  {TOKEN}\n")
    f.chmod(0o644)
    assert read_token_file(f) == TOKEN  # a client reads what it is given
    with pytest.raises(TcpConfigError, match="readable by others"):
        read_token_file(f, private=True)
    f.chmod(0o600)
    assert read_token_file(f, private=True) == TOKEN
    for content in ("", "\n", "two words\n"):
        f.write_text(content)
        with pytest.raises(TcpConfigError, match="one token"):
            read_token_file(f)
    with pytest.raises(TcpConfigError, match="cannot read"):
        read_token_file(tmp_path / "missing")


# -- the daemon ------------------------------------------------------------------------------------
async def test_with_the_token_a_tcp_client_runs_a_prompt_and_the_unix_socket_is_unchanged(home: Path) -> None:
    fake = write_responses(home / "f.responses", text_response("Hello", " over TCP"))
    paths = DaemonPaths(home / "run")
    with trio.fail_after(20):
        async with running_daemon(home, tcp=TcpListen(port=0)) as daemon:
            # A new random token, beside the socket, only the user can read it.
            info = paths.token.stat()
            assert stat.S_IMODE(info.st_mode) == 0o600 and info.st_uid == os.getuid()
            token = paths.token.read_text().strip()
            assert token == daemon.tcp_token and len(token) >= 40
            [(host, port)] = daemon.tcp_addresses
            assert host == "127.0.0.1"
            remote_at = tcp_address(f"tcp://127.0.0.1:{port}", paths.token)
            async with open_client(remote_at, client="remote") as remote, client_of(home, "local") as local:
                assert remote.address != local.address
                ready = await remote.create_session(str(home / "ws"), fake_responses=str(fake), model="gemini-2.5-flash")
                sid = ready.session_id
                await remote.subscribe(sid, from_seq=1)
                await local.subscribe(sid, from_seq=1)  # no token on the Unix socket
                await remote.prompt(sid, "hi")
                over_tcp = await events_until(remote)
                over_unix = await events_until(local)
                assert "TextStreamed" in types(over_tcp)
                assert [(e.seq, e.message) for e in over_tcp] == [(e.seq, e.message) for e in over_unix]
        assert not paths.token.exists()  # gone with the daemon


async def test_a_missing_or_wrong_token_or_anything_before_it_closes_the_connection(home: Path) -> None:
    with trio.fail_after(20):
        async with running_daemon(home, tcp=TcpListen(port=0, token=TOKEN)) as daemon:
            [(host, port)] = daemon.tcp_addresses
            assert (home / "run" / "daemon.token").read_text() == TOKEN + "\n"
            for token in ("", "not-" + TOKEN, TOKEN[:-1]):
                with pytest.raises(DaemonError) as refused:
                    async with open_client(TcpAddress(host=host, port=port, token=token)):
                        pass
                assert refused.value.code == "bad_token"

            # By hand: each first frame gets one fatal error, and whatever follows it is
            # never answered.
            after = frame(ListSessions(request_id="after"))
            firsts = {
                "bad_token": frame(Hello(request_id="h", protocol=PROTOCOL_VERSION, token="wrong")),
                "hello_required": frame(ListSessions(request_id="l")),
                "bad_frame": b"{not json\n",
                "frame_too_large": b"x" * 8192 + b"\n",
            }
            for code, first in firsts.items():
                async with await trio.open_tcp_stream(host, port) as stream:
                    await stream.send_all(first + after)
                    sent = await everything_sent(stream)
                assert len(sent) == 1, sent
                error = sent[0]
                assert isinstance(error, ProtocolError) and error.fatal and error.code == code

            # With the token: served; the daemon carried on.
            async with open_client(TcpAddress(host=host, port=port, token=TOKEN)) as client:
                await client.list_sessions()


async def test_a_tcp_client_that_says_nothing_is_closed(home: Path) -> None:
    with trio.fail_after(10):
        async with running_daemon(home, tcp=TcpListen(port=0), hello_timeout_s=0.2) as daemon:
            [(host, port)] = daemon.tcp_addresses
            async with await trio.open_tcp_stream(host, port) as stream:
                [error] = await everything_sent(stream)
            assert isinstance(error, ProtocolError) and error.fatal and error.code == "bad_token"
            assert "in time" in error.message


async def test_a_host_that_is_not_loopback_is_refused_unless_allowed(home: Path) -> None:
    paths = DaemonPaths(home / "run")
    for host in ("0.0.0.0", "::", ""):
        with pytest.raises(TcpConfigError, match="not a loopback address"):
            await serve(config_for(home, tcp=TcpListen(host=host, port=0)))
    # Nothing is left behind: the next daemon starts, and a stale token file goes.
    paths.token.write_text("stale\n")
    async with running_daemon(home) as daemon:
        assert daemon.tcp_addresses == []
        assert not paths.token.exists()


# -- the command line -----------------------------------------------------------------------------
async def test_agentbus_daemon_listen_tcp_with_chat_and_acp_connecting(home: Path) -> None:
    token_file = home / "my.token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    fake = write_responses(home / "hi.responses", text_response("Hello ", "from far away."))
    with trio.fail_after(60):
        async with daemon_process(home, "--listen-tcp", "127.0.0.1:0", "--token-file", str(token_file)) as daemon:
            found = re.search(rb"listening on tcp://127\.0\.0\.1:(\d+)", daemon.log)
            assert found, daemon.log
            url = f"tcp://127.0.0.1:{int(found.group(1))}"
            env = {**env_for(home), "AGENTBUS_RUNTIME_DIR": str(home / "elsewhere")}  # no local daemon there

            def chat(*args: str) -> subprocess.CompletedProcess[str]:
                return subprocess.run(
                    [sys.executable, "-m", "actors.frontends", "chat", "--connect", url, *args],
                    input="hi\n",
                    env=env,
                    cwd=home / "ws",
                    capture_output=True,
                    text=True,
                    timeout=30,
                    check=False,
                )

            done = await trio.to_thread.run_sync(
                lambda: chat("--token-file", str(token_file), "--fake-responses", str(fake), "-m", "gemini-2.5-flash")
            )
            assert done.returncode == 0, done.stderr
            assert "Hello from far away." in done.stdout
            wrong = home / "wrong.token"
            wrong.write_text("nope\n")
            refused = await trio.to_thread.run_sync(lambda: chat("--token-file", str(wrong)))
            assert refused.returncode == 1 and "token" in refused.stderr
            assert not (home / "elsewhere" / "daemon.sock").exists()  # nothing was started

            # ACP attached over TCP.
            script = fake_responses(home / "acp.jsonl", text_chunks("Attached over TCP."))
            options = AcpOptions(
                model="gemini-2.5-flash",
                fake_responses=str(script),
                data_dir=home / "data",
                attach=True,
                daemon_paths=tcp_address(url, token_file),
            )
            async with connected(options) as (client, _):
                await client.initialize()
                sid = await new_session(client, (home / "ws").resolve())
                client.clear()
                assert (await prompt(client, sid, "hi"))["stopReason"] == "end_turn"
                assert "agent_message_chunk" in client.sequence()
            daemon.proc.send_signal(signal.SIGTERM)
            assert await daemon.proc.wait() == 0
    assert not (home / "run" / "daemon.token").exists()


def test_the_command_line_refuses_what_it_must(home: Path) -> None:
    loose = home / "loose.token"
    loose.write_text(TOKEN)
    loose.chmod(0o644)
    done = agentbus(home, "daemon", "--listen-tcp", "127.0.0.1:0", "--token-file", str(loose))
    assert done.returncode == 2 and "readable by others" in done.stderr
    done = agentbus(home, "daemon", "--token-file", str(loose))
    assert done.returncode == 2 and "--listen-tcp" in done.stderr
    done = agentbus(home, "daemon", "--listen-tcp", "0.0.0.0:0")
    assert done.returncode == 1 and "not a loopback address" in done.stderr
    done = agentbus(home, "chat", "--connect", "http://example.com:80")
    assert done.returncode == 1 and "tcp://HOST:PORT" in done.stderr


def test_the_local_token_goes_only_to_loopback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from actors.frontends.daemon import client as client_module

    paths = DaemonPaths(tmp_path / "run")
    paths.token.parent.mkdir(parents=True, mode=0o700)
    paths.token.write_text("s3cret\n")
    paths.token.chmod(0o600)
    monkeypatch.setattr(client_module, "default_paths", lambda: paths)
    with pytest.raises(DaemonError, match="not this machine's loopback address: give --token-file"):
        tcp_address("tcp://example.com:7000")
    local = tcp_address("tcp://localhost:7000")  # never ::1 first, where someone else may listen
    assert (local.host, local.port, local.token) == ("127.0.0.1", 7000, "s3cret")
