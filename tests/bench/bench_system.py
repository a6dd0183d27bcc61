"""Whole-system benchmarks, side by side with Gemini CLI when ``gemini`` is on PATH.

Every scenario runs the real command line (``agentbus -p``, and ``gemini -p`` in the
same invocation when it is installed) on the same fake-responses file, with medians of
several runs:

- cold start (``-p hi``), per-turn overhead (20 model turns of one ``read_file`` each),
  8 x ``sleep 1`` shell calls in one response;
- Ctrl-C: SIGINT to the run's process group while its shell tool runs ``sleep 30``:
  until the CLI exits, and until no process of the run is alive;
- 5 MB of shell output: the run's peak RSS (``wait4``: the CLI and what it waited for);
- event latency model -> client: both CLIs stream from the same fake Gemini server over
  real HTTP (``GOOGLE_GEMINI_BASE_URL``), which notes when it sends each chunk; the
  client's clock is the time each ``stream-json`` line reaches us;
- in the daemon: ``CancelTurn`` -> ``TurnCancelAcknowledged`` while a real ``sleep 30``
  runs, and 100 concurrent sessions x 3 turns (``bench_daemon.run``).

Without ``gemini`` the Gemini CLI columns stay empty. ``python -m tests.bench.bench_system``
runs only these.
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs
import trio

from tests.bench._table import record

ROOT = Path(__file__).resolve().parents[2]
AGENTBUS = ROOT / ".venv" / "bin" / "agentbus"
MODEL = "gemini-2.5-flash"
RUNS = 5


# -- the two command lines -----------------------------------------------------------------
@attrs.frozen
class Cli:
    name: str
    argv: tuple[str, ...]
    env: dict[str, str]
    version: str = ""

    def command(self, responses: Path | None, prompt: str) -> list[str]:
        extra = ["--fake-responses", str(responses)] if responses is not None else []
        return [*self.argv, "-m", MODEL, "-o", "stream-json", "--skip-trust", "-y", *extra, "-p", prompt]


def clis(home: Path) -> tuple[Cli, Cli | None]:
    """agentbus, and Gemini CLI when ``gemini`` is on PATH (else None)."""
    (home / "ab").mkdir(parents=True, exist_ok=True)
    (home / "g" / ".gemini").mkdir(parents=True, exist_ok=True)
    base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "GEMINI_API_KEY": "fake-key", "LANG": "C.UTF-8"}
    ours = Cli(
        "agentbus",
        (str(AGENTBUS),),
        {**base, "HOME": str(home / "ab"), "GEMINI_CLI_HOME": str(home / "ab"), "AGENTBUS_DATA_DIR": str(home / "ab" / "data")},
    )
    found = shutil.which("gemini")
    if found is None:
        return ours, None
    version = subprocess.run([found, "--version"], capture_output=True, text=True, check=False).stdout.strip()
    return ours, Cli("gemini", (found,), {**base, "HOME": str(home / "g")}, version)


def gemini_version() -> str | None:
    found = shutil.which("gemini")
    if found is None:
        return None
    return subprocess.run([found, "--version"], capture_output=True, text=True, check=False).stdout.strip() or None


@attrs.frozen
class Ran:
    wall: float
    peak_rss_mb: float
    returncode: int
    stdout: str


RSS_HELPER = (
    "import os, subprocess, sys\n"
    "p = subprocess.Popen(sys.argv[2:])\n"
    "_, status, usage = os.wait4(p.pid, 0)\n"
    "open(sys.argv[1], 'w').write(str(usage.ru_maxrss))\n"
    "sys.exit(os.waitstatus_to_exitcode(status))\n"
)
"""Runs a command and writes its peak RSS (KB). A process keeps the RSS high-water mark
it had when forked across ``exec``, so the command must be forked from a small process
(``python -S``), not from this one, for ``wait4`` to report the command's own peak
(and its waited-for children's: Gemini CLI's relaunched Node)."""


def run(cli: Cli, responses: Path | None, prompt: str, cwd: Path, *, rss: bool = False) -> Ran:
    """One run to its end: wall time, and with ``rss`` its peak RSS (through
    ``RSS_HELPER``, which adds its own start-up to the wall time)."""
    with tempfile.TemporaryFile() as out, tempfile.NamedTemporaryFile("r") as peak:
        argv = cli.command(responses, prompt)
        if rss:
            argv = [sys.executable, "-S", "-c", RSS_HELPER, peak.name, *argv]
        started = time.perf_counter()
        proc = subprocess.run(argv, cwd=cwd, env=cli.env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.DEVNULL, check=False)
        wall = time.perf_counter() - started
        out.seek(0)
        text = out.read().decode("utf-8", "replace")
        kb = int(peak.read() or 0) if rss else 0
    return Ran(wall, kb / 1024, proc.returncode, text)


def span(stdout: str, first: str, last: str) -> float:
    """Seconds from the first ``first`` event to the last ``last`` event of a
    ``stream-json`` output (their millisecond timestamps)."""
    stamps: dict[str, list[float]] = {first: [], last: []}
    for line in stdout.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and event.get("type") in stamps:
            when = datetime.datetime.fromisoformat(str(event["timestamp"]).replace("Z", "+00:00"))
            stamps[event["type"]].append(when.timestamp())
    return max(stamps[last]) - min(stamps[first])


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def each(ours: Cli, gemini: Cli | None, measure: Callable[[Cli], float]) -> tuple[float, float | None]:
    """``measure`` for agentbus and (when present) Gemini CLI, interleaved run by run."""
    mine: list[float] = []
    theirs: list[float] = []
    for _ in range(RUNS):
        mine.append(measure(ours))
        if gemini is not None:
            theirs.append(measure(gemini))
    return median(mine), median(theirs) if theirs else None


# -- fake-responses files ------------------------------------------------------------------
def text(t: str) -> dict[str, Any]:
    return {
        "method": "generateContentStream",
        "response": [{"candidates": [{"content": {"role": "model", "parts": [{"text": t}]}, "finishReason": "STOP"}]}],
    }


def calls(*pairs: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    parts = [{"functionCall": {"name": n, "args": a}} for n, a in pairs]
    return {
        "method": "generateContentStream",
        "response": [{"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP"}]}],
    }


def write(path: Path, *entries: dict[str, Any]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))
    return path


# -- scenarios -----------------------------------------------------------------------------
def bench_side_by_side() -> None:
    with tempfile.TemporaryDirectory(prefix="abs") as tmp:
        root = Path(tmp)
        ws = root / "ws"
        ws.mkdir()
        for i in range(20):
            (ws / f"notes{i}.txt").write_text(f"milk\neggs {i}\n")
        ours, gemini = clis(root)
        note = f"Gemini CLI {gemini.version}" if gemini else "Gemini CLI not on PATH"
        hi = write(root / "hi.responses", text("Hello! How can I help you today?"))
        turns = write(
            root / "turns.responses",
            # A file each: repeated (or cycling) identical calls would trip the loop detector.
            *[calls(("read_file", {"file_path": f"notes{i}.txt"})) for i in range(20)],
            text("Read it 20 times."),
        )
        # Distinct commands: eight identical calls would trip the loop detector at the fifth.
        sleeps = write(
            root / "sleeps.responses",
            calls(*[("run_shell_command", {"command": f"sleep 1; echo {i}"}) for i in range(8)]),
            text("Slept."),
        )
        big = write(
            root / "big.responses",
            calls(("run_shell_command", {"command": "yes 0123456789012345678901234567890123456789 | head -c 5000000"})),
            text("That was long."),
        )
        for cli in (ours, gemini):
            if cli is not None:
                run(cli, hi, "hi", ws)  # warm the file cache

        cold = each(ours, gemini, lambda c: run(c, hi, "hi", ws).wall)
        record("system: cold start, -p hi (wall)", cold[0], "s", gemini=cold[1], target=note)

        def per_turn(c: Cli) -> float:
            many = run(c, turns, "read notes.txt 20 times", ws)
            one = run(c, hi, "hi", ws)
            assert many.stdout.count('"tool_result"') == 20, many.stdout[-500:]
            return (span(many.stdout, "init", "result") - span(one.stdout, "init", "result")) / 20 * 1000

        overhead = each(ours, gemini, per_turn)
        record(
            "system: per model turn with one read_file (20 turns)",
            overhead[0],
            "ms",
            gemini=overhead[1],
            target="(in-run time of 20 turns - of -p hi) / 20, from stream-json stamps",
        )

        def eight_sleeps(c: Cli) -> float:
            out = run(c, sleeps, "sleep 8 times", ws).stdout
            assert out.count('"tool_result"') == 8, out[-500:]
            return span(out, "tool_use", "tool_result")

        waves = each(ours, gemini, eight_sleeps)
        record(
            "system: 8 x run_shell_command 'sleep 1' in one response",
            waves[0],
            "s",
            gemini=waves[1],
            target="first tool_use -> last tool_result; ideal 1 s",
        )

        def big_rss(c: Cli) -> float:
            return run(c, big, "print a lot", ws, rss=True).peak_rss_mb

        rss = each(ours, gemini, big_rss)
        hi_rss = each(ours, gemini, lambda c: run(c, hi, "hi", ws, rss=True).peak_rss_mb)
        record("system: 5 MB of shell output, peak RSS of the run", rss[0], "MB", gemini=rss[1], target=f"-p hi: {hi_rss[0]:.0f} MB" + (f" (Gemini CLI {hi_rss[1]:.0f} MB)" if hi_rss[1] else ""))
        big_wall = each(ours, gemini, lambda c: run(c, big, "print a lot", ws).wall)
        record("system: 5 MB of shell output, wall", big_wall[0], "s", gemini=big_wall[1])

        bench_sigint(root, ours, gemini)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _sigint_once(root: Path, cli: Cli, n: int) -> tuple[float, float | None]:
    """SIGINT to the run's process group while ``sleep 30`` runs: (until the CLI exits,
    until no process of the run is alive or None when the sleep outlives 2 s)."""
    ws = root / "ws"
    fifo = root / f"pid-{cli.name}-{n}"
    os.mkfifo(fifo)
    responses = write(
        root / f"sleep-{cli.name}-{n}.responses",
        calls(("run_shell_command", {"command": f"echo $$ > {fifo}; exec sleep 30"})),
        text("never"),
    )
    tool: int | None = None
    proc = subprocess.Popen(
        cli.command(responses, "sleep"),
        cwd=ws,
        env=cli.env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        tool = int(fifo.read_text())
        sent = time.perf_counter()
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
        proc.wait(timeout=30)
        exited = time.perf_counter() - sent
        gone: float | None = None
        while time.perf_counter() - sent < 2.0:
            if not _alive(tool):
                gone = max(exited, time.perf_counter() - sent)
                break
            time.sleep(0.001)
        return exited, gone
    finally:
        if proc.poll() is None:
            proc.kill()
        if tool is not None and _alive(tool):
            os.kill(tool, signal.SIGKILL)


def bench_sigint(root: Path, ours: Cli, gemini: Cli | None) -> None:
    results: dict[str, list[tuple[float, float | None]]] = {"agentbus": [], "gemini": []}
    for n in range(RUNS):
        for cli in (ours, gemini):
            if cli is not None:
                results[cli.name].append(_sigint_once(root, cli, n))
    mine, theirs = results["agentbus"], results["gemini"]
    exit_g = median([e for e, _ in theirs]) if theirs else None
    record("cancel: Ctrl-C during 'sleep 30' -> the CLI exits", median([e for e, _ in mine]) * 1000, "ms", gemini=exit_g * 1000 if exit_g else None)
    gone = [g for _, g in mine]
    left = sum(1 for g in gone if g is None)
    g_left = sum(1 for _, g in theirs if g is None)
    note = f"tool left running in {left}/{len(mine)} runs" if left else "target <= 100 ms"
    if theirs:
        note += f"; Gemini CLI left the sleep running in {g_left}/{len(theirs)} runs"
    record(
        "cancel: Ctrl-C -> no process of the run alive",
        median([g for g in gone if g is not None]) * 1000 if left < len(gone) else None,
        "ms",
        target=note,
    )


async def _cancel_in_daemon(root: Path, runs: int) -> tuple[list[float], int]:
    from actors.frontends.daemon.client import DaemonClient
    from bus import Envelope
    from bus.messages import TurnCancelAcknowledged
    from tests.frontends.daemon._helpers import (
        call_response,
        client_of,
        running_daemon,
        text_response,
        write_responses,
    )

    latencies: list[float] = []
    left = 0

    async def until(client: DaemonClient, sid: str, cls: type) -> Any:
        async for event in client.events:
            if isinstance(event, Envelope) and event.session_id == sid and isinstance(event.message, cls):
                return event.message
        raise AssertionError("connection closed")

    async with running_daemon(root), client_of(root, "bench") as client:
        for n in range(runs):
            fifo = root / f"dpid-{n}"
            os.mkfifo(fifo)
            fake = write_responses(
                root / f"d{n}.responses",
                call_response("run_shell_command", {"command": f"echo $$ > {fifo}; exec sleep 30"}),
                text_response("never"),
            )
            ready = await client.create_session(str(root / "ws"), fake_responses=str(fake), approval_mode="yolo", model=MODEL)
            await client.subscribe(ready.session_id)
            await client.prompt(ready.session_id, "sleep")
            pid = int(await trio.to_thread.run_sync(fifo.read_text))
            sent = time.perf_counter()
            await client.cancel(ready.session_id)
            await until(client, ready.session_id, TurnCancelAcknowledged)
            latencies.append(time.perf_counter() - sent)
            left += _alive(pid)
            await client.unsubscribe(ready.session_id)
            await client.end_session(ready.session_id)
    return latencies, left


def bench_daemon_cancel() -> None:
    with tempfile.TemporaryDirectory(prefix="abc") as tmp:
        root = Path(tmp)
        for d in ("ws", "home", "data"):
            (root / d).mkdir()
        old = {k: os.environ.get(k) for k in ("HOME", "GEMINI_CLI_HOME", "AGENTBUS_DATA_DIR")}
        os.environ.update(HOME=str(root / "home"), GEMINI_CLI_HOME=str(root / "home"), AGENTBUS_DATA_DIR=str(root / "data"))
        try:
            latencies, left = trio.run(_cancel_in_daemon, root, 9)
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    record(
        "cancel: CancelTurn -> TurnCancelAcknowledged (daemon, sleep 30)",
        median(latencies) * 1000,
        "ms",
        target=f"the sleep already dead at the ack in {len(latencies) - left}/{len(latencies)} runs; client->daemon->client over the socket",
    )


# -- event latency over HTTP ---------------------------------------------------------------------
CHUNKS = 40
CHUNK_S = 0.025


async def _latencies(cli: Cli, ws: Path) -> list[float]:
    from actors.gateway import FakeEntry
    from tests.fakes.gemini_server import FakeGeminiServer

    chunks = [
        {"candidates": [{"content": {"role": "model", "parts": [{"text": f"chunk {i:03d} "}]}}]} for i in range(CHUNKS)
    ]
    chunks[-1]["candidates"][0]["finishReason"] = "STOP"
    server = FakeGeminiServer([FakeEntry("generateContentStream", chunks, 1)], chunk_delay_s=CHUNK_S)
    arrivals: list[tuple[float, str]] = []
    async with trio.open_nursery() as nursery:
        await nursery.start(server.run)
        env = {**cli.env, "GOOGLE_GEMINI_BASE_URL": server.base_url}
        proc = await trio.lowlevel.open_process(
            cli.command(None, "stream"), cwd=ws, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        assert proc.stdout is not None
        buf = b""
        try:
            while data := await proc.stdout.receive_some(1 << 16):
                now = time.monotonic()
                buf += data
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    if b'"delta":true' in line or b'"delta": true' in line:
                        arrivals.append((now, json.loads(line).get("content", "")))
        finally:
            await proc.wait()
            await proc.stdout.aclose()
        nursery.cancel_scope.cancel()
    sent = server.requests[0].chunk_sent_at if server.requests else []
    out = []
    for i, stamp in enumerate(sent):
        tag = f"chunk {i:03d}"
        arrived = next((t for t, content in arrivals if tag in content), None)
        if arrived is not None:
            out.append(arrived - stamp)
    return out


def bench_event_latency() -> None:
    with tempfile.TemporaryDirectory(prefix="abl") as tmp:
        root = Path(tmp)
        ws = root / "ws"
        ws.mkdir()
        ours, gemini = clis(root)
        rows: dict[str, list[float]] = {}
        for cli in (ours, gemini):
            if cli is None:
                continue
            rows[cli.name] = []
            settings = Path(cli.env["HOME"], ".gemini", "settings.json")
            if cli.name == "gemini":
                # Gemini CLI reaches GOOGLE_GEMINI_BASE_URL with an API key only when told to.
                settings.write_text(json.dumps({"security": {"auth": {"selectedType": "gemini-api-key"}}}))
            for _ in range(3):
                rows[cli.name] += trio.run(_latencies, cli, ws)
            if cli.name == "gemini":
                settings.unlink()
    mine, theirs = sorted(rows["agentbus"]), sorted(rows.get("gemini", []))

    def p99(xs: list[float]) -> float:
        return xs[max(0, int(len(xs) * 0.99) - 1)]

    record(
        "event latency: model chunk (HTTP) -> client, median",
        median(mine) * 1000,
        "ms",
        gemini=median(theirs) * 1000 if theirs else None,
        target=f"-o stream-json deltas; {len(mine)} events" + (f", Gemini CLI {len(theirs)}" if theirs else ""),
    )
    record("event latency: model chunk (HTTP) -> client, p99", p99(mine) * 1000, "ms", gemini=p99(theirs) * 1000 if theirs else None)


# -- many sessions ---------------------------------------------------------------------------------
def bench_hundred_sessions() -> None:
    from tests.bench.bench_daemon import TURNS, median_run

    r = median_run(100, 10)  # every run checked: each turn of each session ended end_turn
    record(f"daemon: 100 sessions x {TURNS} turns at once, 10 conns (wall)", r["wall_s"], "s", target=f"median of {r['runs']} runs; Gemini CLI has no daemon (one process per session)")
    record("daemon: ... peak RSS", r["peak_rss_mb"], "MB", baseline=r["idle_rss_mb"], target="baseline: the idle daemon")
    record("daemon: ... event latency model chunk -> client, median", r["latency_median_ms"], "ms", target=f"p99 {r['latency_p99_ms']:.1f} ms over {r['events']:.0f} events")
    record(
        "daemon: ... prompt -> its TurnStarted at the client, median",
        r["turn_start_median_ms"],
        "ms",
        target=f"p99 {r['turn_start_p99_ms']:.1f} ms; new turns wait for the streams in flight (up to PROMPT_YIELD_ROUNDS scheduler rounds)",
    )


BENCHMARKS: list[Callable[[], None]] = [bench_side_by_side, bench_daemon_cancel, bench_event_latency, bench_hundred_sessions]


def main() -> int:
    for bench in BENCHMARKS:
        bench()
    return 0


if __name__ == "__main__":
    sys.exit(main())
