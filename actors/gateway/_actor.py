"""The model gateway actor: the only place that talks to Gemini.

Accepts ``GenerateRequest`` and ``CancelGeneration``. For each request it streams
``ModelChunk`` events to the requester, then exactly one terminal reply:
``ModelFinished``, ``ModelFailed`` or ``GenerationCancelled``. Each request runs in its
own cancel scope; a cancel closes the backend's stream (the HTTP connection for a live
backend) and is acknowledged by ``GenerationCancelled``.

Retries are Gemini CLI's (``_retry``): the connection layer around each attempt to open
a response, and, for streams, the mid-stream layer on one attempt counter shared by
errors while reading and invalid streams (``_stream_check``). Before each retry the
requester gets ``ModelRetrying`` (``mid_stream=True`` when output of the failed attempt
was streamed and is now void). Only a ``ModelFinished`` makes a response final, so a
function call seen in a retried attempt is never acted on.

Owns: the backend (held open with ``open_backend`` while the actor runs), the cancel
scopes of requests in flight, and the randomness of the retry jitter.
Stops: when its inbox closes (requests in flight are cancelled and acknowledged), or by
its supervisor's cancel.
"""

from __future__ import annotations

import random
from typing import Any, TypeAlias, assert_never

import attrs
import trio

from bus import Bus, DeliveryError, Port
from bus.json_values import JsonValueError, thaw
from bus.messages import (
    ApiError,
    CancelGeneration,
    GenerateRequest,
    GenerationCancelled,
    ModelChunk,
    ModelFailed,
    ModelFinished,
    ModelRetrying,
)

from ._backend import Backend, BackendError, open_backend
from ._errors import is_retryable
from ._retry import ConnectBackoff, RetryPolicy
from ._stream_check import (
    NUDGE_EMPTY,
    NUDGE_THINKING_ONLY,
    StreamCheck,
    request_is_function_response,
    shape_problem,
)

GATEWAY_ADDRESS = "gateway"
GatewayInbox: TypeAlias = GenerateRequest | CancelGeneration
"""What reaches the gateway's address."""
RETRIED_METHODS = frozenset({"generateContent", "generateContentStream"})
"""Calls the connection layer retries (Gemini CLI does not retry ``countTokens``)."""
NUDGES = {"THINKING_ONLY_RESPONSE": NUDGE_THINKING_ONLY, "NO_RESPONSE_TEXT": NUDGE_EMPTY}


@attrs.define(eq=False)
class _InFlight:
    request: GenerateRequest
    scope: trio.CancelScope


class GatewayActor:
    """Serves generation requests of every session of this process."""

    def __init__(
        self,
        bus: Bus,
        backend: Backend,
        *,
        address: str = GATEWAY_ADDRESS,
        retry: RetryPolicy | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.bus = bus
        self.backend = backend
        self.address = address
        self.retry: RetryPolicy = retry or getattr(backend, "retry_policy", None) or RetryPolicy()
        """Retry constants; by default the backend's (settings), else Gemini CLI's."""
        self.rng = rng or random.Random()
        self._in_flight: dict[str, _InFlight] = {}

    async def run(self, *, task_status: trio.TaskStatus[Port] = trio.TASK_STATUS_IGNORED) -> None:
        async with open_backend(self.backend):
            port = self.bus.connect(self.address)
            try:
                async with trio.open_nursery() as nursery:
                    task_status.started(port)
                    async for env in port:
                        msg = env.message
                        if not isinstance(msg, GatewayInbox):
                            continue  # no peer is wired to send it anything else
                        match msg:
                            case GenerateRequest() as req:
                                flight = _InFlight(req, trio.CancelScope())
                                self._in_flight[req.request_id] = flight
                                nursery.start_soon(self._serve, port, flight)
                            case CancelGeneration(request_id=rid, reason=why):
                                flight_or_none = self._in_flight.get(rid)
                                if flight_or_none is not None:
                                    flight_or_none.scope.cancel(reason=f"CancelGeneration: {why}")
                            case _ as unreachable:
                                assert_never(unreachable)
                    # Inbox closed: cancel what is still running; each is acknowledged.
                    for flight in self._in_flight.values():
                        flight.scope.cancel(reason="gateway inbox closed")
            finally:
                port.close()

    async def _serve(self, port: Port, flight: _InFlight) -> None:
        req = flight.request
        reply: GenerationCancelled | ModelFinished | ModelFailed
        reply = GenerationCancelled(session_id=req.session_id, request_id=req.request_id)
        with flight.scope:
            try:
                reply = await self._attempts(port, req)
            except DeliveryError:
                # The requester is gone: nobody to reply to.
                self._in_flight.pop(req.request_id, None)
                return
        self._in_flight.pop(req.request_id, None)
        try:
            await port.send(reply, to=req.reply_to)
        except DeliveryError:
            pass

    async def _attempts(self, port: Port, req: GenerateRequest) -> ModelFinished | ModelFailed:
        """Run ``req`` with Gemini CLI's mid-stream layer (streams only) around the
        connection layer."""
        started = trio.current_time()
        retry = self._retry_for(req)
        stream = req.method == "generateContentStream"
        is_fn_response = request_is_function_response(req.contents)
        index = 0
        attempt = 0  # the mid-stream layer's counter: stream errors and invalid streams
        last_invalid: str | None = None
        while True:
            check = StreamCheck(is_fn_response)

            async def emit(chunk: Any, check: StreamCheck = check) -> None:
                nonlocal index
                try:
                    msg = ModelChunk(session_id=req.session_id, request_id=req.request_id, index=index, chunk=chunk)
                    problem = shape_problem(msg.chunk)
                except JsonValueError as exc:  # nested too deep, NaN...: this response fails, not the gateway
                    problem = str(exc)
                if problem is not None:
                    raise BackendError(f"the response cannot be used: {problem}", phase="stream")
                check.feed(msg.chunk)  # type: ignore[arg-type]
                index += 1
                await port.send(msg, to=req.reply_to)

            attempt_req = _with_nudge(req, NUDGES.get(last_invalid or "", "")) if attempt else req
            try:
                model = await self._connect(port, attempt_req, emit, lambda: index, retry)
            except BackendError as exc:
                delay = retry.mid_stream_delay(attempt) if stream else None
                if exc.phase != "stream" or delay is None or not is_retryable(exc):
                    return _failed(req, exc)
                await self._announce(port, req, attempt + 1, delay, _reason(exc), mid_stream=True)
                await trio.sleep(delay)
                attempt += 1
                continue
            verdict = check.verdict() if stream else None
            if verdict is None:
                return ModelFinished(
                    session_id=req.session_id,
                    request_id=req.request_id,
                    model=model,
                    latency_ms=int((trio.current_time() - started) * 1000),
                )
            last_invalid = verdict.type
            delay = retry.mid_stream_delay(attempt)
            if delay is None:
                return ModelFailed(
                    session_id=req.session_id,
                    request_id=req.request_id,
                    model=model,
                    error=ApiError(message=verdict.message, type="invalid_stream", invalid_stream=verdict.type),
                )
            await self._announce(port, req, attempt + 1, delay, verdict.type, mid_stream=True)
            await trio.sleep(delay)
            attempt += 1

    def _retry_for(self, req: GenerateRequest) -> RetryPolicy:
        """The retry constants of ``req``: its session's when the backend keeps them
        per session (``retry_policy_for``: the daemon's sessions each have their own
        settings), else the gateway's."""
        policy_for = getattr(self.backend, "retry_policy_for", None)
        policy: RetryPolicy | None = policy_for(req) if policy_for is not None else None
        return policy or self.retry

    async def _connect(self, port: Port, req: GenerateRequest, emit: Any, emitted: Any, retry: RetryPolicy) -> str:
        """One attempt of ``req`` with the connection layer: failures before the
        response starts are retried with backoff; anything else is raised."""
        backoff = ConnectBackoff(retry, self.rng)
        while True:
            backoff.attempt()
            before = emitted()
            try:
                return await self.backend.generate(req, emit)
            except BackendError as exc:
                if emitted() != before:
                    exc.phase = "stream"  # output went out: this attempt is past connecting
                if exc.phase != "connect" or req.method not in RETRIED_METHODS:
                    raise
                delay = backoff.delay_after(exc)
                if delay is None:
                    raise
                await self._announce(port, req, backoff.attempts, delay, _reason(exc), mid_stream=False)
                await trio.sleep(delay)

    async def _announce(
        self, port: Port, req: GenerateRequest, attempt: int, delay: float, reason: str, *, mid_stream: bool
    ) -> None:
        await port.send(
            ModelRetrying(
                session_id=req.session_id,
                request_id=req.request_id,
                attempt=attempt,
                delay_s=delay,
                reason=reason,
                mid_stream=mid_stream,
            ),
            to=req.reply_to,
        )


def _reason(exc: BackendError) -> str:
    if exc.replayed_reason is not None:
        return exc.replayed_reason
    if exc.http_status is not None:
        return f"{exc.http_status} {exc.api_status or exc.type}"
    return exc.network_code or exc.type


def _failed(req: GenerateRequest, exc: BackendError) -> ModelFailed:
    return ModelFailed(
        session_id=req.session_id,
        request_id=req.request_id,
        model=req.model,
        error=ApiError(
            message=exc.message,
            status=exc.status,
            type=exc.type,
            retryable=exc.retryable,
            http_status=exc.http_status,
            api_status=exc.api_status,
            reason=exc.reason,
        ),
    )


def _with_nudge(req: GenerateRequest, nudge: str) -> GenerateRequest:
    """The request with ``nudge`` appended to its system instruction. As Gemini CLI,
    only a text instruction (or none) is nudged."""
    if not nudge:
        return req
    config = thaw(req.config) or {}
    si = config.get("systemInstruction")
    if isinstance(si, str):
        config["systemInstruction"] = si + nudge
    elif si is None:
        config["systemInstruction"] = nudge
    else:
        return req
    return attrs.evolve(req, config=config)
