"""``agentbus web`` on a node of a cluster that serves no workspace (a ``--workers``
front): the page's new session is placed on the node that serves it, and the page
follows, prompts and approves it there (real nats-server, two daemons, real sockets)."""

from __future__ import annotations

from pathlib import Path

import trio

from actors.cluster.servers import NatsServer
from actors.frontends.daemon.paths import DaemonPaths
from actors.frontends.web import BridgeOptions, WebApp
from tests.cluster import conftest as cluster_fixtures
from tests.frontends.daemon.test_cluster_nodes import node
from tests.frontends.web._helpers import _serve, page
from tests.frontends.web.test_web_protocol import WRITE, scripted

nats_server = cluster_fixtures.nats_server


async def test_a_page_on_a_node_drives_a_session_placed_on_another(home: Path, nats_server: NatsServer) -> None:
    ws = home / "ws"
    options = BridgeOptions(workspace=ws, fake_responses=str(scripted(home)), model="gemini-2.5-flash")
    with trio.fail_after(60):
        async with node(home / "b", nats_server.url, "node-b", serves=(str(ws),)) as b, node(
            home / "a", nats_server.url, "node-a", serves=()
        ) as a, trio.open_nursery() as nursery:
            app = WebApp(token="t0ken-" + "x" * 20, bridge=options, where=DaemonPaths(home / "a" / "run"))
            serving = await nursery.start(_serve, app)
            try:
                async with page(serving) as p:
                    sid = (await p.ok("new"))["session"]["session_id"]
                    assert sid in b.core.sessions and sid not in a.core.sessions
                    await p.ok("open", session_id=sid, from_seq=1)
                    await p.ok("prompt", session_id=sid, text="write it")
                    asked = await p.event("ApprovalRequested")
                    await p.ok("answer", session_id=sid, correlation_id=asked["msg"]["correlation_id"], outcome="proceed_once")
                    await p.event("TurnEnded")
                    text = "".join(e["msg"]["text"] for e in p.events() if e["msg"]["type"] == "TextStreamed")
                    assert text == "I will write it.Written."
            finally:
                serving.stop.set()
    assert (ws / WRITE["file_path"]).read_text() == WRITE["content"]
