"""Secrets kept out of recordings (the package docstring's "Secrets").

API keys never reach the file: values of ``GEMINI_API_KEY``, ``GOOGLE_API_KEY`` and
other ``*_API_KEY`` variables of the environment (8 characters or more), Google API
keys (``AIza...``), bearer tokens, and the values of ``Authorization``/
``x-goog-api-key``-like keys are replaced by ``[REDACTED]``. Replay scrubs what it
compares the same way.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

REDACTED = "[REDACTED]"
SECRET_ENV_NAMES = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
MIN_SECRET_LEN = 8
"""Shorter environment values (``GEMINI_API_KEY=fake`` in tests) are not real keys, and
scrubbing them would mangle ordinary text."""



_SENSITIVE_KEY = re.compile(
    r"^(?:authorization|proxy[-_]authorization|x[-_]goog[-_]api[-_]key|x[-_]api[-_]key|api[-_]?key)$",
    re.IGNORECASE,
)
_SECRET_PATTERNS = re.compile(
    r"AIza[0-9A-Za-z_\-]{35}|(?<![A-Za-z])Bearer\s+[A-Za-z0-9._~+/=\-]{8,}", re.IGNORECASE
)
_SENSITIVE_KEY_IN_TEXT = re.compile(
    r'"(?:authorization|proxy[-_]authorization|x[-_]goog[-_]api[-_]key|x[-_]api[-_]key|api[-_]?key)"\s*:',
    re.IGNORECASE,
)


def secrets_from_env(environ: Mapping[str, str]) -> tuple[str, ...]:
    """The environment's API key values worth scrubbing (longest first)."""
    found = {
        v
        for k, v in environ.items()
        if (k in SECRET_ENV_NAMES or k.endswith("_API_KEY")) and len(v) >= MIN_SECRET_LEN
    }
    return tuple(sorted(found, key=len, reverse=True))


@attrs.define
class Scrubber:
    """Removes secrets from encoded lines; cheap when there are none (one regex search
    and a substring test per secret on the line). Not frozen: the daemon adds the keys
    of a client that loads a running session (:meth:`add`), since that session's model
    requests use them from then on; the recorder reads ``secrets`` at each line."""

    secrets: tuple[str, ...] = ()
    _needles_of: tuple[str, ...] | None = attrs.field(default=None, init=False, repr=False, eq=False)
    _needles_cache: tuple[str, ...] = attrs.field(default=(), init=False, repr=False, eq=False)

    def add(self, secrets: Iterable[str]) -> None:
        """Scrub these too, from the next line on (longest first, as ever)."""
        self.secrets = tuple(sorted({*self.secrets, *secrets}, key=len, reverse=True))

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Scrubber:
        return cls(secrets_from_env(os.environ if environ is None else environ))

    def needs(self, text: str) -> bool:
        # Every line of every recording comes here: no generator, and each secret's JSON
        # form made once (``_needles``), not per line.
        for needle in self._needles():
            if needle in text:
                return True
        # The patterns are slow to search; a lower-cased substring test for what each
        # must contain rules most lines out.
        low = text.lower()
        if "api" not in low and "aiza" not in low and "bearer" not in low and "authoriz" not in low:
            return False
        return bool(_SECRET_PATTERNS.search(text) or _SENSITIVE_KEY_IN_TEXT.search(text))

    def _needles(self) -> tuple[str, ...]:
        """Each secret, and its form inside a JSON string, for the ``secrets`` of now."""
        if self._needles_of is not self.secrets:
            self._needles_cache = tuple(dict.fromkeys(n for s in self.secrets for n in (s, _json_inner(s))))
            self._needles_of = self.secrets
        return self._needles_cache

    def scrub_text(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, REDACTED)
        return _SECRET_PATTERNS.sub(REDACTED, text)

    def scrub(self, value: Any) -> Any:
        """A copy of plain JSON data with every secret replaced."""
        if isinstance(value, str):
            return self.scrub_text(value)
        if isinstance(value, Mapping):
            return {
                k: (REDACTED if isinstance(k, str) and _SENSITIVE_KEY.match(k) and v is not None else self.scrub(v))
                for k, v in value.items()
            }
        if isinstance(value, list | tuple):
            return [self.scrub(v) for v in value]
        return value


def _json_inner(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)[1:-1]


__all__ = ["MIN_SECRET_LEN", "REDACTED", "SECRET_ENV_NAMES", "Scrubber", "secrets_from_env"]
