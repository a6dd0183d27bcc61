"""A user's target run under a perturbation (``run_target``): the session's real actors,
its real built-in tools and policy engine in a fresh copy of its workspace, the model
answering from the target's responses (``PerturbedBackend``), each tool wrapped by
``PerturbedTool``, a recording's hooks and MCP tools as recorded stand-ins
(``RecordedHooks``, ``RecordedStandIn``); then DESIGN §5's invariants and the user's (``UserRun``) are checked
while the run's workspace still exists.

While a real tool runs, trio's virtual clock runs at real speed and does not jump (a
subprocess wait is not idleness: ``RealSpeed``); tool spans are timed on the virtual
clock less that real time, so a wave's calls start together as they do when nothing
runs for real.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import inspect
import itertools
import math
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import trio
import trio.testing

from actors.frontends.explore._harness import (
    SID,
    Processes,
    Run,
    Spans,
    World,
    execute,
    fail,
    kill,
    scratch_dir,
    spawn,
)
from actors.frontends.explore._invariants import Violation, check
from actors.frontends.explore._perturb import HookTwist, Perturbation, ToolTwist
from actors.frontends.explore._target import ExploreInputError, HookRun, StandIn, Target
from actors.frontends.replay import recorded_hook_config
from actors.gateway import GATEWAY_ADDRESS, BackendError, FakeResponsesBackend
from actors.host import runtime
from actors.host.context import session_context
from actors.host.models import classifier_choice, classifier_request, resolve_model
from actors.host.setup import request_config_for
from actors.recording import Recording
from actors.scheduler import PolicyEngine
from actors.tools import OutputSink, Tool, ToolEnv, builtin_tools, executor_kind
from bus import Bus, DeliveryError, Envelope, Port
from bus.messages import (
    CancelHooks,
    GenerateRequest,
    HookRan,
    HooksFinished,
    Message,
    RunHooks,
    ToolResult,
    as_approval_mode,
)


class RealSpeed:
    """The virtual clock at real speed while real tools run; counts the real time so
    spent (``virtual_now`` leaves it out)."""

    def __init__(self, clock: trio.testing.MockClock) -> None:
        self.clock = clock
        self.active = 0
        self.spent = 0.0
        self._since = 0.0
        self._jump = clock.autojump_threshold

    def enter(self) -> None:
        self.active += 1
        if self.active == 1:
            self._since = trio.current_time()
            self._jump = self.clock.autojump_threshold
            self.clock.autojump_threshold = math.inf
            self.clock.rate = 1.0

    def exit(self) -> None:
        self.active -= 1
        if self.active == 0:
            self.clock.rate = 0.0
            self.clock.autojump_threshold = self._jump
            self.spent += trio.current_time() - self._since

    def virtual_now(self) -> float:
        now = trio.current_time()
        return now - self.spent - (now - self._since if self.active else 0.0)


class PerturbedTool:
    """A real tool with its twists (``ToolTwist``, by name and occurrence in the run)."""

    def __init__(
        self,
        inner: Tool,
        twists: Mapping[tuple[str, int], ToolTwist],
        counts: dict[str, int],
        spans: Spans,
        procs: Processes,
        speed: RealSpeed,
    ) -> None:
        self.inner = inner
        self.name = inner.name
        self.display_name = inner.display_name
        self.kind = inner.kind
        self.twists = twists
        self.counts = counts
        self.spans = spans
        self.procs = procs
        self.speed = speed
        self.background: list[Any] = []
        self._takes_call_id = "call_id" in inspect.signature(inner.execute).parameters
        cancelled = getattr(inner, "cancelled_result", None)
        if cancelled is not None:
            self.cancelled_result = cancelled

    def declaration(self, model: str) -> dict[str, Any]:
        return self.inner.declaration(model)

    def describe(self, args: Mapping[str, Any], env: ToolEnv) -> str:
        return self.inner.describe(args, env)

    def validate(self, args: Mapping[str, Any], env: ToolEnv) -> str | None:
        return self.inner.validate(args, env)

    async def execute(
        self, args: Mapping[str, Any], env: ToolEnv, output: OutputSink | None = None, *, call_id: str = ""
    ) -> ToolResult:
        nth = self.counts[self.name] = self.counts.get(self.name, 0) + 1
        twist = self.twists.get((self.name, nth))
        span = self.spans.begin(call_id)
        how = "cancelled"
        try:
            if twist is not None and twist.ms:
                await trio.sleep(twist.ms / 1000)
            if twist is not None and twist.outcome == "error":
                how = "error"
                return ToolResult(error_type="execution_failed", error_message=f"{self.name} failed (explored)")
            if twist is not None and twist.outcome == "crash":
                how = "crash"
                raise RuntimeError(f"{self.name} crashed (explored)")
            self.speed.enter()
            try:
                if self._takes_call_id:
                    result: ToolResult = await self.inner.execute(args, env, output, call_id=call_id)  # type: ignore[call-arg]
                else:
                    result = await self.inner.execute(args, env, output)
            finally:
                self.speed.exit()
            if twist is not None and twist.bg:
                child = spawn()
                self.procs.started.append(child)
                self.background.append(child)
            how = "ok"
            return result
        finally:
            self.spans.end(span, how)

    async def close_session(self, env: ToolEnv) -> None:
        for child in self.background:
            kill(child)
        self.background.clear()
        close = getattr(self.inner, "close_session", None)
        if close is not None:
            await close(env)


class RecordedStandIn:
    """A tool this build does not have (an MCP server's in the recording): described as
    the model saw it, each call answered with the next recorded result (then an error)."""

    def __init__(self, standin: StandIn) -> None:
        self.name = standin.name
        self.display_name = standin.name
        self.kind = "other"
        self._declaration = standin.declaration
        self._results = list(standin.results)

    def declaration(self, model: str) -> dict[str, Any]:
        if isinstance(self._declaration, Mapping):
            return dict(self._declaration)
        return {"name": self.name, "description": "", "parametersJsonSchema": {"type": "object"}}

    def describe(self, args: Mapping[str, Any], env: ToolEnv) -> str:
        return self.name

    def validate(self, args: Mapping[str, Any], env: ToolEnv) -> str | None:
        return None

    async def execute(self, args: Mapping[str, Any], env: ToolEnv, output: OutputSink | None = None) -> ToolResult:
        if not self._results:
            return ToolResult(error_type="execution_failed", error_message=f"{self.name}: the recording has no more results")
        return self._results.pop(0)


class RecordedHooks:
    """The session's hook runner in an explored run: a recorded stand-in. A hook's
    command is a process whose timing the virtual clock cannot own; the recording has
    its answers. Each ``RunHooks`` gets the next recorded run of its event and target
    (the last one again when the run asks more often than the recording did): its
    ``HookRan`` events, then its ``HooksFinished``, after the perturbation's delay
    (``HookTwist``) on the virtual clock. ``CancelHooks``, or the inbox closing, cuts a
    waiting request short as the real runner does (its hooks failed, ``cancelled``)."""

    def __init__(self, bus: Bus, address: str, runs: Sequence[HookRun], twists: Sequence[HookTwist]) -> None:
        self.bus = bus
        self.address = address
        self.runs: dict[tuple[str, str], list[HookRun]] = {}
        for run in runs:
            self.runs.setdefault((run.event, run.target), []).append(run)
        self.twists = {(t.event, t.nth): t for t in twists}
        self.asked: dict[str, int] = {}
        self.scopes: dict[str, trio.CancelScope] = {}

    async def run(self, *, task_status: trio.TaskStatus[Port] = trio.TASK_STATUS_IGNORED) -> None:
        port = self.bus.connect(self.address)
        try:
            async with trio.open_nursery() as nursery:
                task_status.started(port)
                async for env in port:
                    msg = env.message
                    if isinstance(msg, RunHooks):
                        scope = self.scopes[msg.request_id] = trio.CancelScope()
                        nursery.start_soon(self._answer, port, msg, scope)
                    elif isinstance(msg, CancelHooks) and msg.request_id in self.scopes:
                        self.scopes[msg.request_id].cancel(reason=msg.reason)
                for scope in self.scopes.values():
                    scope.cancel(reason="the hook runner stopped")
        finally:
            port.close()

    async def _answer(self, port: Port, asked: RunHooks, scope: trio.CancelScope) -> None:
        nth = self.asked[asked.event] = self.asked.get(asked.event, 0) + 1
        twist = self.twists.get((asked.event, nth))
        recorded = self.runs.get((asked.event, asked.target)) or []
        run = recorded.pop(0) if len(recorded) > 1 else (recorded[0] if recorded else None)
        try:
            with scope:
                if twist is not None and twist.ms:
                    await trio.sleep(twist.ms / 1000)
        finally:
            self.scopes.pop(asked.request_id, None)
            with trio.move_on_after(2.0, shield=True):
                await self._reply(port, asked, run, cancelled=scope.cancelled_caught)

    async def _reply(self, port: Port, asked: RunHooks, run: HookRun | None, *, cancelled: bool) -> None:
        sid, rid = asked.session_id, asked.request_id
        ran: list[HookRan] = []
        if run is None:
            finished = HooksFinished(session_id=sid, request_id=rid, event=asked.event, cancelled=cancelled)
        elif cancelled:
            ran = [
                attrs.evolve(r, session_id=sid, request_id=rid, success=False, exit_code=None, error="Hook cancelled")
                for r in run.ran
            ]
            ran = [attrs.evolve(r, output=None, output_format=None) for r in ran]
            failed = tuple(r.name for r in ran)
            finished = HooksFinished(
                session_id=sid, request_id=rid, event=asked.event, ran=len(ran), failed=failed, cancelled=True
            )
        else:
            ran = [attrs.evolve(r, session_id=sid, request_id=rid) for r in run.ran]
            finished = attrs.evolve(run.finished, session_id=sid, request_id=rid)
        try:
            for event in ran:
                await port.publish(event)
            await port.send(finished, to=asked.reply_to)
        except DeliveryError:
            pass


class PerturbedBackend:
    """The target's model answers in strict order (Gemini CLI's fake-responses rules),
    with the perturbation's faults and chunk timing."""

    def __init__(self, target: Target, perturbation: Perturbation, spans: Spans) -> None:
        self.inner = FakeResponsesBackend(list(target.entries))
        self.retry_policy: Any = None
        self.faults = {f.attempt: f for f in perturbation.faults}
        self.chunk_ms = perturbation.chunk_ms
        self.spans = spans
        self.attempts = 0

    async def generate(self, request: GenerateRequest, emit: Callable[[Any], Any]) -> str:
        span = self.spans.begin(request.request_id)
        how = "cancelled"
        try:
            self.attempts += 1
            fault = self.faults.get(self.attempts)
            if fault is not None:
                await fail(emit, fault.status, midstream=fault.midstream)
            sent = 0

            async def paced(chunk: Any) -> None:
                nonlocal sent
                if sent and self.chunk_ms:
                    await trio.sleep(self.chunk_ms / 1000)
                sent += 1
                await emit(chunk)

            model = await self.inner.generate(request, paced)
            how = "finished"
            return model
        except BackendError:
            how = "failed"
            raise
        finally:
            self.spans.end(span, how)


def target_world(
    target: Target, perturbation: Perturbation, run: Run, workspace: Path, home: Path, clock: trio.testing.MockClock
) -> World:
    """The world of ``target`` under ``perturbation`` (see the module doc)."""
    speed = RealSpeed(clock)
    run.tools.now = speed.virtual_now
    approval = target.approval_mode
    all_tools = {t.name: t for t in builtin_tools(target.model)}
    policy, _warnings = PolicyEngine.build(
        approval_mode=approval,
        interactive=target.interactive,
        settings={},
        user_policy_dir=home / ".gemini" / "policies",
        workspace_policy_dir=workspace / ".gemini" / "policies",
        known_tools=tuple(all_tools),
    )
    excluded = policy.excluded_tools(all_tools, approval_mode=approval)
    tools: dict[str, Any] = {n: t for n, t in all_tools.items() if n not in excluded}
    for standin in target.standins:
        tools[standin.name] = RecordedStandIn(standin)
    twists = {(t.tool, t.nth): t for t in perturbation.tools}
    counts: dict[str, int] = {}
    wrapped = {n: PerturbedTool(t, twists, counts, run.tools, run.procs, speed) for n, t in tools.items()}
    hooks = recorded_hook_config((h.event, h.target, h.names) for h in target.hooks)
    env = ToolEnv(
        workspace=workspace,
        project_temp_dir=home / ".gemini" / "tmp" / workspace.name,
        session_id=SID,
        model=target.model,
        settings={},
    )
    context = {"role": "user", "parts": [{"text": session_context(workspace, env.project_temp_dir)}]}
    cfg = runtime.SessionConfig(
        **runtime.guard_settings(target.settings if isinstance(target.settings, Mapping) else {}),
        session_id=SID,
        model=target.model,
        approval_mode=as_approval_mode(approval),
        env=env,
        tools=wrapped,
        executor_of=lambda tool: executor_kind(tool.inner if isinstance(tool, PerturbedTool) else tool),
        policy=policy,
        request_config=request_config_for(tools),
        route_model=resolve_model,
        classifier_choice=classifier_choice,
        classifier_request=classifier_request,
        history=(context,),
        recording=run.recording_path,
        gateway_address=GATEWAY_ADDRESS,
        interactive=target.interactive,
        registered_names=tuple(tools),
        hooks=hooks,
        hook_runner=functools.partial(RecordedHooks, runs=target.hooks, twists=perturbation.hooks) if hooks else None,
        # A clock that moves on with each reading: calls without an id get distinct,
        # reproducible ids.
        wall_ms=functools.partial(next, itertools.count(1_000, 7)),
    )
    return World(cfg, PerturbedBackend(target, perturbation, run.model), tools, real_models=True)


# -- user invariants -------------------------------------------------------------------------------
@attrs.frozen(kw_only=True)
class UserRun:
    """What a user invariant (``--invariant MODULE:FUNC``) is given: one finished run.

    The function returns None (or True) when the run is fine; a string, or an iterable of
    strings, says what is wrong (False: "it does not hold"); an ``AssertionError`` is a
    violation too (its message says what). Any other exception stops the exploration
    (the invariant itself is broken)."""

    messages: tuple[Message, ...]
    """Every message of the session, in the order delivered (``envelopes`` has their
    sequence numbers, senders and recipients)."""
    envelopes: tuple[Envelope, ...]
    recording: Recording
    """The run's recording, as ``actors.recording.load_recording`` reads it."""
    workspace: Path
    """The run's copy of the workspace, after the session closed (deleted after the check)."""
    perturbation: Perturbation | None = None


UserInvariant = Callable[[UserRun], Any]


@attrs.frozen
class UserViolation:
    name: str
    detail: str

    def __str__(self) -> str:
        return f"invariant {self.name}: {self.detail}"


def load_invariant(spec: str) -> tuple[str, UserInvariant]:
    """``MODULE:FUNC`` (a dotted module on the path, or a ``.py`` file) as a callable;
    raises ``ExploreInputError`` naming the cause."""
    module_name, sep, func_name = spec.rpartition(":")
    if not sep or not module_name or not func_name:
        raise ExploreInputError(f"--invariant {spec}: expected MODULE:FUNC (a module or a .py file, and a function in it)")
    try:
        if module_name.endswith(".py"):
            path = Path(module_name)
            if not path.is_file():
                raise ExploreInputError(f"--invariant {spec}: no such file {path}")
            loader_spec = importlib.util.spec_from_file_location(f"agentbus_invariant_{path.stem}", path)
            assert loader_spec is not None and loader_spec.loader is not None
            module = importlib.util.module_from_spec(loader_spec)
            loader_spec.loader.exec_module(module)
        else:
            if "" not in sys.path:
                sys.path.insert(0, "")
            module = importlib.import_module(module_name)
    except ExploreInputError:
        raise
    except BaseException as exc:  # an import runs arbitrary code: any failure is the module's
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise ExploreInputError(
            f"--invariant {spec}: the module {module_name} does not import: {type(exc).__name__}: {exc}"
        ) from None
    func = getattr(module, func_name, None)
    if not callable(func):
        raise ExploreInputError(f"--invariant {spec}: {module_name} has no function {func_name}")
    return spec, func


class UserInvariantError(ExploreInputError):
    """A user invariant raised something other than ``AssertionError``."""


def check_user(invariants: Sequence[tuple[str, UserInvariant]], user_run: UserRun) -> list[UserViolation]:
    found: list[UserViolation] = []
    for name, func in invariants:
        try:
            said = func(user_run)
        except AssertionError as exc:
            found.append(UserViolation(name, str(exc) or "an assertion failed"))
            continue
        except Exception as exc:
            raise UserInvariantError(f"--invariant {name} raised {type(exc).__name__}: {exc}") from exc
        found += [UserViolation(name, text) for text in _said(said)]
    return found


def _said(said: Any) -> Iterable[str]:
    if said is None or said is True:
        return ()
    if said is False:
        return ("it does not hold",)
    if isinstance(said, str):
        return (said,) if said else ()
    return tuple(str(s) for s in said)


# -- one run -------------------------------------------------------------------------------------
@attrs.define
class TargetRun:
    """One explored run of a target: what happened and what broke."""

    run: Run
    perturbation: Perturbation
    violations: list[Violation]
    user_violations: list[UserViolation]

    @property
    def failed(self) -> bool:
        return bool(self.violations or self.user_violations)

    def problems(self) -> list[str]:
        return [str(v) for v in (*self.violations, *self.user_violations)]


def run_target(
    target: Target,
    perturbation: Perturbation,
    *,
    invariants: Sequence[tuple[str, UserInvariant]] = (),
    keep_recording: Path | None = None,
) -> TargetRun:
    """Run ``target`` once under ``perturbation`` in a fresh copy of its workspace on a
    fresh virtual clock; check the seven invariants and ``invariants``. When something
    broke and ``keep_recording`` is given, the run's recording is copied there."""
    session = perturbation.session(target.prompts, target.answers, target.cancels, target.interactive)
    with tempfile.TemporaryDirectory(dir=scratch_dir(), prefix="explored-") as tmp:
        workspace = Path(tmp) / (target.workspace.name if target.workspace is not None else "workspace")
        if target.workspace is not None:
            shutil.copytree(target.workspace, workspace, symlinks=True)
        else:
            workspace.mkdir()
        home = Path(tmp) / "home"
        home.mkdir()
        run = Run(session=session, recording_path=Path(tmp) / "recording.jsonl")
        try:
            execute(session, run, lambda clock: target_world(target, perturbation, run, workspace, home, clock))
        except Exception as exc:  # an actor of the user's session crashed: a finding, not an input error
            crashed = Violation(3, f"the session crashed: {_crash(exc)}")
            if keep_recording is not None and run.recording_path.exists():
                keep_recording.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(run.recording_path, keep_recording)
            return TargetRun(run, perturbation, [crashed], [])
        violations = check(run)
        user: list[UserViolation] = []
        if invariants and run.recording is not None:
            user_run = UserRun(
                messages=tuple(env.message for env in run.envelopes),
                envelopes=tuple(run.envelopes),
                recording=run.recording,
                workspace=workspace,
                perturbation=perturbation,
            )
            user = check_user(invariants, user_run)
        if (violations or user) and keep_recording is not None:
            keep_recording.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(run.recording_path, keep_recording)
    return TargetRun(run, perturbation, violations, user)


def _crash(exc: BaseException) -> str:
    """The innermost exceptions of a crash, one line."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_crash(e) for e in exc.exceptions)
    return f"{type(exc).__name__}: {exc}"
