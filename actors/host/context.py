"""What the model is told about the session: the system instruction and the first
user turn describing the environment (our own words; Gemini CLI sends its own)."""

from __future__ import annotations

import datetime
import os
import platform
from pathlib import Path

MAX_TREE_ITEMS = 200
SKIP_DIRS = frozenset({".git", "node_modules", "__pycache__", ".venv"})

SYSTEM_INSTRUCTION = """\
You are an interactive command-line agent that helps with software engineering tasks.
Work in the user's workspace with the tools you are given. Read before you change;
keep changes minimal and in the style of the surrounding code; verify what you did
when you can (build, tests, linters). Call independent read-only tools together so
they run in parallel; set wait_for_previous when a call depends on earlier ones.
Explain shell commands that modify the system before running them. Be concise: answer
in a few lines unless asked for detail, and do not restate what a tool already showed.
"""


def directory_tree(root: Path, limit: int = MAX_TREE_ITEMS) -> str:
    """A breadth-first listing of up to ``limit`` entries, as an indented tree."""
    lines = [f"{root}/"]
    count = 0
    truncated = False
    queue: list[tuple[Path, int]] = [(root, 0)]
    listing: dict[Path, list[Path]] = {}
    order: list[tuple[Path, int]] = []
    while queue and not truncated:
        folder, depth = queue.pop(0)
        try:
            entries = sorted(folder.iterdir(), key=lambda p: (not p.is_dir(), p.name.lower()))
        except OSError:
            continue
        kept = []
        for entry in entries:
            if count >= limit:
                truncated = True
                break
            kept.append(entry)
            count += 1
            if entry.is_dir() and entry.name not in SKIP_DIRS:
                queue.append((entry, depth + 1))
        listing[folder] = kept
        order.append((folder, depth))

    def render(folder: Path, prefix: str) -> None:
        kids = listing.get(folder, [])
        for i, kid in enumerate(kids):
            last = i == len(kids) - 1
            branch = "└───" if last else "├───"
            lines.append(f"{prefix}{branch}{kid.name}{'/' if kid.is_dir() else ''}")
            if kid in listing:
                render(kid, prefix + ("    " if last else "│   "))

    render(root, "")
    if truncated:
        lines.append(f"... (listing stopped at {limit} items)")
    return "\n".join(lines)


def session_context(workspace: Path, project_temp_dir: Path, today: datetime.date | None = None) -> str:
    today = today or datetime.date.today()
    return (
        "<session_context>\n"
        "This is an agentbus session; here is what you should know about the environment.\n"
        f"Today's date is {today.strftime('%A, %B %d, %Y')}.\n"
        f"Operating system: {platform.system().lower() or os.name}\n"
        f"Temporary directory for this project: {project_temp_dir}\n"
        f"Workspace directory: {workspace}\n"
        f"Workspace contents (up to {MAX_TREE_ITEMS} items):\n\n"
        f"{directory_tree(workspace)}\n"
        "</session_context>"
    )
