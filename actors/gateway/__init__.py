"""Model gateway actor and its backends (fake responses; google-genai in a later step)."""

from ._actor import GATEWAY_ADDRESS, GatewayActor
from ._backend import Backend, BackendError, ChunkSink
from ._fake import FakeResponsesBackend, FakeResponsesError, load_fake_responses, request_dump


def live_backend() -> Backend:
    """The backend for real Gemini calls (google-genai); raises ``BackendError`` when it
    cannot be used."""
    raise BackendError(
        "no live model backend in this build: run with --fake-responses FILE "
        "(the google-genai backend arrives with the gateway work)",
        type="config",
    )


__all__ = [
    "live_backend",
    "GATEWAY_ADDRESS",
    "Backend",
    "BackendError",
    "ChunkSink",
    "FakeResponsesBackend",
    "FakeResponsesError",
    "GatewayActor",
    "load_fake_responses",
    "request_dump",
]
