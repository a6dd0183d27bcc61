"""The scenario checker bites: a recorded scenario whose messages are made wrong in one
place (as a wrong behaviour would be recorded anew: consistently, so it would still
replay identically) no longer meets its ``scenario.json`` expectations, and the same
messages unchanged do."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import attrs
import pytest

from actors.recording import load_recording
from bus import Envelope
from bus.codec import envelope_from_plain, envelope_to_plain
from bus.json_values import thaw
from bus.messages import GenerateRequest

from .test_scenarios import ROOT, check_expectations, load_scenario, observe

Mutation = Callable[[list[Envelope]], list[Envelope]]


def replace_text(old: str, new: str) -> Mutation:
    """Every message with ``old`` in its JSON gets ``new`` instead (the whole session
    consistently, as a recording of the wrong behaviour would have it)."""

    def mutate(envelopes: list[Envelope]) -> list[Envelope]:
        out, hits = [], 0
        for env in envelopes:
            text = json.dumps(envelope_to_plain(env))
            hits += text.count(old)
            out.append(envelope_from_plain(json.loads(text.replace(old, new))))
        assert hits, f"{old!r} is not in the recording: the mutation would test nothing"
        return out

    return mutate


def drop_response(name: str) -> Mutation:
    """The function response of the call ``name`` is left out of every model request."""

    def mutate(envelopes: list[Envelope]) -> list[Envelope]:
        out, hits = [], 0
        for env in envelopes:
            msg = env.message
            if isinstance(msg, GenerateRequest):
                contents = []
                for content in thaw(msg.contents):
                    parts = [
                        p
                        for p in content["parts"]
                        if p.get("functionResponse", {}).get("name") != name
                    ]
                    hits += len(content["parts"]) - len(parts)
                    contents.append({**content, "parts": parts})
                msg = attrs.evolve(msg, contents=tuple(contents))
            out.append(attrs.evolve(env, message=msg))
        assert hits
        return out

    return mutate


def resend_prompt(prompt: str, partial: str) -> Mutation:
    """The last model request still carries a cancelled ``prompt`` and its ``partial``
    answer (a prompt that was not rolled back)."""

    def mutate(envelopes: list[Envelope]) -> list[Envelope]:
        last = max(i for i, e in enumerate(envelopes) if isinstance(e.message, GenerateRequest))
        msg = envelopes[last].message
        assert isinstance(msg, GenerateRequest)
        first, *rest = thaw(msg.contents)
        context, *now = first["parts"]
        contents = [
            {"role": "user", "parts": [context, {"text": prompt}]},
            {"role": "model", "parts": [{"text": partial}]},
            {"role": "user", "parts": now},
            *rest,
        ]
        out = list(envelopes)
        out[last] = attrs.evolve(
            envelopes[last], message=attrs.evolve(msg, contents=tuple(contents))
        )
        return out

    return mutate


WRONG: list[tuple[str, str, Mutation, str]] = [
    # scenario, what is wrong, the mutation, a word of the failure
    ("shell-output", "another exit code", replace_text("Exit Code: 3", "Exit Code: 4"), "response"),
    ("shell-output", "stderr lost", replace_text("Output: one\\ntwo", "Output: one"), "response"),
    (
        "approval-deny",
        "ACP's rejection text instead of the scheduler's",
        replace_text(
            "[Operation Cancelled] Reason: User denied execution.",
            'Tool \\"run_shell_command\\" was canceled by the user.',
        ),
        "response",
    ),
    (
        "tool-errors",
        "another suggestion for an unknown tool",
        replace_text('\\"read_file\\", \\"write_file\\"?', '\\"write_file\\", \\"read_file\\"?'),
        "response",
    ),
    ("tool-errors", "a dropped function response", drop_response("list_dir"), "answer"),
    ("cancel-mid-stream", "the cancelled prompt sent again", resend_prompt("Tell me a long story.", "Once upon "), "last_request"),
    ("retry-invalid-stream", "a 2 s first retry", replace_text('"delay_s": 1.0', '"delay_s": 2.0'), "delay"),
    ("retry-invalid-stream", "no wait before the retry", replace_text('"latency_ms": 1000', '"latency_ms": 0'), "answered after"),
    ("loop-stop", "another loop message", replace_text("Loop detected, stopping", "Loop found, stopping"), "notices"),
    (
        "cancel-mid-tool",
        "no interruption placeholder",
        replace_text("[The previous response was interrupted before it completed.]", "[interrupted]"),
        "last_request",
    ),
    ("waves-read-write", "a write that is no barrier", replace_text('"wave": 2', '"wave": 1'), "waves"),
]  # fmt: skip


def observed(name: str) -> tuple[dict[str, Any], list[Envelope], int, str]:
    folder = ROOT / "scenarios" / "recorded" / name
    scenario = load_scenario(folder)
    recording = load_recording(folder / scenario.get("recording", "recording.jsonl"))
    workspace = str(recording.meta.get("workspace", ""))
    return scenario, list(recording.envelopes), len(recording.segments), workspace


@pytest.mark.parametrize(
    ("name", "what", "mutation", "word"), WRONG, ids=[f"{w[0]}: {w[1]}" for w in WRONG]
)
def test_a_wrong_outcome_fails_its_expectations(
    name: str, what: str, mutation: Mutation, word: str
) -> None:
    scenario, envelopes, segments, workspace = observed(name)
    check_expectations(scenario, observe(envelopes, segments), workspace)  # as recorded: fine
    with pytest.raises(AssertionError, match=word):
        check_expectations(scenario, observe(mutation(envelopes), segments), workspace)
