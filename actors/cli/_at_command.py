"""``@path`` references in a prompt: the files' contents go to the model with it.

A reference that names no existing file leaves the prompt as typed. ``\\@`` escapes.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

REFERENCE_CONTENT_START = "--- Content from referenced files ---"
REFERENCE_CONTENT_END = "--- End of content ---"

_AT_RE = re.compile(r"(?<![\\\w])@((?:\\ |[^\s])+)")
MAX_FILES = 100


def find_references(query: str) -> list[str]:
    return [m.group(1).replace("\\ ", " ") for m in _AT_RE.finditer(query)]


def _files_for(ref: str, workspace: Path) -> list[Path]:
    path = (workspace / ref).resolve()
    try:
        path.relative_to(workspace)
    except ValueError:
        return []
    if path.is_file():
        return [path]
    if path.is_dir():
        return sorted(p for p in path.rglob("*") if p.is_file() and ".git" not in p.parts)[:MAX_FILES]
    return []


def expand_at_references(query: str, workspace: Path) -> list[dict[str, Any]]:
    """The user message parts for ``query``."""
    refs = find_references(query)
    found: list[tuple[str, str]] = []
    for ref in refs:
        for file in _files_for(ref, workspace):
            try:
                text = file.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            found.append((str(file.relative_to(workspace)), text))
    if not found:
        return [{"text": query}]
    parts: list[dict[str, Any]] = [{"text": query}, {"text": f"\n{REFERENCE_CONTENT_START}"}]
    for rel, text in found:
        parts.append({"text": f"\nContent from @{rel}:\n"})
        parts.append({"text": text})
    parts.append({"text": f"\n{REFERENCE_CONTENT_END}"})
    return parts
