"""A tunnel whose node falls silent (a node of another machine killed: no pid to check)
ends with ``TunnelLost``, which the client's node takes for "the node went away" and
follows the session to its next owner (``_routing.Routes._run``). Found by
``tests/bench/bench_cluster.py`` with ``AGENTBUS_BENCH_UNREAPED=1``: the client's whole
connection ended 7 s after the kill instead."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from actors.frontends.daemon._tunnel import DEAD_S, Tunnel, TunnelLost


class _QuietLink:
    """A NATS link whose publishes go nowhere."""

    async def publish(self, *_args: Any, **_kwargs: Any) -> None:
        pass


class _SilentInbox:
    """The other node's frames: none ever come."""

    async def receive(self) -> Any:
        await trio.sleep_forever()


async def test_a_silent_node_ends_the_tunnel_with_tunnel_lost(autojump_clock: trio.abc.Clock) -> None:
    tunnel = Tunnel(_QuietLink(), "ann", "another-machine:4242:abcdef")  # type: ignore[arg-type]
    tunnel._inbox = _SilentInbox()  # type: ignore[assignment]

    async def deliver(lines: list[bytes]) -> None:
        raise AssertionError(f"nothing was sent: {lines!r}")

    began = trio.current_time()
    with pytest.raises(TunnelLost, match="silent"):
        await tunnel.run(deliver)
    assert trio.current_time() - began == pytest.approx(DEAD_S)
