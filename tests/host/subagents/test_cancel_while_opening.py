"""An ``invoke_agent`` call cancelled while its child session is being opened.

The cancel lands at a fixed point: the moment the child's ``OpenSession`` is sent (a bus
that cancels the call's scope as that message passes), so the call is cancelled after
the child exists but before the call has its addresses. The child must still end
closed: ``OpenSession`` ... ``SessionClosed``, never an opened session left behind.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio

from bus import ALL_SESSIONS, Bus
from bus.messages import OpenSession, SessionClosed
from bus.testing import capture_session

from ._harness import agent, session_config


class _CancelAtOpen(Bus):
    """A bus that cancels ``scope`` when a child session's ``OpenSession`` is sent."""

    scope: trio.CancelScope | None = None

    async def send(self, message: Any, *, sender: str, to: str | None) -> Any:
        if isinstance(message, OpenSession) and self.scope is not None:
            self.scope.cancel()
        return await super().send(message, sender=sender, to=to)


async def test_a_call_cancelled_while_its_child_opens_closes_the_child(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    bus = _CancelAtOpen()
    worker = agent("worker")
    cfg = session_config(tmp_path, [worker])
    assert cfg.subagents is not None
    access = cfg.subagents(bus, cfg)
    handed: list[Any] = []
    async with trio.open_nursery() as nursery:
        cap = await nursery.start(capture_session, bus, ALL_SESSIONS)
        with trio.CancelScope() as bus.scope:
            async with access.open_child(
                worker,
                system_instruction="You are worker.",
                parent_call_id="call-1",
                model="gemini-test",
                approval_mode="default",
            ) as child:
                handed.append(child)
        assert bus.scope.cancelled_caught
        with trio.fail_after(60):  # a bound against a hang only: the close takes no time
            await cap.wait_for(lambda m: isinstance(m, SessionClosed))
        nursery.cancel_scope.cancel()
    assert handed == []  # cancelled before the call had its child
    [child_id] = {e.session_id for e in cap.envelopes}
    messages = [type(e.message) for e in cap.envelopes if e.session_id == child_id]
    assert messages[0] is OpenSession and messages[-1] is SessionClosed, messages
    assert not bus.is_connected(f"agent:{child_id}")
