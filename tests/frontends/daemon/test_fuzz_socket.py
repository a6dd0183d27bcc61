"""The daemon's sockets (Unix and TCP) under a stream of adversarial frames from a seeded
generator (``_fuzz``), while a legitimate session runs its turns beside them: the daemon
stays up, every bad frame gets exactly one error reply (the connection goes on unless
the reply says it closes), and the session's turns complete. The turn latency with and
without the fuzz is measured and printed (``-s``), not asserted beyond a bound against
hangs. ``AGENTBUS_FUZZ_SEED`` picks another seed."""

from __future__ import annotations

import logging
import os
import random
import statistics
from functools import partial
from pathlib import Path

import pytest
import trio

from actors.frontends.daemon import TcpListen
from actors.frontends.daemon.client import DaemonClient
from tests.frontends.daemon._fuzz import TEST_MAX_FRAME, Tally, fuzz
from tests.frontends.daemon._helpers import (
    client_of,
    running_daemon,
    text_response,
    write_responses,
)
from tests.frontends.daemon.test_bad_input import own_turn_end

SEED = int(os.environ.get("AGENTBUS_FUZZ_SEED", "17"))
TURNS = 12
"""Turns of the legitimate session in each phase (without, then with the fuzz)."""
FUZZERS = 4
"""Fuzzing clients at once: half on the Unix socket, half over TCP."""
MAX_FRAMES = 1500
"""Bad frames at most, all fuzzers together (they stop when the session's turns end)."""
TOKEN = "fuzz-token"


async def timed_turns(client: DaemonClient, sid: str, turns: int) -> list[float]:
    latencies = []
    for i in range(turns):
        started = trio.current_time()
        accepted = await client.prompt(sid, f"turn {i}")
        ended = await own_turn_end(client, accepted.prompt_id)
        assert ended.stop_reason == "end_turn"
        latencies.append(trio.current_time() - started)
    return latencies


def summary(latencies: list[float]) -> str:
    ms = sorted(x * 1000 for x in latencies)
    return f"median {statistics.median(ms):.1f} ms, max {ms[-1]:.1f} ms over {len(ms)} turns"


async def test_fuzzed_sockets_answer_every_bad_frame_and_the_session_beside_them_goes_on(
    home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fake = write_responses(home / "f.responses", *[text_response(f"answer {i} ", "done.") for i in range(2 * TURNS)])
    rng = random.Random(SEED)
    tally = Tally()
    with trio.fail_after(120):
        async with running_daemon(home, tcp=TcpListen(port=0, token=TOKEN), max_frame=TEST_MAX_FRAME) as daemon:
            [tcp] = daemon.tcp_addresses
            async with client_of(home, "legit") as legit:
                sid = (await legit.create_session(str(home / "ws"), fake_responses=str(fake), model="gemini-2.5-flash")).session_id
                await legit.subscribe(sid)
                quiet = await timed_turns(legit, sid, TURNS)
                stop = trio.Event()
                async with trio.open_nursery() as nursery:
                    for i in range(FUZZERS):
                        where = tcp if i % 2 else None
                        seeded = random.Random(rng.random())
                        nursery.start_soon(partial(fuzz, home, where, seeded, sid, stop, tally, token=TOKEN, limit=MAX_FRAMES))
                    busy = await timed_turns(legit, sid, TURNS)
                    during = tally.frames
                    stop.set()
                for conn in [c for c in daemon.connections.values() if c.client != "legit"]:
                    await conn.done.wait()  # the fuzzers' last connections, closing
                status = await legit.status()
                assert [c.client for c in status.connections] == ["legit"]
                assert (await legit.list_sessions()).sessions
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], "a connection failed"
    assert during > 0 and max(busy) < 10
    print(
        f"\nfuzz seed {SEED}: {tally.frames} bad frames ({during} during the turns) on {tally.connections} connections, "
        f"{tally.fatal} closed them; codes {dict(sorted(tally.codes.items()))}\n"
        f"legitimate turn latency without fuzz: {summary(quiet)}\n"
        f"legitimate turn latency with fuzz:    {summary(busy)}"
    )
