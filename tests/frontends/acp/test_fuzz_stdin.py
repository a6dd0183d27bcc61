"""ACP's input under a stream of adversarial lines from a seeded generator
(``tests.frontends.daemon._fuzz``) interleaved with a legitimate session's prompts on the same
stream, as an editor's bugs would send them: every bad line gets exactly one JSON-RPC
error (with its id when it had a readable one), the session's turns complete, and the
agent ends cleanly at the end of input. The turn latency with and without the fuzz is
printed (``-s``), not asserted beyond a bound against hangs. ``AGENTBUS_FUZZ_SEED``
picks another seed."""

from __future__ import annotations

import os
import random
import statistics
from pathlib import Path
from typing import Any

import trio
import trio.lowlevel

from actors.frontends.acp._session import AcpOptions
from tests.frontends.daemon._fuzz import acp_line

from ._client import Client, connected, fake_responses, text_chunks

SEED = int(os.environ.get("AGENTBUS_FUZZ_SEED", "17"))
TURNS = 12
MAX_LINES = 1500


def locked_sends(client: Client) -> None:
    """Let two tasks write the client's side of the stream (whole lines each)."""
    send_raw, lock = client.send_raw, trio.Lock()

    async def send(data: bytes) -> None:
        async with lock:
            await send_raw(data)

    client.send_raw = send  # type: ignore[method-assign]


async def timed_turns(client: Client, sid: str, turns: int) -> list[float]:
    latencies = []
    for i in range(turns):
        started = trio.current_time()
        result = await client.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": f"turn {i}"}]})
        assert result["stopReason"] == "end_turn"
        latencies.append(trio.current_time() - started)
    return latencies


def summary(latencies: list[float]) -> str:
    ms = sorted(x * 1000 for x in latencies)
    return f"median {statistics.median(ms):.1f} ms, max {ms[-1]:.1f} ms over {len(ms)} turns"


async def test_fuzzed_input_answers_every_bad_line_and_the_session_goes_on(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    script = fake_responses(tmp_path / "fake.jsonl", *[text_chunks(f"answer {i} ", "done.") for i in range(2 * TURNS)])
    options = AcpOptions(model="gemini-2.5-flash", fake_responses=str(script), data_dir=tmp_path / "data")
    rng = random.Random(SEED)
    sent: list[tuple[str, bool]] = []
    with trio.fail_after(120):
        async with connected(options) as (client, _):
            locked_sends(client)
            await client.initialize()
            sid = (await client.call("session/new", {"cwd": str(ws), "mcpServers": []}))["sessionId"]
            quiet = await timed_turns(client, sid, TURNS)
            stop = trio.Event()

            async def fuzz() -> None:
                while not stop.is_set() and len(sent) < MAX_LINES:
                    rid = f"fz{len(sent)}"
                    line, readable = acp_line(rng, rid)
                    sent.append((rid, readable))
                    await client.send_raw(line + b"\n")
                    await trio.lowlevel.checkpoint()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(fuzz)
                busy = await timed_turns(client, sid, TURNS)
                stop.set()
            # Every line is answered before the answer to a request sent after them all.
            await client.call("session/list", {})
            log = list(client.log)
    errors: dict[Any, int] = {}
    for frame in log:
        if "error" in frame and "method" not in frame:
            errors[frame.get("id")] = errors.get(frame.get("id"), 0) + 1
    readable = [rid for rid, ok in sent if ok]
    assert {rid: errors.get(rid, 0) for rid in readable} == {rid: 1 for rid in readable}
    assert errors.get(None, 0) == len(sent) - len(readable)
    assert sent and max(busy) < 10
    print(
        f"\nacp fuzz seed {SEED}: {len(sent)} bad lines, {len(readable)} answered by id\n"
        f"legitimate turn latency without fuzz: {summary(quiet)}\n"
        f"legitimate turn latency with fuzz:    {summary(busy)}"
    )
