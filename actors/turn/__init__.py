"""Turn actor: one prompt's model <-> tool loop (pure decisions in ``_core``, one
prompt's loop in ``_turn`` over its requests to its peers in ``_requests``, the trio
shell in ``_actor``)."""

from ._actor import TurnActor
from ._core import TurnInbox, TurnRouter, invalid_stream_message
from ._logic import (
    INTERRUPTED_RESPONSE_PLACEHOLDER,
    ModelTurnBuilder,
    is_function_response,
    parse_classifier_choice,
    user_content,
)
from ._next_speaker import parse_answer as parse_next_speaker_answer
from ._tokens import token_limit
from ._wiring import TurnWiring

__all__ = [
    "INTERRUPTED_RESPONSE_PLACEHOLDER",
    "ModelTurnBuilder",
    "TurnActor",
    "TurnInbox",
    "TurnRouter",
    "TurnWiring",
    "invalid_stream_message",
    "is_function_response",
    "parse_classifier_choice",
    "parse_next_speaker_answer",
    "token_limit",
    "user_content",
]
