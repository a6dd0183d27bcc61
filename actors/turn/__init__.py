"""Turn actor: one prompt's model <-> tool loop."""

from ._actor import TurnActor, TurnWiring, invalid_stream_message
from ._logic import (
    INTERRUPTED_RESPONSE_PLACEHOLDER,
    ModelTurnBuilder,
    is_function_response,
    parse_classifier_choice,
    user_content,
)
from ._next_speaker import parse_answer as parse_next_speaker_answer

__all__ = [
    "INTERRUPTED_RESPONSE_PLACEHOLDER",
    "ModelTurnBuilder",
    "is_function_response",
    "parse_classifier_choice",
    "parse_next_speaker_answer",
    "user_content",
    "TurnActor",
    "TurnWiring",
    "invalid_stream_message",
]
