"""Subagent definitions: the built-in agents and the Markdown files Gemini CLI loads.

A definition says who the agent is (name, description), how it runs (model,
temperature, turn and time limits), what it may use (tools), what it takes (one input,
filled from ``invoke_agent``'s ``prompt``) and what it must hand back (the argument of
``complete_task``, validated against an output schema when there is one).

Files are Gemini CLI's: ``*.md`` in ``<workspace>/.gemini/agents/`` and
``~/.gemini/agents/`` (names starting with ``_`` skipped), YAML front matter between
``---`` lines, the body is the system prompt. Keys as Gemini CLI accepts them (``name``,
``description``, ``display_name``, ``tools``, ``model``, ``temperature``, ``max_turns``,
``timeout_mins``, ``kind: local``), plus two of ours: ``output_name`` and
``output_schema`` (a JSON Schema for ``complete_task``'s argument). Project agents are
used once acknowledged (Gemini CLI's ``~/.gemini/acknowledgments/agents.json``: the
file's SHA-256 per project and name), as Gemini CLI does: ``agentbus agents
--acknowledge`` records them.

Loading never raises for one bad file: its error is kept (``AgentRegistry.errors``,
and per name in ``broken``) so that the run goes on and invoking that agent says why.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from actors.common import LazyPattern

DEFAULT_MAX_TURNS = 30
DEFAULT_MAX_TIME_MINUTES = 10
DEFAULT_QUERY = "Get Started!"
GRACE_PERIOD_S = 60.0
DEFAULT_MAX_DEPTH = 3
"""How deep subagents may nest (``agents.maxDepth``): the main session is depth 0."""

NAME_PATTERN = LazyPattern(r"^[a-z0-9-_]+$")
FRONTMATTER = LazyPattern(r"^---\r?\n([\s\S]*?)\r?\n---(?:\r?\n([\s\S]*))?")

_LOCAL_KEYS = {
    "kind",
    "name",
    "description",
    "display_name",
    "tools",
    "mcp_servers",
    "model",
    "temperature",
    "max_turns",
    "timeout_mins",
    # ours
    "output_name",
    "output_schema",
}
_REMOTE_KEYS = {"agent_card_url", "agent_card_json", "auth"}

NEVER_DELEGATED = frozenset({"update_topic"})
"""Tools a subagent never gets, even with ``tools: ["*"]`` (Gemini CLI's rule)."""
AGENT_TOOL = "invoke_agent"
COMPLETE_TASK = "complete_task"


class AgentLoadError(Exception):
    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"Failed to load agent from {path}: {message}")
        self.path = path


@attrs.frozen(kw_only=True)
class AgentDefinition:
    name: str
    description: str
    system_prompt: str
    display_name: str = ""
    query: str = "${query}"
    """The first user message, a template over the inputs (``${name}``)."""
    input_schema: Mapping[str, Any] = attrs.field(
        factory=lambda: {
            "type": "object",
            "properties": {"query": {"type": "string", "description": "The task for the agent."}},
            "required": [],
        }
    )
    output_name: str | None = None
    """``complete_task``'s argument when the agent has an output schema."""
    output_schema: Mapping[str, Any] | None = None
    model: str = "inherit"
    temperature: float = 1.0
    top_p: float = 0.95
    max_turns: int = DEFAULT_MAX_TURNS
    timeout_mins: float = DEFAULT_MAX_TIME_MINUTES
    tools: tuple[str, ...] | None = None
    """Tool names (``*``: all); None: every tool of the parent session."""
    source: str = "builtin"
    """``builtin`` or the file it came from."""
    sha256: str = ""

    @property
    def title(self) -> str:
        return self.display_name or self.name

    def inputs_for(self, prompt: str) -> dict[str, Any]:
        """Gemini CLI's mapping of ``invoke_agent``'s ``prompt``: the input schema's only
        property gets it, else ``prompt``."""
        props = self.input_schema.get("properties")
        if isinstance(props, Mapping) and len(props) == 1:
            return {next(iter(props)): prompt}
        return {"prompt": prompt}


def template(text: str, inputs: Mapping[str, Any]) -> str:
    """``${key}`` placeholders filled from ``inputs``; a missing key is an error."""
    keys = dict.fromkeys(re.findall(r"\$\{(\w+)\}", text))
    missing = [k for k in keys if k not in inputs]
    if missing:
        raise ValueError(
            "Template validation failed: Missing required input parameters: "
            f"{', '.join(missing)}. Available inputs: {', '.join(inputs)}"
        )
    return re.sub(r"\$\{(\w+)\}", lambda m: str(inputs[m.group(1)]), text)


def agent_tool_names(
    definition: AgentDefinition, available: Sequence[str], *, may_nest: bool
) -> tuple[str, ...]:
    """The parent's tools this agent gets, in the parent's registry order.

    All of them for no ``tools`` or ``*``, except ``update_topic`` and ``invoke_agent``
    (Gemini CLI never gives agents to agents); ``invoke_agent`` only when the definition
    names it. At the nesting bound (not ``may_nest``) it stays, so that a call of it gets
    the precise error (``InvokeAgentTool.validate``) rather than "tool not found"."""
    wanted = definition.tools
    never = NEVER_DELEGATED | {COMPLETE_TASK}
    if wanted is None or "*" in wanted:
        return tuple(n for n in available if n not in never and n != AGENT_TOOL)
    named = set(wanted)
    return tuple(n for n in available if n in named and n not in never)


# -- files ----------------------------------------------------------------------------
def parse_agent_markdown(
    path: str, text: str, *, known_tools: Iterable[str] = ()
) -> AgentDefinition:
    """One agent file; raises ``AgentLoadError`` saying what is wrong and where."""
    import yaml

    match = FRONTMATTER.match(text)
    if match is None:
        raise AgentLoadError(
            path,
            "Invalid agent definition: Missing mandatory YAML frontmatter. Agent Markdown files "
            'MUST start with YAML frontmatter enclosed in triple-dashes "---" (e.g., '
            "---\\nname: my-agent\\n---).",
        )
    try:
        raw = yaml.safe_load(match.group(1))
    except yaml.YAMLError as exc:
        raise AgentLoadError(
            path, f"YAML frontmatter parsing failed: {_yaml_message(exc)}"
        ) from None
    except RecursionError:
        raise AgentLoadError(path, "YAML frontmatter parsing failed: nested too deep") from None
    except ValueError as exc:  # a value YAML reads but Python cannot make (a date of 30 February)
        why = "an integer of more than 4,300 digits" if "integer string conversion" in str(exc) else str(exc)
        raise AgentLoadError(path, f"YAML frontmatter parsing failed: {why}") from None
    if isinstance(raw, list) or (
        isinstance(raw, dict) and (raw.get("kind") == "remote" or _REMOTE_KEYS & set(raw))
    ):
        raise AgentLoadError(path, "remote agents (A2A) are not supported by agentbus")
    if not isinstance(raw, dict):
        raise AgentLoadError(
            path, "Validation failed: Agent Definition: the frontmatter must be a mapping"
        )
    problems = _check_frontmatter(raw, set(known_tools))
    if problems:
        raise AgentLoadError(path, "Validation failed: Agent Definition:\n" + "\n".join(problems))
    output_schema = raw.get("output_schema")
    if output_schema is not None:
        import jsonschema

        try:
            jsonschema.Draft202012Validator.check_schema(output_schema)
        except jsonschema.SchemaError as exc:
            raise AgentLoadError(path, f"Validation failed: output_schema: {exc.message}") from None
    tools = raw.get("tools")
    return AgentDefinition(
        name=raw["name"],
        description=raw["description"],
        display_name=raw.get("display_name") or "",
        system_prompt=(match.group(2) or "").strip(),
        model=raw.get("model") or "inherit",
        temperature=float(raw.get("temperature", 1)),
        max_turns=int(raw.get("max_turns", DEFAULT_MAX_TURNS)),
        timeout_mins=float(raw.get("timeout_mins", DEFAULT_MAX_TIME_MINUTES)),
        tools=tuple(tools) if tools is not None else None,
        output_name=(raw.get("output_name") or "result") if output_schema is not None else None,
        output_schema=output_schema,
        source=path,
        sha256=hashlib.sha256(text.encode("utf-8")).hexdigest(),
    )


def _yaml_message(exc: Exception) -> str:
    """``line L, column C: <problem>`` (lines of the file: the front matter starts on 2)."""
    problem = getattr(exc, "problem", None)
    mark = getattr(exc, "problem_mark", None)
    if problem and mark is not None:
        return f"line {mark.line + 2}, column {mark.column + 1}: {problem}"
    return " ".join(str(exc).split())


def _check_frontmatter(raw: Mapping[str, Any], known_tools: set[str]) -> list[str]:
    problems: list[str] = []
    unknown = sorted(set(raw) - _LOCAL_KEYS)
    if unknown:
        problems.append(f"Unrecognized key(s) in object: {', '.join(repr(k) for k in unknown)}")
    if raw.get("kind", "local") != "local":
        problems.append('kind: Invalid literal value, expected "local"')
    name = raw.get("name")
    if not isinstance(name, str):
        problems.append("name: Required" if name is None else "name: Expected string")
    elif not NAME_PATTERN.match(name):
        problems.append("name: Name must be a valid slug")
    description = raw.get("description")
    if not isinstance(description, str) or not description:
        problems.append(
            "description: Required"
            if description is None
            else "description: must be a non-empty string"
        )
    for key in ("display_name", "model", "output_name"):
        if key in raw and not isinstance(raw[key], str):
            problems.append(f"{key}: Expected string")
    if "temperature" in raw and (
        isinstance(raw["temperature"], bool) or not isinstance(raw["temperature"], int | float)
    ):
        problems.append("temperature: Expected number")
    for key in ("max_turns", "timeout_mins"):
        value = raw.get(key)
        if key in raw and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
            problems.append(f"{key}: Expected a positive integer")
    tools = raw.get("tools")
    if "tools" in raw:
        if not isinstance(tools, list) or not all(isinstance(t, str) for t in tools):
            problems.append("tools: Expected an array of strings")
        elif known_tools:
            for tool in tools:
                if tool != "*" and tool != COMPLETE_TASK and tool not in known_tools:
                    hint = _closest(tool, known_tools)
                    problems.append(
                        f"tools: unknown tool '{tool}'"
                        + (f" (did you mean '{hint}'?)" if hint else "")
                    )
    if "mcp_servers" in raw and raw["mcp_servers"]:
        problems.append("mcp_servers: MCP servers are not supported by agentbus")
    if "output_schema" in raw and not isinstance(raw["output_schema"], dict):
        problems.append("output_schema: Expected an object (a JSON Schema)")
    return problems


def _closest(word: str, choices: Iterable[str]) -> str | None:
    import difflib

    found = difflib.get_close_matches(word, sorted(choices), n=1)
    return found[0] if found else None


# -- the registry ---------------------------------------------------------------------
@attrs.frozen(kw_only=True)
class AgentRegistry:
    agents: Mapping[str, AgentDefinition]
    """Usable agents by name: built-ins, then acknowledged project agents, then user agents."""
    errors: tuple[str, ...] = ()
    """``Agent loading error: …`` lines, for stderr."""
    broken: Mapping[str, str] = attrs.field(factory=dict)
    """Agent name (when the file says one) -> why it could not be loaded."""
    unacknowledged: tuple[AgentDefinition, ...] = ()
    """Project agents waiting for ``agentbus agents --acknowledge``."""


def acknowledgments_path(home: Path) -> Path:
    return home / ".gemini" / "acknowledgments" / "agents.json"


def read_acknowledgments(home: Path) -> dict[str, dict[str, str]]:
    try:
        data = json.loads(acknowledgments_path(home).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def acknowledge(home: Path, workspace: Path, agents: Iterable[AgentDefinition]) -> None:
    data = read_acknowledgments(home)
    project = data.setdefault(str(workspace), {})
    for agent in agents:
        project[agent.name] = agent.sha256
    path = acknowledgments_path(home)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")


def load_agent_dir(
    directory: Path, known_tools: Iterable[str]
) -> tuple[list[AgentDefinition], list[AgentLoadError], dict[str, str]]:
    agents: list[AgentDefinition] = []
    errors: list[AgentLoadError] = []
    broken: dict[str, str] = {}
    try:
        entries = sorted(
            p
            for p in directory.iterdir()
            if p.is_file() and p.suffix == ".md" and not p.name.startswith("_")
        )
    except FileNotFoundError:
        return agents, errors, broken
    except OSError as exc:
        return (
            agents,
            [AgentLoadError(str(directory), f"Could not list directory: {exc.strerror}")],
            broken,
        )
    for path in entries:
        try:
            text = path.read_text(encoding="utf-8")
            agents.append(parse_agent_markdown(str(path), text, known_tools=known_tools))
        except AgentLoadError as exc:
            errors.append(exc)
            name = _declared_name(path)
            if name:
                broken[name] = str(exc)
        except (OSError, UnicodeDecodeError) as exc:
            errors.append(AgentLoadError(str(path), f"Could not read file: {exc}"))
    return agents, errors, broken


def _declared_name(path: Path) -> str | None:
    try:
        found = re.search(
            r"^name:\s*['\"]?([a-zA-Z0-9_-]+)", path.read_text(encoding="utf-8"), re.MULTILINE
        )
    except (OSError, UnicodeDecodeError):
        return None
    return found.group(1) if found else path.stem


def load_registry(
    *, workspace: Path, home: Path, known_tools: Sequence[str], enabled: bool = True
) -> AgentRegistry:
    """Gemini CLI's order: built-ins, the project's (acknowledged), the user's; the first
    definition of a name wins and a later duplicate is reported."""
    if not enabled:
        return AgentRegistry(agents={})
    agents: dict[str, AgentDefinition] = {a.name: a for a in builtin_agents()}
    errors: list[str] = []
    broken: dict[str, str] = {}
    unacked: list[AgentDefinition] = []
    acks = read_acknowledgments(home).get(str(workspace), {})
    for directory, project in (
        (workspace / ".gemini" / "agents", True),
        (home / ".gemini" / "agents", False),
    ):
        found, errs, bad = load_agent_dir(directory, known_tools)
        errors.extend(f"Agent loading error: {e}" for e in errs)
        for name, why in bad.items():
            broken.setdefault(name, why)
        for agent in found:
            if project and acks.get(agent.name) != agent.sha256:
                unacked.append(agent)
                broken.setdefault(
                    agent.name,
                    f"the project agent {agent.source} is not acknowledged (run `agentbus agents "
                    "--acknowledge` in the workspace to trust it as it is now)",
                )
                continue
            if agent.name in agents:
                errors.append(
                    f"Duplicate agent name '{agent.name}' detected. The later definition will be "
                    "ignored. Rename one of the agents to avoid this conflict."
                )
                continue
            agents[agent.name] = agent
    broken = {name: why for name, why in broken.items() if name not in agents}
    return AgentRegistry(
        agents=agents, errors=tuple(errors), broken=broken, unacknowledged=tuple(unacked)
    )


# -- built-in agents --------------------------------------------------------------------
def builtin_agents() -> tuple[AgentDefinition, ...]:
    """Gemini CLI's built-in local agents that agentbus can run (``cli_help`` needs Gemini
    CLI's own documentation, which agentbus does not ship; the browser agent is opt-in
    there and absent here). Names, inputs, outputs, tools and limits are Gemini CLI's;
    the prompts are ours."""
    investigator_report = {
        "type": "object",
        "properties": {
            "SummaryOfFindings": {
                "type": "string",
                "description": "What the investigation concluded, for the agent that asked.",
            },
            "ExplorationTrace": {
                "type": "array",
                "items": {"type": "string"},
                "description": "The steps taken and tools used, in order.",
            },
            "RelevantLocations": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "FilePath": {"type": "string"},
                        "Reasoning": {"type": "string"},
                        "KeySymbols": {"type": "array", "items": {"type": "string"}},
                    },
                    "required": ["FilePath", "Reasoning", "KeySymbols"],
                },
                "description": "Files that matter and the symbols in them.",
            },
        },
        "required": ["SummaryOfFindings", "ExplorationTrace", "RelevantLocations"],
    }
    return (
        AgentDefinition(
            name="codebase_investigator",
            display_name="Codebase Investigator Agent",
            description=(
                "Investigates a codebase in depth: maps the architecture and the dependencies "
                "that matter for a task, finds root causes of bugs, and plans where a change "
                "must go. Use it for vague requests, bug hunts, refactorings and features that "
                "need an understanding of the code first. It returns a structured report of "
                "the relevant files, symbols and insights."
            ),
            input_schema={
                "type": "object",
                "properties": {
                    "objective": {
                        "type": "string",
                        "description": (
                            "The user's goal in full: the original request, the questions to "
                            "answer and any context that helps."
                        ),
                    }
                },
                "required": ["objective"],
            },
            query=(
                "Investigate the codebase deeply enough to solve the objective below: find the "
                "relevant files and code, and explain how they fit together.\n<objective>\n"
                "${objective}\n</objective>"
            ),
            system_prompt=(
                "You are the Codebase Investigator, a subagent that studies a software project "
                "for another agent. Build an accurate picture of the code that matters for the "
                "objective: the modules, classes and functions involved, why they are written "
                "the way they are, and what a change to them would affect (callers, types, "
                "tests). Do not write the implementation. Use only the read-only tools you "
                "have; read before you conclude, and keep going until the relevant subsystem is "
                "understood, not just the first matching file."
            ),
            output_name="report",
            output_schema=investigator_report,
            temperature=0.1,
            max_turns=50,
            timeout_mins=10,
            tools=("list_directory", "read_file", "glob", "grep_search"),
        ),
        AgentDefinition(
            name="generalist",
            display_name="Generalist Agent",
            description=(
                "A general-purpose agent with every tool of the session. Good for work that "
                "takes many turns or produces a lot of output (batch edits across files, "
                "commands with long output, exploratory investigations), keeping the main "
                "conversation short."
            ),
            input_schema={
                "type": "object",
                "properties": {
                    "request": {"type": "string", "description": "The task or question."}
                },
                "required": ["request"],
            },
            query="${request}",
            system_prompt=(
                "You are a general-purpose subagent working for another agent. Complete the "
                "request with the tools you have, working step by step, and report the outcome "
                "precisely: what you changed, what you found, what is left."
            ),
            output_name="result",
            output_schema={
                "type": "object",
                "properties": {
                    "response": {
                        "type": "string",
                        "description": "The final response of the agent.",
                    }
                },
                "required": ["response"],
            },
            max_turns=20,
            timeout_mins=10,
            tools=None,
        ),
    )
