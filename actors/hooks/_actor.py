"""Hook-runner actor: runs one session's command hooks.

Accepts: ``RunHooks`` (run the hooks of an event that match a target), ``CancelHooks``
(kill a request's running hooks).
Emits: one ``HookRan`` event per hook that was started (also when it was killed), then
exactly one ``HooksFinished`` to the request's ``reply_to`` — also when nothing matched
(``ran=0``, ``output=None``), when it was cancelled, and when the runner stops.
Owns: the hook processes, each request in its own task and cancel scope, so a slow
hook never delays another request; a plan runs its hooks in parallel (a nursery) or,
when sequential, one after the other with each answer chained into the next input.
Stops: when its inbox closes (running requests are cancelled — their process groups
killed — and answered), on ``CancelHooks`` for one request (its hooks count as failed),
or by its supervisor's cancel (replies are still attempted, shielded and bounded).

The hook input is the request's ``input`` after the base fields Gemini adds
(``session_id``, ``transcript_path``, ``cwd``, ``hook_event_name``, ``timestamp``); a
base field present in ``input`` overrides the runner's value.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Callable, Mapping
from typing import Any, TypeAlias, assert_never

import trio

from bus import Bus, DeliveryError, Port
from bus.messages import CancelHooks, HookRan, HooksFinished, RunHooks

from ._aggregate import aggregate, chain_input
from ._config import CommandHook, HookConfig
from ._plan import Plan
from ._run import KILL_GRACE_S, HookResult, run_command_hook

HooksInbox: TypeAlias = RunHooks | CancelHooks
"""What reaches the hook runner's address."""
REPLY_GRACE_S = 2.0
"""Bound on sending a terminal reply from cancelled code."""
EVENT_TEXT_LIMIT = 256 * 1024
"""Characters of a hook's stdout / stderr carried in ``HookRan``."""


def iso_timestamp(moment: datetime.datetime) -> str:
    """``Date.prototype.toISOString``: UTC, milliseconds, ``Z``."""
    utc = moment.astimezone(datetime.UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


def _utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _clip(text: str) -> str:
    if len(text) <= EVENT_TEXT_LIMIT:
        return text
    return text[:EVENT_TEXT_LIMIT] + f"\n[... {len(text) - EVENT_TEXT_LIMIT} more characters]"


class _Request:
    """One ``RunHooks`` in flight: its scope and what its hooks did so far."""

    def __init__(self, run: RunHooks, plan: Plan | None) -> None:
        self.run = run
        self.plan = plan
        self.scope = trio.CancelScope()
        self.cancel_reason: str | None = None
        self.logged_input: Mapping[str, Any] = {}
        """The input before sequential chaining: what ``HookRan.input`` reports."""
        n = len(plan.hooks) if plan else 0
        self.started_at: list[float | None] = [None] * n
        self.results: list[HookResult | None] = [None] * n
        self.published = [False] * n


class HookRunnerActor:
    def __init__(
        self,
        bus: Bus,
        *,
        session_id: str,
        address: str,
        config: HookConfig,
        cwd: str,
        transcript_path: str = "",
        env_extra: Mapping[str, str] | None = None,
        base_env: Mapping[str, str] | None = None,
        plans_dir: str = "",
        clock: Callable[[], datetime.datetime] = _utc_now,
        kill_grace_s: float = KILL_GRACE_S,
    ) -> None:
        """``session_id``: Gemini's session id, sent to hooks; ``cwd``: the working
        directory (``config.getWorkingDir()``); ``transcript_path``: the session's
        ``.jsonl`` or ''; ``base_env``: the (sanitised) process environment, default
        ``os.environ``, then ``env_extra`` over it; ``plans_dir``: ``GEMINI_PLANS_DIR``;
        ``clock``: the wall clock for ``timestamp``."""
        self.bus = bus
        self.session_id = session_id
        self.address = address
        self.config = config
        self.cwd = cwd
        self.transcript_path = transcript_path
        self.env = {**(os.environ if base_env is None else base_env), **(env_extra or {})}
        self.plans_dir = plans_dir
        self.clock = clock
        self.kill_grace_s = kill_grace_s
        self._requests: dict[str, _Request] = {}
        """Requests by id, for ``CancelHooks`` (a reused id reaches the latest)."""
        self._live: set[_Request] = set()

    async def run(self, *, task_status: trio.TaskStatus[Port] = trio.TASK_STATUS_IGNORED) -> None:
        port = self.bus.connect(self.address)
        try:
            async with trio.open_nursery() as nursery:
                task_status.started(port)
                async for env in port:
                    if isinstance(env.message, HooksInbox):  # no peer is wired to send anything else
                        self._handle(env.message, port, nursery)
                for request in self._live:
                    request.cancel_reason = request.cancel_reason or "the hook runner stopped"
                    request.scope.cancel(reason="hook runner inbox closed")
        finally:
            port.close()

    def _handle(self, message: HooksInbox, port: Port, nursery: trio.Nursery) -> None:
        match message:
            case RunHooks() as run:
                request = _Request(run, self.config.plan(run.event, run.target))
                self._requests[run.request_id] = request
                self._live.add(request)
                nursery.start_soon(self._serve, port, request)
            case CancelHooks(request_id=request_id, reason=reason):
                found = self._requests.get(request_id)
                if found is not None:
                    found.cancel_reason = found.cancel_reason or reason
                    found.scope.cancel(reason=f"CancelHooks: {reason}")
            case _ as unreachable:
                assert_never(unreachable)

    def _base_input(self, run: RunHooks) -> dict[str, Any]:
        base: dict[str, Any] = {
            "session_id": self.session_id,
            "transcript_path": self.transcript_path,
            "cwd": self.cwd,
            "hook_event_name": run.event,
            "timestamp": iso_timestamp(self.clock()),
        }
        if isinstance(run.input, Mapping):
            # Shallow: nested values stay frozen (and shared), json.dumps takes them.
            base.update(run.input)
        return base

    async def _serve(self, port: Port, request: _Request) -> None:
        run, plan = request.run, request.plan
        hook_input = self._base_input(run) if plan else {}
        request.logged_input = hook_input
        try:
            with request.scope:
                if plan is not None and plan.sequential:
                    current = hook_input
                    for i, hook in enumerate(plan.hooks):
                        result = await self._one(port, request, i, hook, current)
                        if result.success and result.output is not None:
                            current = chain_input(run.event, current, result.output)
                elif plan is not None:
                    async with trio.open_nursery() as nursery:
                        for i, hook in enumerate(plan.hooks):
                            nursery.start_soon(self._one, port, request, i, hook, hook_input)
        finally:
            if self._requests.get(run.request_id) is request:
                del self._requests[run.request_id]
            self._live.discard(request)
            with trio.move_on_after(REPLY_GRACE_S, shield=True):
                await self._finish(port, request)

    async def _one(
        self, port: Port, request: _Request, i: int, hook: CommandHook, hook_input: dict[str, Any]
    ) -> HookResult:
        request.started_at[i] = trio.current_time()
        result = await run_command_hook(
            hook,
            hook_input,
            base_env=self.env,
            plans_dir=self.plans_dir,
            kill_grace_s=self.kill_grace_s,
        )
        request.results[i] = result
        await port.publish(self._ran(request, result))
        request.published[i] = True
        return result

    def _ran(self, request: _Request, result: HookResult) -> HookRan:
        return HookRan(
            session_id=request.run.session_id,
            request_id=request.run.request_id,
            event=request.run.event,
            name=result.hook.display_name,
            success=result.success,
            exit_code=result.exit_code,
            duration_ms=result.duration_ms,
            error=result.error,
            output=result.output,
            output_format=result.output_format,
            stdout=_clip(result.stdout),
            stderr=_clip(result.stderr),
            input=request.logged_input,
        )

    async def _finish(self, port: Port, request: _Request) -> None:
        """Account for killed hooks, publish what is unpublished, reply. Runs shielded."""
        run, plan = request.run, request.plan
        cancelled = request.scope.cancelled_caught
        now = trio.current_time()
        results: list[HookResult] = []
        for i, hook in enumerate(plan.hooks if plan else ()):
            result = request.results[i]
            started = request.started_at[i]
            if result is None and started is None:
                continue  # a sequential hook that never started
            if result is None:
                assert started is not None
                cancelled = True
                result = HookResult(
                    hook=hook,
                    success=False,
                    duration_ms=int((now - started) * 1000),
                    error=f"Hook cancelled: {request.cancel_reason or 'cancelled'}",
                )
                request.results[i] = result
            if not request.published[i]:
                request.published[i] = True
                try:
                    await port.publish(self._ran(request, result))
                except DeliveryError:
                    pass
            results.append(result)
        finished = HooksFinished(
            session_id=run.session_id,
            request_id=run.request_id,
            event=run.event,
            output=aggregate(run.event, [r.output for r in results if r.output is not None]),
            ran=len(results),
            failed=tuple(r.hook.display_name for r in results if not r.success),
            duration_ms=sum(r.duration_ms for r in results),
            cancelled=cancelled,
        )
        try:
            await port.send(finished, to=run.reply_to)
        except DeliveryError:
            pass
