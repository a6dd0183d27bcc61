"""A session's recording as a JetStream subject, with fenced appends.

The lines of the local recording (``actors.recording``: a meta line opening each
process's part, then envelope and void lines) are the messages of the session's subject
``agentbus.<user>.session.<session>.log`` of the user's stream ``AGENTBUS_<user>``, a
line a message or several lines joined by newlines in one (header ``Agentbus-Lines``:
a writer appends what it has in one round trip): ``export`` writes exactly the local
file. A line over the server's message limit goes
as parts (header ``Agentbus-Part: i/n``) that ``lines`` joins again; a line whose parts
did not all arrive (its writer was fenced or died between them) is dropped as a torn
last line of a local file is.

**Fencing.** Every append names the subject's last sequence its writer knows
(``Nats-Expected-Last-Subject-Sequence``). An owner taking a session over reads that
sequence and appends its process's meta line against it (``take_over``); from then on a
stale owner's append names an older sequence and the stream rejects it (``Fenced``):
two owners can never both extend the log. Each message carries an id naming its writer
(``Nats-Msg-Id``), so an append whose acknowledgement was lost and that is tried again
(``NoQuorum`` says to) is recognised as the writer's own last message: stored once.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Protocol

import attrs
import trio

from actors.cluster.errors import Fenced, TooLarge

PART = "Agentbus-Part"
LINES = "Agentbus-Lines"
"""On a message holding several lines (joined by newlines): how many."""
MSG_ID = "Nats-Msg-Id"
PART_MARGIN = 1024
"""Room left in a message for headers."""
MAX_PARTS = 4096


class StoredLike(Protocol):
    @property
    def seq(self) -> int: ...
    @property
    def data(self) -> bytes: ...
    @property
    def headers(self) -> dict[str, str]: ...


class LogStore(Protocol):
    """What a journal needs of JetStream (``actors.cluster._nats.NatsLink``)."""

    @property
    def max_payload(self) -> int: ...
    async def ensure_stream(self, name: str, subjects: list[str], *, replicas: int = 1) -> None: ...
    async def append(self, subject: str, data: bytes, *, expected_last: int | None, headers: dict[str, str] | None = None) -> int: ...
    async def last_message(self, stream: str, subject: str) -> StoredLike | None: ...
    def read(self, stream: str, subject: str, from_seq: int = 1) -> AsyncIterator[StoredLike]: ...


def token(text: str) -> str:
    """``text`` as one subject token (``.``, ``*``, ``>``, spaces and the rest as
    ``_XX`` hex; ``_`` itself too, so distinct names stay distinct)."""
    return re.sub(r"[^-a-zA-Z0-9]", lambda m: "".join(f"_{b:02X}" for b in m.group().encode("utf-8", "surrogatepass")), text) or "_"


def stream_name(user: str) -> str:
    return f"AGENTBUS_{token(user)}"


def subject_of(user: str, session_id: str) -> str:
    return f"agentbus.{token(user)}.session.{token(session_id)}.log"


@attrs.define
class Journal:
    store: LogStore
    user: str
    session_id: str
    replicas: int = 1
    last: int = 0
    """The subject's last sequence as this writer knows it (what its next append names)."""
    writer: str = attrs.field(factory=lambda: uuid.uuid4().hex)
    """This writer's id: the prefix of its messages' ids (``Nats-Msg-Id``)."""

    @property
    def stream(self) -> str:
        return stream_name(self.user)

    @property
    def subject(self) -> str:
        return subject_of(self.user, self.session_id)

    async def open(self) -> None:
        await self.store.ensure_stream(self.stream, [f"agentbus.{token(self.user)}.session.*.log"], replicas=self.replicas)

    async def take_over(self, meta_line: bytes) -> int:
        """Become the writer: append this process's first line against the subject's
        last sequence as it is now. A stale owner's later appends are fenced."""
        last = await self.store.last_message(self.stream, self.subject)
        self.last = last.seq if last is not None else 0
        return await self.append(meta_line)

    async def append(self, line: bytes) -> int:
        """Store one recording line (without its newline); its last part's sequence.
        ``Fenced`` when another writer appended since this one's last."""
        room = self.store.max_payload - PART_MARGIN
        if len(line) <= room:
            await self._append_one(line, {})
            return self.last
        pieces = [line[i : i + room] for i in range(0, len(line), room)]
        if len(pieces) > MAX_PARTS:
            raise TooLarge(f"a recording line of {len(line)} bytes is over {MAX_PARTS} parts of {room} bytes")
        for i, piece in enumerate(pieces, 1):
            await self._append_one(piece, {PART: f"{i}/{len(pieces)}"})
        return self.last

    def batches(self, lines: list[bytes]) -> list[list[bytes]]:
        """``lines`` cut into runs that fit one message each (a line too large for a
        message alone is a run of its own: it goes as parts)."""
        room = self.store.max_payload - PART_MARGIN
        out: list[list[bytes]] = []
        size = 0
        for line in lines:
            if out and size + 1 + len(line) <= room:  # (a run that is one oversize line: never)
                out[-1].append(line)
                size += 1 + len(line)
            else:
                out.append([line])
                size = len(line)
        return out

    async def append_batch(self, lines: list[bytes]) -> int:
        """Store a run of ``batches``: one message (header ``Agentbus-Lines``) for several
        lines, as ``append`` for one. Tried again after ``NoQuorum``, it is stored once."""
        if len(lines) == 1:
            return await self.append(lines[0])
        await self._append_one(b"\n".join(lines), {LINES: str(len(lines))})
        return self.last

    async def _append_one(self, data: bytes, headers: dict[str, str]) -> None:
        """One message, fenced on ``last``. An append whose answer was lost (``NoQuorum``:
        the cluster may have stored it anyway) and that is tried again finds itself as
        the subject's last message: stored once, not fenced."""
        msg_id = f"{self.writer}/{self.last}/{hashlib.blake2b(data, digest_size=8).hexdigest()}"
        try:
            self.last = await self.store.append(self.subject, data, expected_last=self.last, headers={**headers, MSG_ID: msg_id})
            return
        except Fenced:
            last = await self.store.last_message(self.stream, self.subject)
            theirs = last is None or not last.headers.get(MSG_ID, "").startswith(f"{self.writer}/")
            if theirs:
                raise
            assert last is not None
            # Ours: an earlier attempt was stored after all (its answer was lost).
            self.last = last.seq
            if last.headers.get(MSG_ID) == msg_id:
                return
        msg_id = f"{self.writer}/{self.last}/{msg_id.rsplit('/', 1)[1]}"
        self.last = await self.store.append(self.subject, data, expected_last=self.last, headers={**headers, MSG_ID: msg_id})

    async def lines(self, from_seq: int = 1) -> list[tuple[int, bytes]]:
        """The recording's lines with the sequence of their last part, in order."""
        out: list[tuple[int, bytes]] = []
        parts: list[bytes] = []
        async for msg in self.store.read(self.stream, self.subject, from_seq):
            part = msg.headers.get(PART)
            if part is None:
                parts = []  # a line whose parts stopped short: torn, dropped
                if LINES in msg.headers:
                    out.extend((msg.seq, line) for line in msg.data.split(b"\n"))
                else:
                    out.append((msg.seq, msg.data))
                continue
            index, _, count = part.partition("/")
            if index == "1":
                parts = []
            parts.append(msg.data)
            if index == count and len(parts) == int(count):
                out.append((msg.seq, b"".join(parts)))
                parts = []
        return out

    async def export(self, path: Path) -> int:
        """Write the recording as the local file format; the number of lines."""
        lines = await self.lines()
        target = trio.Path(path)
        await target.parent.mkdir(parents=True, exist_ok=True)
        await target.write_bytes(b"".join(line + b"\n" for _, line in lines))
        return len(lines)


__all__ = ["Fenced", "Journal", "LogStore", "stream_name", "subject_of", "token"]
