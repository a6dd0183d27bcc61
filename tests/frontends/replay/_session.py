"""A scripted session for recording/replay tests: fake tools with scripted outcomes and
durations, a name-based policy, a scripted client that answers approvals and cancels."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import trio

from actors.gateway import FakeEntry, FakeResponsesBackend, GatewayActor
from actors.host import runtime
from actors.tools import OutputSink, ToolEnv
from bus import Bus
from bus.messages import (
    ApprovalAnswered,
    ApprovalRequested,
    CancelTurn,
    CloseSession,
    Message,
    SessionClosed,
    SubmitPrompt,
    ToolResult,
    TurnEnded,
)
from bus.testing import Capture, capture_session

SID = "prop-session"


class ScriptedTool:
    """Does what its arguments say: ``out`` lines, ``ms`` of (virtual) time, then
    ``outcome``: ok, error, crash (raises), invalid (fails validation)."""

    def __init__(self, name: str, kind: str = "read") -> None:
        self.name = name
        self.display_name = name.title()
        self.kind = kind

    def declaration(self, model: str) -> dict[str, Any]:
        return {"name": self.name, "description": "scripted", "parametersJsonSchema": {"type": "object"}}

    def validate(self, args: Mapping[str, Any], env: ToolEnv) -> str | None:
        return "the arguments are invalid" if args.get("outcome") == "invalid" else None

    def describe(self, args: Mapping[str, Any], env: ToolEnv) -> str:
        return self.name

    async def execute(self, args: Mapping[str, Any], env: ToolEnv, output: OutputSink | None = None) -> ToolResult:
        for line in args.get("out") or ():
            if output is not None:
                await output(str(line))
        await trio.sleep(int(args.get("ms") or 0) / 1000)
        outcome = args.get("outcome", "ok")
        if outcome == "crash":
            raise RuntimeError("the tool crashed")
        if outcome == "error":
            return ToolResult(error_type="execution_failed", error_message=f"{self.name} failed")
        return ToolResult(llm_content=f"{self.name} says ok", return_display="ok")


TOOLS: dict[str, Any] = {
    "probe": ScriptedTool("probe"),
    "shell_probe": ScriptedTool("shell_probe", kind="execute"),
    "ask_tool": ScriptedTool("ask_tool", kind="edit"),
    "deny_tool": ScriptedTool("deny_tool"),
}


def executor_of(tool: Any) -> str:
    return "shell" if tool.kind == "execute" else "files"


@attrs.frozen
class _Verdict:
    decision: str
    deny_message: str | None = None


class NamePolicy:
    """allow by default; ``ask_tool`` asks (until "always"); ``deny_tool`` is denied."""

    def __init__(self) -> None:
        self.always: set[str] = set()

    def check(self, tool_name: str, args: Mapping[str, Any], *, approval_mode: str | None = None) -> _Verdict:
        if tool_name == "deny_tool":
            return _Verdict("deny", "no deny_tool here")
        if tool_name == "ask_tool" and tool_name not in self.always:
            return _Verdict("ask_user")
        return _Verdict("allow")

    def add_session_rule(self, tool_name: str, **_: Any) -> None:
        self.always.add(tool_name)


def session_config(workspace: Path, recording: Path | None, *, interactive: bool = True) -> runtime.SessionConfig:
    return runtime.SessionConfig(
        session_id=SID,
        model="gemini-test",
        approval_mode="default",
        env=ToolEnv(workspace=workspace, project_temp_dir=workspace / "tmp", session_id=SID),
        tools=TOOLS,
        executor_of=executor_of,
        policy=NamePolicy(),
        request_config=lambda m: {"systemInstruction": "test"},
        route_model=lambda m: m,
        classifier_choice=lambda c: c,
        classifier_request=None,
        recording=recording,
        interactive=interactive,
    )


@attrs.frozen
class ClientScript:
    prompts: tuple[str, ...] = ("go",)
    approvals: tuple[str, ...] = ()
    """Answers to approvals, in order (then proceed_once)."""
    cancel_after: int | None = None
    """Send ``CancelTurn`` after observing this many messages of the first turn."""


async def run_session(
    workspace: Path,
    recording: Path | None,
    entries: Sequence[FakeEntry],
    client: ClientScript,
    *,
    chunk_delay_s: float = 0.0,
) -> tuple[Capture, list[TurnEnded]]:
    """One scripted session (on whatever clock the caller runs); returns every
    delivered envelope and the turns' ends."""
    bus = Bus()
    cfg = session_config(workspace, recording)
    ended: list[TurnEnded] = []
    answers = list(client.approvals)
    # A deadlocked session fails fast on the autojump clock (TooSlowError).
    with trio.fail_after(LIVE_DEADLINE_S):
        return await _run(bus, cfg, entries, client, answers, ended, chunk_delay_s)


LIVE_DEADLINE_S = 24 * 3600.0


async def _run(
    bus: Bus,
    cfg: runtime.SessionConfig,
    entries: Sequence[FakeEntry],
    client: ClientScript,
    answers: list[str],
    ended: list[TurnEnded],
    chunk_delay_s: float,
) -> tuple[Capture, list[TurnEnded]]:
    async with trio.open_nursery() as nursery:
        await nursery.start(GatewayActor(bus, FakeResponsesBackend(list(entries), chunk_delay_s=chunk_delay_s)).run)
        port = bus.connect("client:test")
        addrs = await nursery.start(runtime.supervise_session, bus, cfg)
        cap = await nursery.start(capture_session, bus, SID)
        sub = bus.subscribe(SID, "test-client", capacity=100_000)
        await port.send(runtime.open_session_message(cfg), to=addrs.session)
        for n, prompt in enumerate(client.prompts):
            await port.send(
                SubmitPrompt(session_id=SID, prompt_id=f"p{n}", parts=({"text": prompt},), display_text=prompt),
                to=addrs.session,
            )
            seen = 0
            async for env in sub:
                msg: Message = env.message
                seen += 1
                if n == 0 and client.cancel_after is not None and seen == client.cancel_after:
                    await port.send(
                        CancelTurn(session_id=SID, turn_id=None, reason="test cancel", requested_by="client:test"),
                        to=addrs.session,
                    )
                if isinstance(msg, ApprovalRequested):
                    outcome = answers.pop(0) if answers else "proceed_once"
                    await port.send(
                        ApprovalAnswered(
                            session_id=SID, correlation_id=msg.correlation_id, outcome=outcome, answered_by="client:test"
                        ),
                        to=addrs.scheduler,
                    )
                if isinstance(msg, TurnEnded):
                    ended.append(msg)
                    break
        await port.send(CloseSession(session_id=SID, reason="done"), to=addrs.session)
        await cap.wait_for_type(SessionClosed)
        bus.unsubscribe(sub)
        port.close()
        bus.disconnect("gateway")
        nursery.cancel_scope.cancel()
    return cap, ended


def text_entry(*texts: str, finish: bool = True) -> FakeEntry:
    chunks: list[dict[str, Any]] = [{"candidates": [{"content": {"role": "model", "parts": [{"text": t}]}}]} for t in texts]
    if finish:
        chunks[-1]["candidates"][0]["finishReason"] = "STOP"
    return FakeEntry("generateContentStream", chunks, 1)


def calls_entry(*calls: tuple[str, dict[str, Any]], text: str = "") -> FakeEntry:
    parts: list[dict[str, Any]] = [{"text": text}] if text else []
    parts += [{"functionCall": {"name": name, "args": args}} for name, args in calls]
    return FakeEntry(
        "generateContentStream",
        [{"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP"}]}],
        1,
    )
