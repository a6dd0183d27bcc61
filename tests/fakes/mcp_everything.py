"""Where ``@modelcontextprotocol/server-everything`` (the MCP project's test server, from
npm) is: ``MCP_EVERYTHING_BIN``, else ``.npm-mcp/everything`` (where ``.ci/run`` installs
it; ``MCP_NPM_PREFIX`` moves it), else ``mcp-server-everything`` on PATH. It needs node."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VERSION = "2026.8.31"
"""The version .ci/run installs."""
INSTALL = f"npm install --prefix .npm-mcp/everything @modelcontextprotocol/server-everything@{VERSION}"
REQUIRED = "AGENTBUS_REQUIRE_MCP_EVERYTHING"
"""Set by .ci/run once it installed the server: then a test that cannot find it fails."""


def find_everything() -> Path | None:
    """The server's ``mcp-server-everything``, or None when it (or node) is missing."""
    if shutil.which("node") is None:
        return None
    explicit = os.environ.get("MCP_EVERYTHING_BIN")
    if explicit:
        return Path(explicit) if Path(explicit).is_file() else None
    prefix = Path(os.environ.get("MCP_NPM_PREFIX", ROOT / ".npm-mcp"))
    local = prefix / "everything" / "node_modules" / ".bin" / "mcp-server-everything"
    if local.is_file():
        return local.resolve()
    found = shutil.which("mcp-server-everything")
    return Path(found) if found else None
