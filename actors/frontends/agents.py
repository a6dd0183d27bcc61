"""``agentbus agents``: the subagents a session in this workspace can start.

    agentbus agents                 list them (name, where from, description) and what
                                    failed to load
    agentbus agents --acknowledge   trust this project's agent files as they are now
                                    (Gemini CLI's acknowledgement: a project agent is
                                    used only after it is acknowledged, and again after
                                    every change to its file)
    -o json                         the same as one JSON document

Exit codes: see ``EXIT_CODES`` (``--help`` shows them).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from actors.host import settings as _settings
from actors.tools import acknowledge, builtin_tools, load_registry

EXIT_CODES = """Exit codes:
  0  listed, and every definition loaded; with --acknowledge: acknowledged (definitions
     that failed to load are still listed on stderr)
  1  listing: a definition failed to load (listed on stderr)
 52  a settings file is broken (named on stderr)"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agentbus agents",
        description="List the subagents of this workspace (built in, ~/.gemini/agents/*.md, "
        ".gemini/agents/*.md) and any definition that failed to load.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--acknowledge",
        action="store_true",
        help="trust this project's agent files as they are now (again after each change)",
    )
    parser.add_argument("-o", "--output-format", choices=("text", "json"), default="text", help="text (default) or json")
    return parser


def main(argv: Sequence[str]) -> int:
    args = build_parser().parse_args(list(argv))
    workspace = Path(os.getcwd()).resolve()
    _settings.load_settings(workspace)  # a broken settings file stops it, as every command (exit 52)
    home = _settings.gemini_home()
    names = [t.name for t in builtin_tools("", agents=True)]
    registry = load_registry(workspace=workspace, home=home, known_tools=names)
    acknowledged = []
    if args.acknowledge and registry.unacknowledged:
        acknowledge(home, workspace, registry.unacknowledged)
        acknowledged = [a.name for a in registry.unacknowledged]
        registry = load_registry(workspace=workspace, home=home, known_tools=names)
    if args.output_format == "json":
        doc = {
            "agents": [
                {
                    "name": a.name,
                    "source": a.source,
                    "description": a.description,
                    "max_turns": a.max_turns,
                    "timeout_mins": a.timeout_mins,
                    "tools": list(a.tools) if a.tools is not None else None,
                }
                for a in registry.agents.values()
            ],
            "unacknowledged": [
                {"name": a.name, "source": a.source} for a in registry.unacknowledged
            ],
            "acknowledged": acknowledged,
            "errors": list(registry.errors),
        }
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        for a in registry.agents.values():
            sys.stdout.write(f"{a.name}  ({a.source})\n    {a.description}\n")
        for name in acknowledged:
            sys.stdout.write(f"acknowledged: {name}\n")
        for a in registry.unacknowledged:
            sys.stdout.write(
                f"{a.name}  ({a.source})  not acknowledged: run `agentbus agents --acknowledge` to use it\n"
            )
    for error in registry.errors:
        sys.stderr.write(f"{error}\n")
    # Acknowledging is what was asked: it succeeded, whatever else failed to load.
    return 1 if registry.errors and not args.acknowledge else 0
