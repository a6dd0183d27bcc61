"""Perturbations of a user's session (``Perturbation``): what the real world would vary
around a recording, scenario or fake-responses file, as plain data that shrinks to
something one can read (``Perturbation.words``), and the hypothesis strategy that
generates them (``perturbations``).

The kinds (``KINDS``), each switched on or off by ``agentbus explore --perturb``:

- ``tools``: a call takes longer (virtual ms), fails, crashes, or leaves a process in
  the background; a recorded hook (a stand-in) answers later;
- ``chunks``: a pause between the model's streamed chunks;
- ``faults``: a model call fails (HTTP 429/500/503/400 or a network error, before or
  after its first chunk); the gateway retries what Gemini CLI retries;
- ``cancels``: the client cancels the turn at a moment of the session;
- ``approvals``: the client's answers to approval requests and when they come (a
  second client answering too);
- ``clients``: a follower that lags, drops and resubscribes from an earlier point; the
  client closing the session early.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
from hypothesis import strategies as st

from actors.frontends.explore._script import (
    Answer,
    Follower,
    Prompt,
    Session,
    When,
    _Brief,
    followers,
    moments,
)

KINDS = ("tools", "chunks", "faults", "cancels", "approvals", "clients")
"""Every kind of perturbation (see the module doc)."""


@attrs.frozen(repr=False)
class ToolTwist(_Brief):
    """The ``nth`` call of ``tool`` in a run: ``ms`` virtual milliseconds more, then
    ``outcome`` (``ok``: it runs for real; ``error``: a tool error instead; ``crash``:
    it raises), and ``bg``: it leaves a child process in the background."""

    tool: str
    nth: int = 1
    ms: int = 0
    outcome: str = "ok"
    bg: bool = False

    def words(self) -> str:
        what = [f"the {_ordinal(self.nth)} {self.tool} call"]
        if self.ms:
            what.append(f"takes {self.ms} ms more")
        if self.outcome == "error":
            what.append("fails with a tool error instead of running")
        elif self.outcome == "crash":
            what.append("crashes (raises) instead of running")
        if self.bg:
            what.append("leaves a process running in the background")
        if len(what) == 1:
            what.append("runs as it is")
        return " ".join(what[:1]) + " " + ", then ".join(what[1:])


@attrs.frozen(repr=False)
class HookTwist(_Brief):
    """The ``nth`` time the session asks for its ``event`` hooks in a run, their
    recorded answer (a stand-in's) comes ``ms`` virtual milliseconds later."""

    event: str
    nth: int = 1
    ms: int = 0

    def words(self) -> str:
        return f"the {_ordinal(self.nth)} {self.event} hooks answer {self.ms} ms later"


@attrs.frozen(repr=False)
class ApiFault(_Brief):
    """The ``attempt``-th model call of the run fails: HTTP ``status`` (None: a network
    error), before any chunk or (``midstream``) after a first one."""

    attempt: int
    status: int | None
    midstream: bool = False

    def words(self) -> str:
        how = f"HTTP {self.status}" if self.status is not None else "a network error (ECONNRESET)"
        when = " after a first chunk" if self.midstream else ""
        return f"model call {self.attempt} fails with {how}{when}"


@attrs.frozen
class Perturbation:
    """One way the world goes around the target's session."""

    tools: tuple[ToolTwist, ...] = ()
    chunk_ms: int = 0
    """Virtual pause before each streamed chunk after the first."""
    faults: tuple[ApiFault, ...] = ()
    cancels: tuple[When, ...] = ()
    answers: tuple[Answer, ...] | None = None
    """The client's approval answers (None: the target's own)."""
    close: When | None = None
    """When the client closes the session, whatever runs."""
    follower: Follower | None = None
    hooks: tuple[HookTwist, ...] = ()
    """When the recorded hooks' answers come (``tools`` kind)."""

    def words(self) -> list[str]:
        """The perturbation as sentences (empty: the session as it is)."""
        out = [t.words() for t in self.tools]
        out += [h.words() for h in self.hooks]
        if self.chunk_ms:
            out.append(f"each streamed chunk comes {self.chunk_ms} ms after the one before")
        out += [f.words() for f in self.faults]
        out += [f"the client cancels the turn {_moment(c)}" for c in self.cancels]
        for i, a in enumerate(self.answers or (), start=1):
            said = f"approval {i} is answered {a.outcome} after {a.after_ms} ms"
            out.append(said + (", by two clients at once" if a.twice else ""))
        if self.close is not None:
            out.append(f"the client closes the session {_moment(self.close)}")
        if self.follower is not None:
            out.append(_follower(self.follower))
        return out

    def session(
        self, prompts: Sequence[str], answers: Sequence[str], cancels: Sequence[When], interactive: bool
    ) -> Session:
        """The client's script: the target's prompts, answers and cancels, perturbed."""
        given = self.answers if self.answers is not None else tuple(Answer(outcome=a) for a in answers)
        return Session(
            model=(),
            prompts=tuple(Prompt(p) for p in prompts),
            answers=given,
            cancels=(*cancels, *self.cancels),
            close=self.close,
            interactive=interactive,
            follower=self.follower,
        )


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _moment(when: When) -> str:
    if when.on is not None:
        fields = "".join(f" with {k}={v!r}" for k, v in when.where)
        return f"when it sees the {_ordinal(when.nth)} {when.on}{fields}"
    if when.after_messages is not None:
        return f"after {when.after_messages} messages"
    return f"at {when.at_ms} ms"


def _follower(f: Follower) -> str:
    said = f"a second client follows with a buffer of {f.capacity} message(s)"
    if f.slow_ms:
        said += f", taking {f.slow_ms} ms over each"
    if f.drop_after is not None:
        said += (
            f"; it drops after {f.drop_after} messages, is away {f.away_ms} ms and resubscribes"
            f" {f.rewind} message(s) back"
        )
    return said


def perturbations(
    calls: Sequence[str], requests: int, *, kinds: Sequence[str] = KINDS, hooks: Sequence[str] = ()
) -> st.SearchStrategy[Perturbation]:
    """Perturbations of a session whose model makes the function ``calls`` (tool names,
    in order) over ``requests`` answers and whose recorded hooks answer ``hooks`` (their
    events, in order), of the given ``kinds`` only."""
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown:
        raise ValueError(f"unknown perturbation kind(s) {', '.join(unknown)}; known: {', '.join(KINDS)}")
    none: st.SearchStrategy[tuple[()]] = st.just(())
    occurrences = [(name, calls[: i + 1].count(name)) for i, name in enumerate(calls)]
    tools: st.SearchStrategy[tuple[ToolTwist, ...]] = none
    if "tools" in kinds and occurrences:
        twist = st.builds(
            lambda at, ms, outcome, bg: ToolTwist(tool=at[0], nth=at[1], ms=ms, outcome=outcome, bg=bg),
            st.sampled_from(occurrences),
            st.sampled_from([0, 5, 50, 400, 3000]),
            st.sampled_from(["ok", "ok", "ok", "error", "crash"]),
            st.sampled_from([False, False, False, True]),
        )
        tools = st.lists(twist, max_size=4, unique_by=lambda t: (t.tool, t.nth)).map(tuple)
    hook_twists: st.SearchStrategy[tuple[HookTwist, ...]] = none
    asked = [(event, hooks[: i + 1].count(event)) for i, event in enumerate(hooks)]
    if "tools" in kinds and asked:
        hook_twist = st.builds(
            lambda at, ms: HookTwist(event=at[0], nth=at[1], ms=ms),
            st.sampled_from(asked),
            st.sampled_from([5, 50, 400, 3000]),
        )
        hook_twists = st.lists(hook_twist, max_size=3, unique_by=lambda h: (h.event, h.nth)).map(tuple)
    chunk_ms = st.sampled_from([0, 0, 10, 1000]) if "chunks" in kinds else st.just(0)
    faults: st.SearchStrategy[tuple[ApiFault, ...]] = none
    if "faults" in kinds:
        fault = st.builds(
            ApiFault,
            attempt=st.integers(1, max(1, requests) + 1),
            status=st.sampled_from([503, 429, 500, 400, None]),
            midstream=st.booleans(),
        )
        faults = st.lists(fault, max_size=2, unique_by=lambda f: f.attempt).map(tuple)
    cancels: st.SearchStrategy[tuple[When, ...]] = none
    if "cancels" in kinds:
        cancels = st.one_of(none, none, st.tuples(moments))
    answers: st.SearchStrategy[tuple[Answer, ...] | None] = st.none()
    if "approvals" in kinds:
        answer = st.builds(
            Answer,
            outcome=st.sampled_from(["proceed_once", "proceed_once", "proceed_always", "cancel"]),
            after_ms=st.sampled_from([0, 0, 10, 5000]),
            twice=st.sampled_from([False, False, True]),
        )
        answers = st.none() | st.lists(answer, min_size=1, max_size=3).map(tuple)
    close: st.SearchStrategy[When | None] = st.none()
    follower: st.SearchStrategy[Follower | None] = st.none()
    if "clients" in kinds:
        close = st.one_of(st.none(), st.none(), st.none(), moments)
        follower = st.none() | followers
    return st.builds(
        Perturbation,
        tools=tools,
        chunk_ms=chunk_ms,
        faults=faults,
        cancels=cancels,
        answers=answers,
        close=close,
        follower=follower,
        hooks=hook_twists,
    )
