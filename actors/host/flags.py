"""Flags that every command opening sessions from the command line shares (headless,
``agentbus acp``), defined once. Standard library only: ``agentbus acp`` parses its
flags before the runtime loads."""

from __future__ import annotations

import argparse

APPROVAL_MODES = ("default", "auto_edit", "yolo", "plan")
"""``bus.messages.ApprovalMode``'s words, spelled out: importing the bus would load trio
before ``agentbus acp`` answers ``initialize`` (``tests/host/test_flags.py`` keeps them equal)."""

DATA_DIR_HELP = (
    "where recordings go (default: $AGENTBUS_DATA_DIR, else $XDG_DATA_HOME/agentbus, else ~/.local/share/agentbus)"
)


def split_server_names(values: list[str] | None) -> list[str] | None:
    """``--allowed-mcp-server-names`` as Gemini CLI coerces it: split on commas, trimmed,
    empties dropped — but one empty value stays ``[""]`` (no server). None: not given."""
    if values is None:
        return None
    if len(values) == 1 and values[0] == "":
        return [""]
    return [s.strip() for v in values for s in v.split(",") if s.strip()]


def add_session_flags(p: argparse.ArgumentParser) -> None:
    """``--fake-responses-non-strict``, ``--record-responses``, ``--data-dir``,
    ``--policy``, ``--allowed-tools``, ``--allowed-mcp-server-names``, ``--skip-trust``."""
    p.add_argument(
        "--fake-responses-non-strict",
        metavar="FILE",
        help="as --fake-responses, but each call takes the first remaining line of its own method",
    )
    p.add_argument("--record-responses", metavar="FILE", help="append live responses to FILE in the fake-responses format")
    p.add_argument("--data-dir", metavar="DIR", help=DATA_DIR_HELP)
    p.add_argument(
        "--policy", action="append", default=[], metavar="FILE", help="a policy TOML file or folder (repeatable)"
    )
    p.add_argument(
        "--allowed-tools",
        action="append",
        default=[],
        metavar="TOOL",
        help="tools allowed without asking (comma-separated or repeated)",
    )
    p.add_argument(
        "--allowed-mcp-server-names",
        action="append",
        default=None,
        metavar="NAME",
        help="start only these MCP servers (comma-separated or repeated; replaces mcp.allowed, ignores mcp.excluded)",
    )
    p.add_argument("--skip-trust", action="store_true", help="accepted for compatibility (folder trust is not implemented)")
