"""Dependency direction, checked in ``make test``.

- ``bus`` never imports ``actors``.
- The leaf helpers (``actors.common``) import only ``bus``, the standard library and
  third-party packages, never an actor, the host or a front end; everything may import
  them.
- An actor package never imports another actor package: actors share only ``bus``.
  Only the wiring (``actors.runtime``) and the entry points (``actors.cli``,
  ``actors.daemon``) may import several actors.
- Nothing outside the model gateway's bridge (``actors/gateway/_genai*.py``) imports
  ``asyncio`` or ``anyio``.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WIRING = {"runtime", "cli", "daemon", "acp", "chat", "replay"}
LEAF = "common"
ASYNC_BRIDGE_PREFIX = "actors/gateway/_genai"


def imports_of(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[tuple[int, str]] = []
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join([*base, node.module] if node.module else base)
            else:
                mod = node.module or ""
            found.append((node.lineno, mod))
            if node.module is None or node.level:
                found.extend((node.lineno, f"{mod}.{a.name}") for a in node.names)
    return found


def actor_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "actors" or len(parts) < 2:
        return None
    return parts[1]


def main() -> int:
    problems: list[str] = []
    for path in sorted([*ROOT.glob("bus/**/*.py"), *ROOT.glob("actors/**/*.py")]):
        rel = path.relative_to(ROOT).as_posix()
        own = actor_of(".".join(path.relative_to(ROOT).with_suffix("").parts))
        for line, mod in imports_of(path):
            top = mod.split(".")[0]
            if top in ("asyncio", "anyio") and not rel.startswith(ASYNC_BRIDGE_PREFIX):
                problems.append(f"{rel}:{line}: imports {mod} outside the gateway bridge")
            if rel.startswith("bus/") and top == "actors":
                problems.append(f"{rel}:{line}: bus imports {mod}")
            if own == LEAF and top == "actors" and actor_of(mod) != LEAF:
                problems.append(f"{rel}:{line}: leaf helpers import {mod}")
            other = actor_of(mod)
            if (
                rel.startswith("actors/")
                and own not in WIRING
                and other is not None
                and other != own
                and other != LEAF
                and other != "__init__"
            ):
                problems.append(f"{rel}:{line}: actor '{own}' imports actor '{other}' ({mod})")
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} dependency rule violation(s)")
        return 1
    print("dependency rules hold")
    return 0


if __name__ == "__main__":
    sys.exit(main())
