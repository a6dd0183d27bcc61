"""agentbus's message bus: typed messages, the codec, routing. Knows nothing of actors."""

from ._bus import ALL_SESSIONS, DEFAULT_INBOX, Bus, Port, Subscription
from .codec import Envelope
from .errors import BusError, CodecError, DeliveryError

__all__ = [
    "ALL_SESSIONS",
    "DEFAULT_INBOX",
    "Bus",
    "BusError",
    "CodecError",
    "DeliveryError",
    "Envelope",
    "Port",
    "Subscription",
]
