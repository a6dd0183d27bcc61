"""``agentbus acp``: the Agent Client Protocol front end (JSON-RPC 2.0 on stdio).

An editor (Zed, or any ACP client) starts ``agentbus acp`` and drives sessions through
it; each session is the same set of actors a headless run starts
(``actors.host.opening.open_session``), with this front end as its interactive client.
Layers, h11-style: ``_rpc`` (framing, pure), ``_protocol`` (what we announce, parameter
checks, pure), ``_present`` and ``_view`` (bus messages -> ACP updates, pure state
machine), ``_session``, ``_bus_session``, ``_terminal`` (the shell's commands in the
client's ``terminal/*``) and ``_server`` (the trio shells), ``_main`` (flags, the fast
``initialize``). Importing this package loads nothing else: ``initialize`` is answered
before trio and the actors are loaded.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from actors.frontends.acp._main import build_parser
    from actors.frontends.acp._session import AcpOptions


def main(argv: Sequence[str]) -> int:
    from actors.frontends.acp._main import main as acp_main

    return acp_main(argv)


def __getattr__(name: str) -> Any:
    """``AcpOptions`` (what ``agentbus acp``'s flags choose) and its ``build_parser``,
    loaded on first use."""
    if name == "AcpOptions":
        from actors.frontends.acp._session import AcpOptions

        return AcpOptions
    if name == "build_parser":
        from actors.frontends.acp._main import build_parser

        return build_parser
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["AcpOptions", "build_parser", "main"]
