"""The one way to open a session, for every front end and for subagents.

A front end resolves what the user asked for into a ``SessionConfig`` (``setup``:
``session_setup`` then ``session_config``), then calls ``open_session``: the session's
MCP servers are connected and their tools added (``mcp.supervise_with_mcp``), the
session's actors start under the front end's nursery (``runtime.supervise_session``), the front
end's observers subscribe (``observe``: before the session can publish anything but
after the recorder, so the recording stays the first observer), and the session is
opened from the front end's port. An interactive session (the daemon's, ACP's, chat's)
first runs its ``SessionStart`` hooks, whose context becomes the last turn of its
history, as Gemini CLI's interactive mode does; a one-shot session (headless, ``agentbus
tool``, replays, subagents) is opened as it is, its client deciding what to do with
``SessionStart``.

What reaches the bus is therefore the same whichever front end opened the session
(``tests/host/test_open_session.py`` runs one prompt through each and compares).
"""

from __future__ import annotations

from collections.abc import Callable

import trio

from actors.host import runtime
from actors.host.setup import open_interactive_session
from bus import Bus, Port

Source = str
"""``startup`` or ``resume`` (the ``SessionStart`` hooks' ``source``)."""


async def open_session(
    nursery: trio.Nursery,
    bus: Bus,
    cfg: runtime.SessionConfig,
    client: Port | None,
    *,
    interactive_source: Source | None = None,
    observe: Callable[[runtime.SessionAddresses], None] | None = None,
) -> runtime.SessionAddresses:
    """Start ``cfg``'s actors in ``nursery`` and open the session from ``client``.

    ``interactive_source`` (``startup``/``resume``) makes it an interactive opening:
    ``SessionStart`` hooks first (nothing else may read ``client``'s inbox meanwhile).
    ``client`` None: the opening comes from elsewhere (a replay plays the recorded
    client's ``OpenSession``). Returns the session's addresses; the session runs until
    it is closed or ``nursery`` is cancelled.
    """
    if cfg.mcp_servers or cfg.mcp_errors:
        from actors.host.mcp import supervise_with_mcp

        addrs: runtime.SessionAddresses = await nursery.start(supervise_with_mcp, bus, cfg)
    else:
        addrs = await nursery.start(runtime.supervise_session, bus, cfg)
    if observe is not None:
        observe(addrs)
    if client is None:
        return addrs
    if interactive_source is None:
        await client.send(runtime.open_session_message(cfg), to=addrs.session)
    else:
        await open_interactive_session(client, addrs, cfg, interactive_source)
    return addrs
