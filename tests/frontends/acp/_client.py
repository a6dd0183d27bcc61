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


INFO_UPDATES = frozenset({"session_info_update", "usage_update"})
"""About the session, not the turn's stream: left out of ``updates()`` and
``sequence()`` (tests of them ask for them)."""


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
        self.terminals: Terminals | None = None
        """None: the client offers no terminals."""
        self._nursery: trio.Nursery | None = None
        self._send_lock = trio.Lock()
        self._ids = itertools.count(100)
        self._waiting: dict[int, trio.MemorySendChannel[dict[str, Any]]] = {}
        self._changed = trio.Event()
        self._buf = b""

    # -- sending ---------------------------------------------------------------------------
    async def send_raw(self, data: bytes) -> None:
        async with self._send_lock:  # terminal answers are sent from their own tasks
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

    async def initialize(self, *, fs: bool = False, terminal: bool = False) -> Any:
        if fs and self.files is None:
            self.files = {}
        if terminal and self.terminals is None:
            self.terminals = Terminals()
        caps: dict[str, Any] = {"fs": {"readTextFile": fs, "writeTextFile": fs}, "terminal": terminal}
        return await self.call("initialize", {"protocolVersion": 1, "clientCapabilities": caps})

    # -- receiving -------------------------------------------------------------------------
    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            await self._read()
            nursery.cancel_scope.cancel()

    async def _read(self) -> None:
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
        elif method.startswith("terminal/") and self.terminals is not None:
            # Answered in its own task: wait_for_exit waits, the others must not.
            assert self._nursery is not None
            self._nursery.start_soon(self._terminal, rid, method, params)
            return
        else:
            reply = {"error": {"code": -32601, "message": "Method not found"}}
        await self.send({"jsonrpc": "2.0", "id": rid, **reply})

    async def _terminal(self, rid: Any, method: str, params: dict[str, Any]) -> None:
        assert self.terminals is not None
        self.terminals._nursery = self._nursery
        try:
            result = await self.terminals.serve(method, params)
            reply: dict[str, Any] = {"result": result}
        except KeyError as exc:
            reply = {"error": {"code": -32602, "message": f"no terminal {exc}"}}
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
    def updates(self, sid: str | None = None, *, info: bool = False) -> list[dict[str, Any]]:
        """The session updates, without the session's title and context usage
        (``session_info_update``, ``usage_update``) unless ``info``."""
        return [
            f["params"]["update"]
            for f in self.log
            if f.get("method") == "session/update"
            and (sid is None or f["params"]["sessionId"] == sid)
            and (info or f["params"]["update"]["sessionUpdate"] not in INFO_UPDATES)
        ]

    def sequence(self) -> list[str]:
        """Labels like the kit's: ``kind[:status[:toolKind]]`` for updates (not
        ``INFO_UPDATES``), method names for the agent's requests."""
        out = []
        for f in self.log:
            if f.get("method") == "session/update":
                u = f["params"]["update"]
                if u["sessionUpdate"] in INFO_UPDATES:
                    continue
                bits = [u["sessionUpdate"]] + [str(u[k]) for k in ("status", "kind") if k in u and u["sessionUpdate"].startswith("tool_call")]
                out.append(":".join(bits))
            elif "method" in f and "id" in f:
                out.append(f["method"])
        return out

    def clear(self) -> None:
        self.log.clear()


class Terminals:
    """An editor's terminals for ``terminal/*``: real processes (no pty), output kept,
    every request logged (``calls``)."""

    def __init__(self) -> None:
        self.procs: dict[str, trio.Process] = {}
        self.output: dict[str, bytearray] = {}
        self.done: dict[str, trio.Event] = {}
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.released: set[str] = set()
        self._ids = itertools.count(1)
        self._nursery: trio.Nursery | None = None

    async def serve(self, method: str, params: dict[str, Any]) -> Any:
        self.calls.append((method, params))
        if method == "terminal/create":
            return await self.create(params)
        tid = params["terminalId"]
        proc = self.procs[tid]
        if method == "terminal/output":
            return {"output": self.output[tid].decode("utf-8", "replace"), "truncated": False, **self.status(proc)}
        if method == "terminal/wait_for_exit":
            await self.done[tid].wait()
            return self.status(proc).get("exitStatus", {})
        if method == "terminal/kill":
            self.kill(tid)
            return {}
        if method == "terminal/release":
            self.kill(tid)
            self.released.add(tid)
            del self.procs[tid]
            return {}
        raise KeyError(method)

    async def create(self, params: dict[str, Any]) -> Any:
        import os
        import subprocess

        tid = f"term-{next(self._ids)}"
        env = {**os.environ, **{v["name"]: v["value"] for v in params.get("env", [])}}
        proc = await trio.lowlevel.open_process(
            [params["command"], *params.get("args", [])],
            cwd=params.get("cwd"),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.procs[tid], self.output[tid], self.done[tid] = proc, bytearray(), trio.Event()
        assert self._nursery is not None
        self._nursery.start_soon(self._pump, tid, proc)
        return {"terminalId": tid}

    async def _pump(self, tid: str, proc: trio.Process) -> None:
        assert proc.stdout is not None
        async for chunk in proc.stdout:
            self.output[tid] += chunk
        await proc.wait()
        self.done[tid].set()

    @staticmethod
    def status(proc: trio.Process) -> dict[str, Any]:
        import signal

        rc = proc.returncode
        if rc is None:
            return {}
        if rc < 0:
            return {"exitStatus": {"exitCode": None, "signal": signal.Signals(-rc).name}}
        return {"exitStatus": {"exitCode": rc, "signal": None}}

    def kill(self, tid: str) -> None:
        import os
        import signal

        proc = self.procs.get(tid)
        if proc is not None and proc.returncode is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


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
