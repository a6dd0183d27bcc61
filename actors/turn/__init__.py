"""Turn actor: one prompt's model <-> tool loop."""

from ._actor import TurnActor, TurnWiring, invalid_stream_message

__all__ = ["TurnActor", "TurnWiring", "invalid_stream_message"]
