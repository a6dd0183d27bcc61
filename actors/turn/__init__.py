"""Turn actor: one prompt's model <-> tool loop."""

from ._actor import TurnActor, TurnWiring, invalid_stream_message
from ._logic import (
    INTERRUPTED_RESPONSE_PLACEHOLDER,
    ModelTurnBuilder,
    is_function_response,
    user_content,
)

__all__ = [
    "INTERRUPTED_RESPONSE_PLACEHOLDER",
    "ModelTurnBuilder",
    "is_function_response",
    "user_content","TurnActor", "TurnWiring", "invalid_stream_message"]
