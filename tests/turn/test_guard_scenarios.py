"""The turn guards in a whole session (MockClock, fake responses): loops, compression,
the context window, turn limits and the next-speaker check."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio

from actors.turn._compression import COMPRESSION_INSTRUCTION, SUMMARY_ACKNOWLEDGEMENT
from actors.turn._core import (
    LOOP_DETECTED_MESSAGE,
    MAX_SESSION_TURNS_MESSAGE,
    loop_recovery_prompt,
)
from actors.turn._logic import INTERRUPTED_RESPONSE_PLACEHOLDER
from actors.turn._next_speaker import CONTINUE_PROMPT
from bus.json_values import thaw
from bus.messages import (
    CheckLoop,
    HistoryCompressed,
    LoopVerdict,
    TextStreamed,
    ToolCallRequested,
    TurnEnded,
    TurnNotice,
)

from ._session import answer, call_chunk, run_session, stream, text_chunk, texts

POLL = ("poll", {"job": 1})
DETAIL = 'Repeated tool call: poll with arguments {"job":1}'


def answered(history: list[Any]) -> bool:
    """Every function call is followed by its response (by id), in order."""
    pending: list[str] = []
    for content in history:
        for part in content.get("parts") or ():
            if "functionCall" in part:
                pending.append(part["functionCall"]["id"])
            elif "functionResponse" in part:
                if not pending or pending.pop(0) != part["functionResponse"]["id"]:
                    return False
        if content.get("role") == "user" and pending and not any("functionResponse" in p for p in content["parts"]):
            return False
    return not pending


# -- loops ---------------------------------------------------------------------------------
async def test_a_repeated_call_is_stopped_at_the_second_strike(tmp_path: Path, autojump_clock: trio.abc.Clock) -> None:
    run = await run_session(tmp_path, [stream(call_chunk(*POLL)) for _ in range(6)])
    (ended,) = run.ended
    assert ended.stop_reason == "loop_detected"
    # Four calls shown and run; the fifth (first strike) and sixth (second) never shown.
    assert len(run.capture.of_type(ToolCallRequested)) == 4
    verdicts = [v.count for v in run.capture.of_type(LoopVerdict) if v.count]
    assert verdicts == [1, 2]
    notices = run.capture.of_type(TurnNotice)
    assert [(n.kind, n.severity, n.message) for n in notices] == [("loop_detected", "warning", LOOP_DETECTED_MESSAGE)]
    main = run.requests("main")
    assert len(main) == 6
    recovery = [thaw(c) for c in main[5].contents]
    # The 5th request answered tools: its responses stay, the cut answer is replaced by
    # Gemini CLI's placeholder, then the recovery prompt, word for word.
    assert texts(recovery[-2]) == [INTERRUPTED_RESPONSE_PLACEHOLDER]
    assert texts(recovery[-1]) == [loop_recovery_prompt(DETAIL)]
    assert texts(recovery[-1])[0] == (
        "System: Potential loop detected. Details: " + DETAIL + ". Please take a step back and confirm "
        "you're making forward progress. If not, take a step back, analyze your previous actions and "
        "rethink how you're approaching the problem. Avoid repeating the same tool calls or responses "
        "without new results."
    )
    history = [thaw(c) for c in ended.history_added]
    assert answered(history)
    # Four calls with their responses; the recovery prompt, whose answer was cut, is
    # rolled back like any prompt whose stream its consumer stopped.
    assert sum("functionCall" in c["parts"][0] for c in history) == 4
    assert "functionResponse" in history[-1]["parts"][0]


async def test_a_loop_that_stops_after_the_recovery_prompt_ends_normally(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    entries = [stream(call_chunk(*POLL)) for _ in range(5)] + [stream(text_chunk("Done, I stop.", finish=True))]
    run = await run_session(tmp_path, entries)
    (ended,) = run.ended
    assert ended.stop_reason == "end_turn"
    assert run.capture.of_type(TurnNotice) == []
    history = [thaw(c) for c in ended.history_added]
    assert answered(history)
    assert texts(history[-2]) == [loop_recovery_prompt(DETAIL)]
    assert texts(history[-1]) == ["Done, I stop."]


async def test_chanting_text_is_cut_before_the_looping_chunk(tmp_path: Path, autojump_clock: trio.abc.Clock) -> None:
    line = "I am checking the configuration once more now. "  # 48 characters
    chant = [text_chunk(line) for _ in range(30)]
    entries = [stream(*chant), stream(*chant)]
    run = await run_session(tmp_path, entries)
    (ended,) = run.ended
    assert ended.stop_reason == "loop_detected"
    shown = run.capture.of_type(TextStreamed)
    # The 10th occurrence of the first window ends at 9 * 48 + 50 = 482 characters: the
    # 11th chunk completes it and is never shown (in either stream: the second strike
    # comes at once, the text history of the prompt still chants).
    assert len(shown) == 10
    assert ended.history_added == ()  # both requests were prompts: rolled back
    main = run.requests("main")
    assert texts(thaw(main[1].contents)[-1])[0].startswith("System: Potential loop detected. Details: Repeating content")


async def test_without_the_detector_nothing_is_checked(tmp_path: Path, autojump_clock: trio.abc.Clock) -> None:
    entries = [stream(call_chunk(*POLL)) for _ in range(6)] + [stream(text_chunk("ok", finish=True))]
    run = await run_session(tmp_path, entries, loop_detection=False)
    assert run.ended[0].stop_reason == "end_turn"
    assert run.capture.of_type(CheckLoop) == []
    assert len(run.capture.of_type(ToolCallRequested)) == 6


# -- compression -----------------------------------------------------------------------------
LONG = " ".join(f"w{i}" for i in range(800))  # long, and no window repeats


async def test_compression_at_the_threshold_sends_the_compressed_history(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    snapshot = "<state_snapshot><goal>say hi</goal></state_snapshot>"
    entries = [
        stream(text_chunk("first answer " + LONG, finish=True, prompt_tokens=1000)),
        # 0.5 * 1 048 576 = 524 288: this count puts the next request over the threshold
        stream(text_chunk("second answer", finish=True, prompt_tokens=524_288)),
        answer("<scratchpad>thinking</scratchpad>" + snapshot),
        answer(snapshot),
        stream(text_chunk("third answer", finish=True, prompt_tokens=100)),
    ]
    run = await run_session(tmp_path, entries, prompts=("one " + LONG, "two", "three"))
    assert [e.stop_reason for e in run.ended] == ["end_turn"] * 3
    (compressed,) = run.capture.of_type(HistoryCompressed)
    assert compressed.status == "COMPRESSED"
    assert compressed.original_token_count == 524_288
    history = [thaw(c) for c in compressed.history]
    # The newest ~30 % (by characters) is kept from a real user turn: "two" and its answer.
    assert [texts(c) for c in history] == [
        [snapshot],
        [SUMMARY_ACKNOWLEDGEMENT],
        ["two"],
        ["second answer"],
    ]
    assert [c["role"] for c in history] == ["user", "model", "user", "model"]
    calls = run.requests("compressor")
    assert len(calls) == 2 and all(thaw(c.config)["systemInstruction"] == COMPRESSION_INSTRUCTION for c in calls)
    assert texts(thaw(calls[0].contents)[0])[0].startswith("one ")  # the older part is what is summarised
    # The next request carries the compressed history, then the prompt.
    last = [thaw(c) for c in run.requests("main")[-1].contents]
    assert [texts(c) for c in last] == [[snapshot], [SUMMARY_ACKNOWLEDGEMENT], ["two"], ["second answer"], ["three"]]
    notices = [n for n in run.capture.of_type(TurnNotice) if n.kind == "chat_compressed"]
    assert len(notices) == 1 and notices[0].message == "Context compressed from 50% to 0%."
    # The session's history is the compressed one plus the third prompt's turn.
    assert [texts(thaw(c)) for c in run.ended[2].history_added] == [["three"], ["third answer"]]


async def test_under_the_threshold_nothing_is_compressed(tmp_path: Path, autojump_clock: trio.abc.Clock) -> None:
    entries = [
        stream(text_chunk("a", finish=True, prompt_tokens=524_287)),
        stream(text_chunk("b", finish=True, prompt_tokens=10)),
    ]
    run = await run_session(tmp_path, entries, prompts=("one", "two"))
    assert run.capture.of_type(HistoryCompressed) == []
    assert run.requests("compressor") == []


async def test_a_failed_summary_call_keeps_the_history(tmp_path: Path, autojump_clock: trio.abc.Clock) -> None:
    entries = [
        stream(text_chunk("first", finish=True, prompt_tokens=600_000)),
        stream(text_chunk("second", finish=True, prompt_tokens=10)),
    ]
    # non-strict, no generateContent entries: the summary call fails
    run = await run_session(tmp_path, entries, prompts=("one", "two"), strict=False)
    (failed,) = run.capture.of_type(HistoryCompressed)
    assert failed.status == "COMPRESSION_FAILED_EMPTY_SUMMARY" and failed.history == ()
    assert run.ended[1].stop_reason == "end_turn"
    last = [thaw(c) for c in run.requests("main")[-1].contents]
    assert [texts(c) for c in last] == [["one"], ["first"], ["two"]]


async def test_an_empty_summary_keeps_the_history(tmp_path: Path, autojump_clock: trio.abc.Clock) -> None:
    entries = [
        stream(text_chunk("first", finish=True, prompt_tokens=600_000)),
        answer("   "),
        answer(""),
        stream(text_chunk("second", finish=True, prompt_tokens=10)),
    ]
    run = await run_session(tmp_path, entries, prompts=("one", "two"))
    (failed,) = run.capture.of_type(HistoryCompressed)
    assert failed.status == "COMPRESSION_FAILED_EMPTY_SUMMARY"
    assert [texts(thaw(c)) for c in run.requests("main")[-1].contents] == [["one"], ["first"], ["two"]]


async def test_an_inflated_summary_keeps_the_history_and_is_not_retried(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    big = "<state_snapshot>" + "y" * 2000 + "</state_snapshot>"
    entries = [
        stream(text_chunk("first", finish=True, prompt_tokens=150)),
        answer(big),
        answer(big),
        stream(text_chunk("second", finish=True, prompt_tokens=150)),
        # no model call for compression any more: strict mode would fail on one
        stream(text_chunk("third", finish=True, prompt_tokens=150)),
    ]
    threshold = 100 / 1_048_576  # 100 tokens
    run = await run_session(tmp_path, entries, prompts=("one", "two", "three"), compression_threshold=threshold)
    statuses = [c.status for c in run.capture.of_type(HistoryCompressed)]
    assert statuses[0] == "COMPRESSION_FAILED_INFLATED_TOKEN_COUNT"
    assert "COMPRESSED" not in statuses
    assert len(run.requests("compressor")) == 2
    assert run.ended[0].compression_failed is False and run.ended[1].compression_failed is True
    assert [e.stop_reason for e in run.ended] == ["end_turn"] * 3


# -- context window --------------------------------------------------------------------------
async def test_a_request_that_would_overflow_is_not_sent(tmp_path: Path, autojump_clock: trio.abc.Clock) -> None:
    entries = [stream(text_chunk("first", finish=True, prompt_tokens=1_048_000))]
    prompt = "z" * 4000  # 1000 tokens > 576 left
    run = await run_session(tmp_path, entries, prompts=("one", prompt), compression_threshold=2.0)
    second = run.ended[1]
    assert second.stop_reason == "context_window_overflow"
    assert second.history_added == ()
    assert len(run.requests("main")) == 1
    (notice,) = [n for n in run.capture.of_type(TurnNotice) if n.kind == "context_window_will_overflow"]
    assert notice.message == (
        "Sending this message (1000 tokens) might exceed the context window limit (576 tokens left). "
        "Please try reducing the size of your message or use the `/compress` command to compress the chat history."
    )


# -- limits ----------------------------------------------------------------------------------
async def test_interactive_sessions_get_the_max_session_turns_event(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    entries = [stream(call_chunk("a", {"n": i})) for i in range(3)]
    run = await run_session(tmp_path, entries, interactive=True, max_session_turns=2)
    (ended,) = run.ended
    assert ended.stop_reason == "max_session_turns"
    assert ended.error is None
    assert [(n.kind, n.message) for n in run.capture.of_type(TurnNotice)] == [
        ("max_session_turns", MAX_SESSION_TURNS_MESSAGE)
    ]
    assert len(run.requests("main")) == 2
    assert answered([thaw(c) for c in ended.history_added])


async def test_headless_sessions_stop_with_exit_53_at_the_host_check(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    entries = [stream(call_chunk("a", {"n": i})) for i in range(3)]
    run = await run_session(tmp_path, entries, max_session_turns=2)
    (ended,) = run.ended
    assert ended.stop_reason == "turn_limit"
    assert ended.error is not None and ended.error.exit_code == 53
    assert len(run.requests("main")) == 2


# -- next speaker ----------------------------------------------------------------------------
async def test_the_next_speaker_check_continues_the_model(tmp_path: Path, autojump_clock: trio.abc.Clock) -> None:
    entries = [
        stream(text_chunk("Next, I will list the files.", finish=True)),
        answer('{"reasoning": "It announced a next step.", "next_speaker": "model"}'),
        stream(text_chunk("Here they are.", finish=True)),
        answer('{"reasoning": "Complete.", "next_speaker": "user"}'),
    ]
    run = await run_session(tmp_path, entries, skip_next_speaker_check=False)
    (ended,) = run.ended
    assert ended.stop_reason == "end_turn"
    assert [texts(thaw(c)) for c in ended.history_added] == [
        ["go"],
        ["Next, I will list the files."],
        [CONTINUE_PROMPT],
        ["Here they are."],
    ]
    assert len(run.requests("next_speaker")) == 2


async def test_the_next_speaker_check_is_off_by_default(tmp_path: Path, autojump_clock: trio.abc.Clock) -> None:
    run = await run_session(tmp_path, [stream(text_chunk("Next, I will list the files.", finish=True))])
    assert run.requests("next_speaker") == []


async def test_a_failing_next_speaker_check_ends_the_turn(tmp_path: Path, autojump_clock: trio.abc.Clock) -> None:
    entries = [stream(text_chunk("Next, I will list the files.", finish=True))]
    run = await run_session(tmp_path, entries, strict=False, skip_next_speaker_check=False)
    assert run.ended[0].stop_reason == "end_turn"
    assert len(run.requests("next_speaker")) == 1


async def test_every_ended_turn_carries_the_token_count(tmp_path: Path, autojump_clock: trio.abc.Clock) -> None:
    entries = [stream(text_chunk("a", finish=True, prompt_tokens=42))]
    run = await run_session(tmp_path, entries)
    assert run.ended[0].last_prompt_token_count == 42
    assert isinstance(run.ended[0], TurnEnded)


async def test_the_llm_check_from_the_30th_request_can_start_the_recovery(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    judged = '{"unproductive_state_analysis": "It lists the same tree over and over.", "unproductive_state_confidence": 0.96}'
    entries = [stream(call_chunk("ls", {"n": i})) for i in range(29)]
    entries += [answer(judged), answer(judged), stream(text_chunk("I will stop here.", finish=True))]
    run = await run_session(tmp_path, entries)
    (ended,) = run.ended
    assert ended.stop_reason == "end_turn"
    checks = run.requests("loop_detector")
    assert len(checks) == 2
    main = run.requests("main")
    assert len(main) == 30  # the 30th model turn was the check's: no request
    last = [thaw(c) for c in main[-1].contents]
    assert texts(last[-1]) == [loop_recovery_prompt("It lists the same tree over and over.")]
    assert texts(last[-2]) == [INTERRUPTED_RESPONSE_PLACEHOLDER]
    assert answered([thaw(c) for c in ended.history_added])


async def test_re_prompts_are_bounded_by_max_turns(tmp_path: Path, autojump_clock: trio.abc.Clock) -> None:
    more = '{"reasoning": "It announced more.", "next_speaker": "model"}'
    entries = []
    for i in range(100):
        entries += [stream(text_chunk(f"Step {i} done; next I will do step {i + 1}.", finish=True)), answer(more)]
    # (without the loop detector, whose LLM check would ask the model at the 30th turn)
    run = await run_session(tmp_path, entries, skip_next_speaker_check=False, loop_detection=False)
    (ended,) = run.ended
    # 100 requests (boundedTurns 100, 99, ..., 1); the 101st model turn has none left and
    # ends the turn quietly, counted like every model turn.
    assert ended.stop_reason == "end_turn"
    assert len(run.requests("main")) == 100
    assert len(run.requests("next_speaker")) == 100
    assert ended.model_requests == 101
    assert run.capture.of_type(TurnNotice) == []
