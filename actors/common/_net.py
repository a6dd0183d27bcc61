"""Node's network error codes that Gemini CLI retries (``utils/retry.ts``).

A failed connection or stream carries Node's ``code`` (``ECONNRESET``, undici's
``UND_ERR_*``, OpenSSL's ``ERR_SSL_*``); the model gateway and web fetch both retry the
same ones, so the list lives here once.
"""

from __future__ import annotations

import re

from ._lazy import LazyPattern

RETRYABLE_NETWORK_CODES = frozenset(
    {
        "ECONNRESET",
        "ETIMEDOUT",
        "EPIPE",
        "ENOTFOUND",
        "EAI_AGAIN",
        "ECONNREFUSED",
        "ERR_SSL_WRONG_VERSION_NUMBER",
        "EPROTO",
        "UND_ERR_HEADERS_TIMEOUT",
        "UND_ERR_BODY_TIMEOUT",
        "UND_ERR_CONNECT_TIMEOUT",
        "ERR_STREAM_PREMATURE_CLOSE",
    }
)

# Node names SSL errors ERR_SSL_ + OpenSSL's reason, which differs between OpenSSL
# versions (..._SSLV3_ALERT_BAD_RECORD_MAC, ..._SSL/TLS_ALERT_BAD_RECORD_MAC).
_SSL_BAD_RECORD_MAC = LazyPattern(r"^ERR_SSL_.*BAD_RECORD_MAC", re.IGNORECASE)


def is_network_retryable(code: str) -> bool:
    """Whether a network error with Node's ``code`` is worth another try."""
    return code in RETRYABLE_NETWORK_CODES or _SSL_BAD_RECORD_MAC.match(code) is not None
