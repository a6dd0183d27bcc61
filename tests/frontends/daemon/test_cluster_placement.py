"""Sessions created at once through a node that serves no workspace (a ``--workers``
front) are spread over the nodes that serve theirs. Found by
``tests/bench/bench_cluster.py``: ``agentbus daemon --workers 2`` put all 200 sessions of
the benchmark on one worker, every run (placement reads each node's load as the node
last advertised it, every ``renew_every_s``, so a burst goes to one node)."""

from __future__ import annotations

from pathlib import Path

import trio

from actors.cluster.servers import NatsServer
from tests.cluster import conftest as cluster_fixtures
from tests.frontends.daemon._helpers import client_of, text_response, write_responses
from tests.frontends.daemon.test_cluster_nodes import node

nats_server = cluster_fixtures.nats_server
SESSIONS = 8


async def test_sessions_created_at_once_are_spread_over_the_nodes(home: Path, nats_server: NatsServer) -> None:
    ws = home / "ws"
    fake = write_responses(home / "f.responses", text_response("hi"))
    with trio.fail_after(60):
        async with node(home / "w1", nats_server.url, "node-w1", renew_every_s=3.0) as w1, node(
            home / "w2", nats_server.url, "node-w2", renew_every_s=3.0
        ) as w2, node(home / "front", nats_server.url, "node-front", serves=(), renew_every_s=3.0), client_of(
            home / "front"
        ) as client:
            for _ in range(SESSIONS):
                await client.create_session(str(ws), fake_responses=str(fake), model="gemini-2.5-flash")
            placed = sorted((len(w1.core.sessions), len(w2.core.sessions)))
    assert sum(placed) == SESSIONS
    assert placed[0] >= SESSIONS // 2 - 1, f"placed {placed}"
