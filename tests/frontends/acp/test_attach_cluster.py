"""The front ends on a cluster: `agentbus acp --attach` and `agentbus chat` attached to a
node that serves no workspace drive a session the cluster placed on another node, as
they drive one of their own daemon (real nats-server; the chat as a real process)."""

from __future__ import annotations

from pathlib import Path

import trio

from actors.cluster.servers import NatsServer
from actors.frontends.acp._session import AcpOptions
from actors.frontends.daemon.paths import DaemonPaths
from tests.cluster import conftest as cluster_fixtures
from tests.frontends.daemon._helpers import home, text_response, write_responses
from tests.frontends.daemon._procs import piped_chat
from tests.frontends.daemon.test_cluster_nodes import node

from ._client import call_chunks, connected, fake_responses, text_chunks
from .test_server import MODEL, new_session, prompt

nats_server = cluster_fixtures.nats_server
__all__ = ["home", "nats_server"]  # fixtures


async def test_acp_attached_to_a_node_drives_a_session_placed_on_another(home: Path, nats_server: NatsServer) -> None:
    ws = (home / "ws").resolve()
    script = fake_responses(
        home / "write.jsonl",
        call_chunks(("write_file", {"file_path": "out.txt", "content": "from node b\n"})),
        text_chunks("Wrote it.", prompt_tokens=7, output_tokens=3),
    )
    options = AcpOptions(
        model=MODEL, fake_responses=str(script), data_dir=home / "a" / "data", attach=True, daemon_paths=DaemonPaths(home / "a" / "run")
    )
    with trio.fail_after(60):
        async with node(home / "b", nats_server.url, "node-b", serves=(str(ws),)) as b, node(
            home / "a", nats_server.url, "node-a", serves=()
        ) as a, connected(options) as (client, _):
            await client.initialize()
            sid = await new_session(client, ws)
            assert sid in b.core.sessions and sid not in a.core.sessions
            client.clear()
            result = await prompt(client, sid, "Create out.txt")
            assert result["stopReason"] == "end_turn"
            assert client.sequence() == [
                "tool_call:pending:edit",
                "session/request_permission",
                "tool_call_update:in_progress",
                "tool_call_update:completed:edit",
                "agent_message_chunk",
            ]
            assert (ws / "out.txt").read_text() == "from node b\n"


async def test_chat_attached_to_a_node_talks_to_a_session_on_another(home: Path, nats_server: NatsServer) -> None:
    ws = (home / "a" / "ws").resolve()
    ws.mkdir(parents=True)
    fake = write_responses(home / "f.responses", text_response("Hello from ", "node b."))
    with trio.fail_after(60):
        async with node(home / "b", nats_server.url, "node-b", serves=(str(ws),)) as b, node(
            home / "a", nats_server.url, "node-a", serves=()
        ):
            done = await trio.to_thread.run_sync(
                lambda: piped_chat(home / "a", "--fake-responses", str(fake), "-m", "gemini-2.5-flash", typed="hi there\n")
            )
            assert done.returncode == 0, done.stdout + done.stderr
            assert "Hello from node b." in done.stdout
            assert len(b.core.registry.entries()) == 1  # the session is node b's
            # `--resume latest` on node a finds it (the cluster's directory: titled by
            # its first prompt) and prints the conversation so far.
            resumed = await trio.to_thread.run_sync(lambda: piped_chat(home / "a", "--resume", "latest", typed="/quit\n"))
            assert resumed.returncode == 0, resumed.stdout + resumed.stderr
            assert "hi there" in resumed.stdout and "Hello from node b." in resumed.stdout
