"""A session's journal on a real 3-server JetStream cluster, its stream replicated on
all three: one server killed (-9), appends go on; two killed, an append fails loudly
and nothing acknowledged is lost; quorum back, appends go on."""

from __future__ import annotations

import pytest
import trio

from actors.cluster import Journal, NoQuorum
from actors.cluster._nats import open_link
from actors.cluster.servers import NatsServer

pytestmark = pytest.mark.slow


async def test_appends_survive_one_server_and_fail_loudly_without_quorum(nats_cluster: list[NatsServer], nursery: trio.Nursery) -> None:
    urls = ",".join(s.url for s in nats_cluster)
    acked: list[bytes] = []
    with trio.fail_after(90):
        async with open_link(urls) as link:
            journal = Journal(link, "ann", "s-1", replicas=3)
            await journal.open()
            await journal.take_over(b"meta")
            for i in range(5):
                await journal.append(b"before %d" % i)
                acked.append(b"before %d" % i)
            nats_cluster[0].kill()
            # The survivors elect the stream's leader again; appends wait for it.
            line = b"after one"
            await until_quorum(journal, line)
            acked.append(line)
            nats_cluster[1].kill()
            with pytest.raises(NoQuorum, match="too few servers|no JetStream answer"):
                await journal.append(b"without quorum")
            await nats_cluster[1].start(nursery)
            # Tried again, as NoQuorum says: stored once, whether or not the first try
            # was (its answer was lost with the quorum).
            await until_quorum(journal, b"without quorum")
            acked.append(b"without quorum")
            await journal.append(b"quorum back")
            acked.append(b"quorum back")
            lines = await read_when_available(journal)
    assert lines == [b"meta", *acked]


async def read_when_available(journal: Journal) -> list[bytes]:
    """The journal's lines; a restarted server's JetStream may still say it is not
    available for a moment (503) after the appends went through."""
    while True:
        try:
            return [line for _, line in await journal.lines()]
        except NoQuorum:
            await trio.sleep(0.1)  # a retry's pause, not a wait for something to happen


async def until_quorum(journal: Journal, line: bytes) -> None:
    """Append ``line`` once the stream has a leader (JetStream says NoQuorum until then)."""
    while True:
        try:
            await journal.append(line)
            return
        except NoQuorum:
            await trio.sleep(0.1)  # a retry's pause, not a wait for something to happen
