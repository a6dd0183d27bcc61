"""agentbus and Gemini CLI 0.61.0 side by side on the same MCP servers, each a real
process talking to its own fake Gemini server over HTTP (agentbus's live backend: the
google-genai SDK), with the same script of model answers. Scenarios: a trusted stdio
server (tests/fakes/mcp_names_server.py: tool names to sanitise, a text, an error and an
image result, a schema with definitions and a nullable field, empty, structured and
media content, arguments that fail the schemas, the server's environment);
``includeTools``/``excludeTools`` and an untrusted server (headless: its tools not
offered); ``@modelcontextprotocol/server-everything`` when installed (annotated content
with an image, resource links, structured content, the server's own refusal); remote
servers over ``httpUrl``, SSE and a ``url`` without type.

Compared, in ``-o text``, ``-o json`` and ``-o stream-json``: the tools declared to the
model (names, descriptions, schemas), the function responses that went back to it, the
order of the API calls, and stdout (ids, times, durations and token counts aside; the
session's own ids as ordinals). Gemini CLI is run by this test: it skips saying why when
Gemini CLI 0.61.0 is not installed (``GEMINI_CLI_BIN``, ``/tmp/gemini-cli`` as ``make
bench`` finds it, or the ACP kit's ``.npm-acp/gemini``).
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from actors.gateway import FakeEntry
from tests.fakes.gemini_server import FakeGeminiServer, RecordedRequest
from tests.fakes.mcp_everything import INSTALL, REQUIRED, find_everything
from tests.mcp.test_transports import free_port, web_server

ROOT = Path(__file__).resolve().parents[3]
AGENTBUS = Path(sys.executable).with_name("agentbus")
SERVER = ROOT / "tests" / "fakes" / "mcp_names_server.py"
VERSION = "0.61.0"
MODES = ("text", "json", "stream-json")
BOUND_S = 90
"""Only against hangs: a run takes 1-3 s."""


def gemini_cli() -> Path:
    """Gemini CLI 0.61.0's ``gemini``, or a skip saying where it was looked for."""
    candidates = [
        os.environ.get("GEMINI_CLI_BIN", ""),
        "/tmp/gemini-cli/node_modules/.bin/gemini",
        str(ROOT / ".npm-acp" / "gemini" / "node_modules" / ".bin" / "gemini"),
        shutil.which("gemini") or "",
    ]
    for candidate in filter(None, candidates):
        path = Path(candidate)
        if not path.is_file():
            continue
        package = path.resolve().parent.parent / "package.json"
        version = json.loads(package.read_text()).get("version") if package.is_file() else None
        if version == VERSION:
            return path
    pytest.skip(
        f"Gemini CLI {VERSION} is not installed (set GEMINI_CLI_BIN, or: cd /tmp/gemini-cli && "
        f"npm install @google/gemini-cli@{VERSION}); the side-by-side MCP runs need it"
    )


if shutil.which("node") is None:
    pytestmark = pytest.mark.skip(reason="node is not on PATH: Gemini CLI cannot run")


def call(*calls: tuple[str, dict[str, Any]]) -> tuple[str, Any]:
    parts = [{"functionCall": {"name": name, "args": args}} for name, args in calls]
    return ("generateContentStream", [{"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP"}]}])


def text(answer: str) -> tuple[str, Any]:
    content = {"role": "model", "parts": [{"text": answer}]}
    return ("generateContentStream", [{"candidates": [{"content": content, "finishReason": "STOP"}]}])


COUNT = ("countTokens", {"totalTokens": 12})
"""Both count the tokens of a function response holding media before sending it."""

LONG = "mcp_names_a_tool_whose_name_is...sixty_three_characters_allowed"
NAMES = [
    "mcp_names_get_weather", "mcp_names_r_sum_.lookup", LONG, "mcp_names_fail-hard", "mcp_names_tiny:image",
    "mcp_names_plan_trip", "mcp_names_nothing", "mcp_names_forecast", "mcp_names_media", "mcp_names_variable",
    "mcp_names_refuse",
]


def names_server(*, trust: bool = True) -> dict[str, Any]:
    return {"names": {"command": sys.executable, "args": [str(SERVER)], "trust": trust}}


def everything_server() -> dict[str, Any]:
    found = find_everything()
    if found is None:
        if os.environ.get(REQUIRED):
            pytest.fail(f"{REQUIRED} is set (.ci/run installed it) but server-everything or node is not found")
        pytest.skip(f"@modelcontextprotocol/server-everything is not installed: {INSTALL}")
    return {"everything": {"command": str(found), "args": ["stdio"], "trust": True}}


@attrs.frozen
class Scenario:
    servers: Callable[[], dict[str, Any]]
    script: list[tuple[str, Any]]
    declared: list[str]
    """MCP tools both must declare (so that two runs that declare none cannot agree)."""


SCENARIOS = {
    "names-and-results": Scenario(
        names_server,
        [
            call(
                ("mcp_names_get_weather", {"city": "Paris"}),
                ("mcp_names_r_sum_.lookup", {"person": "Ada"}),
                (LONG, {}),
                ("mcp_names_fail-hard", {"reason": "no"}),
                ("mcp_names_tiny:image", {}),
                # arguments that fail the tools' schemas
                ("mcp_names_get_weather", {}),
                ("mcp_names_get_weather", {"city": 3}),
                ("mcp_names_fail-hard", {"why": "x"}),
                ("mcp_names_plan_trip", {"trip": {"city": "Rome", "nights": 2}, "budget": 300}),
                ("mcp_names_nothing", {}),
                ("mcp_names_forecast", {"city": "Oslo"}),
                ("mcp_names_media", {}),
                # what the server's environment has of its client's
                ("mcp_names_variable", {"name": "GEMINI_CLI"}),
                ("mcp_names_variable", {"name": "GEMINI_CLI_TRUST_WORKSPACE"}),
                ("mcp_names_variable", {"name": "GEMINI_API_KEY"}),
                ("mcp_names_refuse", {}),
            ),
            COUNT,
            text("Paris is sunny; the lookup worked; four calls failed."),
        ],
        NAMES,
    ),
    # includeTools (also as "name(...)"), excludeTools, which wins over it, and an untrusted
    # server. (Two servers
    # whose names sanitise alike are not compared: which one Gemini keeps is a race.)
    "filters": Scenario(
        lambda: {
            "a_b": {**names_server()["names"], "includeTools": ["get weather", "fail-hard(reason)", "media"]},
            "zz": {**names_server()["names"], "excludeTools": ["get weather"], "includeTools": ["get weather", "forecast"]},
            "un": names_server(trust=False)["names"],  # headless, an untrusted server's tools are not offered
        },
        [
            call(
                ("mcp_a_b_get_weather", {"city": "Paris"}),
                ("mcp_a_b_forecast", {"city": "Oslo"}),
                ("mcp_zz_forecast", {"city": "Oslo"}),
                ("mcp_zz_get_weather", {"city": "Oslo"}),
                ("mcp_un_get_weather", {"city": "Oslo"}),
            ),
            text("Done."),
        ],
        ["mcp_a_b_get_weather", "mcp_a_b_fail-hard", "mcp_a_b_media", "mcp_zz_forecast"],
    ),
    "everything": Scenario(  # the MCP project's test server: annotations, links, structured content
        everything_server,
        [
            call(
                ("mcp_everything_get-annotated-message", {"messageType": "error", "includeImage": True}),
                ("mcp_everything_get-resource-links", {"count": 3}),
                ("mcp_everything_get-structured-content", {"location": "Chicago"}),
                ("mcp_everything_get-sum", {"a": 2, "b": 3}),
                ("mcp_everything_echo", {"message": 7}),
            ),
            COUNT,
            text("Done."),
        ],
        ["mcp_everything_echo", "mcp_everything_get-sum", "mcp_everything_get-tiny-image"],
    ),
}
CASES = [
    *(("names-and-results", mode) for mode in MODES),
    ("filters", "stream-json"),
    ("everything", "stream-json"),
]


def settings(scenario: Scenario) -> dict[str, Any]:
    return {"mcpServers": scenario.servers(), "security": {"auth": {"selectedType": "gemini-api-key"}}}


async def run(program: list[str], tmp: Path, scenario: Scenario, mode: str) -> tuple[str, list[RecordedRequest]]:
    """One headless run of ``program`` against its own fake Gemini server."""
    home, ws = tmp / "home", tmp / "ws"
    (home / ".gemini").mkdir(parents=True)
    (home / ".gemini" / "settings.json").write_text(json.dumps(settings(scenario)))
    ws.mkdir()
    server = FakeGeminiServer([FakeEntry(method, response, i) for i, (method, response) in enumerate(scenario.script)])
    async with trio.open_nursery() as nursery:
        await nursery.start(server.run)
        env = {
            "PATH": os.environ["PATH"],
            "HOME": str(home),
            "GEMINI_CLI_HOME": str(home),
            "AGENTBUS_DATA_DIR": str(tmp / "data"),
            "TMPDIR": str(tmp),
            "LANG": "C.UTF-8",
            "GEMINI_API_KEY": "not-a-key",
            "GOOGLE_GEMINI_BASE_URL": server.base_url,
            "GEMINI_CLI_NO_RELAUNCH": "true",
        }
        with trio.fail_after(BOUND_S):
            done = await trio.run_process(
                [*program, "-m", "gemini-2.5-flash", "-p", "go", "-o", mode, "--skip-trust"],
                stdin=b"",
                capture_stdout=True,
                capture_stderr=True,
                check=False,
                cwd=str(ws),
                env=env,
            )
        nursery.cancel_scope.cancel()
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-3000:]
    return done.stdout.decode(), server.requests


# -- what is compared ------------------------------------------------------------------------
PROPERTY_MAPS = ("properties", "response", "args")
"""Keys whose values are the user's or the server's names, never renamed."""


def camel(value: Any) -> Any:
    """Field names as the API's JSON names them: it reads ``mime_type`` (the Python
    SDK's spelling on the wire) and ``mimeType`` (the JS SDK's) as the same field."""
    if isinstance(value, dict):
        return {re.sub(r"_([a-z])", lambda m: m[1].upper(), k) if k[:1].islower() and k not in PROPERTY_MAPS else k:
                (v if k in PROPERTY_MAPS else camel(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [camel(v) for v in value]
    return value


def mcp_declarations(request: RecordedRequest) -> list[Any]:
    body = camel(request.body)
    [tools] = body["config"]["tools"] if "config" in body else body["tools"]
    declared = [d for d in tools["functionDeclarations"] if d["name"].startswith("mcp_")]
    for d in declared:
        # Our own wording of the parameter every tool gets (docs/differences.md: tool descriptions).
        d["parametersJsonSchema"]["properties"]["wait_for_previous"].pop("description")
    return declared


def _same_spelling(part: dict[str, Any]) -> dict[str, Any]:
    """A part with the call's id left out and inline data in base64's standard alphabet
    (the Python SDK sends bytes URL-safe, the JS one standard: the API reads both)."""
    out = dict(part)
    if "functionResponse" in out:
        out["functionResponse"] = {**out["functionResponse"], "id": None}
    if "inlineData" in out:
        data = str(out["inlineData"].get("data", ""))
        out["inlineData"] = {**out["inlineData"], "data": data.replace("-", "+").replace("_", "/")}
    return out


def model_side(requests: list[RecordedRequest]) -> list[Any]:
    """What each API call carried that depends on the MCP server: the call, the MCP
    tools declared, and the last content's parts (the function responses, without the
    calls' ids)."""
    seen: list[Any] = []
    for request in requests:
        contents = request.body.get("contents") or []
        parts = [_same_spelling(camel(part)) for part in (contents[-1]["parts"] if contents else []) if "text" not in part]
        declared = mcp_declarations(request) if request.method == "generateContentStream" else None
        seen.append({"method": request.method, "mcp_tools": declared, "last_parts": parts})
    return seen


def stdout_of(mode: str, stdout: str) -> Any:
    if mode == "text":
        return stdout
    if mode == "json":
        return _scrub(json.loads(stdout))
    ids: dict[str, str] = {}
    events = [_scrub(json.loads(line), ids) for line in stdout.splitlines() if line.strip()]
    # Parallel calls finish in any order: a run of results is compared by call (as
    # the conformance corpus' compare.py does).
    runs = itertools.groupby(events, key=lambda e: e.get("type") == "tool_result")
    return [e for is_result, run in runs for e in (sorted(run, key=lambda e: int(e["tool_id"][1:])) if is_result else run)]


_TOKEN_COUNTS = {"tokens", "cached", "input"}
_VOLATILE = {"timestamp", "session_id", "duration_ms", "durationMs", "totalDurationMs", "totalLatencyMs"}


def _scrub(value: Any, ids: dict[str, str] | None = None) -> Any:
    """Times, durations, token counts and the session id out; tool ids as T1, T2, ..."""
    ids = {} if ids is None else ids
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if key in _VOLATILE or key in _TOKEN_COUNTS or key.endswith("_tokens"):
                continue
            if key == "tool_id":
                item = ids.setdefault(item, f"T{len(ids) + 1}")
            out[key] = _scrub(item, ids)
        return out
    if isinstance(value, list):
        return [_scrub(v, ids) for v in value]
    return value


async def compare(scenario: Scenario, mode: str, tmp_path: Path) -> None:
    """Run both on ``scenario`` at once; what the model got and stdout must be the same."""
    gemini = gemini_cli()
    settings(scenario)  # skips here when its server is missing
    results: dict[str, tuple[str, list[RecordedRequest]]] = {}

    async def one(name: str, program: list[str]) -> None:
        results[name] = await run(program, tmp_path / name, scenario, mode)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(one, "gemini", [str(gemini)])
        nursery.start_soon(one, "agentbus", [str(AGENTBUS)])
    (their_out, their_requests), (our_out, our_requests) = results["gemini"], results["agentbus"]
    theirs = model_side(their_requests)
    declared = [d["name"] for d in theirs[0]["mcp_tools"]]
    assert set(scenario.declared) <= set(declared) and bool(declared) == bool(scenario.declared)
    assert model_side(our_requests) == theirs
    assert stdout_of(mode, our_out) == stdout_of(mode, their_out)


@pytest.mark.parametrize(("scenario", "mode"), CASES)
async def test_same_tools_results_and_output_as_gemini_cli(scenario: str, mode: str, tmp_path: Path) -> None:
    await compare(SCENARIOS[scenario], mode, tmp_path)


@pytest.mark.filterwarnings("ignore:Async generator 'httpcore2\\.:ResourceWarning")
async def test_remote_servers_over_streamable_http_sse_and_a_url_without_type(tmp_path: Path) -> None:
    """The SDK's server (tests/fakes/mcp_server.py) over ``httpUrl``, ``url`` with
    ``type: sse``, and ``url`` alone (Gemini tries streamable HTTP, then SSE)."""
    http, sse = free_port(), free_port()
    async with web_server("http", http), web_server("sse", sse):
        remote = Scenario(
            lambda: {
                "h": {"httpUrl": f"http://127.0.0.1:{http}/mcp", "trust": True},
                "s": {"url": f"http://127.0.0.1:{sse}/sse", "type": "sse", "trust": True},
                "u": {"url": f"http://127.0.0.1:{sse}/sse", "trust": True},
            },
            [
                call(("mcp_h_both", {}), ("mcp_s_echo", {"text": "x"}), ("mcp_u_fail", {"reason": "r"}), ("mcp_h_picture", {})),
                COUNT,
                text("Done."),
            ],
            ["mcp_h_both", "mcp_s_echo", "mcp_u_fail"],
        )
        await compare(remote, "stream-json", tmp_path)
