"""Forwarding events in batches: a follower queues every event waiting in its
subscription as one write, the writer sends what is queued together, and a session that
several connections follow encodes each event once. Whatever the batching, every client
gets every event, intact, in order, without gap or duplicate."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
import trio

from actors.frontends.daemon import _connection
from bus import Envelope
from bus.codec import encode
from bus.messages import CaughtUp, TextStreamed
from tests.frontends.daemon._helpers import (
    client_of,
    events_until,
    running_daemon,
    text_response,
    write_responses,
)

CHUNKS = 300


async def test_many_events_reach_every_client_intact_in_order_each_encoded_once(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chunks = [hashlib.sha256(str(i).encode()).hexdigest()[: 8 + i % 40] + f" {i} " for i in range(CHUNKS)]
    fake = write_responses(home / "many.responses", text_response(*chunks))
    encoded: list[int] = []
    real = _connection.encode_envelope

    def counting(env: Envelope, **extra: Any) -> str:
        encoded.append(env.seq)
        return real(env, **extra)

    monkeypatch.setattr(_connection, "encode_envelope", counting)
    with trio.fail_after(60):
        async with running_daemon(home), client_of(home, "a") as a, client_of(home, "b") as b:
            ready = await a.create_session(str(home / "ws"), fake_responses=str(fake), model="gemini-2.5-flash")
            sid = ready.session_id
            await b.load_session(sid)
            await a.subscribe(sid)
            await b.subscribe(sid)
            # Both followers forward live from here (before it, they read the recording).
            for client in (a, b):
                async for event in client.events:
                    if isinstance(event, CaughtUp):
                        break
            await a.prompt(sid, "talk")
            seen_a = await events_until(a)
            seen_b = await events_until(b)
    texts = [e.message.text for e in seen_a if isinstance(e.message, TextStreamed)]
    assert texts == chunks
    seqs = [e.seq for e in seen_a]
    assert seqs == sorted(set(seqs))  # in order, no duplicate
    assert [(e.seq, encode(e.message)) for e in seen_b] == [(e.seq, encode(e.message)) for e in seen_a]
    # Both connections forwarded every event live; each was encoded once.
    assert sorted(encoded) == sorted(set(encoded))
    assert set(seqs) <= set(encoded)
