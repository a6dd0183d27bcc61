"""What a turn actor is given by its supervisor: addresses and configuration."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from . import _compression, _next_speaker


@attrs.frozen(kw_only=True)
class TurnWiring:
    """Addresses and configuration a turn actor is given by its supervisor."""

    session_id: str
    address: str
    session_address: str
    gateway_address: str
    scheduler_address: str
    request_config: Callable[[str], Mapping[str, Any]]
    """Model -> request config (system instruction, tool declarations, generation config)."""
    route_model: Callable[[str], str] = lambda model: model
    """Resolves a configured model name (``auto`` excluded) to the model to call."""
    classifier_choice: Callable[[str], str] = lambda choice: choice
    """Maps the router's ``model_choice`` (``flash``/``pro``) to a model name."""
    classifier_request: Callable[[Sequence[Any]], tuple[Any, Mapping[str, Any]]] | None = None
    """Builds the router classifier's (contents, config) from the request contents."""
    wall_ms: Callable[[], int] = lambda: int(time.time() * 1000)
    """Wall clock in ms, for call ids (injected so replays are deterministic)."""
    interactive: bool = False
    hooks_address: str | None = None
    """The session's hook runner, when hooks are configured."""
    has_hooks: Callable[[str, str], bool] = lambda event, target: False
    """Whether any hook matches (event, target): nothing is sent when none does."""
    loops_address: str | None = None
    """The session's loop detector; ``None``: loop detection is off."""
    compression_threshold: float | None = None
    """``model.compressionThreshold`` (fraction of the token limit; unset: 0.5)."""
    skip_next_speaker_check: bool = True
    """``model.skipNextSpeakerCheck`` (Gemini CLI's default: skip)."""
    project_temp_dir: str | None = None
    """Where compression saves function responses it cuts (``tool-outputs/``)."""
    truncate_tool_output_threshold: int = _compression.DEFAULT_TRUNCATE_TOOL_OUTPUT_THRESHOLD
    """``tools.truncateToolOutputThreshold``: the longest cut response kept (chars)."""
    next_speaker_model: str = _next_speaker.NEXT_SPEAKER_MODEL
    finish_tool: str | None = None
    """A subagent's session: a batch in which this tool (``complete_task``) succeeded
    ends the turn with ``goal``; the headless host's round limit does not apply (the
    subagent's supervisor bounds the session with ``maxSessionTurns``)."""
