"""The built-in tools declared from the cache (``actors.tools._declared``), as a user's
``agentbus -p`` runs them: a second run in the same home declares them without importing
their modules, a tool call then runs the real tool with the same result as a run
without the cache, and a changed tool source is declared afresh."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from actors.tools import _declared, builtin_tools
from actors.tools._declared import DeclaredTool, declared_tools
from tests.frontends.daemon._helpers import call_response, text_response, write_responses

ROOT = Path(__file__).resolve().parents[2]
TOOL_MODULES = (
    "actors.tools._files",
    "actors.tools._shell",
    "actors.tools._read_file",
    "actors.tools._web_fetch",
    "actors.tools._agents",
    "actors.tools._write_file",  # not even for the plans directory a session's start asks for
    "actors.tools._jsdiff",
)
CODE = (
    "import atexit, sys\n"
    "from actors.frontends import main\n"
    "watched = sys.argv[1].split(',')\n"
    "sys.argv = ['agentbus', *sys.argv[2:]]\n"
    "atexit.register(lambda: print('imported:', *(m for m in watched if m in sys.modules), file=sys.stderr, flush=True))\n"
    "main()\n"
)
"""``agentbus`` as its entry point runs it, saying at exit (its ``atexit`` functions run
before it leaves) which of the watched modules it imported."""


def _agentbus(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``agentbus args...`` as its own process (``main()`` reading ``sys.argv``), in ``home``."""
    env = {**os.environ, "HOME": str(home), "GEMINI_CLI_HOME": str(home), "AGENTBUS_DATA_DIR": str(home / "data")}
    env.pop("XDG_CACHE_HOME", None)
    return subprocess.run(
        [sys.executable, "-c", CODE, ",".join(TOOL_MODULES), *args],
        cwd=home / "ws", env=env, capture_output=True, text=True, timeout=60, check=False,
    )


def _imported(done: subprocess.CompletedProcess[str]) -> list[str]:
    line = [ln for ln in done.stderr.splitlines() if ln.startswith("imported:")][-1]
    return line.split()[1:]


def test_a_second_run_declares_the_tools_without_importing_them(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    hi = str(ROOT / "scenarios" / "bench" / "hi.responses")
    first = _agentbus(tmp_path, "-p", "hi", "-m", "gemini-2.5-flash", "--fake-responses", hi, "-o", "json")
    assert first.returncode == 0, first.stderr
    assert set(_imported(first)) == set(TOOL_MODULES)  # made to declare them, and kept
    assert list((tmp_path / ".cache" / "agentbus").glob("tools-*.marshal"))
    second = _agentbus(tmp_path, "-p", "hi", "-m", "gemini-2.5-flash", "--fake-responses", hi, "-o", "json")
    assert second.returncode == 0, second.stderr
    assert _imported(second) == []
    assert json.loads(second.stdout)["response"] == json.loads(first.stdout)["response"]


def test_a_declared_tool_runs_the_real_one(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("milk\neggs\n")
    fake = write_responses(
        tmp_path / "f.responses", call_response("read_file", {"file_path": "notes.txt"}), text_response("done")
    )
    args = ("-p", "read my notes", "-m", "gemini-2.5-flash", "--fake-responses", str(fake), "-o", "stream-json", "--yolo")

    def results(done: subprocess.CompletedProcess[str]) -> list[dict[str, object]]:
        assert done.returncode == 0, done.stderr
        events = [json.loads(line) for line in done.stdout.splitlines()]
        return [{k: v for k, v in e.items() if k not in ("timestamp", "tool_id")} for e in events if e["type"] == "tool_result"]

    uncached = results(_agentbus(tmp_path, *args))  # builds the tools and keeps them
    cached = _agentbus(tmp_path, *args)
    assert set(_imported(cached)) >= {"actors.tools._read_file"}  # made by the call
    assert results(cached) == uncached and uncached[0]["status"] == "success"


def test_declared_tools_answer_as_the_real_ones_and_a_changed_source_declares_afresh(tmp_path: Path) -> None:
    real = builtin_tools("gemini-2.5-flash", agents=True)
    _declared.reuse_declared_tools(str(tmp_path / "tools.marshal"))
    try:
        key = ("gemini-2.5-flash", False, True)

        def build() -> tuple[object, ...]:
            return real  # type: ignore[return-value]

        assert declared_tools(key, build) == real  # nothing kept yet: built
        _declared._stored = None  # the next process
        declared = declared_tools(key, build)
        assert all(type(t) is DeclaredTool for t in declared)
        assert [(t.name, t.display_name, t.kind, t.declaration("gemini-2.5-flash")) for t in declared] == [
            (t.name, t.display_name, t.kind, t.declaration("gemini-2.5-flash")) for t in real
        ]
        assert _declared.loaded_tool(declared[0]) is None  # never made: nothing to release
        assert _declared.real_tool(declared[0]) is real[0] and _declared.loaded_tool(declared[1]) is real[1]
        # A source the entry was made from changed: declared afresh (built again).
        entry = next(iter(_declared._entries().values()))
        stamps = [list(s) for s in entry[0]]
        stamps[0][1] -= 1
        assert not _declared._unchanged(stamps) and _declared._unchanged(entry[0])
        _declared._stored = None
        entries = _declared._entries()
        text = next(iter(entries))
        entries[text] = ([tuple(s) for s in stamps], entry[1])
        assert declared_tools(key, build) == real
    finally:
        _declared._path = None
        _declared._stored = None


def test_a_cache_of_another_shape_or_version_is_as_good_as_none(tmp_path: Path) -> None:
    import marshal

    path = tmp_path / "tools.marshal"
    real = builtin_tools("gemini-2.5-flash")
    _declared.reuse_declared_tools(str(path))
    try:
        key = ("gemini-2.5-flash", False, False)
        declared_tools(key, lambda: real)  # kept
        ((text, (stamps, rows)),) = marshal.loads(path.read_bytes()).items()
        for broken in ((stamps, [(*row, "a later field") for row in rows]), 5, (stamps, None)):
            path.write_bytes(marshal.dumps({text: broken}))
            _declared._stored = None
            assert declared_tools(key, lambda: real) == real  # built, not crashed
        # A name this version does not make (another version's entry): its use is an
        # error of that use, and what asks with a default gets the default.
        path.write_bytes(marshal.dumps({text: (stamps, [("no_such_tool", "X", "read", {"name": "no_such_tool"})])}))
        _declared._stored = None
        (ghost,) = declared_tools(key, lambda: real)
        assert ghost.name == "no_such_tool" and getattr(ghost, "close_session", None) is None
        assert _declared.loaded_tool(ghost) is None
        try:
            _declared.real_tool(ghost)
        except LookupError as exc:
            assert "no_such_tool" in str(exc)
        else:
            raise AssertionError("a tool this version does not make was made")
    finally:
        _declared._path = None
        _declared._stored = None


async def test_declared_tools_on_the_live_backend(tmp_path: Path) -> None:
    """``agentbus -p`` on the live backend (google-genai over HTTP to the fake Gemini
    server), twice in one home: the second run declares the tools from the cache the
    first kept; the model is sent the same declarations, and the call runs the real
    tool with the same result."""
    import trio

    from actors.gateway import FakeEntry
    from tests.fakes.gemini_server import FakeGeminiServer
    from tests.gateway.test_headless_live import agentbus
    from tests.gateway.test_live_faults import stream

    call = FakeEntry(
        "generateContentStream",
        [{"candidates": [{"content": {"role": "model", "parts": [{"functionCall": {"name": "read_file", "args": {"file_path": "notes.txt"}}}]}, "finishReason": "STOP"}]}],
        0,
    )
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "notes.txt").write_text("milk\neggs\n")
    runs = []
    for _ in range(2):
        server = FakeGeminiServer([call, stream("done")])
        async with trio.open_nursery() as nursery:
            await nursery.start(server.run)
            env = {"GEMINI_API_KEY": "not-a-key", "GOOGLE_GEMINI_BASE_URL": server.base_url}
            run = await agentbus(tmp_path, "-p", "read my notes", "-m", "gemini-2.5-flash", "-o", "stream-json", "--yolo", env=env)
            nursery.cancel_scope.cancel()
        assert run.code == 0, run.stderr
        results = [{k: v for k, v in e.items() if k not in ("timestamp", "tool_id")} for e in run.events() if e["type"] == "tool_result"]
        runs.append((results, [r.body.get("tools") for r in server.requests]))
        assert list((tmp_path / "home" / ".cache" / "agentbus").glob("tools-*.marshal"))
    (first_results, first_tools), (second_results, second_tools) = runs
    assert first_results == second_results and first_results[0]["status"] == "success"
    assert first_tools == second_tools and first_tools[0]
