"""Headless output: Gemini CLI's ``-o text|json|stream-json`` from the session's messages.

A ``HeadlessPrinter`` observes the messages of one session (as any client does) and
writes what Gemini CLI writes: streamed text, a JSON document, or JSONL events, with
the same stats and the same exit codes.

Retries (deliberate differences, docs/differences.md): a connection-layer retry is
announced on stderr in one line, as Gemini CLI's warning without the stack. After a
mid-stream retry the text of the failed attempt is not shown twice (``RetriedText``):
``-o json`` answers the successful attempt's text; ``-o text`` and ``stream-json``
skip what the new attempt repeats, and when it says something else they first say that
the text shown is discarded (a ``[WARNING]`` line on stderr, an ``error`` event of
severity ``warning``).
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO

import attrs

from actors.common import strip_ansi, token_count
from actors.frontends.headless._retried_text import RetriedText, Shown, discard_notice
from actors.gateway import retry_notice
from bus.json_values import thaw
from bus.messages import (
    BatchSettled,
    GenerateRequest,
    HookRan,
    ModelChunk,
    ModelFailed,
    ModelFinished,
    ModelRetrying,
    ModelSelected,
    ScheduleBatch,
    StreamRetried,
    TextStreamed,
    ToolCallRequested,
    TurnEnded,
    TurnError,
    TurnNotice,
)

if TYPE_CHECKING:
    from bus.messages import Message  # the union: imported when first used (bus.messages)

TOKEN_KEYS = ("input", "prompt", "candidates", "total", "cached", "thoughts", "tool")
DECISIONS = ("accept", "reject", "modify", "auto_accept")


def iso_now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _tokens() -> dict[str, int]:
    return dict.fromkeys(TOKEN_KEYS, 0)


@attrs.define
class Stats:
    """Gemini CLI's SessionMetrics, fed by bus messages."""

    models: dict[str, Any] = attrs.field(factory=dict)
    tools: dict[str, Any] = attrs.field(
        factory=lambda: {
            "totalCalls": 0,
            "totalSuccess": 0,
            "totalFail": 0,
            "totalDurationMs": 0,
            "totalDecisions": dict.fromkeys(DECISIONS, 0),
            "byName": {},
        }
    )
    files: dict[str, int] = attrs.field(factory=lambda: {"totalLinesAdded": 0, "totalLinesRemoved": 0})
    _requests: dict[str, GenerateRequest] = attrs.field(factory=dict)
    _usage: dict[str, Any] = attrs.field(factory=dict)

    def on_request(self, req: GenerateRequest) -> None:
        self._requests[req.request_id] = req

    def on_chunk(self, chunk: ModelChunk) -> None:
        usage = chunk.chunk.get("usageMetadata") if isinstance(chunk.chunk, dict) else None
        if isinstance(usage, dict):
            self._usage[chunk.request_id] = usage

    def _model_entry(self, model: str) -> dict[str, Any]:
        entry: dict[str, Any] = self.models.setdefault(
            model,
            {
                "api": {"totalRequests": 0, "totalErrors": 0, "totalLatencyMs": 0, "errorsByType": {}},
                "tokens": _tokens(),
                "roles": {},
            },
        )
        return entry

    def on_invalid_stream(self, request_id: str, kind: str) -> None:
        """An invalid stream counts an error of its type, not a request (as Gemini CLI)."""
        req = self._requests.pop(request_id, None)
        self._usage.pop(request_id, None)
        m = self._model_entry(req.model if req else "")
        m["api"]["totalErrors"] += 1
        by_type = m["api"]["errorsByType"]
        by_type[kind] = by_type.get(kind, 0) + 1

    def on_done(self, request_id: str, model: str, latency_ms: int, failed: bool, error_type: str = "") -> None:
        req = self._requests.pop(request_id, None)
        usage = self._usage.pop(request_id, None) or {}
        if req is not None and req.role == "token_counter":
            return  # Gemini CLI's countTokens calls are not logged, so not in its stats
        role = _role_name(req.role if req else "main")
        if failed and req is not None:
            model = req.model
        m = self._model_entry(model)
        r = m["roles"].setdefault(
            role, {"totalRequests": 0, "totalErrors": 0, "totalLatencyMs": 0, "tokens": _tokens()}
        )
        for bucket in (m["api"], r):
            bucket["totalRequests"] += 1
            bucket["totalLatencyMs"] += latency_ms
            if failed:
                bucket["totalErrors"] += 1
        if failed:
            by_type = m["api"]["errorsByType"]
            by_type[error_type] = by_type.get(error_type, 0) + 1
        if usage:
            prompt = token_count(usage.get("promptTokenCount"))
            cached = token_count(usage.get("cachedContentTokenCount"))
            add = {
                "input": max(0, prompt - cached),
                "prompt": prompt,
                "candidates": token_count(usage.get("candidatesTokenCount")),
                "total": token_count(usage.get("totalTokenCount")),
                "cached": cached,
                "thoughts": token_count(usage.get("thoughtsTokenCount")),
                "tool": token_count(usage.get("toolUsePromptTokenCount")),
            }
            for bucket in (m["tokens"], r["tokens"]):
                for k, v in add.items():
                    bucket[k] += v

    def on_settled(self, settled: BatchSettled) -> None:
        t = self.tools
        executions = [run for call in settled.calls for run in (*call.replaced, call)]
        for call in executions:
            t["totalCalls"] += 1
            ok = call.status != "error"
            t["totalSuccess" if ok else "totalFail"] += 1
            t["totalDurationMs"] += call.duration_ms
            by = t["byName"].setdefault(
                call.name,
                {"count": 0, "success": 0, "fail": 0, "durationMs": 0, "decisions": dict.fromkeys(DECISIONS, 0)},
            )
            by["count"] += 1
            by["success" if ok else "fail"] += 1
            by["durationMs"] += call.duration_ms
            if call.decision in DECISIONS:
                t["totalDecisions"][call.decision] += 1
                by["decisions"][call.decision] += 1
            display = thaw(call.result_display)
            if call.status == "success" and isinstance(display, dict):
                diff = display.get("diffStat")
                if isinstance(diff, dict):
                    self.files["totalLinesAdded"] += int(diff.get("model_added_lines") or 0)
                    self.files["totalLinesRemoved"] += int(diff.get("model_removed_lines") or 0)

    def session_metrics(self) -> dict[str, Any]:
        return {"models": self.models, "tools": self.tools, "files": self.files}

    def stream_stats(self, duration_ms: int) -> dict[str, Any]:
        total = {"total_tokens": 0, "input_tokens": 0, "output_tokens": 0, "cached": 0, "input": 0}
        models: dict[str, Any] = {}
        for name, m in self.models.items():
            tok = m["tokens"]
            entry = {
                "total_tokens": tok["total"],
                "input_tokens": tok["prompt"],
                "output_tokens": tok["candidates"],
                "cached": tok["cached"],
                "input": tok["input"],
            }
            models[name] = entry
            for k in total:
                total[k] += entry[k]
        return {
            **total,
            "duration_ms": duration_ms,
            "tool_calls": self.tools["totalCalls"],
            "models": models,
        }


def _role_name(role: str) -> str:
    return {"classifier": "utility_router", "compressor": "utility_compressor"}.get(role, role)


class HeadlessPrinter:
    """Writes one headless run's output in Gemini CLI's format."""

    def __init__(
        self,
        fmt: str,
        stdout: TextIO,
        stderr: TextIO,
        *,
        session_id: str,
        requested_model: str,
        clock_ms: Callable[[], float],
        raw_output: bool = False,
        max_attempts: int | None = None,
    ) -> None:
        self.fmt = fmt
        self.out = stdout
        self.err = stderr
        self.session_id = session_id
        self.requested_model = requested_model
        self.clock_ms = clock_ms
        self.started_ms = clock_ms()
        self.raw = raw_output
        self.stats = Stats()
        self.response_text: list[str] = []
        self.warnings: list[str] = []
        self.invalid_stream: str | None = None
        self._at_line_start = True
        self.model: str = requested_model
        self.stop_message: str | None = None
        self.max_attempts = max_attempts
        """The connection layer's attempts (``general.maxAttempts``), for retry notices."""
        self._retried = RetriedText()
        self._retry_reason = ""
        self._response_start = 0
        """Where the current response's text starts in ``response_text``."""

    # -- writing -------------------------------------------------------------------
    def emit(self, event: dict[str, Any]) -> None:
        line = {"type": event.pop("type"), "timestamp": iso_now(), **event}
        self.out.write(json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n")
        self.out.flush()

    def write_text(self, text: str) -> None:
        if not text:
            return
        self.out.write(text)
        self.out.flush()
        self._at_line_start = text.endswith("\n")

    def ensure_newline(self) -> None:
        if not self._at_line_start:
            self.write_text("\n")

    # -- the run ---------------------------------------------------------------------
    def start(self) -> None:
        if self.fmt == "stream-json":
            self.emit({"type": "init", "session_id": self.session_id, "model": self.requested_model})

    def user_message(self, user_input: str) -> None:
        if self.fmt == "stream-json":
            self.emit({"type": "message", "role": "user", "content": user_input})

    def on_descendant(self, msg: Message) -> None:
        """A message of a subagent's session: it counts in the stats (as Gemini CLI's
        global telemetry counts its subagents' requests and tool calls), nothing else."""
        match msg:
            case BatchSettled():
                self.stats.on_settled(msg)
            case GenerateRequest():
                self.stats.on_request(msg)
            case ModelChunk() | ModelFinished() | ModelFailed():
                self.on(msg)  # only the stats see these
            case ModelRetrying():
                self._announce_retry(msg)
            case _:
                pass

    def on(self, msg: Message) -> None:
        match msg:
            case GenerateRequest():
                self.stats.on_request(msg)
                if msg.role == "main":
                    self._end_response()
            case HookRan():
                out = thaw(msg.output)
                if isinstance(out, dict) and out.get("systemMessage") and not out.get("suppressOutput"):
                    if msg.event == "SessionStart":
                        self.err.write(f"{out['systemMessage']}\n")
                    self.err.write(f"Hook system message: {out['systemMessage']}\n")
            case ModelChunk():
                self.stats.on_chunk(msg)
            case ModelFinished():
                self.stats.on_done(msg.request_id, msg.model, msg.latency_ms, failed=False)
            case ModelFailed():
                if msg.error.invalid_stream is not None:
                    self.stats.on_invalid_stream(msg.request_id, msg.error.invalid_stream)
                else:
                    error_type = msg.error.type if msg.error.type not in ("unknown", "") else "Error"
                    self.stats.on_done(msg.request_id, msg.model, 0, failed=True, error_type=error_type)
            case ModelSelected():
                self.model = msg.model
            case ModelRetrying():
                self._announce_retry(msg)
            case StreamRetried():
                self._retried.retry()
                self._retry_reason = msg.reason
            case TextStreamed():
                text = msg.text if self.raw else strip_ansi(msg.text)
                step = self._retried.feed(text) if text else None
                if step is not None:
                    self._show(step)
            case ToolCallRequested():
                if self.fmt == "stream-json":
                    self.emit(
                        {
                            "type": "tool_use",
                            "tool_name": msg.name,
                            "tool_id": msg.call_id,
                            "parameters": thaw(msg.args),
                        }
                    )
            case ScheduleBatch():
                self._end_response()
                if self.fmt == "text":
                    self.ensure_newline()
            case BatchSettled():
                self.stats.on_settled(msg)
                # -o json reports the text after the last tool batch only (Gemini CLI
                # resets it on each round of its tool loop).
                self.response_text = []
                self._response_start = 0
                for call in msg.calls:
                    if call.error_type == "stop_execution" and call.error_message:
                        self.stop_message = call.error_message
                    if call.status == "error":
                        display = thaw(call.result_display)
                        shown = display if isinstance(display, str) and display else call.error_message
                        self.err.write(f"Error executing tool {call.name}: {shown}\n")
                if self.fmt == "stream-json":
                    for call in msg.calls:
                        event: dict[str, Any] = {
                            "type": "tool_result",
                            "tool_id": call.call_id,
                            "status": "error" if call.status == "error" else "success",
                        }
                        display = thaw(call.result_display)
                        if isinstance(display, str):
                            event["output"] = display
                        if call.error_message is not None and call.status == "error":
                            event["error"] = {
                                "type": call.error_type or "TOOL_EXECUTION_ERROR",
                                "message": call.error_message,
                            }
                        self.emit(event)
            case TurnNotice():
                self._notice(msg)
            case TurnEnded():
                self._end_response()
            case _:
                pass

    def _announce_retry(self, msg: ModelRetrying) -> None:
        """A connection-layer retry, on stderr in every format (as Gemini CLI's warning;
        a mid-stream retry shows only through the text, as in Gemini CLI)."""
        if not msg.mid_stream:
            self.err.write(retry_notice(msg.attempt, msg.delay_s, msg.reason, max_attempts=self.max_attempts) + "\n")
            self.err.flush()

    def _end_response(self) -> None:
        shown = self._retried.end()
        if shown is not None:
            self._show(shown)
        self._response_start = len(self.response_text)

    def _show(self, shown: Shown) -> None:
        """Text of the response to show, after saying (when the retried stream said
        something else) that the text shown before it is discarded."""
        if shown.diverged:
            notice = discard_notice(self._retry_reason)
            if self.fmt == "stream-json":
                self.emit({"type": "error", "severity": "warning", "message": notice})
            elif self.fmt == "json":
                del self.response_text[self._response_start :]
            else:
                self.ensure_newline()
                self.err.write(f"[WARNING] {notice}\n")
                self.err.flush()
        if not shown.text:
            return
        if self.fmt == "stream-json":
            self.emit({"type": "message", "role": "assistant", "content": shown.text, "delta": True})
        elif self.fmt == "json":
            self.response_text.append(shown.text)
        else:
            self.write_text(shown.text)

    def _notice(self, msg: TurnNotice) -> None:
        """Gemini CLI's headless handling of each turn event (nonInteractiveCli.ts)."""
        text = msg.message
        if msg.kind == "invalid_stream":
            self.invalid_stream = text
            if self.fmt == "stream-json":
                self.emit({"type": "error", "severity": "error", "message": text})
            elif self.fmt == "text":
                self.err.write(f"[ERROR] {text}\n")
        elif msg.kind == "agent_stopped":
            if self.fmt == "text":
                self.err.write(f"{text}\n")
            self.warnings.append(text)
        elif msg.kind == "agent_blocked":
            if self.fmt == "text":
                self.err.write(f"[WARNING] {text}\n")
            elif self.fmt == "stream-json":
                self.emit({"type": "error", "severity": "warning", "message": strip_ansi(text)})
            self.warnings.append(text)
        elif msg.kind in ("chat_compressed", "context_window_will_overflow"):
            pass  # headless Gemini CLI shows neither
        else:  # loop_detected, max_session_turns
            if self.fmt == "stream-json":
                self.emit({"type": "error", "severity": msg.severity, "message": text})
            self.warnings.append(text)

    def finish(self, ended: TurnEnded) -> int:
        """Write the closing output for the turn's end; returns the exit code."""
        if ended.error is not None:
            return self.fail(ended.error)
        if ended.stop_reason == "stop_execution" and self.stop_message and self.fmt == "text":
            self.err.write(f"Agent execution stopped: {self.stop_message}\n")
        return self.succeed()

    def _duration(self) -> int:
        return int(self.clock_ms() - self.started_ms)

    def succeed(self) -> int:
        if self.fmt == "stream-json":
            self.emit(
                {
                    "type": "result",
                    "status": "error" if self.invalid_stream else "success",
                    "stats": self.stats.stream_stats(self._duration()),
                }
            )
        elif self.fmt == "json":
            doc: dict[str, Any] = {
                "session_id": self.session_id,
                "response": "".join(self.response_text),
                "stats": self.stats.session_metrics(),
            }
            if self.warnings:
                doc["warnings"] = self.warnings
            if self.invalid_stream:
                doc["error"] = {"type": "INVALID_STREAM", "message": self.invalid_stream}
            self.write_text(json.dumps(doc, indent=2, ensure_ascii=False))
        else:
            self.ensure_newline()
        return 0

    def fail(self, error: TurnError) -> int:
        """A fatal error: Gemini CLI's error result, stderr object or message."""
        code = error.exit_code
        if error.kind == "api":
            message = f"[API Error: {error.message}]"
            err_type = "unknown"
            if error.status is not None and self.fmt != "text":
                code = error.status  # Gemini CLI exits with a numeric API status
        elif error.kind == "fatal_tool":
            message = error.message
            err_type = error.type
        else:
            message = error.message
            err_type = error.type
        if self.fmt == "stream-json":
            self.emit(
                {
                    "type": "result",
                    "status": "error",
                    "error": {"type": err_type, "message": message},
                    "stats": self.stats.stream_stats(0),
                }
            )
        elif self.fmt == "json":
            self.write_json_error(
                "Error" if error.kind == "api" else error.type,
                error.message,
                code if error.kind == "api" else (error.type if error.kind == "fatal_tool" else code),
            )
        else:
            self.ensure_newline()
            if error.kind == "api":
                # Gemini CLI then prints "An unexpected critical error occurred:[object Object]"
                # (it stringifies an object); the line above already says what happened.
                self.err.write(f"Error when talking to Gemini API: {error.message}\n")
            elif error.kind in ("turn_limit", "cancelled"):
                self.err.write(f"{error.message}\n[ERROR] {error.message}\n")
            else:
                self.err.write(f"{error.message}\n")
        return _exit_code(code)

    def write_json_error(self, type_name: str, message: str, code: Any) -> None:
        """The JSON error object Gemini CLI writes to stderr in ``-o json`` mode."""
        doc = {"session_id": self.session_id, "error": {"type": type_name, "message": message, "code": code}}
        self.err.write(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
        self.err.flush()


def _exit_code(code: Any) -> int:
    return code & 0xFF if isinstance(code, int) else 1
