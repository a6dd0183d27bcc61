"""The bus's own errors."""

from __future__ import annotations


class BusError(Exception):
    """Base class for every error the bus raises."""


class CodecError(BusError):
    """A frame could not be decoded: malformed JSON, an unknown tag, a wrong field.

    ``where`` says where the frame came from (a file and line, a socket), when known.
    """

    def __init__(self, message: str, *, where: str | None = None) -> None:
        self.where = where
        super().__init__(f"{where}: {message}" if where else message)


class DeliveryError(BusError):
    """A message was sent to an address that nobody listens on (any more)."""
