"""Merging several hooks' answers, and chaining sequential hooks: pure functions.

``aggregate`` is Gemini CLI's ``HookAggregator.mergeOutputs`` (``hookAggregator.ts``):

- ``BeforeTool``, ``AfterTool``, ``BeforeAgent``, ``AfterAgent``, ``SessionStart``: OR
  merge. ``continue`` is false if any says so (``stopReason``s joined with ``\\n``);
  ``block``/``deny`` wins (the last one seen), then ``ask``; with none of those and no
  ``continue: false`` the decision is ``allow``; ``reason``s, ``systemMessage``s and
  string ``additionalContext``s are joined with ``\\n``; ``suppressOutput`` and
  ``hookSpecificOutput.clearContext`` are ORs; other ``hookSpecificOutput`` keys are
  shallow-merged (later wins).
- ``BeforeModel``, ``AfterModel``: field replacement, later wins, ``hookSpecificOutput``
  merged shallowly (and always present).
- ``BeforeToolSelection``: only ``hookSpecificOutput.toolConfig`` survives: ``NONE`` if
  any hook says so (no names), else ``ANY`` if any, else ``AUTO``; names are the sorted
  union. Decisions of these hooks are dropped, as in Gemini.
- Every other event: shallow merge, later wins.

Outputs are taken in plan order, from every hook that produced one — also from hooks
that exited non-zero (exit 2 + ``deny`` denies). JavaScript truthiness is kept where
Gemini relies on it (an empty ``reason`` is not collected).

``chain_input`` is ``HookRunner.applyHookOutputToInput`` (sequential plans only).

The ``effective_reason`` ... ``tail_tool_call`` helpers read an aggregated output the
way Gemini's ``DefaultHookOutput`` methods do; the lead's integration points use them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bus.llm_shapes import js_string, js_truthy

OR_MERGE_EVENTS = frozenset({"BeforeTool", "AfterTool", "BeforeAgent", "AfterAgent", "SessionStart"})
REPLACE_EVENTS = frozenset({"BeforeModel", "AfterModel"})
TOOL_SELECTION_EVENT = "BeforeToolSelection"




def _as_object(value: Any) -> dict[str, Any]:
    """An output as the object JavaScript's spread sees (an array spreads its indices)."""
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, list | tuple):
        return {str(i): v for i, v in enumerate(value)}
    return {}


def _specific(output: Mapping[str, Any]) -> Mapping[str, Any] | None:
    value = output.get("hookSpecificOutput")
    return value if isinstance(value, Mapping) else None


def _merge_or_decision(outputs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    merged: dict[str, Any] = {"continue": True, "suppressOutput": False}
    stop_reasons: list[str] = []
    reasons: list[str] = []
    system_messages: list[str] = []
    contexts: list[str] = []
    has_block = has_ask = has_continue_false = False
    for output in outputs:
        if output.get("continue") is False:
            has_continue_false = True
            merged["continue"] = False
            if js_truthy(output.get("stopReason")):
                stop_reasons.append(js_string(output["stopReason"]))
        decision = output.get("decision")
        if decision in ("block", "deny"):
            has_block = True
            merged["decision"] = decision
        elif decision == "ask":
            has_ask = True
            if not has_block:
                merged["decision"] = decision
        if js_truthy(output.get("reason")):
            reasons.append(js_string(output["reason"]))
        if js_truthy(output.get("systemMessage")):
            system_messages.append(js_string(output["systemMessage"]))
        if js_truthy(output.get("suppressOutput")):
            merged["suppressOutput"] = True
        specific = _specific(output)
        if specific is not None:
            base = dict(merged.get("hookSpecificOutput") or {})
            if specific.get("clearContext") is True:
                base["clearContext"] = True
            base.update((k, v) for k, v in specific.items() if k != "clearContext")
            merged["hookSpecificOutput"] = base
            context = specific.get("additionalContext")
            if isinstance(context, str):
                contexts.append(context)
    if not has_block and not has_ask and not has_continue_false:
        merged["decision"] = "allow"
    if stop_reasons:
        merged["stopReason"] = "\n".join(stop_reasons)
    if reasons:
        merged["reason"] = "\n".join(reasons)
    if system_messages:
        merged["systemMessage"] = "\n".join(system_messages)
    if contexts:
        merged["hookSpecificOutput"] = {
            **merged.get("hookSpecificOutput", {}),
            "additionalContext": "\n".join(contexts),
        }
    return merged


def _merge_replacing(outputs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for output in outputs:
        specific = {**_as_object(merged.get("hookSpecificOutput")), **_as_object(output.get("hookSpecificOutput"))}
        merged = {**merged, **output, "hookSpecificOutput": specific}
    return merged


def _js_sort_key(name: str) -> bytes:
    # Array.prototype.sort() compares UTF-16 code units, not code points.
    return name.encode("utf-16-be", "surrogatepass")


def _merge_tool_selection(outputs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    names: set[str] = set()
    has_none = has_any = False
    for output in outputs:
        specific = _specific(output)
        tool_config = specific.get("toolConfig") if specific is not None else None
        if not isinstance(tool_config, Mapping):
            continue
        mode = tool_config.get("mode")
        if mode == "NONE":
            has_none = True
        elif mode == "ANY":
            has_any = True
        allowed = tool_config.get("allowedFunctionNames")
        if isinstance(allowed, list | tuple):
            names.update(n for n in allowed if isinstance(n, str))
    if has_none:
        mode, allowed_names = "NONE", []
    else:
        mode = "ANY" if has_any else "AUTO"
        allowed_names = sorted(names, key=_js_sort_key)
    return {
        "hookSpecificOutput": {
            "hookEventName": TOOL_SELECTION_EVENT,
            "toolConfig": {"mode": mode, "allowedFunctionNames": allowed_names},
        }
    }


def _merge_simple(outputs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for output in outputs:
        merged.update(output)
    return merged


def aggregate(event: str, outputs: Sequence[Any]) -> dict[str, Any] | None:
    """Merge the hooks' outputs (plan order) for ``event``; None when there are none."""
    objects = [_as_object(o) for o in outputs if o is not None]
    if not objects:
        return None
    if event in OR_MERGE_EVENTS:
        return _merge_or_decision(objects)
    if event in REPLACE_EVENTS:
        return _merge_replacing(objects)
    if event == TOOL_SELECTION_EVENT:
        return _merge_tool_selection(objects)
    return _merge_simple(objects)


def chain_input(event: str, hook_input: Mapping[str, Any], output: Any) -> dict[str, Any]:
    """The next sequential hook's input after a successful hook answered ``output``.

    ``BeforeAgent``: ``prompt += "\\n\\n" + additionalContext`` (raw, not escaped);
    ``BeforeModel``: ``llm_request = {...llm_request, ...output.llm_request}``;
    ``BeforeTool``: ``tool_input = {...tool_input, ...output.tool_input}``. Other
    events pass the input on unchanged.
    """
    chained = dict(hook_input)
    specific = _specific(output) if isinstance(output, Mapping) else None
    if not specific:
        return chained
    if event == "BeforeAgent":
        context = specific.get("additionalContext")
        if isinstance(context, str) and isinstance(chained.get("prompt"), str):
            chained["prompt"] = chained["prompt"] + "\n\n" + context
    elif event == "BeforeModel":
        partial = specific.get("llm_request")
        if js_truthy(partial) and "llm_request" in chained:
            chained["llm_request"] = {**_as_object(chained["llm_request"]), **_as_object(partial)}
    elif event == "BeforeTool":
        new_input = specific.get("tool_input")
        if js_truthy(new_input) and "tool_input" in chained:
            chained["tool_input"] = {**_as_object(chained["tool_input"]), **_as_object(new_input)}
    return chained


# ----------------------------------------------------- reading an (aggregated) output


def should_stop(output: Mapping[str, Any] | None) -> bool:
    """``continue === false``."""
    return output is not None and output.get("continue") is False


def is_blocking(output: Mapping[str, Any] | None) -> bool:
    """``decision`` is ``block`` or ``deny``."""
    return output is not None and output.get("decision") in ("block", "deny")


def is_ask(output: Mapping[str, Any] | None) -> bool:
    return output is not None and output.get("decision") == "ask"


def effective_reason(output: Mapping[str, Any] | None) -> str:
    """``stopReason || reason || 'No reason provided'``."""
    if output is not None:
        for key in ("stopReason", "reason"):
            if js_truthy(output.get(key)):
                return js_string(output[key])
    return "No reason provided"


def additional_context(output: Mapping[str, Any] | None) -> str | None:
    """``hookSpecificOutput.additionalContext`` with ``<`` / ``>`` escaped, if a string."""
    specific = _specific(output) if output is not None else None
    context = specific.get("additionalContext") if specific is not None else None
    if not isinstance(context, str):
        return None
    return context.replace("<", "&lt;").replace(">", "&gt;")


def tool_input_override(output: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """BeforeTool: ``hookSpecificOutput.tool_input`` when it is an object."""
    specific = _specific(output) if output is not None else None
    value = specific.get("tool_input") if specific is not None else None
    return dict(value) if isinstance(value, Mapping) else None


def tail_tool_call(output: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """AfterTool: ``hookSpecificOutput.tailToolCallRequest`` (``{name, args}``) if an object."""
    specific = _specific(output) if output is not None else None
    value = specific.get("tailToolCallRequest") if specific is not None else None
    return dict(value) if isinstance(value, Mapping) else None


def clear_context(output: Mapping[str, Any] | None) -> bool:
    """AfterAgent: ``hookSpecificOutput.clearContext === true``."""
    specific = _specific(output) if output is not None else None
    return specific is not None and specific.get("clearContext") is True
