"""Record a scenario: run its scripted session for real and keep the recording.

    python -m actors.frontends.replay.record scenarios/recorded/NAME      # writes NAME/recording.jsonl

``scenario.json`` says what to run (see ``scenarios/README.md``):

- ``args``: headless-style flags (``-m``, ``--approval-mode``); ``interactive``: whether
  approvals are asked of the (scripted) client;
- ``fixture`` (a Gemini CLI fake-responses file), ``chunk_delay_s`` (a pause between
  streamed chunks, so a cancel can land mid-stream), ``workspace`` (copied; tools run
  in the copy);
- ``processes``: a list of processes, each a list of turns; a later process resumes
  the session the way ``agentbus --resume`` does (same id, same file, history rebuilt
  from the recording). A turn is ``{"prompt": ..., "approvals": [outcome, ...],
  "cancel_when": {"type": MessageType, field: value, ..., "nth": n}}``: approvals are
  answered in the order asked; the cancel is sent when the n-th matching message is
  seen. A plain ``"prompt"`` at the top level is one process with one turn.

The session runs with the real actors, tools and policy engine, on trio's virtual
clock (live tools run at real speed: ``LiveTool``), and is recorded by the real
recorder. The scripted client is an observer like any client, subscribed after the
supervisor (the recorder stays first).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import trio
import trio.testing

from actors.frontends.replay._tools import LiveClock, LiveTool
from actors.gateway import GATEWAY_ADDRESS, FakeResponsesBackend, GatewayActor, load_fake_responses
from actors.host import runtime
from actors.host.args import parse_headless
from actors.host.context import session_context
from actors.host.models import classifier_choice, classifier_request, resolve_model
from actors.host.opening import open_session
from actors.host.sessions import resumable_history
from actors.host.setup import request_config_for
from actors.recording import load_recording
from actors.scheduler import PolicyEngine
from actors.tools import ToolEnv, builtin_tools, executor_kind
from bus import Bus
from bus.json_values import thaw
from bus.messages import (
    ApprovalAnswered,
    ApprovalOutcome,
    ApprovalRequested,
    CancelTurn,
    CloseSession,
    Message,
    SessionClosed,
    SubmitPrompt,
    TurnEnded,
    as_approval_mode,
    as_approval_outcome,
)

SCENARIO_SESSION_PREFIX = "scenario-"


@attrs.define
class Turn:
    prompt: str
    approvals: list[ApprovalOutcome] = attrs.field(factory=list)
    cancel_when: dict[str, Any] | None = None


def _turns(spec: Any) -> list[Turn]:
    out = []
    for item in spec:
        if isinstance(item, str):
            out.append(Turn(prompt=item))
        else:
            out.append(
                Turn(
                    prompt=str(item["prompt"]),
                    approvals=[as_approval_outcome(str(a)) for a in item.get("approvals", [])],
                    cancel_when=item.get("cancel_when"),
                )
            )
    return out


def processes_of(scenario: Mapping[str, Any]) -> list[list[Turn]]:
    if "processes" in scenario:
        return [_turns(p) for p in scenario["processes"]]
    return [_turns([{k: v for k, v in scenario.items() if k in ("prompt", "approvals", "cancel_when")}])]


def matches(msg: Message, pattern: Mapping[str, Any]) -> bool:
    if type(msg).__name__ != pattern.get("type"):
        return False
    for key, want in pattern.items():
        if key in ("type", "nth"):
            continue
        if thaw(getattr(msg, key, None)) != want:
            return False
    return True


async def run_process(
    scenario: Mapping[str, Any],
    folder: Path,
    workspace: Path,
    home: Path,
    recording: Path,
    session_id: str,
    turns: Sequence[Turn],
    fixture: Path,
    live_clock: LiveClock,
    resumed: tuple[Any, ...],
) -> list[TurnEnded]:
    args = parse_headless([*[str(a) for a in scenario.get("args", [])], "-p", "x"])
    model = (args.model or "gemini-2.5-flash").strip()
    approval = args.approval_mode or ("yolo" if args.yolo else "default")
    interactive = bool(scenario.get("interactive", False))
    all_tools = {t.name: t for t in builtin_tools(model)}
    policy, _warnings = PolicyEngine.build(
        approval_mode=approval,
        interactive=interactive,
        settings={},
        user_policy_dir=home / ".gemini" / "policies",
        workspace_policy_dir=workspace / ".gemini" / "policies",
        known_tools=tuple(all_tools),
    )
    excluded = policy.excluded_tools(all_tools, approval_mode=approval)
    tools = {n: t for n, t in all_tools.items() if n not in excluded}
    env = ToolEnv(
        workspace=workspace,
        project_temp_dir=home / ".gemini" / "tmp" / workspace.name,
        session_id=session_id,
        model=model,
        settings={},
    )
    context = {"role": "user", "parts": [{"text": session_context(workspace, env.project_temp_dir)}]}
    cfg = runtime.SessionConfig(
        **runtime.guard_settings(scenario.get("settings", {})),
        session_id=session_id,
        model=model,
        approval_mode=as_approval_mode(approval),
        env=env,
        tools={n: LiveTool(t, live_clock) for n, t in tools.items()},
        executor_of=lambda tool: executor_kind(tool),
        policy=policy,
        request_config=request_config_for(tools),
        route_model=resolve_model,
        classifier_choice=classifier_choice,
        classifier_request=classifier_request,
        history=(context, *resumed),
        recording=recording,
        gateway_address=GATEWAY_ADDRESS,
        interactive=interactive,
        max_session_turns=int(scenario.get("max_session_turns", -1)),
        registered_names=tuple(tools),
    )
    backend = FakeResponsesBackend(
        load_fake_responses(fixture), chunk_delay_s=float(scenario.get("chunk_delay_s", 0.0))
    )
    bus = Bus()
    ended: list[TurnEnded] = []
    client_address = f"client:scenario:{session_id}"
    async with trio.open_nursery() as nursery:
        await nursery.start(GatewayActor(bus, backend).run)
        client = bus.connect(client_address)
        subs: list[Any] = []

        def observe(_addrs: runtime.SessionAddresses) -> None:
            subs.append(bus.subscribe(session_id, "scenario-client", capacity=100_000))

        addrs = await open_session(nursery, bus, cfg, client, observe=observe)
        sub = subs[0]
        for number, turn in enumerate(turns, start=1):
            prompt_id = session_id if number == 1 else f"{session_id}########{number}"
            await client.send(
                SubmitPrompt(
                    session_id=session_id, prompt_id=prompt_id, parts=({"text": turn.prompt},), display_text=turn.prompt
                ),
                to=addrs.session,
            )
            approvals = list(turn.approvals)
            seen = 0
            cancelled = False
            async for env_ in sub:
                msg = env_.message
                if isinstance(msg, ApprovalRequested) and approvals:
                    # An approval the script has no answer for stays unanswered.
                    outcome = approvals.pop(0)
                    await client.send(
                        ApprovalAnswered(
                            session_id=session_id,
                            correlation_id=msg.correlation_id,
                            outcome=outcome,
                            answered_by=client_address,
                        ),
                        to=addrs.scheduler,
                    )
                if turn.cancel_when is not None and not cancelled and matches(msg, turn.cancel_when):
                    seen += 1
                    if seen >= int(turn.cancel_when.get("nth", 1)):
                        cancelled = True
                        await client.send(
                            CancelTurn(
                                session_id=session_id,
                                turn_id=None,
                                reason="cancelled by the user",
                                requested_by=client_address,
                            ),
                            to=addrs.session,
                        )
                if isinstance(msg, TurnEnded):
                    ended.append(msg)
                    break
        await client.send(CloseSession(session_id=session_id, reason="scenario done"), to=addrs.session)
        async for env_ in sub:
            if isinstance(env_.message, SessionClosed):
                break
        bus.unsubscribe(sub)
        client.close()
        bus.disconnect(GATEWAY_ADDRESS)
    return ended


def record(folder: Path, out: Path | None = None) -> tuple[Path, list[TurnEnded]]:
    """Run ``folder``'s scenario and write its recording (default ``recording.jsonl``)."""
    scenario = json.loads((folder / "scenario.json").read_text(encoding="utf-8"))
    out = out or folder / str(scenario.get("recording", "recording.jsonl"))
    if out.exists():
        out.unlink()
    session_id = SCENARIO_SESSION_PREFIX + str(scenario["name"])
    clock = trio.testing.MockClock(autojump_threshold=0)
    live_clock = LiveClock(clock)
    ended: list[TurnEnded] = []
    saved_env = os.environ.get("GEMINI_CLI_HOME")
    with tempfile.TemporaryDirectory(prefix="agentbus-record-") as tmp:
        workspace = Path(tmp) / str(scenario["name"])
        source = folder / str(scenario.get("workspace", "workspace"))
        if source.is_dir():
            shutil.copytree(source, workspace)
        else:
            workspace.mkdir()
        home = Path(tmp) / "home"
        home.mkdir()
        os.environ["GEMINI_CLI_HOME"] = str(home)
        try:
            for number, turns in enumerate(processes_of(scenario), start=1):
                fixture = folder / str(scenario.get(f"fixture{number}") or scenario.get("fixture", "fake.responses"))
                resumed = tuple(resumable_history(load_recording(out))) if out.exists() else ()
                ended += trio.run(
                    run_process,
                    scenario,
                    folder,
                    workspace,
                    home,
                    out,
                    session_id,
                    turns,
                    fixture,
                    live_clock,
                    resumed,
                    clock=clock,
                )
        finally:
            if saved_env is None:
                os.environ.pop("GEMINI_CLI_HOME", None)
            else:
                os.environ["GEMINI_CLI_HOME"] = saved_env
    return out, ended


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        sys.stderr.write("usage: python -m actors.frontends.replay.record SCENARIO_DIR...\n")
        return 2
    for name in args:
        path, ended = record(Path(name))
        reasons = ", ".join(e.stop_reason for e in ended)
        lines = sum(1 for _ in path.open(encoding="utf-8"))
        sys.stdout.write(f"{path}: {lines} lines; turns ended: {reasons}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

__all__ = ["record"]
