"""A scripted ACP client for in-process tests: JSON-RPC over trio memory streams.

It records, in arrival order, everything the agent sends (updates, requests, the
answers to our requests), answers ``session/request_permission`` and ``fs/*`` by
policy, and lets a test wait for a given frame without sleeping.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio
import trio.testing

from actors.frontends.acp._server import AcpServer
from actors.frontends.acp._session import AcpOptions


def _read_or_none(path: str) -> str | None:
    try:
        return Path(path).read_text()
    except FileNotFoundError:
        return None


class RpcFailure(Exception):
    def __init__(self, error: Mapping[str, Any]) -> None:
        super().__init__(error.get("message"))
        self.code = error.get("code")
        self.error = dict(error)


class Client:
    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self.log: list[dict[str, Any]] = []
        """Every frame the agent sent, in order."""
        self.permission: str | Callable[[dict[str, Any]], Any] = "proceed_once"
        """The optionId to choose, ``cancelled``, or a function of the request params."""
        self.files: dict[str, str] | None = None
        """None: the client offers no fs; else the editor's buffers (path -> text)."""
        self.missing_file_error = True
        """Answer a read of a missing file with -32002 (else with "")."""
        self._ids = itertools.count(100)
        self._waiting: dict[int, trio.MemorySendChannel[dict[str, Any]]] = {}
        self._changed = trio.Event()
        self._buf = b""

    # -- sending ---------------------------------------------------------------------------
    async def send_raw(self, data: bytes) -> None:
        await self.stream.send_all(data)

    async def send(self, frame: dict[str, Any]) -> None:
        await self.send_raw(json.dumps(frame).encode() + b"\n")

    async def call(self, method: str, params: Any = None) -> Any:
        """Send a request, wait for its answer (``RpcFailure`` for an error)."""
        rid = next(self._ids)
        send, receive = trio.open_memory_channel[dict[str, Any]](1)
        self._waiting[rid] = send
        await self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params if params is not None else {}})
        answer = await receive.receive()
        if "error" in answer:
            raise RpcFailure(answer["error"])
        return answer["result"]

    async def notify(self, method: str, params: Any) -> None:
        await self.send({"jsonrpc": "2.0", "method": method, "params": params})

    async def initialize(self, *, fs: bool = False) -> Any:
        if fs and self.files is None:
            self.files = {}
        caps: dict[str, Any] = {"fs": {"readTextFile": fs, "writeTextFile": fs}}
        return await self.call("initialize", {"protocolVersion": 1, "clientCapabilities": caps})

    # -- receiving -------------------------------------------------------------------------
    async def run(self) -> None:
        async for data in self.stream:
            self._buf += data
            while b"\n" in self._buf:
                line, self._buf = self._buf.split(b"\n", 1)
                await self._handle(json.loads(line))

    async def _handle(self, frame: dict[str, Any]) -> None:
        self.log.append(frame)
        self._changed.set()
        self._changed = trio.Event()
        if "method" not in frame:
            waiter = self._waiting.pop(frame.get("id"), None)  # type: ignore[arg-type]
            if waiter is not None:
                waiter.send_nowait(frame)
            return
        if "id" not in frame:
            return
        method, params, rid = frame["method"], frame.get("params") or {}, frame["id"]
        reply: dict[str, Any]
        if method == "session/request_permission":
            choice = self.permission(params) if callable(self.permission) else self.permission
            if choice is None:
                return  # never answers
            outcome = {"outcome": "cancelled"} if choice == "cancelled" else {"outcome": "selected", "optionId": choice}
            reply = {"result": {"outcome": outcome}}
        elif method == "fs/read_text_file" and self.files is not None:
            path = params["path"]
            if path in self.files:
                reply = {"result": {"content": self.files[path]}}
            elif (disk := await trio.to_thread.run_sync(_read_or_none, path)) is not None:
                reply = {"result": {"content": disk}}
            elif self.missing_file_error:
                reply = {"error": {"code": -32002, "message": "Resource not found", "data": {"uri": path}}}
            else:
                reply = {"result": {"content": ""}}
        elif method == "fs/write_text_file" and self.files is not None:
            self.files[params["path"]] = params["content"]
            reply = {"result": {}}
        else:
            reply = {"error": {"code": -32601, "message": "Method not found"}}
        await self.send({"jsonrpc": "2.0", "id": rid, **reply})

    async def wait_for(self, predicate: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        seen = 0
        while True:
            for frame in self.log[seen:]:
                if predicate(frame):
                    return frame
            seen = len(self.log)
            await self._changed.wait()

    # -- views of the log ------------------------------------------------------------------
    def updates(self, sid: str | None = None) -> list[dict[str, Any]]:
        return [
            f["params"]["update"]
            for f in self.log
            if f.get("method") == "session/update" and (sid is None or f["params"]["sessionId"] == sid)
        ]

    def sequence(self) -> list[str]:
        """Labels like the kit's: ``kind[:status[:toolKind]]`` for updates, method names
        for the agent's requests."""
        out = []
        for f in self.log:
            if f.get("method") == "session/update":
                u = f["params"]["update"]
                bits = [u["sessionUpdate"]] + [str(u[k]) for k in ("status", "kind") if k in u and u["sessionUpdate"].startswith("tool_call")]
                out.append(":".join(bits))
            elif "method" in f and "id" in f:
                out.append(f["method"])
        return out

    def clear(self) -> None:
        self.log.clear()


@asynccontextmanager
async def connected(options: AcpOptions, **server_kwargs: Any) -> AsyncIterator[tuple[Client, AcpServer]]:
    """An ``AcpServer`` on one end of a memory stream pair, a ``Client`` on the other.
    Leaving the block closes the client's side (end of input) and waits for the server
    to shut down."""
    ours, theirs = trio.testing.memory_stream_pair()
    server = AcpServer(theirs, theirs, options, **server_kwargs)
    client = Client(ours)
    stopped = trio.Event()

    async def run_server() -> None:
        try:
            await server.run()
        finally:
            stopped.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run_server)
        nursery.start_soon(client.run)
        try:
            yield client, server
        finally:
            with trio.fail_after(10):
                await ours.send_stream.aclose()
                await stopped.wait()
            nursery.cancel_scope.cancel()


def fake_responses(path: Path, *responses: list[dict[str, Any]]) -> Path:
    """A Gemini CLI fake-responses file: one model call per argument (its chunks)."""
    path.write_text(
        "".join(json.dumps({"method": "generateContentStream", "response": chunks}) + "\n" for chunks in responses)
    )
    return path


def text_chunks(*texts: str, prompt_tokens: int = 10, output_tokens: int = 2) -> list[dict[str, Any]]:
    chunks: list[dict[str, Any]] = [
        {"candidates": [{"content": {"role": "model", "parts": [{"text": t}]}, "index": 0}]} for t in texts
    ]
    chunks[-1]["candidates"][0]["finishReason"] = "STOP"
    chunks[-1]["usageMetadata"] = {
        "promptTokenCount": prompt_tokens,
        "candidatesTokenCount": output_tokens,
        "totalTokenCount": prompt_tokens + output_tokens,
    }
    return chunks


def call_chunks(*calls: tuple[str, dict[str, Any]], text: str | None = None) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = [{"text": text}] if text else []
    parts += [{"functionCall": {"name": name, "args": args}} for name, args in calls]
    return [
        {
            "candidates": [{"content": {"role": "model", "parts": parts}, "index": 0, "finishReason": "STOP"}],
            "usageMetadata": {"promptTokenCount": 20, "candidatesTokenCount": 5, "totalTokenCount": 25},
        }
    ]
