"""Node's retryable network error codes (Gemini CLI's ``utils/retry.ts``)."""

from __future__ import annotations

import pytest

from actors.common import RETRYABLE_NETWORK_CODES, is_network_retryable


@pytest.mark.parametrize("code", sorted(RETRYABLE_NETWORK_CODES))
def test_listed_codes_are_retried(code: str) -> None:
    assert is_network_retryable(code)


@pytest.mark.parametrize(
    "code",
    [
        "ERR_SSL_SSLV3_ALERT_BAD_RECORD_MAC",
        "ERR_SSL_SSL/TLS_ALERT_BAD_RECORD_MAC",
        "err_ssl_x_bad_record_mac",
    ],
)
def test_every_openssl_spelling_of_bad_record_mac_is_retried(code: str) -> None:
    assert is_network_retryable(code)


@pytest.mark.parametrize(
    "code", ["ECONNABORTED", "ENOENT", "ERR_SSL_DECRYPTION_FAILED", "", "BAD_RECORD_MAC"]
)
def test_other_codes_are_not(code: str) -> None:
    assert not is_network_retryable(code)
