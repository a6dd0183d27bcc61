"""Shared set-up for the web tool tests: a fake model line, canned answers, an env."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from actors.tools._base import ModelCallError, ToolEnv

Answer = Mapping[str, Any] | ModelCallError | Callable[..., Awaitable[Mapping[str, Any]]]


def answer(text: str | None, **grounding: Any) -> dict[str, Any]:
    """A ``generateContent`` response with ``text`` (None: no parts) and grounding."""
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": []}, "finishReason": "STOP"}
    if text is not None:
        candidate["content"]["parts"] = [{"text": text}]
    if grounding:
        candidate["groundingMetadata"] = grounding
    return {"candidates": [candidate]}


@attrs.define
class FakeModel:
    """A ``ModelAccess`` that records requests and answers from a list (then ``default``)."""

    answers: list[Answer] = attrs.field(factory=list)
    default: Answer | None = None
    calls: list[dict[str, Any]] = attrs.field(factory=list)

    async def generate(
        self,
        *,
        model: str,
        contents: Sequence[Any],
        config: Mapping[str, Any] | None = None,
        role: str = "utility_tool",
    ) -> dict[str, Any]:
        call = {
            "model": model,
            "contents": list(contents),
            "config": dict(config or {}),
            "role": role,
        }
        self.calls.append(call)
        reply = self.answers.pop(0) if self.answers else self.default
        if reply is None:
            raise ModelCallError("No more mock responses for generateContent")
        if isinstance(reply, ModelCallError):
            raise reply
        if callable(reply):
            return dict(await reply(**call))
        return dict(reply)

    def prompt(self, index: int = -1) -> str:
        """The text of a recorded request's only part."""
        return str(self.calls[index]["contents"][0]["parts"][0]["text"])


def web_env(tmp_path: Path, model: FakeModel | None, session_id: str = "s1") -> ToolEnv:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    return ToolEnv(
        workspace=workspace,
        project_temp_dir=tmp_path / "home" / ".gemini" / "tmp" / "ws",
        session_id=session_id,
        model_access=model,
    )
