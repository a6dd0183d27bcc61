"""The layers of the tree, checked in ``make test``. The rules are the data below.

    bus  <-  actors.common  <-  the actors  <-  actors.host  <-  actors.frontends

A module imports only from its own layer or the layers to its left. Within the actors'
layer an actor never imports another actor (they share only ``bus``). Packages (one
actor, the host, one front end) import each other without cycles, and never another
package's ``_private`` module: what a package offers others is public. Outside the
gateway's bridge to google-genai nothing imports ``asyncio`` or ``anyio``.

``tests/`` mirror the tree; a test package may import the private modules of the package
it tests (``tests/frontends/acp`` -> ``actors.frontends.acp._view``), and any public one.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("bus", ("bus",)),
    ("leaf helpers", ("actors.common", "actors.recording")),
    (
        "actors",
        (
            "actors.gateway",
            "actors.hooks",
            "actors.loops",
            "actors.mcp",
            "actors.recorder",
            "actors.scheduler",
            "actors.session",
            "actors.tools",
            "actors.turn",
        ),
    ),
    # actors.cluster: sessions on NATS JetStream (leases, journals, servers), for the daemon.
    ("host", ("actors.host", "actors.cluster")),
    (
        "front ends",
        (
            "actors.frontends.acp",
            "actors.frontends.agents",
            "actors.frontends.chat",
            "actors.frontends.cluster",
            "actors.frontends.daemon",
            "actors.frontends.demo",
            "actors.frontends.explore",
            "actors.frontends.headless",
            "actors.frontends.replay",
            "actors.frontends.tool",
            "actors.frontends.web",
            # The entry point: dispatches to the front ends above.
            "actors.frontends",
        ),
    ),
)
"""Each layer and its packages; a package is a module prefix."""

SHARING_LAYERS = {"leaf helpers", "host", "front ends"}
"""Layers whose packages may import each other (without cycles); in the actors' layer an
actor imports no other actor."""

ASYNC_ALLOWED = ("actors/gateway/_genai", "actors/cluster/_nats")
"""Path prefixes that may import asyncio or anyio (the google-genai and nats-py bridges)."""

ROOT_MODULES = {"actors", "actors.__init__"}
"""The ``actors`` package itself (its docstring only)."""


def package_of(module: str) -> str | None:
    best = None
    for _layer, packages in LAYERS:
        for pkg in packages:
            if (module == pkg or module.startswith(pkg + ".")) and (
                best is None or len(pkg) > len(best)
            ):
                best = pkg
    return best


def layer_of(package: str) -> int:
    for i, (_layer, packages) in enumerate(LAYERS):
        if package in packages:
            return i
    raise KeyError(package)


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


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
            found.extend((node.lineno, f"{mod}.{a.name}") for a in node.names)
    return found


def private_part(module: str, package: str) -> str | None:
    """The first ``_private`` component of ``module`` below ``package``, if any."""
    rest = module[len(package) :].lstrip(".")
    for part in rest.split(".") if rest else ():
        if part.startswith("_") and not part.startswith("__"):
            return part
    return None


def known_module(name: str) -> bool:
    """Whether ``name`` is a module (or package) of this tree, not a name imported from one."""
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def check_tree() -> list[str]:
    problems: list[str] = []
    edges: dict[str, set[str]] = defaultdict(set)
    for path in sorted([*ROOT.glob("bus/**/*.py"), *ROOT.glob("actors/**/*.py")]):
        rel = path.relative_to(ROOT).as_posix()
        own_module = module_name(path)
        own = package_of(own_module)
        if own is None:
            if own_module not in ROOT_MODULES:
                problems.append(f"{rel}: belongs to no layer (add its package to LAYERS)")
            continue
        for line, mod in imports_of(path):
            top = mod.split(".")[0]
            if top in ("asyncio", "anyio") and not rel.startswith(ASYNC_ALLOWED):
                problems.append(f"{rel}:{line}: imports {mod} outside the gateway bridge")
            if top not in ("bus", "actors"):
                continue
            other = package_of(mod)
            if other is None:
                if mod not in ROOT_MODULES:
                    problems.append(f"{rel}:{line}: imports {mod}, which belongs to no layer")
                continue
            if other == own:
                continue
            mine, theirs = layer_of(own), layer_of(other)
            if theirs > mine:
                problems.append(
                    f"{rel}:{line}: {LAYERS[mine][0]} ({own}) imports {LAYERS[theirs][0]} ({mod})"
                )
            elif theirs == mine and LAYERS[mine][0] not in SHARING_LAYERS:
                problems.append(f"{rel}:{line}: actor {own} imports actor {other} ({mod})")
            private = private_part(mod, other)
            if private is not None and known_module(
                mod[: mod.index(private) + len(private)].rstrip(".")
            ):
                problems.append(f"{rel}:{line}: imports {mod}, private to {other}")
            edges[own].add(other)
    problems.extend(cycles(edges))
    return problems


def tested_package(path: Path) -> str | None:
    """The package a test module mirrors: ``tests/frontends/acp/…`` -> ``actors.frontends.acp``,
    ``tests/bus/…`` -> ``bus``; None for tests of the whole (``tests/system``, ``bench``…)."""
    dirs = path.relative_to(ROOT / "tests").parts[:-1]
    for n in range(len(dirs), 0, -1):
        dotted = ".".join(dirs[:n])
        for candidate in (f"actors.{dotted}", dotted):
            if package_of(candidate) == candidate:
                return candidate
    return None


def check_tests() -> list[str]:
    """Tests import only public names, but for the private modules of the package they mirror."""
    problems: list[str] = []
    for path in sorted(ROOT.glob("tests/**/*.py")):
        rel = path.relative_to(ROOT).as_posix()
        own = tested_package(path)
        for line, mod in imports_of(path):
            if mod.split(".")[0] not in ("bus", "actors"):
                continue
            other = package_of(mod)
            if other is None or other == own:
                continue
            private = private_part(mod, other)
            if private is not None and known_module(
                mod[: mod.index(private) + len(private)].rstrip(".")
            ):
                problems.append(f"{rel}:{line}: imports {mod}, private to {other}")
    return problems


def cycles(edges: dict[str, set[str]]) -> list[str]:
    found: list[str] = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                found.append("import cycle: " + " -> ".join([*stack[stack.index(nxt) :], nxt]))
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node)
    return found


def main() -> int:
    problems = check_tree() + check_tests()
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} dependency rule violation(s)")
        return 1
    print("dependency rules hold")
    return 0


if __name__ == "__main__":
    sys.exit(main())
