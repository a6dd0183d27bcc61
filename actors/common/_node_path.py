"""Node's ``path`` module (POSIX) and Gemini's path predicates built on it.

Gemini CLI resolves, joins and compares paths with Node's rules (``path.resolve`` never
keeps a leading ``//``, ``path.relative`` answers ``''`` for the same path,
``path.extname`` of ``.bashrc`` is ``''``); the tools, the policy engine and the front
ends compute them here alike.
"""

from __future__ import annotations

import os
import posixpath


def node_resolve(*parts: str) -> str:
    """``path.resolve(...parts)`` (relative parts resolve against the process cwd)."""
    joined = ""
    for part in reversed(parts):
        if not part:
            continue
        joined = part if not joined else part + "/" + joined
        if part.startswith("/"):
            break
    if not joined.startswith("/"):
        joined = os.getcwd() + "/" + joined
    return _normalize_abs(joined)


def _normalize_abs(path: str) -> str:
    norm = posixpath.normpath(path)
    if norm.startswith("//"):
        norm = "/" + norm.lstrip("/")
    return norm


def node_join(*parts: str) -> str:
    """``path.join(...parts)``: concatenates with ``/`` then normalizes."""
    joined = "/".join(p for p in parts if p)
    if not joined:
        return "."
    trailing = joined.endswith("/")
    norm = posixpath.normpath(joined)
    if norm.startswith("//"):
        norm = "/" + norm.lstrip("/")
    if trailing and norm != "/":
        norm += "/"
    return norm


def node_relative(from_path: str, to_path: str) -> str:
    """``path.relative(from, to)`` (``''`` when they are the same path)."""
    start = node_resolve(from_path)
    target = node_resolve(to_path)
    if start == target:
        return ""
    rel = posixpath.relpath(target, start)
    return "" if rel == "." else rel


def node_extname(path: str) -> str:
    """``path.extname(path)`` (Node's algorithm, dot files included)."""
    start_dot = -1
    start_part = 0
    end = -1
    matched_slash = True
    pre_dot_state = 0
    for i in range(len(path) - 1, -1, -1):
        ch = path[i]
        if ch == "/":
            if not matched_slash:
                start_part = i + 1
                break
            continue
        if end == -1:
            matched_slash = False
            end = i + 1
        if ch == ".":
            if start_dot == -1:
                start_dot = i
            elif pre_dot_state != 1:
                pre_dot_state = 1
        elif start_dot != -1:
            pre_dot_state = -1
    if (
        start_dot == -1
        or end == -1
        or pre_dot_state == 0
        or (pre_dot_state == 1 and start_dot == end - 1 and start_dot == start_part + 1)
    ):
        return ""
    return path[start_dot:end]


def is_subpath(parent: str, child: str) -> bool:
    """Gemini's ``isSubpath`` (a path is a subpath of itself)."""
    rel = node_relative(parent, child)
    return not rel.startswith("../") and rel != ".." and not rel.startswith("/")


def is_within_root(path: str, root: str) -> bool:
    """Gemini's ``isWithinRoot`` (``fileUtils``)."""
    norm_path = node_resolve(path)
    norm_root = node_resolve(root)
    root_sep = norm_root if norm_root.endswith("/") else norm_root + "/"
    return norm_path == norm_root or norm_path.startswith(root_sep)
