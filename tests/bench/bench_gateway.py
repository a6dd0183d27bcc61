"""Gateway benchmark: 200 concurrent streams through one gateway on the live backend.

The fake Gemini server runs in a process of its own (so its work does not share our
loop) and answers each stream with 20 chunks, 20 ms apart; the client is another fresh
process (so its peak RSS is the gateway's alone) that drives one ``GatewayActor`` with
``GenaiBackend`` — google-genai over real HTTP, bridged with trio-asyncio. Reported:

- the wall time of 200 concurrent streams against one stream's (ideal: about 1x);
- the client's CPU time during those streams: the gateway is CPU-bound, so this is the
  number to read when other processes share the machine (under 0.40 s it keeps up with
  the chunks and the wall is about one stream's);
- peak RSS of the client process;
- threads before and at the peak (a thread per stream would show here);
- chunk latency: from the server writing a chunk (its monotonic clock, shared by the
  processes) to the requester receiving its ``ModelChunk`` from the bus (median, p99);
- the floor, in the same run: a client that only reads the same 200 streams off trio
  sockets (no HTTP parsing, no SDK, no bus), against one stream read the same way — what
  this machine, this server and trio allow at best.

Run with ``python -m tests.bench`` (all benchmarks) or ``python -m tests.bench.bench_gateway``.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import trio

ROOT = Path(__file__).resolve().parents[2]
STREAMS = 200
CHUNKS = 20
CHUNK_DELAY_S = 0.02


def _entries(n: int) -> list[Any]:
    from actors.gateway import FakeEntry

    chunks = [{"candidates": [{"content": {"role": "model", "parts": [{"text": f"c{i} "}]}}]} for i in range(CHUNKS)]
    chunks[-1]["candidates"][0]["finishReason"] = "STOP"
    return [FakeEntry("generateContentStream", chunks, i) for i in range(n)]


# -- the server process -----------------------------------------------------------------------
def serve(port_file: str, times_file: str) -> None:
    """Serve until stdin closes, then write each request's chunk send times."""
    from tests.fakes.gemini_server import FakeGeminiServer

    async def main() -> None:
        server = FakeGeminiServer(_entries(2 * STREAMS + 8), strict=False, chunk_delay_s=CHUNK_DELAY_S)
        async with trio.open_nursery() as nursery:
            port = await nursery.start(server.run)
            _write(port_file, str(port))
            await trio.to_thread.run_sync(sys.stdin.read)
            nursery.cancel_scope.cancel()
        times = {r.body["contents"][0]["parts"][0]["text"]: r.chunk_sent_at for r in server.requests if isinstance(r.body, dict)}
        _write(times_file, json.dumps(times))

    trio.run(main)


def _write(path: str, text: str) -> None:
    Path(path).write_text(text)


# -- the client process -----------------------------------------------------------------------
def client(base_url: str, out_file: str) -> None:
    import random

    from actors.gateway import GatewayActor, GenaiBackend, GenaiSettings
    from bus import Bus
    from bus.messages import GenerateRequest, ModelChunk, ModelFailed, ModelFinished

    received: dict[str, list[float]] = {}
    failures: list[str] = []

    async def one(bus: Bus, name: str) -> None:
        port = bus.connect(name)
        await port.send(
            GenerateRequest(
                session_id=name,
                request_id=name,
                reply_to=name,
                method="generateContentStream",
                model="gemini-bench",
                contents=({"role": "user", "parts": [{"text": name}]},),
            ),
            to="gateway",
        )
        times = received.setdefault(name, [])
        async for env in port:
            if isinstance(env.message, ModelChunk):
                times.append(time.monotonic())
            elif isinstance(env.message, ModelFinished | ModelFailed):
                if isinstance(env.message, ModelFailed):
                    failures.append(env.message.error.message)
                break
        bus.disconnect(name)

    async def main() -> dict[str, Any]:
        bus = Bus()
        backend = GenaiBackend(GenaiSettings(api_key="bench", base_url=base_url))
        threads = {"before": threading.active_count(), "peak": threading.active_count()}
        async with trio.open_nursery() as nursery:
            await nursery.start(GatewayActor(bus, backend, rng=random.Random(0)).run)
            await one(bus, "warmup-0")
            threads["after_warmup"] = threading.active_count()
            started = time.perf_counter()
            await one(bus, "single-0")
            single = time.perf_counter() - started

            async def sample() -> None:
                while True:
                    threads["peak"] = max(threads["peak"], threading.active_count())
                    await trio.sleep(0.005)

            sampler = trio.CancelScope()

            async def run_sampler() -> None:
                with sampler:
                    await sample()

            nursery.start_soon(run_sampler)
            started, cpu_started = time.perf_counter(), time.process_time()
            async with trio.open_nursery() as streams:
                for i in range(STREAMS):
                    streams.start_soon(one, bus, f"bench-{i}")
            many, many_cpu = time.perf_counter() - started, time.process_time() - cpu_started
            sampler.cancel()
            bus.disconnect("gateway")
        return {
            "single_s": single,
            "many_s": many,
            "many_cpu_s": many_cpu,
            "threads": threads,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "received": received,
            "failures": failures,
        }

    _write(out_file, json.dumps(trio.run(main)))


# -- the floor: the same streams read off raw trio sockets ---------------------------------------
def floor_client(base_url: str, out_file: str) -> None:
    host, _, port_text = base_url.removeprefix("http://").partition(":")
    port = int(port_text)

    async def one(name: str) -> None:
        body = json.dumps({"contents": [{"role": "user", "parts": [{"text": name}]}]}).encode()
        head = (
            f"POST /v1beta/models/gemini-bench:streamGenerateContent?alt=sse HTTP/1.1\r\nHost: {host}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode()
        stream = await trio.open_tcp_stream(host, port)
        async with stream:
            await stream.send_all(head + body)
            seen = b""
            while not seen.endswith(b"0\r\n\r\n"):  # the chunked body's end
                data = await stream.receive_some(65536)
                if not data:
                    break
                seen = seen[-8:] + data

    async def main() -> dict[str, float]:
        await one("floor-warmup")
        started = time.perf_counter()
        await one("floor-single")
        single = time.perf_counter() - started
        started, cpu_started = time.perf_counter(), time.process_time()
        async with trio.open_nursery() as nursery:
            for i in range(STREAMS):
                nursery.start_soon(one, f"floor-{i}")
        return {"single_s": single, "many_s": time.perf_counter() - started, "many_cpu_s": time.process_time() - cpu_started}

    _write(out_file, json.dumps(trio.run(main)))


# -- orchestration ------------------------------------------------------------------------------
def measure() -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with tempfile.TemporaryDirectory() as tmp:
        port_file, times_file, out_file, floor_file = (
            str(Path(tmp) / n) for n in ("port", "times.json", "out.json", "floor.json")
        )
        server = subprocess.Popen(
            [sys.executable, "-c", f"from tests.bench.bench_gateway import serve; serve({port_file!r}, {times_file!r})"],
            stdin=subprocess.PIPE,
            env=env,
            cwd=ROOT,
        )
        try:
            deadline = time.monotonic() + 30
            while not Path(port_file).exists() or not Path(port_file).read_text():
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("the fake server did not start")
                time.sleep(0.02)
            base_url = f"http://127.0.0.1:{Path(port_file).read_text()}"
            for fn, out in (("client", out_file), ("floor_client", floor_file)):
                subprocess.run(
                    [sys.executable, "-c", f"from tests.bench.bench_gateway import {fn}; {fn}({base_url!r}, {out!r})"],
                    env=env,
                    cwd=ROOT,
                    check=True,
                    timeout=300,
                )
        finally:
            assert server.stdin is not None
            server.stdin.close()
            server.wait(timeout=30)
        result: dict[str, Any] = json.loads(Path(out_file).read_text())
        result["floor"] = json.loads(Path(floor_file).read_text())
        sent: dict[str, list[float]] = json.loads(Path(times_file).read_text())
    one = [got - at for got, at in zip(result["received"].get("single-0", ()), sent.get("single-0", ()), strict=False)]
    result["single_latency_median_ms"] = statistics.median(one) * 1000 if one else float("nan")
    latencies = [
        got - sent_at
        for name, times in result.pop("received").items()
        if name.startswith("bench-")
        for got, sent_at in zip(times, sent.get(name, ()), strict=False)
    ]
    latencies.sort()
    result["latency_median_ms"] = statistics.median(latencies) * 1000
    result["latency_p99_ms"] = latencies[int(len(latencies) * 0.99) - 1] * 1000
    result["chunks"] = len(latencies)
    return result


RUNS = 3


def bench_gateway() -> None:
    """Each row the median of ``RUNS`` measurements (a fresh server and client each);
    a run with a failed stream or a missing chunk stops the benchmark: its figures
    would not be of this load."""
    from tests.bench._table import record

    runs = []
    for _ in range(RUNS):
        r = measure()
        if r["failures"] or r["chunks"] != STREAMS * CHUNKS:
            raise RuntimeError(f"gateway bench: {len(r['failures'])} failed streams, {r['chunks']} of {STREAMS * CHUNKS} chunks timed")
        runs.append(r)

    def med(key: str, *, of: str | None = None) -> float:
        return float(statistics.median((r[of] if of else r)[key] for r in runs))

    note = f"median of {RUNS} runs"
    ideal = CHUNKS * CHUNK_DELAY_S
    record(
        f"gateway: {STREAMS} concurrent streams, wall",
        med("many_s"),
        "s",
        baseline=med("single_s"),
        target=f"~1x one stream ({ideal:.2f} s of chunk delays); compare the floor below; {note}",
    )
    record("gateway: client CPU during those streams", med("many_cpu_s"), "s", target=f"< {ideal:.2f} s keeps up")
    record(
        f"floor: {STREAMS} streams read off raw trio sockets, wall",
        med("many_s", of="floor"),
        "s",
        baseline=med("single_s", of="floor"),
        target=f"the best this machine and server allow (no HTTP, SDK or bus); {note}",
    )
    record("floor: CPU of that reader", med("many_cpu_s", of="floor"), "s")
    record("gateway: peak RSS (client process)", med("peak_rss_mb"), "MB")
    before = runs[0]["threads"]["before"]
    peak = max(r["threads"]["peak"] for r in runs)
    record(f"gateway: threads at peak (before: {before}), most of {RUNS} runs", peak, "thr", target="no thread per stream")
    record("gateway: chunk -> ModelChunk latency, one stream, median", med("single_latency_median_ms"), "ms", target=note)
    record("gateway: chunk -> ModelChunk latency, median", med("latency_median_ms"), "ms", target=note)
    record("gateway: chunk -> ModelChunk latency, p99", med("latency_p99_ms"), "ms", target=note)


if __name__ == "__main__":
    bench_gateway()
