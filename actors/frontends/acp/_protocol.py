"""What agentbus says about itself over ACP, and the checks of what clients send.

Pure data and functions: the ``initialize`` answer, the session modes (ACP mode ids
against our approval modes), the models offered, the local slash commands (among them
the user's own tool calls: ``/tool``, ``/shell``, and ``/tool!``, ``/shell!`` that add
the result to the conversation), and the parameter accessors that turn a malformed
request into ``-32602``. Imported before trio (``initialize`` is answered from here
while the rest loads), so it stays small.
"""

from __future__ import annotations

import os
from typing import Any, NamedTuple

from actors.frontends.acp._rpc import RpcError, invalid_params, method_not_found

PROTOCOL_VERSION = 1
AGENT_NAME = "agentbus"
AGENT_VERSION = "0.1.0"


class ClientCapabilities(NamedTuple):
    read_text_file: bool = False
    write_text_file: bool = False
    terminal: bool = False

    @classmethod
    def from_params(cls, params: Any) -> ClientCapabilities:
        caps = params.get("clientCapabilities") if isinstance(params, dict) else None
        if not isinstance(caps, dict):
            return cls()
        fs = caps.get("fs")
        if not isinstance(fs, dict):
            fs = {}
        return cls(
            read_text_file=fs.get("readTextFile") is True,
            write_text_file=fs.get("writeTextFile") is True,
            terminal=caps.get("terminal") is True,
        )


AUTH_METHODS: tuple[dict[str, Any], ...] = (
    {
        "id": "gemini-api-key",
        "name": "Gemini API key",
        "description": "Use an API key with Gemini Developer API",
        "_meta": {"api-key": {"provider": "google"}},
    },
    {"id": "vertex-ai", "name": "Vertex AI", "description": "Use an API key with Vertex AI GenAI API"},
    {
        "id": "gateway",
        "name": "AI API Gateway",
        "description": "Use a custom AI API Gateway",
        "_meta": {"gateway": {"protocol": "google", "restartRequired": "false"}},
    },
)
AUTH_METHOD_IDS = tuple(m["id"] for m in AUTH_METHODS)


def initialize_result(params: Any) -> tuple[dict[str, Any], ClientCapabilities]:
    """The ``initialize`` answer and what the client offers. We speak version 1 only; a
    client that asked for another one decides whether to go on (the spec's rule)."""
    if not isinstance(params, dict):
        raise invalid_params("initialize takes an object")
    version = params.get("protocolVersion")
    if not isinstance(version, int) or isinstance(version, bool):
        raise invalid_params("protocolVersion must be an integer", field="protocolVersion")
    result = {
        "protocolVersion": PROTOCOL_VERSION,
        "agentCapabilities": {
            "loadSession": True,
            "promptCapabilities": {"image": True, "audio": True, "embeddedContext": True},
            "mcpCapabilities": {"http": True, "sse": True},
            "sessionCapabilities": {"list": {}, "resume": {}, "close": {}, "delete": {}},
        },
        "authMethods": [dict(m) for m in AUTH_METHODS],
        "agentInfo": {"name": AGENT_NAME, "title": "agentbus", "version": AGENT_VERSION},
    }
    return result, ClientCapabilities.from_params(params)


class Mode(NamedTuple):
    id: str
    """The ACP mode id (Gemini CLI's ``ApprovalMode`` values)."""
    approval_mode: str
    """Ours."""
    name: str
    description: str


MODES: tuple[Mode, ...] = (
    Mode("default", "default", "Default", "Prompts for approval"),
    Mode("autoEdit", "auto_edit", "Auto Edit", "Auto-approves edit tools"),
    Mode("yolo", "yolo", "YOLO", "Auto-approves all tools"),
    Mode("plan", "plan", "Plan", "Read-only mode"),
)


def mode_id(approval_mode: str) -> str:
    return next((m.id for m in MODES if m.approval_mode == approval_mode), approval_mode)


def approval_mode_of(mode: str) -> str:
    found = next((m.approval_mode for m in MODES if m.id == mode or m.approval_mode == mode), None)
    if found is None:
        raise invalid_params(f"unknown mode {mode!r}", modeId=mode)
    return found


def modes_state(approval_mode: str) -> dict[str, Any]:
    return {
        "availableModes": [{"id": m.id, "name": m.name, "description": m.description} for m in MODES],
        "currentModeId": mode_id(approval_mode),
    }


MODELS: tuple[tuple[str, str, str | None], ...] = (
    ("auto", "Auto", "Let agentbus choose per prompt: gemini-3.1-pro-preview, gemini-3-flash-preview"),
    ("gemini-3.1-pro-preview", "gemini-3.1-pro-preview", None),
    ("gemini-3-flash-preview", "gemini-3-flash-preview", None),
    ("gemini-2.5-pro", "gemini-2.5-pro", None),
    ("gemini-2.5-flash", "gemini-2.5-flash", None),
    ("gemini-2.5-flash-lite", "gemini-2.5-flash-lite", None),
)


def model_choices(model: str, *, fixed: bool = False) -> list[tuple[str, str, str | None]]:
    """The models offered, with the current one when it is not among them (``-m``,
    settings), so that a selector always shows what runs; ``fixed``: only the current
    one (the session's model cannot be changed)."""
    if fixed:
        return [next((m for m in MODELS if m[0] == model), (model, model, None))]
    known = list(MODELS)
    if model and all(model != m[0] for m in known):
        known.insert(0, (model, model, None))
    return known


def _model_entries(model: str, id_key: str, *, fixed: bool) -> list[dict[str, Any]]:
    """``model_choices`` as ``{<id_key>, name, description?}`` objects."""
    entries = []
    for model_id, name, description in model_choices(model, fixed=fixed):
        entry: dict[str, Any] = {id_key: model_id, "name": name}
        if description:
            entry["description"] = description
        entries.append(entry)
    return entries


def models_state(model: str, *, fixed: bool = False) -> dict[str, Any]:
    """Gemini CLI's non-standard ``models`` (schema 0.10's unstable model selector)."""
    return {"availableModels": _model_entries(model, "modelId", fixed=fixed), "currentModelId": model}


MODE_OPTION = "mode"
MODEL_OPTION = "model"


def config_options(approval_mode: str, model: str, *, fixed_model: bool = False) -> list[dict[str, Any]]:
    """The session's config options (ACP's successor of ``modes`` and ``models``): the
    mode and the model, both ``select`` options, kept in step with ``modes``/``models``."""
    return [
        {
            "id": MODE_OPTION,
            "name": "Mode",
            "description": "How tool calls are approved",
            "category": "mode",
            "type": "select",
            "currentValue": mode_id(approval_mode),
            "options": [{"value": m.id, "name": m.name, "description": m.description} for m in MODES],
        },
        {
            "id": MODEL_OPTION,
            "name": "Model",
            "category": "model",
            "type": "select",
            "currentValue": model,
            "options": _model_entries(model, "value", fixed=fixed_model),
        },
    ]


def config_choice(params: dict[str, Any], model: str, *, fixed_model: bool = False) -> tuple[str | None, str | None]:
    """``session/set_config_option``'s change as (mode, model), one of them None; a
    config id or value we do not offer is invalid params naming it."""
    config_id = required_str(params, "configId")
    value = params.get("value")
    if params.get("type") == "boolean" or isinstance(value, bool):
        raise invalid_params(f"{config_id!r} is not a boolean option", configId=config_id)
    if not isinstance(value, str) or not value:
        raise invalid_params("value must be a non-empty string", field="value")
    if config_id == MODE_OPTION:
        if all(value != m.id for m in MODES):
            raise invalid_params(f"unknown mode {value!r}", configId=config_id, value=value)
        return value, None
    if config_id == MODEL_OPTION:
        if all(value != m[0] for m in model_choices(model, fixed=fixed_model)):
            raise invalid_params(f"unknown model {value!r}", configId=config_id, value=value)
        return None, value
    raise invalid_params(f"unknown config option {config_id!r}", configId=config_id)


NEWER_METHODS = {"auth/login": 2, "auth/logout": 2}
"""Methods a newer protocol version has and version 1 has not (schema v2's ``meta.json``)."""
UNSTABLE_METHODS = frozenset(
    {"session/fork", "providers/list", "providers/set", "providers/disable", "mcp/message", "logout"}
    | {f"nes/{m}" for m in ("start", "suggest", "accept", "reject", "close")}
    | {f"document/did{m}" for m in ("Open", "Change", "Close", "Save", "Focus")}
)
"""Methods of the schema that agentbus does not offer (unstable ones, and ``logout``:
there is no stored login to end; ``agentCapabilities.auth.logout`` is not advertised)."""


def unknown_method(method: str) -> RpcError:
    """-32601 for a method we do not serve, saying why when the schema knows it."""
    error = method_not_found(method)
    if (version := NEWER_METHODS.get(method)) is not None:
        error.data = {
            "method": method,
            "details": f"{method} is ACP protocol version {version}; this agent speaks version {PROTOCOL_VERSION}"
            " (initialize's protocolVersion)",
        }
    elif method in UNSTABLE_METHODS:
        error.data = {"method": method, "details": f"{method} is not offered by this agent (see agentCapabilities)"}
    return error


class Command(NamedTuple):
    name: str
    description: str
    hint: str | None = None
    """What follows the name (ACP's unstructured command input)."""


COMMANDS: tuple[Command, ...] = (
    Command("about", "Show version and environment info"),
    Command("help", "Show available commands"),
    Command("tool", "Run a tool yourself (the model does not see the result)", 'NAME {"arg": "value"}'),
    Command("tool!", "Run a tool yourself and add its result to the conversation", 'NAME {"arg": "value"}'),
    Command("shell", "Run a shell command yourself (the model does not see its output)", "COMMAND"),
    Command("shell!", "Run a shell command yourself and add its output to the conversation", "COMMAND"),
)
"""Slash commands answered by the front end itself (no model call): ``about``, ``help``,
and the user's own tool calls, run through the session's scheduler."""

USER_CALL_COMMANDS = frozenset({"tool", "tool!", "shell", "shell!"})


def available_commands() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for command in COMMANDS:
        entry: dict[str, Any] = {"name": command.name, "description": command.description}
        if command.hint is not None:
            entry["input"] = {"hint": command.hint}
        out.append(entry)
    return out


# -- parameters ---------------------------------------------------------------------------
def params_object(params: Any) -> dict[str, Any]:
    if params is None:
        return {}
    if not isinstance(params, dict):
        raise invalid_params("params must be an object")
    return params


def required_str(params: dict[str, Any], key: str) -> str:
    value = params.get(key)
    if not isinstance(value, str) or not value:
        raise invalid_params(f"{key} must be a non-empty string", field=key)
    return value


def optional_str(params: dict[str, Any], key: str) -> str | None:
    value = params.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise invalid_params(f"{key} must be a string", field=key)
    return value


def absolute_dir(params: dict[str, Any], key: str = "cwd") -> str:
    value = required_str(params, key)
    if not os.path.isabs(value):
        raise invalid_params(f"{key} must be an absolute path", field=key)
    if not os.path.isdir(value):
        raise invalid_params(f"{key} is not a directory: {value}", field=key)
    return os.path.realpath(value)


def prompt_blocks(params: dict[str, Any]) -> list[dict[str, Any]]:
    blocks = params.get("prompt")
    if not isinstance(blocks, list) or not all(
        isinstance(b, dict) and isinstance(b.get("type"), str) for b in blocks
    ):
        raise invalid_params("prompt must be an array of content blocks", field="prompt")
    for block in blocks:
        kind = block["type"]
        if kind == "text" and not isinstance(block.get("text"), str):
            raise invalid_params("a text block needs text", field="prompt")
        if kind not in ("text", "image", "audio", "resource_link", "resource"):
            raise invalid_params(f"unknown content block type {kind!r}", field="prompt")
    return blocks


def mcp_servers(params: dict[str, Any], cwd: str) -> list[Any]:
    """``mcpServers`` as ``mcp_config.McpServerConfig`` entries (a stdio server runs in
    ``cwd``, as Gemini CLI runs it); a malformed entry is invalid params naming it."""
    from actors.host.mcp_config import McpConfigError, acp_mcp_servers

    try:
        return acp_mcp_servers(params.get("mcpServers", []), cwd)
    except McpConfigError as exc:
        raise invalid_params(str(exc), field="mcpServers") from None


__all__ = [
    "AUTH_METHODS",
    "AUTH_METHOD_IDS",
    "COMMANDS",
    "ClientCapabilities",
    "Command",
    "MODES",
    "RpcError",
    "USER_CALL_COMMANDS",
    "approval_mode_of",
    "available_commands",
    "config_choice",
    "config_options",
    "initialize_result",
    "mode_id",
    "unknown_method",
    "modes_state",
    "models_state",
]
