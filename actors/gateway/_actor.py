"""The model gateway actor: the only place that talks to Gemini.

Accepts ``GenerateRequest`` and ``CancelGeneration``. For each request it streams
``ModelChunk`` events to the requester, then exactly one terminal reply:
``ModelFinished``, ``ModelFailed`` or ``GenerationCancelled``. Each request runs in its
own cancel scope; a cancel closes the backend's stream (the HTTP connection for a live
backend) and is acknowledged by ``GenerationCancelled``.

Owns: the backend and the cancel scopes of requests in flight.
Stops: when its inbox closes (requests in flight are cancelled and acknowledged), or by
its supervisor's cancel.
"""

from __future__ import annotations

import attrs
import trio

from bus import Bus, DeliveryError, Port
from bus._json import thaw
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

from ._backend import Backend, BackendError
from ._stream_check import (
    INVALID_STREAM_INITIAL_DELAY_S,
    INVALID_STREAM_MAX_ATTEMPTS,
    NUDGE_EMPTY,
    NUDGE_THINKING_ONLY,
    StreamCheck,
    request_is_function_response,
)

GATEWAY_ADDRESS = "gateway"


@attrs.define(eq=False)
class _InFlight:
    request: GenerateRequest
    scope: trio.CancelScope


class GatewayActor:
    """Serves generation requests of every session of this process."""

    def __init__(self, bus: Bus, backend: Backend, *, address: str = GATEWAY_ADDRESS) -> None:
        self.bus = bus
        self.backend = backend
        self.address = address
        self._in_flight: dict[str, _InFlight] = {}

    async def run(self, *, task_status: trio.TaskStatus[Port] = trio.TASK_STATUS_IGNORED) -> None:
        port = self.bus.connect(self.address)
        try:
            async with trio.open_nursery() as nursery:
                task_status.started(port)
                async for env in port:
                    match env.message:
                        case GenerateRequest() as req:
                            flight = _InFlight(req, trio.CancelScope())
                            self._in_flight[req.request_id] = flight
                            nursery.start_soon(self._serve, port, flight)
                        case CancelGeneration(request_id=rid):
                            flight_or_none = self._in_flight.get(rid)
                            if flight_or_none is not None:
                                flight_or_none.scope.cancel()
                        case _:
                            pass  # not for us: the gateway ignores other messages
                # Inbox closed: cancel what is still running; each is acknowledged.
                for flight in self._in_flight.values():
                    flight.scope.cancel()
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
        """Run ``req`` with Gemini CLI's invalid-stream retries (streams only)."""
        clock = trio.current_time
        started = clock()
        index = 0
        attempt_req = req
        is_fn_response = request_is_function_response(req.contents)
        attempt = 0
        while True:
            check = StreamCheck(is_fn_response)

            async def emit(chunk: object, check: StreamCheck = check) -> None:
                nonlocal index
                msg = ModelChunk(
                    session_id=req.session_id, request_id=req.request_id, index=index, chunk=chunk
                )
                check.feed(msg.chunk)  # type: ignore[arg-type]
                await port.send(msg, to=req.reply_to)
                index += 1

            try:
                model = await self.backend.generate(attempt_req, emit)
            except BackendError as exc:
                return ModelFailed(
                    session_id=req.session_id,
                    request_id=req.request_id,
                    model=req.model,
                    error=ApiError(
                        message=exc.message, status=exc.status, type=exc.type, retryable=exc.retryable
                    ),
                )
            verdict = check.verdict() if req.method == "generateContentStream" else None
            if verdict is None:
                return ModelFinished(
                    session_id=req.session_id,
                    request_id=req.request_id,
                    model=model,
                    latency_ms=int((clock() - started) * 1000),
                )
            attempt += 1
            if attempt >= INVALID_STREAM_MAX_ATTEMPTS:
                return ModelFailed(
                    session_id=req.session_id,
                    request_id=req.request_id,
                    model=model,
                    error=ApiError(
                        message=verdict.message, type="invalid_stream", invalid_stream=verdict.type
                    ),
                )
            delay = INVALID_STREAM_INITIAL_DELAY_S * 2 ** (attempt - 1)
            await port.send(
                ModelRetrying(
                    session_id=req.session_id,
                    request_id=req.request_id,
                    attempt=attempt,
                    delay_s=delay,
                    reason=verdict.type,
                    mid_stream=True,
                ),
                to=req.reply_to,
            )
            await trio.sleep(delay)
            nudge = {"THINKING_ONLY_RESPONSE": NUDGE_THINKING_ONLY, "NO_RESPONSE_TEXT": NUDGE_EMPTY}
            attempt_req = _with_nudge(req, nudge.get(verdict.type, ""))


def _with_nudge(req: GenerateRequest, nudge: str) -> GenerateRequest:
    """The request with ``nudge`` appended to its system instruction."""
    if not nudge:
        return req
    config = thaw(req.config) or {}
    si = config.get("systemInstruction")
    if isinstance(si, str):
        config["systemInstruction"] = si + nudge
    elif isinstance(si, dict):
        parts = list(si.get("parts") or [])
        parts.append({"text": nudge})
        config["systemInstruction"] = {**si, "parts": parts}
    else:
        config["systemInstruction"] = nudge
    return attrs.evolve(req, config=config)
