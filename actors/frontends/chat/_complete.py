"""Tab completion in ``agentbus chat``: what may come next where the cursor is. No I/O
besides listing directories.

``complete(line, begidx, endidx, ...)`` takes readline's view of the line (the word
being completed is ``line[begidx:endidx]``, words split at whitespace) and returns the
candidates for that word, each ending with a space when it is complete (readline, as
Python sets it up, appends nothing) and with ``/`` for a directory:

- a slash command at the start of the line (``/to`` -> ``/tool``, ``/tool!``), the
  session's MCP prompts among them;
- a tool name after ``/tool`` or ``/tool!``; an approval mode after ``/mode``;
- a path after ``@`` anywhere in a prompt (``@src/ma`` -> ``@src/main.py``);
- a path in any later word of a ``!`` / ``!!`` shell command.

Paths are relative to the workspace unless absolute; hidden entries show only once the
typed name starts with a dot; a space in a name is escaped with a backslash, as ``@path``
references are written.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from actors.host.flags import APPROVAL_MODES

SLASH_COMMANDS = ("/help", "/sessions", "/resume", "/new", "/mode", "/mcp", "/tool", "/tool!", "/quit")
MAX_CANDIDATES = 500


def complete(
    line: str, begidx: int, endidx: int, *, tools: Sequence[str], workspace: Path, commands: Sequence[str] = ()
) -> list[str]:
    """``commands``: the session's own (``/<prompt>`` of its MCP servers), after the
    chat's."""
    word = line[begidx:endidx]
    before = line[:begidx].split()
    if not before and word.startswith("/"):
        return [f"{c} " for c in (*SLASH_COMMANDS, *commands) if c.startswith(word)]
    if before in (["/tool"], ["/tool!"]):
        return [f"{name} " for name in tools if name.startswith(word)]
    if before == ["/mode"]:
        return [f"{mode} " for mode in APPROVAL_MODES if mode.startswith(word)]
    if word.startswith("@"):
        return ["@" + c for c in path_candidates(word[1:], workspace)]
    if line.lstrip().startswith("!") and before:
        return path_candidates(word, workspace)
    return []


def path_candidates(prefix: str, workspace: Path) -> list[str]:
    """Entries whose path starts with ``prefix`` (relative to ``workspace`` unless
    absolute), directories with a trailing ``/``, files with a space."""
    typed = prefix.replace("\\ ", " ")
    cut = typed.rfind("/") + 1
    head, name = typed[:cut], typed[cut:]
    directory = workspace / head if head else workspace
    try:
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
    except OSError:
        return []
    out: list[str] = []
    for entry in entries:
        if not entry.name.startswith(name) or (entry.name.startswith(".") and not name.startswith(".")):
            continue
        try:
            is_dir = entry.is_dir()
        except OSError:
            is_dir = False
        text = (head + entry.name).replace(" ", "\\ ")
        out.append(text + ("/" if is_dir else " "))
        if len(out) >= MAX_CANDIDATES:
            break
    return out
