"""The built-in tools' declarations, kept on disk for the next process (a cache); the
tools' modules are imported when a tool is first used.

A session declares every built-in tool to the model (name, description, parameter
schema), and its tools' modules, imported to make those declarations, were 5.5 ms of a
``-p hi`` run (24 modules: the file tools, the shell, web fetch, the subagents'
tool...), though such a run calls none of them. ``reuse_declared_tools`` makes
``builtin_tools`` answer from this cache when it holds the same tools:

- an entry is found by the arguments of ``builtin_tools`` (model, tracker, subagents),
  the interpreter and the platform, and holds each tool's name, display name, kind and
  declaration for that model;
- it is used only while the modules that made it are unchanged: the size and
  modification time of every source file of ``actors/tools`` and of every other
  agentbus module the tools imported (a changed tool declares afresh);
- what it gives are ``DeclaredTool`` objects: they answer the name, kind and
  declaration themselves, and anything else (validating, describing, running a call,
  the confirmation details) from the real tool, which the first such use makes (every
  built-in tool at once, as ``builtin_tools`` makes them): a session that calls no tool
  imports none of their modules. The executor runs the real tool (``real_tool``); a
  declared tool whose real one was never made ran no call, and has nothing to release
  when the session ends (``loaded_tool``).

Tools that answer what the host asks at setup other than these (an MCP tool's policy
annotations) are not kept. The file is named after the interpreter's bytecode, lives
beside the compiled-methods cache (``$XDG_CACHE_HOME/agentbus``) and is written aside and
moved into place; one that cannot be read or written is as good as none. The entry point
turns it on for a process of its own (``actors.frontends.main``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

from actors.common import file_stamps, read_cache_file, write_cache_file

from ._base import Tool

MAX_ENTRIES = 16
"""Above this many entries (models, tool sets), the oldest go."""

_path: str | None = None
_stored: dict[str, Any] | None = None
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
"""The source tree holding ``actors`` and ``bus``."""


def reuse_declared_tools(path: str) -> None:
    """Declare the built-in tools from the cache at ``path`` from now on."""
    global _path, _stored
    _path, _stored = path, None


class _Loader:
    """Makes the real tools of one ``builtin_tools`` call, once, at the first use of one."""

    def __init__(self, build: Callable[[], tuple[Tool, ...]]) -> None:
        self._build = build
        self.tools: dict[str, Tool] | None = None

    def load(self) -> dict[str, Tool]:
        if self.tools is None:
            self.tools = {t.name: t for t in self._build()}
        return self.tools


class DeclaredTool:
    """A built-in tool as the cache declares it; the real one made by its first use."""

    policy_annotations = None
    mcp_context = None
    """What the host reads of every tool at setup: none for a built-in tool."""

    def __init__(self, loader: _Loader, name: str, display_name: str, kind: str, declarations: dict[str, Any]) -> None:
        self.name = name
        self.display_name = display_name
        self.kind = kind
        self._declarations = declarations
        self._loader = loader

    def declaration(self, model: str) -> dict[str, Any]:
        declared = self._declarations.get(model)
        if declared is None:
            declared = self._declarations[model] = self.real().declaration(model)
        return declared  # type: ignore[no-any-return]

    def real(self) -> Tool:
        tool = self._loader.load().get(self.name)
        if tool is None:  # a cache another version wrote: its entry is not used again
            raise LookupError(f"the built-in tool {self.name!r} is not made by this version of agentbus")
        return tool

    def loaded(self) -> Tool | None:
        """The real tool if it was made (else none of these tools ran a call, and it
        holds nothing)."""
        return None if self._loader.tools is None else self._loader.tools.get(self.name)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        try:
            real = self.real()
        except LookupError as exc:  # what ``getattr(tool, name, default)`` expects
            raise AttributeError(f"{name}: {exc}") from exc
        return getattr(real, name)

    def __repr__(self) -> str:
        return f"DeclaredTool({self.name!r})"


def real_tool(tool: Any) -> Any:
    """The tool that runs a call: a declared tool's real one."""
    return tool.real() if type(tool) is DeclaredTool else tool


def loaded_tool(tool: Any) -> Any:
    """``real_tool``, or None for a declared tool whose real one was never made."""
    return tool.loaded() if type(tool) is DeclaredTool else tool


def declared_tools(key: tuple[Any, ...], build: Callable[[], tuple[Tool, ...]]) -> tuple[Any, ...]:
    """``build()``'s tools, declared from the cache when it holds them for ``key`` (the
    arguments of ``builtin_tools``; ``key[0]`` the model) and their sources are unchanged;
    else built, and kept for the next process."""
    if _path is None:
        return build()
    if not _tool_sources():
        return build()  # an install without its sources: a changed tool could not be told
    text = repr((_ROOT, sys.version, sys.platform, key))  # two installs keep their own
    entries = _entries()
    try:
        entry = entries.get(text)
        if entry is not None and _unchanged(entry[0]):
            loader = _Loader(build)
            return tuple(
                DeclaredTool(loader, str(name), str(display), str(kind), {key[0]: dict(declaration)})
                for name, display, kind, declaration in entry[1]
            )
    except (TypeError, ValueError, KeyError, IndexError):  # an entry of another shape is as good as none
        pass
    before = set(sys.modules)
    tools = build()
    _store(text, key[0], tools, [m for m in sys.modules if m not in before])
    return tools


def _store(text: str, model: str, tools: tuple[Tool, ...], modules: list[str]) -> None:
    import marshal

    if any(getattr(t, "policy_annotations", None) is not None or getattr(t, "mcp_context", None) is not None for t in tools):
        return
    mine = [m for m in modules if _source(m) is not None]
    stamps = file_stamps(sorted({*_tool_sources(), *(s for m in mine if (s := _source(m)) is not None)}))
    if stamps is None:
        return
    entry = (stamps, [(t.name, t.display_name, t.kind, t.declaration(model)) for t in tools])
    try:
        marshal.dumps(entry)
    except ValueError:  # a declaration marshal does not hold: not kept
        return
    entries = _entries()
    entries.pop(text, None)
    entries[text] = entry
    while len(entries) > MAX_ENTRIES:
        del entries[next(iter(entries))]
    assert _path is not None
    write_cache_file(_path, entries)


def _source(module: str) -> str | None:
    """An agentbus module's source file; None for any other module."""
    path = getattr(sys.modules.get(module), "__file__", None)
    if not isinstance(path, str) or not path.endswith(".py"):
        return None
    path = os.path.abspath(path)
    return path if path.startswith(_ROOT + os.sep) else None


def _tool_sources() -> list[str]:
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        return [os.path.join(here, n) for n in os.listdir(here) if n.endswith(".py")]
    except OSError:
        return []


def _unchanged(stamps: Any) -> bool:
    """Every source file the entry was made from is as it was, and no tool module was
    added since."""
    try:
        paths = [p for p, _, _ in stamps]
        return file_stamps(paths) == [tuple(s) for s in stamps] and set(_tool_sources()) <= set(paths)
    except (TypeError, ValueError):
        return False


def _entries() -> dict[str, Any]:
    global _stored
    if _stored is None:
        loaded = read_cache_file(_path) if _path is not None else None
        _stored = loaded if isinstance(loaded, dict) else {}
    return _stored
