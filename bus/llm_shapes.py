"""Gemini CLI's stable hook shapes for model requests and responses (``hookTranslator.ts``).

Pure functions between Gemini REST wire shapes (``contents``: ``[{role, parts}]``,
``config``: a ``GenerateContentConfig`` with ``temperature``, ``systemInstruction``,
``tools``, ``toolConfig``..., chunks: ``GenerateContentResponse`` JSON) and what hooks
see and answer:

- ``LLMRequest``: ``{model, messages: [{role: user|model|system, content: str}],
  config: {temperature?, maxOutputTokens?, topP?, topK?}}``. Only text parts are shown
  (thought text included), one message per content that has any text; the system
  instruction, tools and other config keys are not. Gemini's type also has a
  ``toolConfig`` but ``toHookLLMRequest`` never fills it, and the corpus confirms it
  is absent.
- ``LLMResponse``: ``{text?, candidates: [{content: {role: 'model', parts: [str]},
  finishReason?, index?, safetyRatings?}], usageMetadata?: {promptTokenCount?,
  candidatesTokenCount?, totalTokenCount?}}``.

It lives in ``bus`` because two actors speak it: the turn (which reaches the model hook
points) and the hook runner.

Keys JavaScript would leave ``undefined`` are omitted (``JSON.stringify`` drops them);
``None`` in our inputs counts as unset.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

DEFAULT_MODEL = "gemini-2.5-flash"
"""``DEFAULT_GEMINI_FLASH_MODEL``: the model an ``LLMRequest`` names when none is given."""

GENERATION_KEYS = ("temperature", "maxOutputTokens", "topP", "topK")
"""The config keys the hook view shows and a hook may set."""



def js_truthy(value: Any) -> bool:
    """JavaScript truthiness: ``[]`` and ``{}`` are true, ``0``, ``''``, null are not."""
    if value is None or value is False:
        return False
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value == value and value != 0
    if isinstance(value, str):
        return value != ""
    return True



def js_string(value: Any) -> str:
    """``String(value)`` for JSON values (``Array.prototype.join`` uses it too)."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    if isinstance(value, str | int | float):
        return str(value)
    if isinstance(value, Mapping):
        return "[object Object]"
    if isinstance(value, list | tuple):
        return ",".join("" if v is None else js_string(v) for v in value)
    return str(value)



class LLMShapeError(ValueError):
    """A hook's ``llm_response`` is not an ``LLMResponse``.

    Gemini throws in the same place and catches it upstream: an AfterModel hook's
    replacement is then ignored (the original chunk is used), and a BeforeModel
    block's synthetic response makes Gemini treat the hook as not having answered
    (the model is called).
    """


def _items(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, list | tuple) else [value]


def _has_text(part: Any) -> bool:
    return isinstance(part, Mapping) and isinstance(part.get("text"), str)


def _is_content(content: Any) -> bool:
    return isinstance(content, Mapping) and "role" in content and "parts" in content


def _generation_config(config: Mapping[str, Any] | None) -> dict[str, Any]:
    if not isinstance(config, Mapping):
        return {}
    return {k: config[k] for k in GENERATION_KEYS if config.get(k) is not None}


def _thaw(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _thaw(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_thaw(v) for v in value]
    return value


# ---------------------------------------------------------------------------- requests


def to_llm_request(
    model: str | None, contents: Sequence[Any] | Any, config: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """``toHookLLMRequest``: the request a BeforeModel / BeforeToolSelection / AfterModel
    hook sees as ``llm_request``."""
    messages: list[dict[str, Any]] = []
    for content in _items(contents):
        if isinstance(content, str):
            messages.append({"role": "user", "content": content})
        elif _is_content(content):
            role = content["role"] if content["role"] in ("model", "system") else "user"
            text = "".join(p["text"] for p in _items(content["parts"]) if _has_text(p))
            if text:
                messages.append({"role": role, "content": text})
    return {
        "model": model or DEFAULT_MODEL,
        "messages": messages,
        "config": _generation_config(config),
    }


def _message_text(message: Any) -> str:
    """``typeof content === 'string' ? content : String(content)``."""
    if not isinstance(message, Mapping) or "content" not in message:
        return "undefined"
    content = message["content"]
    return content if isinstance(content, str) else js_string(content)


def _message_role(message: Any) -> Any:
    return message.get("role") if isinstance(message, Mapping) else None


def _message_to_content(message: Any) -> dict[str, Any]:
    content: dict[str, Any] = {"parts": [{"text": _message_text(message)}]}
    role = _message_role(message)
    if role is not None:
        content = {"role": role, **content}
    return content


def _merge_messages(base_contents: list[Any], messages: list[Any]) -> list[dict[str, Any]]:
    """Put the hook's texts back into the base contents, keeping non-text parts
    (function calls and responses, inline data) where they were (gemini-cli#25558)."""
    merged: list[dict[str, Any]] = []
    index = 0
    for content in base_contents:
        if isinstance(content, str):
            if index < len(messages):
                merged.append(_message_to_content(messages[index]))
                index += 1
            else:
                merged.append({"role": "user", "parts": [{"text": content}]})
            continue
        if not _is_content(content):
            merged.append({"role": "user", "parts": [_thaw(content)]})
            continue
        parts = _items(content.get("parts"))
        base = {**_thaw(content), "parts": [_thaw(p) for p in parts]}
        # Note: a content whose text parts are all empty gave no message, but counts
        # here as having text: Gemini's two directions disagree, and so do we.
        if not any(_has_text(p) for p in parts) or index >= len(messages):
            merged.append(base)
            continue
        message = messages[index]
        index += 1
        role = _message_role(message)
        replaced = {
            **base,
            "parts": [{"text": _message_text(message)}]
            + [_thaw(p) for p in parts if not _has_text(p)],
        }
        if role is None:
            replaced.pop("role", None)
        else:
            replaced["role"] = role
        merged.append(replaced)
    merged.extend(_message_to_content(m) for m in messages[index:])
    return merged


def apply_llm_request(
    contents: Sequence[Any],
    config: Mapping[str, Any] | None,
    model: str | None,
    llm_request_override: Any,
) -> tuple[str, list[Any], dict[str, Any]]:
    """What a BeforeModel hook's ``hookSpecificOutput.llm_request`` does to the request
    (``applyLLMRequestModifications`` + ``fromHookLLMRequest`` + ``geminiChat``'s
    ``Object.assign(config, ...)``): returns ``(model, contents, config)``.

    - ``messages`` (any array, even empty): merged into ``contents`` in order, each
      text-bearing content's text replaced by the next message, non-text parts kept,
      extra messages appended; absent: ``contents`` unchanged.
    - ``model``: replaces the model (the caller resolves aliases, as Gemini does).
    - ``config`` (any object): sets the four generation keys to the hook's values —
      a key the hook leaves out is REMOVED (Gemini assigns ``undefined``); other
      config keys (system instruction, tools...) are kept.
    Without an override (None, not an object) the request is returned unchanged.
    """
    base_contents = [_thaw(c) for c in _items(contents)]
    new_config = _thaw(config) if isinstance(config, Mapping) else {}
    new_model = model or ""
    if not isinstance(llm_request_override, Mapping):
        return new_model, base_contents, new_config
    override = llm_request_override
    messages = override.get("messages")
    # Gemini tests ``!messages``: an empty array still goes through the merge.
    if isinstance(messages, list | tuple):
        base_contents = _merge_messages(base_contents, list(messages))
    hook_model = override.get("model")
    if isinstance(hook_model, str) and hook_model:
        # Gemini keeps an empty model here, then ignores it (``if (modifiedModel)``).
        new_model = hook_model
    hook_config = override.get("config")
    if isinstance(hook_config, Mapping):
        for key in GENERATION_KEYS:
            value = hook_config.get(key)
            if value is None:
                new_config.pop(key, None)
            else:
                new_config[key] = _thaw(value)
    return new_model, base_contents, new_config


def apply_tool_config(config: Mapping[str, Any] | None, tool_config: Any) -> dict[str, Any]:
    """What a BeforeToolSelection output's ``hookSpecificOutput.toolConfig`` does to the
    request config (``applyToolConfigModifications`` + ``fromHookToolConfig``):
    ``toolConfig`` becomes ``{functionCallingConfig: {mode, allowedFunctionNames}}``
    (``{}`` when both are unset) and ``tools`` defaults to ``[]``. No tool config: the
    config is returned unchanged."""
    new_config = _thaw(config) if isinstance(config, Mapping) else {}
    if not isinstance(tool_config, Mapping):
        return new_config
    mode = tool_config.get("mode")
    names = tool_config.get("allowedFunctionNames")
    calling: dict[str, Any] = {}
    if js_truthy(mode) or js_truthy(names):
        if mode is not None:
            calling["mode"] = mode
        if names is not None:
            calling["allowedFunctionNames"] = _thaw(names)
        new_config["toolConfig"] = {"functionCallingConfig": calling}
    else:
        new_config["toolConfig"] = {}
    if not js_truthy(new_config.get("tools")):
        new_config["tools"] = []
    return new_config


# ---------------------------------------------------------------------------- responses


def _response_text(chunk: Mapping[str, Any]) -> str | None:
    """``getResponseText``: the first candidate's non-thought text; None without parts."""
    candidates = _items(chunk.get("candidates"))
    if not candidates or not isinstance(candidates[0], Mapping):
        return None
    content = candidates[0].get("content")
    parts = _items(content.get("parts")) if isinstance(content, Mapping) else []
    if not parts:
        return None
    return "".join(
        p["text"]
        for p in parts
        if isinstance(p, Mapping) and js_truthy(p.get("text")) and not js_truthy(p.get("thought"))
    )


def to_llm_response(chunk: Mapping[str, Any]) -> dict[str, Any]:
    """``toHookLLMResponse``: the ``llm_response`` an AfterModel hook sees for a chunk."""
    response: dict[str, Any] = {}
    text = _response_text(chunk)
    if text is not None:
        response["text"] = text
    candidates: list[dict[str, Any]] = []
    for candidate in _items(chunk.get("candidates")):
        if not isinstance(candidate, Mapping):
            candidate = {}
        content = candidate.get("content")
        parts = _items(content.get("parts")) if isinstance(content, Mapping) else []
        entry: dict[str, Any] = {
            "content": {"role": "model", "parts": [p["text"] for p in parts if _has_text(p)]}
        }
        if candidate.get("finishReason") is not None:
            entry["finishReason"] = candidate["finishReason"]
        if candidate.get("index") is not None:
            entry["index"] = candidate["index"]
        ratings = candidate.get("safetyRatings")
        if ratings is not None:
            entry["safetyRatings"] = [
                {
                    "category": js_string(r.get("category") or ""),
                    "probability": js_string(r.get("probability") or ""),
                }
                for r in _items(ratings)
                if isinstance(r, Mapping)
            ]
        candidates.append(entry)
    response["candidates"] = candidates
    usage = chunk.get("usageMetadata")
    if js_truthy(usage) and isinstance(usage, Mapping):
        response["usageMetadata"] = {
            k: usage[k]
            for k in ("promptTokenCount", "candidatesTokenCount", "totalTokenCount")
            if usage.get(k) is not None
        }
    return response


def from_llm_response(
    llm_response: Mapping[str, Any], *, default_finish_reason: str | None = None
) -> dict[str, Any]:
    """``fromHookLLMResponse``: a hook's ``llm_response`` as a chunk.

    ``default_finish_reason``: set on candidates without one (Gemini does this with
    ``STOP`` for a BeforeModel block's synthetic response). The ``text`` field is not
    carried over: a REST chunk has none (Gemini's text is derived from the parts).
    Raises ``LLMShapeError`` where Gemini's translation would throw.
    """
    if not isinstance(llm_response, Mapping):
        raise LLMShapeError("llm_response is not an object")
    raw_candidates = llm_response.get("candidates")
    if not isinstance(raw_candidates, list | tuple):
        raise LLMShapeError("llm_response.candidates is not an array")
    candidates: list[dict[str, Any]] = []
    for i, candidate in enumerate(raw_candidates):
        content = candidate.get("content") if isinstance(candidate, Mapping) else None
        parts = content.get("parts") if isinstance(content, Mapping) else None
        if not isinstance(parts, list | tuple):
            raise LLMShapeError(f"llm_response.candidates[{i}].content.parts is not an array")
        if not all(isinstance(p, str) for p in parts):
            raise LLMShapeError(f"llm_response.candidates[{i}].content.parts holds a non-string")
        assert isinstance(candidate, Mapping)
        entry: dict[str, Any] = {"content": {"role": "model", "parts": [{"text": p} for p in parts]}}
        finish = candidate.get("finishReason")
        if finish is None:
            finish = default_finish_reason
        if finish is not None:
            entry["finishReason"] = finish
        for key in ("index", "safetyRatings"):
            if candidate.get(key) is not None:
                entry[key] = _thaw(candidate[key])
        candidates.append(entry)
    chunk: dict[str, Any] = {"candidates": candidates}
    if llm_response.get("usageMetadata") is not None:
        chunk["usageMetadata"] = _thaw(llm_response["usageMetadata"])
    return chunk


def modified_response(hook_specific_output: Any) -> dict[str, Any] | None:
    """AfterModel (``getModifiedResponse``): the replacement chunk when
    ``llm_response.candidates[0].content.parts`` is non-empty, else None (keep the
    original chunk; also None where Gemini's translation would throw)."""
    if not isinstance(hook_specific_output, Mapping):
        return None
    response = hook_specific_output.get("llm_response")
    if not isinstance(response, Mapping):
        return None
    candidates = _items(response.get("candidates"))
    first = candidates[0] if candidates else None
    content = first.get("content") if isinstance(first, Mapping) else None
    parts = content.get("parts") if isinstance(content, Mapping) else None
    if not parts:
        return None
    try:
        return from_llm_response(response)
    except LLMShapeError:
        return None


def synthetic_response(hook_specific_output: Any) -> dict[str, Any] | None:
    """BeforeModel block/deny (``getSyntheticResponse``): the chunk to answer with
    instead of calling the model (finish reason defaulted to ``STOP``), None when the
    hook gave no ``llm_response``. Raises ``LLMShapeError`` on a malformed one (see
    there for what Gemini then does)."""
    if not isinstance(hook_specific_output, Mapping):
        return None
    response = hook_specific_output.get("llm_response")
    if not js_truthy(response):
        return None
    if not isinstance(response, Mapping):
        raise LLMShapeError("llm_response is not an object")
    return from_llm_response(response, default_finish_reason="STOP")
