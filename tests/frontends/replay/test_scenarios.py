"""Every recorded scenario in ``scenarios/recorded/`` replays with ``--check`` and meets
the expectations its ``scenario.json`` states; the replay never touches the file.

``--check`` only shows that the code agrees with the recording it wrote. The
expectations do not come from the recording: each key of ``expect`` has a ``sources``
note (Gemini CLI's source or the behaviour reference, a DESIGN invariant, or a value
derived by hand from the fake responses and the workspace), and both the recording and
the replay must meet them. The vocabulary is in ``scenarios/README.md``; ``check_key``
below is its one definition. DESIGN invariants 1 and 3 are checked for every scenario.

A key listed in a scenario's ``known_bugs`` is where agentbus disagrees with its source
(``reason``): the main test holds it to ``now``, what agentbus does today (without the
invariant it breaks), and one test checks that the expectation itself still fails on
the recording, so it turns red the day the behaviour is fixed and the entry must go.
"""

from __future__ import annotations

import io
import json
import re
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest

from actors.frontends.replay import replay_file
from actors.recording import load_recording
from bus import Envelope
from bus.json_values import thaw
from bus.messages import (
    ApprovalRequested,
    ApprovalSettled,
    BatchSettled,
    GenerateRequest,
    GenerationCancelled,
    Message,
    ModelFailed,
    ModelFinished,
    ModelRetrying,
    ScheduleBatch,
    StartTurn,
    TextStreamed,
    ThoughtStreamed,
    ToolCallUpdated,
    TurnEnded,
    TurnNotice,
)

ROOT = Path(__file__).resolve().parents[3]
SCENARIOS = sorted(p.parent for p in (ROOT / "scenarios" / "recorded").glob("*/scenario.json"))
TERMINAL = ("success", "error", "cancelled")
KEYS = (
    "stop_reasons", "requests", "calls", "history", "last_request", "text", "thoughts",
    "waves", "approvals", "approvals_asked", "retries", "notices", "error", "processes",
)  # fmt: skip
"""The ``expect`` vocabulary (``scenarios/README.md``)."""


def load_scenario(folder: Path) -> dict[str, Any]:
    scenario: dict[str, Any] = json.loads((folder / "scenario.json").read_text())
    return scenario


# ---------------------------------------------------------------------------- observing


@attrs.define
class Observed:
    """What a session did, from its decoded messages (a recording's or a replay's)."""

    messages: list[tuple[int, Message]]
    segments: int

    def of(self, kind: type[Any]) -> list[Any]:
        return [m for _, m in self.messages if isinstance(m, kind)]

    def main_requests(self) -> list[tuple[int, GenerateRequest]]:
        return [
            (s, m) for s, m in self.messages if isinstance(m, GenerateRequest) and m.role == "main"
        ]

    def conversation(self) -> list[Any]:
        """The session's history after its last turn: that turn's ``StartTurn.history``
        plus what its ``TurnEnded`` added."""
        ended = self.of(TurnEnded)
        assert ended, "no turn ended"
        last = ended[-1]
        start = next(m for m in self.of(StartTurn) if m.turn_id == last.turn_id)
        history = [thaw(c) for c in start.history]
        if last.history_reset:
            history = history[:1]
        return history + [thaw(c) for c in last.history_added]


def observe(envelopes: Sequence[Envelope], segments: int) -> Observed:
    return Observed(messages=[(e.seq, e.message) for e in envelopes], segments=segments)


# ------------------------------------------------------------------- describing contents


def describe_part(part: Mapping[str, Any]) -> str:
    if "functionCall" in part:
        return "call:" + str(part["functionCall"].get("name"))
    if "functionResponse" in part:
        return "response:" + str(part["functionResponse"].get("name"))
    if "text" in part:
        if part.get("thought"):
            return "thought"
        if str(part["text"]).startswith("<session_context>"):
            return "context"
        return "text=" + str(part["text"])
    return ",".join(sorted(k for k in part if k != "thoughtSignature"))


def describe(content: Mapping[str, Any]) -> str:
    """``"model: text=Reading. | call:read_file"``: the role and each part's kind."""
    return f"{content.get('role')}: " + " | ".join(
        describe_part(p) for p in content.get("parts", ())
    )


def bare_id(call_id: Any, name: Any) -> str:
    """A call id as the API sees it (Gemini CLI strips the ``<name>__`` prefix)."""
    text, prefix = str(call_id), f"{name}__"
    return text[len(prefix) :] if text.startswith(prefix) else text


def responses_in(contents: Sequence[Any]) -> dict[str, Any]:
    """Function responses of a list of contents, by bare id."""
    found: dict[str, Any] = {}
    for content in contents:
        for part in content.get("parts", ()):
            if "functionResponse" in part:
                fr = part["functionResponse"]
                found[bare_id(fr.get("id"), fr.get("name"))] = thaw(fr.get("response"))
    return found


def assert_calls_answered(contents: Sequence[Any], where: str) -> None:
    """DESIGN invariant 1: each model content's function calls are answered by the next
    content, a user content with exactly one response per call in request order; no
    response without its call."""
    answered: set[str] = set()
    i = 0
    while i < len(contents):
        content = contents[i]
        calls = [p["functionCall"] for p in content.get("parts", ()) if "functionCall" in p]
        responses = [
            p["functionResponse"] for p in content.get("parts", ()) if "functionResponse" in p
        ]
        if content.get("role") == "user" and responses:
            raise AssertionError(
                f"{where}: content {i} answers calls nobody made: {describe(content)}"
            )
        if content.get("role") == "model" and calls:
            assert i + 1 < len(contents), f"{where}: the calls of content {i} have no response"
            nxt = contents[i + 1]
            got = [bare_id(p["functionResponse"].get("id"), p["functionResponse"].get("name"))
                   for p in nxt.get("parts", ()) if "functionResponse" in p]  # fmt: skip
            want = [bare_id(c.get("id"), c.get("name")) for c in calls]
            assert nxt.get("role") == "user" and got == want, (
                f"{where}: content {i + 1} does not answer content {i}'s calls {want} in order: {describe(nxt)}"
            )
            assert not answered & set(want), f"{where}: a call id is answered twice: {want}"
            answered |= set(want)
            i += 2
            continue
        i += 1


def assert_invariants(obs: Observed) -> None:
    """Invariant 1 on every model request; invariant 3 for model requests and tool calls."""
    for seq, req in obs.main_requests():
        contents = [thaw(c) for c in req.contents]
        assert_calls_answered(contents, f"request at seq {seq}")
        assert contents and contents[-1].get("role") == "user", (
            f"request at seq {seq} does not end with the user"
        )
    replies: dict[str, int] = defaultdict(int)
    for m in obs.of(ModelFinished) + obs.of(ModelFailed) + obs.of(GenerationCancelled):
        replies[m.request_id] += 1
    for req in obs.of(GenerateRequest):
        assert replies[req.request_id] == 1, (
            f"model request {req.request_id}: {replies[req.request_id]} replies"
        )
    ends: dict[str, int] = defaultdict(int)
    for u in obs.of(ToolCallUpdated):
        if u.status in TERMINAL:
            ends[u.call_id] += 1
    for batch in obs.of(ScheduleBatch):
        for call in batch.calls:
            assert ends[call.call_id] == 1, (
                f"call {call.call_id}: {ends[call.call_id]} terminal states"
            )


# ---------------------------------------------------------------------------- matching


def matches(expected: Any, got: Any, workspace: str) -> bool:
    """A string is exact (``{workspace}`` stands for the recorded workspace); ``{"re":
    pattern}`` must match all of the value (``.`` matches newlines); dicts and lists
    match item by item."""
    if isinstance(expected, str):
        return bool(got == expected.replace("{workspace}", workspace))
    if isinstance(expected, dict) and set(expected) == {"re"}:
        pattern = str(expected["re"]).replace("{workspace}", re.escape(workspace))
        return isinstance(got, str) and re.fullmatch(pattern, got, re.DOTALL) is not None
    if isinstance(expected, dict):
        return (
            isinstance(got, Mapping)
            and set(got) == set(expected)
            and all(matches(v, got[k], workspace) for k, v in expected.items())
        )
    if isinstance(expected, list):
        return (
            isinstance(got, list | tuple)
            and len(got) == len(expected)
            and all(matches(e, g, workspace) for e, g in zip(expected, got, strict=True))
        )
    return bool(expected == got)


def check_calls(
    expected: list[Mapping[str, Any]], obs: Observed, workspace: str, invariants: bool = True
) -> None:
    """Each call of the session, in request order: its name, arguments, final status and
    the function response the model gets — from the scheduler (``BatchSettled``), in the
    state updates, in every later model request and in the final history."""
    settled = [(seq, c) for seq, m in obs.messages if isinstance(m, BatchSettled) for c in m.calls]
    got_names = [c.name for _, c in settled]
    assert got_names == [e["name"] for e in expected], f"calls {got_names}"
    finals: dict[str, list[str]] = defaultdict(list)
    for u in obs.of(ToolCallUpdated):
        if u.status in TERMINAL:
            finals[u.call_id].append(u.status)
    history = responses_in(obs.conversation())
    requests = obs.main_requests()
    for n, ((seq, call), want) in enumerate(zip(settled, expected, strict=True)):
        label = f"call {n} ({call.name})"
        if "args" in want:
            assert matches(want["args"], thaw(call.args), workspace), (
                f"{label} args {thaw(call.args)}"
            )
        assert call.status == want["status"], f"{label} ended {call.status}"
        assert finals[call.call_id] == [want["status"]], f"{label} states {finals[call.call_id]}"
        parts = [thaw(p) for p in call.response_parts]
        assert len(parts) == 1 and set(parts[0]) == {"functionResponse"}, f"{label} parts {parts}"
        fr = parts[0]["functionResponse"]
        assert (fr.get("id"), fr.get("name")) == (call.call_id, call.name), (
            f"{label} answered as {fr}"
        )
        assert matches(want["response"], fr.get("response"), workspace), (
            f"{label} response {fr.get('response')!r}"
        )
        key = bare_id(call.call_id, call.name)
        if invariants or key in history:
            assert key in history, f"{label}: its response is not in the final history"
            assert history[key] == fr.get("response"), (
                f"{label}: the history holds {history[key]!r}"
            )
        for rseq, req in requests:
            if rseq > seq:
                sent = responses_in([thaw(c) for c in req.contents])
                assert sent.get(key) == fr.get("response"), (
                    f"{label}: request at seq {rseq} sent {sent.get(key)!r}"
                )


def waves_of(obs: Observed) -> list[list[str]]:
    waves: dict[tuple[str, int], list[str]] = {}
    for m in obs.of(ToolCallUpdated):
        if m.status == "executing":
            waves.setdefault((m.batch_id, m.wave), []).append(m.name)
    return list(waves.values())


def check_retries(expected: list[Mapping[str, Any]], obs: Observed) -> None:
    """The retries announced, and the wait they took: the retried request's answer came
    no sooner than its delays (the replay runs on trio's virtual clock)."""
    retried = obs.of(ModelRetrying)
    assert [{"reason": r.reason, "delay_s": r.delay_s} for r in retried] == expected, retried
    waits: dict[str, float] = defaultdict(float)
    for r in retried:
        waits[r.request_id] += r.delay_s
    latency = {m.request_id: m.latency_ms for m in obs.of(ModelFinished)}
    for rid, wait in waits.items():
        assert latency.get(rid, 0) >= wait * 1000, (
            f"request {rid} answered after {latency.get(rid)} ms"
        )


def check_error(expected: Mapping[str, Any], obs: Observed, workspace: str) -> None:
    error = obs.of(TurnEnded)[-1].error
    assert error is not None, "the last turn ended without an error"
    got = {"type": error.type, "message": error.message, "exit_code": error.exit_code}
    shown = {k: got[k] for k in expected}  # only the fields the scenario states
    assert set(expected) <= set(got) and matches(dict(expected), shown, workspace), got


CHECKS: dict[str, Callable[[Any, Observed, str, bool], None]] = {
    "calls": check_calls,
    "retries": lambda want, obs, ws, inv: check_retries(want, obs),
    "error": lambda want, obs, ws, inv: check_error(want, obs, ws),
}

GETTERS: dict[str, Callable[[Observed], Any]] = {
    "stop_reasons": lambda o: [m.stop_reason for m in o.of(TurnEnded)],
    "requests": lambda o: len(o.main_requests()),
    "history": lambda o: [describe(c) for c in o.conversation()],
    "last_request": lambda o: [describe(thaw(c)) for c in o.main_requests()[-1][1].contents],
    "text": lambda o: "".join(m.text for m in o.of(TextStreamed)),
    "thoughts": lambda o: [[m.subject, m.description] for m in o.of(ThoughtStreamed)],
    "waves": waves_of,
    "approvals": lambda o: [m.outcome for m in o.of(ApprovalSettled) if m.outcome],
    "approvals_asked": lambda o: len(o.of(ApprovalRequested)),
    "notices": lambda o: [[m.kind, m.severity, m.message] for m in o.of(TurnNotice)],
    "processes": lambda o: o.segments,
}
assert set(CHECKS) | set(GETTERS) == set(KEYS)


def check_key(
    key: str, expected: Any, obs: Observed, workspace: str, invariants: bool = True
) -> None:
    """Raise ``AssertionError`` when ``obs`` does not meet ``expect[key]``. Without
    ``invariants`` (a known bug's ``now``), the final history may leave calls unanswered."""
    if key in CHECKS:
        CHECKS[key](expected, obs, workspace, invariants)
        return
    got = GETTERS[key](obs)
    assert matches(expected, got, workspace), f"{key}: got {got!r}"
    if key == "history" and invariants:
        assert_calls_answered(obs.conversation(), "the final history")


def check_expectations(scenario: Mapping[str, Any], obs: Observed, workspace: str) -> None:
    """Invariants, then every key of ``expect``; a key in ``known_bugs`` is held to its
    ``now`` (agentbus's behaviour today) instead, so nothing else about it can change
    unnoticed."""
    expect, bugs = scenario["expect"], scenario.get("known_bugs", {})
    unknown = set(expect) - set(KEYS)
    assert not unknown, f"unknown expect keys {unknown}"
    assert set(bugs) <= set(expect), "known_bugs names a key that is not expected"
    assert_invariants(obs)
    for key in KEYS:
        if key in bugs:
            check_key(key, bugs[key]["now"], obs, workspace, invariants=False)
        elif key in expect:
            check_key(key, expect[key], obs, workspace)


# ---------------------------------------------------------------------------- the tests


def test_there_are_at_least_twelve_recorded_scenarios() -> None:
    assert len(SCENARIOS) >= 12
    for folder in SCENARIOS:
        assert (folder / "recording.jsonl").is_file(), folder


def test_every_expectation_names_its_source() -> None:
    for folder in SCENARIOS:
        scenario = load_scenario(folder)
        expect, sources = scenario["expect"], scenario.get("sources", {})
        assert {"stop_reasons", "requests", "history"} <= set(expect), folder.name
        assert set(sources) == set(expect), (folder.name, set(expect) ^ set(sources))
        assert all(isinstance(s, str) and s.strip() for s in sources.values()), folder.name


@pytest.mark.parametrize("folder", SCENARIOS, ids=lambda p: p.name)
def test_scenario_replays_identically_with_its_expected_outcome(folder: Path) -> None:
    scenario = load_scenario(folder)
    path = folder / scenario.get("recording", "recording.jsonl")
    before = (path.read_bytes(), path.stat().st_mtime_ns)
    recording = load_recording(path)
    out, err = io.StringIO(), io.StringIO()
    code, result = replay_file(
        recording, check=True, tools_mode="recorded", workspace=None, fmt="human", out=out, err=err
    )
    assert code == 0, err.getvalue()
    assert result.messages == len(recording.envelopes)
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before, (
        "replay must not write to its input"
    )
    workspace = str(recording.meta.get("workspace", ""))
    # The recording (as written) and the replay (as the code does it now) must both
    # meet the independent expectations.
    check_expectations(scenario, observe(recording.envelopes, len(recording.segments)), workspace)
    check_expectations(scenario, observe(result.envelopes, result.segments), workspace)
    # What a person following the replay sees: the end of each turn.
    assert "[turn ended: " + scenario["expect"]["stop_reasons"][-1] in out.getvalue()


def test_each_known_disagreement_with_the_source_still_disagrees() -> None:
    """Each ``known_bugs`` entry is still a disagreement: its expectation fails on the
    recording (the day it passes, the bug is fixed: re-record and drop the entry). One
    test over every entry, so an empty list of known bugs is not a skipped test."""
    for folder in SCENARIOS:
        scenario = load_scenario(folder)
        recording = load_recording(folder / scenario.get("recording", "recording.jsonl"))
        obs = observe(recording.envelopes, len(recording.segments))
        for key in scenario.get("known_bugs", {}):
            with pytest.raises(AssertionError):
                check_key(key, scenario["expect"][key], obs, str(recording.meta.get("workspace", "")))
