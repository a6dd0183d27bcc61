"""A new prompt lets the work in flight go first (``after_work_in_flight``): the events
already on their way, a hop a scheduler round, pass it; a daemon that is never idle
still starts it."""

from __future__ import annotations

import trio
import trio.testing

from actors.frontends.daemon._connection import PROMPT_YIELD_ROUNDS, after_work_in_flight


async def test_a_prompt_waits_for_the_events_already_on_their_way() -> None:
    hops = PROMPT_YIELD_ROUNDS - 2
    delivered: list[int] = []

    async def stream() -> None:  # an event passed along its hops, one a round
        for hop in range(hops):
            await trio.lowlevel.checkpoint()
            delivered.append(hop)

    async with trio.open_nursery() as nursery:
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(stream)
        await after_work_in_flight()
        assert delivered == list(range(hops))  # every hop ran before the prompt went on


async def test_a_daemon_never_idle_still_starts_every_prompt() -> None:
    async def busy() -> None:
        while True:
            await trio.lowlevel.checkpoint()

    async with trio.open_nursery() as nursery:
        for _ in range(3):
            nursery.start_soon(busy)
        with trio.fail_after(5):
            await after_work_in_flight()
        nursery.cancel_scope.cancel()
