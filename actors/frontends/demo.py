"""``make demo``: a bundled scenario, end to end, as a person would watch it.

Copies ``scenarios/demo-fix-mean/workspace`` to a temporary folder, runs the scenario's
prompt there against its recorded model responses (no API key needed), streams the
session to the terminal — thoughts, text, each wave of tool calls with its results —
checks the scenario's expected outcome, and prints where the recording went.

    python -m actors.frontends.demo [SCENARIO_DIR] [--no-delay]
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, TextIO

import trio

from actors.frontends.headless import Prepared, prepare
from actors.gateway import GATEWAY_ADDRESS, FakeResponsesBackend, GatewayActor
from actors.host.args import parse_headless
from actors.host.at_command import expand_at_references_off_loop
from actors.host.opening import open_session
from actors.host.setup import session_config
from bus import Bus
from bus.json_values import thaw
from bus.messages import (
    BatchSettled,
    CloseSession,
    Message,
    SessionClosed,
    SubmitPrompt,
    TextStreamed,
    ThoughtStreamed,
    ToolCallUpdated,
    TurnEnded,
)

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_SCENARIO = ROOT / "scenarios" / "demo-fix-mean"


class Style:
    def __init__(self, stream: TextIO) -> None:
        self.on = stream.isatty() and os.environ.get("NO_COLOR") is None

    def __call__(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.on else text


def _brief(args: Any) -> str:
    args = thaw(args) or {}
    for key in ("command", "file_path", "dir_path", "pattern", "prompt"):
        if key in args:
            value = str(args[key]).replace("\n", " ")
            return value if len(value) <= 60 else value[:57] + "..."
    return ""


class DemoView:
    """Renders a session's messages for a person at a terminal."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.s = Style(out)
        self.at_line_start = True
        self.waves: list[list[str]] = []
        self.results: dict[str, str] = {}
        self.args: dict[str, Any] = {}
        self.calls = 0
        self.final_text: list[str] = []
        self.last_wave: tuple[str, int] | None = None
        self.started: dict[str, float] = {}

    def write(self, text: str) -> None:
        if text:
            self.out.write(text)
            self.out.flush()
            self.at_line_start = text.endswith("\n")

    def newline(self) -> None:
        if not self.at_line_start:
            self.write("\n")

    def on(self, msg: Message) -> None:
        match msg:
            case ThoughtStreamed():
                self.newline()
                self.write(self.s("2;3", f"  thinking: {msg.subject or msg.description[:60]}") + "\n")
            case TextStreamed():
                self.final_text.append(msg.text)
                self.write(msg.text)
            case ToolCallUpdated(status="executing"):
                self.newline()
                key = (msg.batch_id, msg.wave)
                if key != self.last_wave:
                    self.last_wave = key
                    self.waves.append([])
                    self.write(self.s("1;36", f"  wave {len(self.waves)}") + "\n")
                self.waves[-1].append(msg.name)
                self.started[msg.call_id] = time.monotonic()
                self.write(self.s("36", f"    > {msg.name}") + f" {self.args.get(msg.call_id, '')}\n")
            case ToolCallUpdated(status="success" | "error" | "cancelled"):
                self.newline()
                self.calls += 1
                ok = msg.status == "success"
                mark = self.s("32", "ok") if ok else self.s("31", msg.status)
                took = time.monotonic() - self.started.get(msg.call_id, time.monotonic())
                detail = "" if ok else f": {msg.detail}"
                self.write(f"    {mark} {msg.name} ({took * 1000:.0f} ms){detail}\n")
                self.results[msg.name] = msg.status
            case BatchSettled():
                self.final_text = []
                self.write("\n")
            case TurnEnded():
                self.newline()
            case _:
                pass

    def remember_args(self, call_id: str, args: Any) -> None:
        self.args[call_id] = _brief(args)


async def run_demo(prepared: Prepared, view: DemoView) -> tuple[TurnEnded, Path | None]:
    bus = Bus()
    assert prepared.setup is not None
    cfg = session_config(prepared.setup, history=prepared.history, recording=prepared.recording, settings=prepared.settings)
    from bus.messages import ToolCallRequested

    ended: TurnEnded | None = None
    async with trio.open_nursery() as nursery:
        await nursery.start(GatewayActor(bus, prepared.backend).run)
        sub = bus.subscribe(prepared.session_id, "demo", capacity=1024)
        client = bus.connect("client:demo")
        addrs = await open_session(nursery, bus, cfg, client)
        await client.send(
            SubmitPrompt(
                session_id=prepared.session_id,
                prompt_id=prepared.session_id,
                parts=tuple(await expand_at_references_off_loop(prepared.user_input, prepared.workspace)),
                display_text=prepared.user_input,
            ),
            to=addrs.session,
        )
        async for env in sub:
            msg = env.message
            if isinstance(msg, ToolCallRequested):
                view.remember_args(msg.call_id, msg.args)
            view.on(msg)
            if isinstance(msg, TurnEnded):
                ended = msg
                await client.send(CloseSession(session_id=prepared.session_id, reason="demo done"), to=addrs.session)
            elif isinstance(msg, SessionClosed):
                break
        bus.unsubscribe(sub)
        client.close()
        bus.disconnect(GATEWAY_ADDRESS)
    assert ended is not None
    return ended, prepared.recording


def check(scenario: dict[str, Any], ended: TurnEnded, view: DemoView, workspace: Path) -> list[str]:
    """The scenario's expected outcome against what happened; a list of failures."""
    expect = scenario.get("expect", {})
    problems: list[str] = []
    if ended.stop_reason != "end_turn" or ended.error is not None:
        problems.append(f"turn ended {ended.stop_reason}: {ended.error}")
    text = "".join(view.final_text)
    tail = expect.get("response_endswith")
    if tail and not text.endswith(tail):
        problems.append(f"final text does not end with {tail!r}")
    waves = expect.get("waves")
    if waves is not None and view.waves != waves:
        problems.append(f"waves {view.waves} != expected {waves}")
    for name, status in expect.get("tool_status", {}).items():
        if view.results.get(name) != status:
            problems.append(f"{name} ended {view.results.get(name)}, expected {status}")
    for rel, cond in expect.get("files", {}).items():
        content = (workspace / rel).read_text(encoding="utf-8")
        if cond.get("contains") and cond["contains"] not in content:
            problems.append(f"{rel} lacks {cond['contains']!r}")
    return problems


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    delay = 0.0 if "--no-delay" in args else 0.04
    args = [a for a in args if a != "--no-delay"]
    scenario_dir = Path(args[0]).resolve() if args else DEFAULT_SCENARIO
    scenario = json.loads((scenario_dir / "scenario.json").read_text(encoding="utf-8"))
    out = sys.stdout
    style = Style(out)
    with tempfile.TemporaryDirectory(prefix="agentbus-demo-") as tmp:
        workspace = Path(tmp) / scenario["name"]
        shutil.copytree(scenario_dir / scenario.get("workspace", "workspace"), workspace)
        home = Path(tmp) / "home"
        home.mkdir()
        old_cwd = os.getcwd()
        os.chdir(workspace)
        os.environ.setdefault("GEMINI_CLI_HOME", str(home))
        try:
            fixture = str(scenario_dir / scenario["fixture"])
            headless = parse_headless(
                [*scenario.get("args", []), "--fake-responses", fixture, "-p", scenario["prompt"]]
            )
            prepared = prepare(headless, {}, stdin_text=None)
            prepared = _with_delay(prepared, fixture, delay)
            out.write(style("1", "agentbus demo") + f": {scenario['description']}\n")
            out.write(style("2", f"workspace: {workspace} (a temporary copy)") + "\n\n")
            out.write(style("1;33", "> ") + scenario["prompt"] + "\n\n")
            view = DemoView(out)
            started = time.monotonic()
            ended, recording = trio.run(run_demo, prepared, view)
            elapsed = time.monotonic() - started
            problems = check(scenario, ended, view, workspace)
        finally:
            os.chdir(old_cwd)
    out.write("\n")
    out.write(
        f"{view.calls} tool calls in {len(view.waves)} waves, {elapsed:.2f} s. "
        f"Recording: {recording}\n"
    )
    out.write(f"Replay and check it: .venv/bin/agentbus replay {recording} --check\n")
    if problems:
        for p in problems:
            out.write(style("31", f"unexpected: {p}") + "\n")
        return 1
    out.write(style("32", "demo OK: the outcome matches the scenario's expectations") + "\n")
    return 0


def _with_delay(prepared: Prepared, fixture: str, delay: float) -> Prepared:
    import attrs

    return attrs.evolve(prepared, backend=FakeResponsesBackend.from_file(fixture, chunk_delay_s=delay))


if __name__ == "__main__":
    sys.exit(main())
