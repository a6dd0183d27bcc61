"""``agentbus acp``: the Agent Client Protocol front end (JSON-RPC 2.0 on stdio).

An editor (Zed, or any ACP client) starts ``agentbus acp`` and drives sessions through
it; each session is the same set of actors a headless run starts
(``actors.host.opening.open_session``), with this front end as its interactive client.
Layers, h11-style: ``_rpc`` (framing, pure), ``_protocol`` (what we announce, parameter
checks, pure), ``_present`` and ``_view`` (bus messages -> ACP updates, pure state
machine), ``_session`` and ``_server`` (the trio shells), ``_main`` (flags, the fast
``initialize``). Importing this package loads nothing else: ``initialize`` is answered
before trio and the actors are loaded.
"""

from __future__ import annotations

from collections.abc import Sequence


def main(argv: Sequence[str]) -> int:
    from actors.frontends.acp._main import main as acp_main

    return acp_main(argv)


__all__ = ["main"]
