"""The script of an explored session: plain data with a short repr, so that a failing
example shrinks to a session one can read: what the model says (text, thoughts,
parallel calls, malformed chunks, invalid streams, API faults), what the tools do
(virtual durations, outcomes, live output, oversized results, real child processes),
and what the client does (prompts, approval answers, cancels, invalid commands, closing
early, a follower that drops and resubscribes from a sequence number); and the
hypothesis strategies that generate it (``sessions``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
from hypothesis import strategies as st

from bus.json_values import thaw


# -- the script ------------------------------------------------------------------------------
class _Brief:
    """attrs classes whose repr leaves out the fields at their default."""

    def __repr__(self) -> str:
        shown = []
        for field in attrs.fields(type(self)):  # type: ignore[arg-type]
            value = getattr(self, field.name)
            if field.default is not attrs.NOTHING and value == field.default:
                continue
            shown.append(f"{field.name}={value!r}")
        return f"{type(self).__name__}({', '.join(shown)})"


@attrs.frozen(repr=False)
class Text(_Brief):
    text: str


@attrs.frozen(repr=False)
class Thought(_Brief):
    subject: str


@attrs.frozen(repr=False)
class Call(_Brief):
    """A function call; its arguments tell the test tool what to do."""

    tool: str
    ms: int = 0
    """Virtual milliseconds the call takes."""
    outcome: str = "ok"
    """``ok``, ``error`` (a tool error), ``crash`` (raises), ``invalid`` (fails validation)."""
    out: int = 0
    """Lines of live output."""
    big: bool = False
    """An oversized result."""
    ask: bool = False
    """The policy asks the client first."""
    wait: bool | None = None
    """``wait_for_previous``."""
    proc: bool = False
    """Runs a real child process for its duration."""
    bg: bool = False
    """Leaves a real child process in the background (killed when the session closes)."""

    def args(self) -> dict[str, Any]:
        out: dict[str, Any] = {"ms": self.ms, "outcome": self.outcome}
        for name in ("out", "big", "ask", "proc", "bg"):
            if getattr(self, name):
                out[name] = getattr(self, name)
        if self.wait is not None:
            out["wait_for_previous"] = self.wait
        return out


JUNK_PARTS: dict[str, dict[str, Any]] = {
    "nameless_call": {"functionCall": {"args": {"ms": 0}}},
    "args_not_object": {"functionCall": {"name": "probe", "args": [1, 2]}},
    "text_not_string": {"text": 42},
    "unknown_part": {"weird": True},
}
JUNK_CHUNKS: dict[str, Any] = {
    "empty_candidates": {"candidates": []},
    "no_content": {"candidates": [{"index": 0}]},
    "parts_not_list": {"candidates": [{"content": {"role": "model", "parts": "oops"}}]},
    "usage_only": {"usageMetadata": {"promptTokenCount": 12}},
}


@attrs.frozen(repr=False)
class Junk(_Brief):
    """A malformed part (``JUNK_PARTS``) or a whole malformed chunk (``JUNK_CHUNKS``)."""

    kind: str


Part = Text | Thought | Call | Junk


@attrs.frozen(repr=False)
class Reply(_Brief):
    """One streamed response: chunks of parts; ``finish`` None is an invalid stream."""

    chunks: tuple[tuple[Part, ...], ...]
    finish: str | None = "STOP"
    delay_ms: int = 0
    """Virtual pause before each chunk after the first."""


@attrs.frozen(repr=False)
class Fault(_Brief):
    """An API error: ``status`` None is a network error; ``midstream`` after a chunk."""

    status: int | None
    midstream: bool = False


Step = Reply | Fault


@attrs.frozen(repr=False)
class Prompt(_Brief):
    text: str
    queued: bool = False
    """Sent without waiting for the previous prompt's turn to end."""


@attrs.frozen(repr=False)
class Answer(_Brief):
    outcome: str = "proceed_once"
    after_ms: int = 0
    twice: bool = False
    """A second client answers too (the first answer wins)."""


MOMENTS = (
    "GenerateRequest",
    "ModelChunk",
    "ToolCallRequested",
    "ScheduleBatch",
    "RunTool",
    "ToolOutputStreamed",
    "ApprovalRequested",
    "ToolFinished",
    "BatchSettled",
    "TurnEnded",
)
"""Message types a client may act on (cancel or close) the moment it sees them."""


@attrs.frozen(repr=False)
class When(_Brief):
    """A moment of the session, as the client sees it: the ``nth`` message of type
    ``on``, or after ``after_messages`` messages, or at virtual time ``at_ms``."""

    on: str | None = None
    nth: int = 1
    after_messages: int | None = None
    at_ms: int | None = None
    where: tuple[tuple[str, Any], ...] = ()
    """Fields the message of type ``on`` must have (a scenario's ``cancel_when``):
    ``nth`` then counts only the messages that match."""

    def due(self, seen: int, counts: Mapping[str, int], latest: str) -> bool:
        if self.on is not None:
            return latest == self.on and counts.get(latest, 0) == self.nth
        return self.after_messages == seen

    def matches(self, message: Any) -> bool:
        """Whether ``message`` is of type ``on`` with the fields ``where`` names."""
        return type(message).__name__ == self.on and all(
            thaw(getattr(message, key, None)) == value for key, value in self.where
        )


BOGUS_KINDS = ("unknown_answer", "cancel_unknown_turn", "empty_prompt", "configure")


@attrs.frozen(repr=False)
class Bogus(_Brief):
    """A command a careless client sends (see ``BOGUS_KINDS``)."""

    kind: str
    at_ms: int = 0


@attrs.frozen(repr=False)
class Follower(_Brief):
    """A subscriber with a small ``lag`` buffer; after ``drop_after`` messages it goes
    away for ``away_ms`` and resubscribes from ``rewind`` messages before where it was,
    catching up from the recording."""

    capacity: int = 4
    drop_after: int | None = None
    away_ms: int = 0
    rewind: int = 0
    slow_ms: int = 0
    """Virtual time it takes over each message (a slow client lags)."""


@attrs.frozen(repr=False)
class Session:
    model: tuple[Step, ...]
    """What the model answers, request after request (strict order, like a
    fake-responses file; when it runs out a request fails)."""
    prompts: tuple[Prompt, ...] = (Prompt("go"),)
    answers: tuple[Answer, ...] = ()
    """Answers to approval requests, in order (then ``proceed_once`` at once)."""
    cancels: tuple[When, ...] = ()
    """When the client sends ``CancelTurn``."""
    bogus: tuple[Bogus, ...] = ()
    close: When | None = None
    """When the client closes the session, whatever runs (else after its prompts)."""
    interactive: bool = True
    follower: Follower | None = None

    def __repr__(self) -> str:
        lines = ["Session("]
        lines.append("  model=[")
        lines += [f"    {step!r}," for step in self.model]
        lines.append("  ],")
        for field in attrs.fields(Session)[1:]:
            value = getattr(self, field.name)
            if value != field.default:
                lines.append(f"  {field.name}={value!r},")
        lines.append(")")
        return "\n".join(lines)


# -- strategies ------------------------------------------------------------------------------
WORDS = ("alpha", "beta", "gamma", "done", "ok", "hello world", "")
CHANT = "I will check the file again to make sure it is right. " * 12
"""Streamed text the loop detector finds repetitive."""

any_calls = st.builds(
    Call,
    tool=st.sampled_from(["probe", "probe", "shell_probe", "write_file", "deny_tool", "no_such_tool"]),
    ms=st.sampled_from([0, 5, 50, 400, 3000]),
    outcome=st.sampled_from(["ok", "ok", "ok", "error", "crash", "invalid"]),
    out=st.sampled_from([0, 0, 2]),
    big=st.sampled_from([False, False, False, True]),
    ask=st.sampled_from([False, False, True]),
    wait=st.sampled_from([None, None, True, False]),
    proc=st.sampled_from([False, False, False, True]),
    bg=st.sampled_from([False, False, False, True]),
)
"""Any call: failing, denied, unknown, asking, waiting, with processes..."""
plain_calls = st.builds(
    Call,
    tool=st.sampled_from(["probe", "probe", "shell_probe", "shell_probe", "write_file"]),
    ms=st.sampled_from([5, 50, 400]),
    bg=st.sampled_from([False, False, False, True]),
)
"""A call that runs and succeeds (``write_file`` is a barrier)."""
calls = st.one_of(plain_calls, plain_calls, any_calls)
texts = st.sampled_from(WORDS).map(Text)
thoughts = st.sampled_from(["Plan", "Check"]).map(Thought)
junk = st.sampled_from(sorted(JUNK_PARTS) + sorted(JUNK_CHUNKS)).map(Junk)
delays = st.sampled_from([0, 0, 10, 1000])

answer_replies = st.builds(
    lambda first, more, delay: Reply(chunks=(first, *more), delay_ms=delay),
    st.tuples(st.sampled_from(WORDS[:-1]).map(Text)) | st.tuples(thoughts, st.sampled_from(WORDS[:-1]).map(Text)),
    st.lists(st.lists(texts | thoughts, min_size=1, max_size=2).map(tuple), max_size=2),
    delays,
)
"""A final answer: text (and thoughts), no calls."""
call_replies = st.builds(
    lambda lead, groups, delay: Reply(chunks=((lead,), *groups) if lead is not None else tuple(groups), delay_ms=delay),
    st.none() | texts | thoughts,
    st.lists(st.lists(calls, min_size=1, max_size=4).map(tuple), min_size=1, max_size=2),
    delays,
)
"""Function calls (parallel ones in a chunk, or over chunks), maybe after some text."""
odd_steps: st.SearchStrategy[Step] = st.one_of(
    st.builds(Fault, status=st.sampled_from([429, 500, 503, 400, None]), midstream=st.booleans()),
    st.builds(
        Reply,
        chunks=st.lists(st.lists(texts | calls | junk, min_size=1, max_size=3).map(tuple), min_size=1, max_size=2).map(tuple),
        finish=st.sampled_from(["STOP", None, "MAX_TOKENS", "SAFETY", "MALFORMED_FUNCTION_CALL"]),
    ),
    st.just(Reply(chunks=((Text(CHANT),),))),
    # Five identical calls in one response: the loop detector's tool-call rule.
    calls.map(lambda c: Reply(chunks=((c,) * 5,))),
)
"""API faults, malformed chunks, invalid streams, loops."""
rounds = st.one_of(
    st.tuples(call_replies, answer_replies),
    st.tuples(call_replies, answer_replies),
    st.tuples(call_replies, call_replies, answer_replies),
    st.tuples(answer_replies),
    st.tuples(odd_steps),
)
"""What the model says for one prompt, most often: calls, then an answer."""

followers = st.builds(
    Follower,
    capacity=st.sampled_from([1, 4, 1000]),
    drop_after=st.none() | st.integers(1, 60),
    away_ms=st.sampled_from([0, 5, 2000]),
    rewind=st.sampled_from([0, 0, 1, 5]),
    slow_ms=st.sampled_from([0, 0, 1]),
)


moments = st.one_of(
    st.builds(When, on=st.sampled_from(MOMENTS), nth=st.sampled_from([1, 1, 2])),
    st.builds(When, on=st.sampled_from(MOMENTS), nth=st.sampled_from([1, 1, 2])),
    st.builds(When, after_messages=st.integers(1, 80)),
    st.builds(When, at_ms=st.sampled_from([0, 1, 10, 60, 400, 3000, 60_000])),
)


def _session(turns: list[tuple[Prompt, tuple[Step, ...]]], **rest: Any) -> Session:
    return Session(model=tuple(step for _, r in turns for step in r), prompts=tuple(p for p, _ in turns), **rest)


def sessions() -> st.SearchStrategy[Session]:
    """Sessions of one to three prompts, each with what the model says to it (a round
    may fall short, e.g. after a loop or a retry: then the script runs out)."""
    prompts = st.builds(Prompt, text=st.sampled_from(["go", "again", "fix it"]), queued=st.sampled_from([False, False, True]))
    return st.builds(
        _session,
        turns=st.lists(st.tuples(prompts, rounds | st.just(())), min_size=1, max_size=3),
        answers=st.lists(
            st.builds(
                Answer,
                outcome=st.sampled_from(["proceed_once", "proceed_once", "proceed_always", "cancel"]),
                after_ms=st.sampled_from([0, 0, 10, 5000]),
                twice=st.sampled_from([False, False, True]),
            ),
            max_size=3,
        ).map(tuple),
        cancels=st.one_of(st.just(()), st.just(()), st.tuples(moments)),
        bogus=st.lists(
            st.builds(Bogus, kind=st.sampled_from(BOGUS_KINDS), at_ms=st.sampled_from([0, 5, 500])), max_size=1
        ).map(tuple),
        close=st.one_of(st.none(), st.none(), st.none(), moments),
        interactive=st.sampled_from([True, True, True, False]),
        follower=st.none() | followers,
    )


