"""What ``agentbus explore`` explores (``load_target``): a recording, a scenario folder or
a fake-responses file, read into a ``Target`` — the model's answers in order, the
prompts, the client's approval answers and cancels, the session's settings and the
workspace its tools run in (copied for every run; the original is never touched).

- a **recording**: the model's answers are the chunks each recorded model request got
  (its last attempt), the prompts and approval answers those the client sent; the
  workspace is ``--workspace``, else the scenario folder's ``workspace/`` next to it,
  else the recorded one if it still exists, else an empty folder (said in the output);
- a **scenario folder** (``scenario.json``, see ``scenarios/README.md``): its fixture(s),
  the turns of all its processes in one session, their approvals and ``cancel_when``;
  a ``workspace`` it names must exist;
- a **fake-responses file** (with ``-p PROMPT``): Gemini CLI's format, one prompt, in
  yolo mode; the workspace is ``--workspace`` (else an empty folder: the current one
  is not copied, it may be large).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from actors.frontends.explore._script import When
from actors.frontends.replay import ReplayInputError, sniff
from actors.frontends.replay.record import processes_of
from actors.gateway import FakeEntry, FakeResponsesError, load_fake_responses
from actors.host.args import parse_headless
from actors.host.errors import UsageError
from actors.recording import RecordingError, load_recording
from actors.tools import builtin_tools
from bus.json_values import thaw
from bus.messages import (
    ApprovalAnswered,
    CancelTurn,
    GenerateRequest,
    GenerationCancelled,
    HookRan,
    HooksFinished,
    ModelChunk,
    ModelFinished,
    ModelRetrying,
    OpenSession,
    RunHooks,
    RunTool,
    SubmitPrompt,
    ToolFinished,
    ToolResult,
)


@attrs.frozen
class StandIn:
    """A recorded stand-in for a tool: its declaration as the model saw it, and the
    results its calls had, in order."""

    name: str
    declaration: Any
    results: tuple[ToolResult, ...]


@attrs.frozen
class HookRun:
    """One recorded ``RunHooks``: where the session asked (``event``, ``target``), what
    each hook answered (``ran``) and the aggregated answer (``finished``)."""

    event: str
    target: str
    ran: tuple[HookRan, ...]
    finished: HooksFinished

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(r.name for r in self.ran))


class ExploreInputError(Exception):
    """A target, option or invariant ``agentbus explore`` cannot use: one line naming the cause."""


@attrs.frozen(kw_only=True)
class Target:
    """A session to explore, as plain data."""

    name: str
    kind: str
    """``recording``, ``scenario`` or ``fake-responses``."""
    entries: tuple[FakeEntry, ...]
    """What the model answers, request after request (strict order)."""
    prompts: tuple[str, ...]
    answers: tuple[str, ...] = ()
    """Approval outcomes the client gives, in the order asked."""
    cancels: tuple[When, ...] = ()
    """When the client cancels (a scenario's ``cancel_when``; a recording's cancels)."""
    workspace: Path | None = None
    """The folder copied for each run (None: an empty one)."""
    model: str = "gemini-2.5-flash"
    approval_mode: str = "default"
    interactive: bool = False
    settings: Any = attrs.field(factory=dict)
    notes: tuple[str, ...] = ()
    """What the user should know about how the target is run (stand-ins, a missing workspace)."""
    standins: tuple[StandIn, ...] = ()
    """Tools the recording ran that this build does not register (an MCP server's):
    explored runs answer them from the recording."""
    hooks: tuple[HookRun, ...] = ()
    """The recording's hook runs: explored runs ask for hooks where it did and get its
    answers back (recorded stand-ins; their commands do not run)."""

    @property
    def hook_events(self) -> tuple[str, ...]:
        """The events of the recorded hook runs, in order."""
        return tuple(h.event for h in self.hooks)

    @property
    def calls(self) -> tuple[str, ...]:
        """The tool names of the function calls in the model's answers, in order."""
        out: list[str] = []
        for entry in self.entries:
            chunks = entry.response if isinstance(entry.response, list) else [entry.response]
            for chunk in chunks:
                for cand in (chunk or {}).get("candidates") or () if isinstance(chunk, dict) else ():
                    parts = ((cand or {}).get("content") or {}).get("parts") or ()
                    for part in parts if isinstance(parts, list) else ():
                        call = part.get("functionCall") if isinstance(part, dict) else None
                        if isinstance(call, dict) and isinstance(call.get("name"), str):
                            out.append(call["name"])
        return tuple(out)


def load_target(
    path: Path, *, prompt: str | None = None, workspace: Path | None = None
) -> Target:
    """``path`` as a ``Target``; raises ``ExploreInputError`` naming the cause."""
    try:
        kind = sniff(path)
    except ReplayInputError as exc:
        raise ExploreInputError(str(exc)) from None
    if kind == "scenario":
        target = _scenario(path)
    elif kind == "fake-responses":
        if prompt is None:
            raise ExploreInputError(f"{path}: a fake-responses file needs the prompt (-p PROMPT)")
        target = Target(
            name=path.stem,
            kind=kind,
            entries=tuple(_fake(path)),
            prompts=(prompt,),
            approval_mode="yolo",
            notes=() if workspace is not None else ("tools run in an empty folder (--workspace DIR gives one)",),
        )
    else:
        target = _recording(path)
    if workspace is not None:
        if not workspace.is_dir():
            raise ExploreInputError(f"--workspace {workspace}: no such folder")
        target = attrs.evolve(target, workspace=workspace)
    if target.kind != "recording" and _configures_hooks(target):
        note = "hooks are configured: explored runs leave them out (a recording's hooks run as recorded stand-ins)"
        target = attrs.evolve(target, notes=(*target.notes, note))
    if not target.prompts:
        raise ExploreInputError(f"{path}: the session has no prompt to explore")
    return target


def _configures_hooks(target: Target) -> bool:
    """Whether the target's settings or its workspace's ``.gemini/settings.json`` name hooks."""
    found: list[Any] = [target.settings]
    if target.workspace is not None:
        try:
            found.append(json.loads((target.workspace / ".gemini" / "settings.json").read_text(encoding="utf-8")))
        except (OSError, ValueError):
            pass
    return any(isinstance(s, dict) and bool(s.get("hooks")) for s in found)


def _fake(path: Path) -> list[FakeEntry]:
    try:
        return load_fake_responses(path)
    except FakeResponsesError as exc:
        raise ExploreInputError(str(exc)) from None


def _scenario(folder: Path) -> Target:
    try:
        scenario = json.loads((folder / "scenario.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ExploreInputError(f"{folder / 'scenario.json'}: cannot read: {exc}") from None
    if not isinstance(scenario, dict):
        raise ExploreInputError(f"{folder / 'scenario.json'}: expected a JSON object")
    workspace: Path | None = None
    if "workspace" in scenario:
        workspace = folder / str(scenario["workspace"])
        if not workspace.is_dir():
            raise ExploreInputError(
                f"{folder}: the scenario's workspace {scenario['workspace']!r} is missing ({workspace} is not a folder)"
            )
    try:
        processes = processes_of(scenario)
    except (KeyError, TypeError, ValueError) as exc:
        raise ExploreInputError(f"{folder / 'scenario.json'}: cannot read its turns: {exc}") from None
    entries: list[FakeEntry] = []
    prompts: list[str] = []
    answers: list[str] = []
    cancels: list[When] = []
    for number, turns in enumerate(processes, start=1):
        fixture = folder / str(scenario.get(f"fixture{number}") or scenario.get("fixture", "fake.responses"))
        if number > 1 and fixture == folder / str(scenario.get("fixture", "fake.responses")):
            fixture = folder / f"fake{number}.responses" if (folder / f"fake{number}.responses").is_file() else fixture
        entries += _fake(fixture)
        for turn in turns:
            prompts.append(turn.prompt)
            answers += [str(a) for a in turn.approvals]
            if turn.cancel_when is not None:
                pattern = dict(turn.cancel_when)
                on = str(pattern.pop("type"))
                nth = int(pattern.pop("nth", 1))
                cancels.append(When(on=on, nth=nth, where=tuple(sorted(pattern.items()))))
    args = _args(folder, scenario.get("args", []))
    notes = ("the processes of the scenario run as one session",) if len(processes) > 1 else ()
    return Target(
        name=str(scenario.get("name", folder.name)),
        kind="scenario",
        entries=tuple(entries),
        prompts=tuple(prompts),
        answers=tuple(answers),
        cancels=tuple(cancels),
        workspace=workspace,
        model=args[0],
        approval_mode=args[1],
        interactive=bool(scenario.get("interactive", False)),
        settings=scenario.get("settings", {}),
        notes=notes,
    )


def _args(folder: Path, args: Sequence[Any]) -> tuple[str, str]:
    try:
        parsed = parse_headless([*[str(a) for a in args], "-p", "x"])
    except UsageError as exc:
        raise ExploreInputError(f"{folder / 'scenario.json'}: args: {exc.message}") from None
    model = (parsed.model or "gemini-2.5-flash").strip()
    return model, parsed.approval_mode or ("yolo" if parsed.yolo else "default")


def _recording(path: Path) -> Target:
    try:
        recording = load_recording(path)
    except RecordingError as exc:
        raise ExploreInputError(f"cannot explore this recording: {exc}") from None
    requests: dict[str, tuple[GenerateRequest, list[Any], bool]] = {}
    opened: OpenSession | None = None
    prompts: list[str] = []
    answers: list[str] = []
    cancels = 0
    asked: dict[str, RunHooks] = {}
    hook_ran: dict[str, list[HookRan]] = {}
    hook_runs: list[HookRun] = []
    running: dict[str, str] = {}
    results: dict[str, list[ToolResult]] = {}
    for env in recording.envelopes:
        msg = env.message
        match msg:
            case OpenSession() if opened is None:
                opened = msg
            case GenerateRequest():
                requests[msg.request_id] = (msg, [], False)
            case ModelRetrying() if msg.request_id in requests:
                req, _, _ = requests[msg.request_id]
                requests[msg.request_id] = (req, [], False)
            case ModelChunk() if msg.request_id in requests:
                requests[msg.request_id][1].append(thaw(msg.chunk))
            case ModelFinished() | GenerationCancelled() if msg.request_id in requests:
                req, chunks, _ = requests[msg.request_id]
                requests[msg.request_id] = (req, chunks, True)
            case SubmitPrompt():
                prompts.append(" ".join(str(p.get("text", "")) for p in thaw(msg.parts) if isinstance(p, dict)))
            case ApprovalAnswered():
                answers.append(msg.outcome)
            case CancelTurn() if (env.recipient or "").startswith("session:"):
                cancels += 1
            case RunTool():
                running[msg.call_id] = msg.name
            case ToolFinished() if msg.call_id in running:
                results.setdefault(running.pop(msg.call_id), []).append(msg.result)
            case RunHooks():
                asked[msg.request_id] = msg
            case HookRan() if msg.request_id in asked:
                hook_ran.setdefault(msg.request_id, []).append(msg)
            case HooksFinished() if msg.request_id in asked:
                run = asked.pop(msg.request_id)
                ran = tuple(hook_ran.pop(msg.request_id, ()))
                hook_runs.append(HookRun(str(run.event), run.target, ran, msg))
            case _:
                pass
    entries = []
    for req, chunks, answered in requests.values():
        if not answered:
            continue  # failed: the file has nothing for it, as the original had not
        response: Any = chunks if req.method == "generateContentStream" else (chunks[0] if chunks else {})
        entries.append(FakeEntry(req.method, response, 0))
    meta = recording.meta
    notes: list[str] = []
    workspace: Path | None = None
    beside = path.parent / "workspace"
    recorded = Path(opened.workspace) if opened is not None else Path(str(meta.get("workspace", "")))
    if beside.is_dir():
        workspace = beside
    elif str(recorded) not in ("", ".") and recorded.is_dir():
        workspace = recorded
    else:
        notes.append(f"the recorded workspace {recorded} is gone: tools run in an empty folder (--workspace DIR gives one)")
    if cancels:
        notes.append(f"the recording's {cancels} cancel(s) are left to the explorer's cancels")
    hooks = _kept(hook_runs)
    if hooks:
        names = ", ".join(dict.fromkeys(f"{h.event} {name}" for h in hooks for name in h.names or ("(no name)",)))
        notes.append(
            f"hooks {names}: run as recorded stand-ins (each answers as in the recording, its command does not run)"
        )
    model = opened.model if opened is not None else str(meta.get("model", "gemini-2.5-flash"))
    standins = _standins(results, [req for req, _, _ in requests.values()], model)
    if standins:
        names = ", ".join(t.name for t in standins)
        notes.append(f"{names}: not tools of this build (an MCP server's?); run as recorded stand-ins (results from the recording)")
    return Target(
        name=path.stem,
        kind="recording",
        entries=tuple(entries),
        prompts=tuple(prompts),
        answers=tuple(answers),
        workspace=workspace,
        model=model,
        approval_mode=opened.approval_mode if opened is not None else str(meta.get("approval_mode", "default")),
        interactive=bool(meta.get("interactive", False)),
        notes=tuple(notes),
        standins=standins,
        hooks=hooks,
    )


def _kept(runs: Sequence[HookRun]) -> tuple[HookRun, ...]:
    """The recorded hook runs to give back (those where a hook ran): those a cancel cut
    short only where the same event and target has no other answer."""
    runs = [h for h in runs if h.ran]  # a client's own asking with nothing configured ran none
    answered = {(h.event, h.target) for h in runs if not h.finished.cancelled}
    return tuple(h for h in runs if not h.finished.cancelled or (h.event, h.target) not in answered)


def _standins(
    results: dict[str, list[ToolResult]], requests: Sequence[GenerateRequest], model: str
) -> tuple[StandIn, ...]:
    builtin = {t.name for t in builtin_tools(model, agents=True)}
    declared: dict[str, Any] = {}
    for req in requests:
        for group in thaw(req.config).get("tools") or ():
            for decl in (group or {}).get("functionDeclarations") or () if isinstance(group, dict) else ():
                if isinstance(decl, dict) and isinstance(decl.get("name"), str):
                    declared.setdefault(decl["name"], decl)
    return tuple(
        StandIn(name, declared.get(name), tuple(found)) for name, found in results.items() if name not in builtin
    )
