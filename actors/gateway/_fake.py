"""Gemini CLI's fake-responses files, served with exactly its matching rules.

A file holds one JSON object per non-blank line: ``{"method": M, "response": R}`` where
``M`` is ``generateContent``, ``generateContentStream`` (``R`` is a list of chunks),
``countTokens`` or ``embedContent``. Requests are never inspected, only their method.

- strict: the next line is consumed whatever its method; none left raises
  ``No more mock responses for <method>, got request:\\n<request>``; a different method
  raises ``Unexpected response type, next response was for <X> but expected <Y>``
  (the line is consumed).
- non-strict: the first remaining line with the requested method is taken.

Each process reads the file from its first line.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import attrs
import trio

from bus.json_values import thaw
from bus.messages import GenerateRequest

from ._backend import BackendError, ChunkSink

METHODS = ("generateContent", "generateContentStream", "countTokens", "embedContent")


class FakeResponsesError(Exception):
    """The file cannot be used: missing, unreadable, or a malformed line."""


@attrs.frozen
class FakeEntry:
    method: str
    response: Any
    line: int


MAX_FAKE_RESPONSES_BYTES = 256 << 20
"""The largest fake-responses file read (a daemon reads one for each session a client
asks for: a bigger one, or a device that never ends, is refused, not read into memory)."""


def load_fake_responses(path: str | Path) -> list[FakeEntry]:
    """Parse a fake-responses file; raises ``FakeResponsesError`` naming file and line."""
    p = Path(path)
    try:
        with p.open("rb") as fh:
            raw = fh.read(MAX_FAKE_RESPONSES_BYTES + 1)  # /dev/zero would take every byte of memory
        if len(raw) > MAX_FAKE_RESPONSES_BYTES:
            raise FakeResponsesError(f"fake responses file {p} is larger than {MAX_FAKE_RESPONSES_BYTES >> 20} MiB")
        text = raw.decode("utf-8")
    except FileNotFoundError:
        raise FakeResponsesError(f"fake responses file not found: {p}") from None
    except IsADirectoryError:
        raise FakeResponsesError(f"fake responses path is a directory: {p}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise FakeResponsesError(f"cannot read fake responses file {p}: {exc}") from None
    entries: list[FakeEntry] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise FakeResponsesError(f"{p}:{lineno}: malformed JSON: {exc.msg}") from None
        except RecursionError:
            raise FakeResponsesError(f"{p}:{lineno}: unusable JSON: nested too deep") from None
        except ValueError:  # (not a JSONDecodeError: Python's integer-conversion limit)
            raise FakeResponsesError(f"{p}:{lineno}: unusable JSON: an integer of more than 4,300 digits") from None
        if not isinstance(data, dict) or "method" not in data or "response" not in data:
            raise FakeResponsesError(
                f"{p}:{lineno}: expected an object with 'method' and 'response'"
            )
        method = data["method"]
        if method not in METHODS:
            raise FakeResponsesError(f"{p}:{lineno}: unknown method {method!r}")
        if method == "generateContentStream" and not isinstance(data["response"], list):
            raise FakeResponsesError(
                f"{p}:{lineno}: a generateContentStream response must be a list of chunks"
            )
        entries.append(FakeEntry(method, data["response"], lineno))
    return entries


def request_dump(request: GenerateRequest) -> str:
    """The request as JSON text, for error messages (``got request:``)."""
    body: dict[str, Any] = {"model": request.model, "contents": thaw(request.contents)}
    config = thaw(request.config)
    if config:
        body["config"] = config
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"))


class FakeResponsesBackend:
    """Serves a fake-responses file. One instance per process: the order is global."""

    def __init__(
        self, entries: list[FakeEntry], *, strict: bool = True, chunk_delay_s: float = 0.0
    ) -> None:
        self._entries = list(entries)
        self._strict = strict
        self._next = 0
        self.chunk_delay_s = chunk_delay_s
        """Pause before each streamed chunk after the first (demos, latency tests)."""
        self.retry_policy: Any = None
        """The gateway's retry constants with this backend (``general.maxAttempts``);
        ``None``: Gemini CLI's defaults."""

    @classmethod
    def from_file(
        cls, path: str | Path, *, strict: bool = True, chunk_delay_s: float = 0.0
    ) -> FakeResponsesBackend:
        return cls(load_fake_responses(path), strict=strict, chunk_delay_s=chunk_delay_s)

    @property
    def remaining(self) -> int:
        return len(self._entries) - self._next if self._strict else len(self._entries)

    def take(self, request: GenerateRequest) -> FakeEntry:
        """Consume the entry that answers ``request``; raises ``BackendError``."""
        method = request.method
        if self._strict:
            if self._next >= len(self._entries):
                raise self._exhausted(request)
            entry = self._entries[self._next]
            self._next += 1
            if entry.method != method:
                raise BackendError(
                    f"Unexpected response type, next response was for {entry.method} "
                    f"but expected {method}"
                )
            return entry
        for i, entry in enumerate(self._entries):
            if entry.method == method:
                del self._entries[i]
                return entry
        raise self._exhausted(request)

    def _exhausted(self, request: GenerateRequest) -> BackendError:
        return BackendError(
            f"No more mock responses for {request.method}, got request:\n{request_dump(request)}"
        )

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Nothing to hold open (the live backend's hook is where the asyncio loop lives)."""
        yield

    async def generate(self, request: GenerateRequest, emit: ChunkSink) -> str:
        entry = self.take(request)
        if entry.method == "generateContentStream":
            for i, chunk in enumerate(entry.response):
                if i and self.chunk_delay_s:
                    await trio.sleep(self.chunk_delay_s)
                await emit(chunk)
        else:
            await emit(entry.response)
        return request.model
