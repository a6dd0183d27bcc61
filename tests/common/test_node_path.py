"""Node's ``path`` module (POSIX) and Gemini's path predicates; expectations from node."""

from __future__ import annotations

import os

from actors.common import (
    is_subpath,
    is_within_root,
    node_extname,
    node_join,
    node_relative,
    node_resolve,
)


def test_node_path_functions() -> None:
    assert node_join("/a", "../b", "c/") == "/b/c/"
    assert node_join("/a", "/b") == "/a/b"
    assert node_join() == "."
    assert node_relative("/a/b", "/a/b") == ""
    assert node_relative("/a/b", "/a/c/d") == "../c/d"
    assert node_resolve("//a//b/../c") == "/a/c"  # Node keeps no leading //
    assert node_resolve("/x", "y") == "/x/y"
    assert node_resolve("y") == os.getcwd() + "/y"
    assert [node_extname(p) for p in ("a.b.c", ".bashrc", "a.", "noext", "x/.a.ts")] == [
        ".c",
        "",
        ".",
        "",
        ".ts",
    ]


def test_is_subpath_and_is_within_root() -> None:
    # One predicate for the tools and the policy engine (which had its own on
    # os.path.relpath).
    assert is_subpath("/ws", "/ws") and is_subpath("/ws", "/ws/a/b")
    assert not is_subpath("/ws", "/wsx") and not is_subpath("/ws", "/")
    assert is_subpath("/ws", "/ws/..a")  # a name starting with dots is inside
    assert is_within_root("/ws/a", "/ws") and is_within_root("/ws", "/ws/")
    assert not is_within_root("/wsx", "/ws")
