"""Pure parts of the scheduler: waves, argument checks, responses for the model."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

EDIT_TOOL_NAMES = frozenset({"replace", "write_file"})
UPDATE_TOPIC = "update_topic"

WAIT_FOR_PREVIOUS_PROPERTY = {
    "type": "boolean",
    "description": (
        "Set to true to start this call only after every earlier call of this turn has "
        "finished. Leave it unset to let independent calls run in parallel."
    ),
}


@attrs.frozen(kw_only=True)
class ToolSpec:
    """What the scheduler knows of a tool (given by the wiring; no tool code here)."""

    name: str
    display_name: str
    kind: str
    schema: Mapping[str, Any]
    """The ``parametersJsonSchema`` of the tool's declaration."""
    executor: str
    """Address of the executor that runs it."""
    validate: Callable[[Mapping[str, Any], str], str | None] = lambda args, approval_mode: None
    annotations: Mapping[str, Any] | None = None
    """An MCP tool's annotations with its ``_serverName``, given to the policy with each
    call: a server's rules match by the server's name, which the tool's registered name
    (``mcp_<server>_<tool>``) cannot tell when the server's name has a ``_``."""
    mcp_context: Mapping[str, Any] | None = None
    """An MCP tool's server and name on it, as the BeforeTool and AfterTool hooks get them
    (``mcp_context``)."""
    """Value checks after the schema check (the tool's own), in the batch's approval
    mode (plan mode changes where a write may go); an error message or None."""
    details: Callable[[Mapping[str, Any], str], Mapping[str, Any]] = lambda args, approval_mode: {}
    """What an approval shows of the call (the tool's confirmation details: a diff, the
    whole command), in the batch's approval mode; added to ``ApprovalRequested.details``."""


def is_parallelizable(name: str, args: Mapping[str, Any]) -> bool:
    """Gemini CLI's rule: name and ``wait_for_previous`` decide, not the tool's kind."""
    if name == UPDATE_TOPIC or name in EDIT_TOOL_NAMES:
        return False
    wait = args.get("wait_for_previous") if isinstance(args, Mapping) else None
    if isinstance(wait, bool):
        return not wait
    return True


def plan_waves(calls: Sequence[tuple[str, Mapping[str, Any]]]) -> list[list[int]]:
    """Split calls (in request order) into waves of indices.

    A parallelizable call starts a wave that takes every contiguous parallelizable call
    after it; a non-parallelizable call is a wave of one (a barrier).
    """
    waves: list[list[int]] = []
    i = 0
    while i < len(calls):
        wave = [i]
        if is_parallelizable(*calls[i]):
            while i + 1 < len(calls) and is_parallelizable(*calls[i + 1]):
                i += 1
                wave.append(i)
        waves.append(wave)
        i += 1
    return waves


def with_wait_for_previous(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The schema with the optional ``wait_for_previous`` flag every tool accepts."""
    out = dict(schema)
    props = dict(out.get("properties") or {})
    props.setdefault("wait_for_previous", WAIT_FOR_PREVIOUS_PROPERTY)
    out["properties"] = props
    out.setdefault("type", "object")
    return out


_VALIDATORS: dict[str, Any] = {}
"""jsonschema's validators by the schema's JSON (for schemas ``_schema_check`` leaves to it)."""
_BY_IDENTITY: dict[int, tuple[Mapping[str, Any], Callable[[Any], str | None]]] = {}
"""Checkers by their schema object, kept alive with it (so its id is not reused)."""


def schema_error(schema: Mapping[str, Any], args: Any) -> str | None:
    """Validate ``args``; the first error worded as Gemini CLI's validator words it."""
    # By identity first (a tool's schema is one object for the session): building a
    # checker costs a tenth of an MCP call's way through the scheduler.
    known = _BY_IDENTITY.get(id(schema))
    if known is not None and known[0] is schema:
        return known[1](args)
    from ._schema_check import compile_checker  # on the first call: -p hi has none

    full = with_wait_for_previous(schema)
    checker = compile_checker(full)
    if checker is None:
        validator = _jsonschema_validator(full)
        checker = lambda args: _jsonschema_error(validator, args)  # noqa: E731
    if len(_BY_IDENTITY) >= 4096:
        _BY_IDENTITY.clear()
    _BY_IDENTITY[id(schema)] = (schema, checker)
    return checker(args)


def jsonschema_schema_error(schema: Mapping[str, Any], args: Any) -> str | None:
    """``schema_error`` by jsonschema alone, whatever keywords the schema uses (the
    answer ``_schema_check`` must give where it applies)."""
    return _jsonschema_error(_jsonschema_validator(with_wait_for_previous(schema)), args)


def _jsonschema_validator(full: Mapping[str, Any]) -> Any:
    import json

    # Keys in their order: it decides which of two errors at one place is reported.
    key = json.dumps(full, default=str)
    validator = _VALIDATORS.get(key)
    if validator is None:
        import jsonschema  # imported on first use: it costs 15-30 ms

        validator = _VALIDATORS[key] = jsonschema.Draft202012Validator(full)
    return validator


def _jsonschema_error(validator: Any, args: Any) -> str | None:
    from ._schema_check import ajv_text, error_order

    try:
        errors = sorted(validator.iter_errors(args), key=lambda e: error_order(e.path))
    except Exception:  # noqa: BLE001
        # A schema the validator cannot apply (an unknown type, a $ref to nowhere): no
        # validation, as Gemini CLI's validator skips a schema it cannot compile.
        return None
    if not errors:
        return None
    err = errors[0]
    return ajv_text(err.absolute_path, err.validator, err.validator_value, err.message)


# -- responses for the model ---------------------------------------------------------------

BINARY_INJECTION_KEY = "__binary_injection__"


def supports_multimodal_function_response(model: str) -> bool:
    return model.startswith("gemini-3")


def function_response_parts(
    name: str, call_id: str, llm_content: Any, model: str
) -> list[dict[str, Any]]:
    """A successful call's ``responseParts`` (Gemini CLI's conversion rules)."""
    if isinstance(llm_content, str):
        return [{"functionResponse": {"id": call_id, "name": name, "response": {"output": llm_content}}}]
    items = llm_content if isinstance(llm_content, list | tuple) else [llm_content]
    parts: list[Mapping[str, Any]] = [{"text": p} if isinstance(p, str) else p for p in items if p]
    texts: list[str] = []
    inline: list[Mapping[str, Any]] = []
    files: list[Mapping[str, Any]] = []
    for part in parts:
        if "text" in part and part["text"] is not None:
            texts.append(str(part["text"]))
        elif "inlineData" in part:
            inline.append(part)
        elif "fileData" in part:
            files.append(part)
        elif "functionResponse" in part:
            return [
                {
                    "functionResponse": {
                        "id": call_id,
                        "name": name,
                        "response": dict(part["functionResponse"].get("response") or {}),
                    }
                }
            ]
    supported = [p for p in inline if not _is_av(p)]
    unsupported = [p for p in inline if _is_av(p)]
    is_read = name in ("read_file", "read_many_files")
    if unsupported:
        mimes = ", ".join(dict.fromkeys(str(p["inlineData"].get("mimeType", "")) for p in unsupported))
        if is_read:
            texts.insert(
                0,
                f"Binary content ({mimes}) read successfully. Content will be injected for "
                "analysis in the next sequence.",
            )
        else:
            texts.insert(
                0, f"[SYSTEM: Binary content ({mimes}) stripped from response due to protocol limitations.]"
            )
    response: dict[str, Any] = {"output": "\n".join(texts)} if texts else {}
    if unsupported and is_read:
        response[BINARY_INJECTION_KEY] = [dict(p) for p in unsupported]
    fr: dict[str, Any] = {"id": call_id, "name": name, "response": response}
    siblings: list[Mapping[str, Any]] = list(files)
    if supported:
        if supports_multimodal_function_response(model):
            fr["parts"] = [dict(p) for p in supported]
        else:
            siblings.extend(supported)
    if not texts and (supported or files):
        fr["response"] = {"output": f"Binary content provided ({len(supported) + len(files)} item(s))."}
    return [{"functionResponse": fr}, *[dict(p) for p in siblings]]


def _is_av(part: Mapping[str, Any]) -> bool:
    mime = str(part["inlineData"].get("mimeType") or "")
    return mime.startswith(("audio/", "video/"))


def error_response_parts(name: str, call_id: str, message: str) -> list[dict[str, Any]]:
    return [{"functionResponse": {"id": call_id, "name": name, "response": {"error": message}}}]


def cancelled_response_parts(name: str, call_id: str, reason: str) -> list[dict[str, Any]]:
    """A call cancelled before it ran (denied, queued, aborted while waiting)."""
    return error_response_parts(name, call_id, f"[Operation Cancelled] Reason: {reason}")
