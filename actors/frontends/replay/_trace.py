"""A recording as a timeline: the Chrome trace event format (``agentbus replay FILE
--trace OUT.json``), which Perfetto (ui.perfetto.dev) and ``chrome://tracing`` open.

Pure: a ``Recording`` (``actors.recording.load_recording``) in, a list of trace events
out (``trace_events``; ``trace_document`` wraps them as ``{"traceEvents": [...]}``).

**Processes and tracks.** Each process that ran the session (a ``Segment`` of the
recording: a resumed session has several) is a trace process (``pid`` 1, 2, ... in file
order, named with its OS pid and whether it resumed). Each actor address that sent or
received a message in that process is a track (``tid``, named by ``M`` events with the
address less its ``:<session id>``): clients, session, turn, loops, gateway, scheduler,
each executor, hooks. Slices of one track that overlap without nesting (two calls of one
wave, a loop check's model request beside the turn's) go on extra lanes of that track,
named ``<track> (2)``, ``(3)``...; the scheduler's tool calls have lanes of their own
(``scheduler · calls``) and so do its approvals (``scheduler · approvals``).

**Time.** A message's ``ts`` is its wall stamp in microseconds from the first message's,
or 1 µs after the message before it where the stamp is missing, equal (stamps are
milliseconds) or earlier: every message keeps its own instant, in file order, so slices
are never negative and nest as the messages did. A slice still open when its process's
part ends (a crash, a torn tail) ends at that part's last message, marked
``unfinished``.

**The mapping** (``X`` slices, ``i`` instants; ``S`` sender, ``R`` recipient):

=================================================  ==========================================
messages                                           on the timeline
=================================================  ==========================================
``OpenSession``/``SessionOpened`` → ``SessionClosed``  slice ``session`` on the session
``StartTurn`` (or ``TurnStarted``) → ``TurnEnded``     slice ``turn N · <prompt>`` on the turn
``GenerateRequest`` → ``ModelFinished`` /              slice ``model · <role>`` on the gateway,
``ModelFailed`` / ``GenerationCancelled``              its attempts as child slices when
                                                       ``ModelRetrying`` split it (and an
                                                       instant per retry; its chunks and
                                                       the first one's delay in its args);
                                                       slice ``model`` on S (the turn waiting)
``ScheduleBatch`` → ``BatchSettled``                   slice ``batch · N calls`` on the
                                                       scheduler, children ``validate`` then
                                                       ``wave W`` (the wave's first status to
                                                       its last call's end); slice ``tools``
                                                       on S
``ToolCallUpdated`` (one call)                         slice ``<tool>`` on ``scheduler · calls``
                                                       from the call's first status of its
                                                       wave to its terminal one (``wave`` in
                                                       args), a child per status
                                                       (``awaiting_approval``, ``scheduled``,
                                                       ``executing``)
``RunTool`` → ``ToolFinished``                         slice ``<tool>`` on the executor (its
                                                       ``ToolOutputStreamed`` lines counted)
``ApprovalRequested`` → ``ApprovalSettled`` (or the  slice ``approval · <tool>`` on
call's next status: a rule answered it, or it ended)   ``scheduler · approvals``
``RunHooks`` → ``HooksFinished``                       slice ``hooks · <event>`` on the hook
                                                       runner and on S; ``HookRan`` instants
``CheckLoop`` → ``LoopVerdict``                        slice ``check · <kind>`` on loops; a
                                                       verdict with a loop: instant
``CancelTurn`` → ``TurnCancelAcknowledged``            slice ``cancel turn`` on R (session,
                                                       then turn), closed by R's acknowledgement
``CancelBatch`` → ``BatchCancelAcknowledged``          slice ``cancel batch`` on the scheduler
``SubmitPrompt``, ``ApprovalAnswered``, ``CancelTool``, instants on their sender's (or, for the
``CancelGeneration``, ``ToolCallRequested``,           cancels, recipient's) track
``StreamRetried``, ``TurnNotice``, ``ActorFailed``...
=================================================  ==========================================

Messages that start or end a slice and go to an address (``StartTurn``,
``GenerateRequest``, a model's reply, ``ScheduleBatch``, ``BatchSettled``, ``RunTool``,
``ToolFinished``, ``RunHooks``, ``HooksFinished``, ``CancelTurn``, ``CancelBatch``,
``CancelTool``, ``ApprovalAnswered``, ``TurnEnded``, ``TurnCancelAcknowledged``) are flow
arrows (``s``/``f``) from the sender's track to the recipient's, where a slice is open
on each to hold them.
"""

from __future__ import annotations

import bisect
from typing import Any

import attrs

from actors.frontends.replay._trace_build import (
    GROUP_ORDER,
    ROLE_ORDER,
    Track,
    _Builder,
    _Slice,
    wall_micros,
)
from actors.recording import Recording

# -- layout: lanes, tids, events ---------------------------------------------------------


def _sane_children(parent: _Slice) -> list[_Slice]:
    """Children in order, each inside its parent and after the one before it."""
    out: list[_Slice] = []
    floor = parent.start
    for child in sorted(parent.children, key=lambda c: (c.start, c.end)):
        start = min(max(child.start, floor), parent.end)
        end = min(max(child.end, start), parent.end)
        out.append(attrs.evolve(child, start=start, end=end))
        floor = end
    return out


def _lanes(slices: list[_Slice]) -> list[list[_Slice]]:
    """Slices of one track spread over lanes so each lane's slices nest: a slice goes
    in the first lane where it starts after the open ones end or fits inside the
    innermost open one (never inside one with children of its own)."""
    lanes: list[list[_Slice]] = []
    stacks: list[list[_Slice]] = []
    for s in sorted(slices, key=lambda x: (x.start, -x.end)):
        for lane, stack in zip(lanes, stacks, strict=True):
            while stack and stack[-1].end <= s.start:
                stack.pop()
            if not stack or (not stack[-1].children and stack[-1].end >= s.end):
                lane.append(s)
                stack.append(s)
                break
        else:
            lanes.append([s])
            stacks.append([s])
    return lanes


def _role(address: str) -> int:
    role = address.split(":", 1)[0].split(".", 1)[0]
    return ROLE_ORDER.index(role) if role in ROLE_ORDER else len(ROLE_ORDER)


class _Enclosing:
    """The slices of one tid, for finding the innermost one open at a time."""

    def __init__(self, slices: list[_Slice]) -> None:
        ordered = sorted(slices, key=lambda x: (x.start, -x.end))
        self.starts = [s.start for s in ordered]
        self.ends = [s.end for s in ordered]
        self.parent: list[int] = []
        stack: list[int] = []
        for i, s in enumerate(ordered):
            while stack and self.ends[stack[-1]] < s.end:
                stack.pop()
            self.parent.append(stack[-1] if stack else -1)
            stack.append(i)

    def holds(self, ts: int) -> bool:
        i = bisect.bisect_right(self.starts, ts) - 1
        while i >= 0 and self.ends[i] < ts:
            i = self.parent[i]
        return i >= 0


def trace_events(recording: Recording) -> list[dict[str, Any]]:
    """The recording as Chrome trace events (see the module docstring)."""
    b = _Builder(recording)
    for number, seg in enumerate(recording.segments, start=1):
        b.segment(number, seg)
    suffix = f":{b.sid}" if b.sid else ""
    events: list[dict[str, Any]] = []
    slices_out: list[dict[str, Any]] = []
    tid_of: dict[tuple[int, Track], list[int]] = {}
    # Thread ids are unique across processes: Perfetto takes a tid seen in a second
    # process for a thread that moved there, and the first process's lost its name.
    tid = 0
    by_tid: dict[tuple[int, int], list[_Slice]] = {}
    for pid, seg in enumerate(recording.segments, start=1):
        meta = seg.meta
        label = f"agentbus session {b.sid} · process {pid}"
        if isinstance(meta.get("pid"), int):
            label += f" (pid {meta['pid']}{', resumed' if meta.get('resumed') else ''})"
        events.append(
            {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": label}}
        )
        events.append(
            {
                "ph": "M",
                "name": "process_sort_index",
                "pid": pid,
                "tid": 0,
                "args": {"sort_index": pid},
            }
        )
        per_track: dict[Track, list[_Slice]] = {t: [] for t in b.tracks.get(pid, set())}
        for s in b.slices.get(pid, []):
            per_track.setdefault(s.track, []).append(s)
        order = sorted(
            per_track,
            key=lambda t: (
                _role(t[0]),
                t[0],
                GROUP_ORDER.index(t[1]) if t[1] in GROUP_ORDER else 9,
                t[1],
            ),
        )
        for track in order:
            address, group = track
            shown = address[: -len(suffix)] if suffix and address.endswith(suffix) else address
            base = f"{shown} · {group}" if group else shown
            lanes = _lanes(per_track[track]) or [[]]
            tid_of[(pid, track)] = []
            for k, lane in enumerate(lanes):
                tid += 1
                tid_of[(pid, track)].append(tid)
                name = base if k == 0 else f"{base} ({k + 1})"
                events.append(
                    {
                        "ph": "M",
                        "name": "thread_name",
                        "pid": pid,
                        "tid": tid,
                        "args": {"name": name},
                    }
                )
                events.append(
                    {
                        "ph": "M",
                        "name": "thread_sort_index",
                        "pid": pid,
                        "tid": tid,
                        "args": {"sort_index": tid},
                    }
                )
                placed = by_tid.setdefault((pid, tid), [])
                for s in lane:
                    kids = _sane_children(s)
                    placed.append(s)
                    placed.extend(kids)
                    for one in (s, *kids):
                        event: dict[str, Any] = {
                            "ph": "X",
                            "name": one.name,
                            "cat": one.cat,
                            "pid": pid,
                            "tid": tid,
                            "ts": one.start,
                            "dur": one.end - one.start,
                            "args": one.args,
                        }
                        if one.cname:
                            event["cname"] = one.cname
                        slices_out.append(event)
    slices_out.sort(key=lambda e: (e["pid"], e["tid"], e["ts"], -e["dur"]))
    events.extend(slices_out)
    for inst in b.instants:
        pid, track = inst.pop("pid"), inst.pop("track")
        events.append({**inst, "pid": pid, "tid": tid_of[(pid, track)][0]})
    enclosing = {key: _Enclosing(v) for key, v in by_tid.items()}

    def holder(pid: int, address: str, ts: int) -> int | None:
        for group in GROUP_ORDER:
            for tid in tid_of.get((pid, (address, group)), []):
                if (pid, tid) in enclosing and enclosing[(pid, tid)].holds(ts):
                    return tid
        return None

    flow_id = 0
    for pid, sender, recipient, ts, name in b.flows:
        src, dst = holder(pid, sender, ts), holder(pid, recipient, ts)
        if src is None or dst is None:
            continue
        flow_id += 1
        events.append(
            {
                "ph": "s",
                "id": flow_id,
                "name": name,
                "cat": "flow",
                "pid": pid,
                "tid": src,
                "ts": ts,
            }
        )
        events.append(
            {
                "ph": "f",
                "bp": "e",
                "id": flow_id,
                "name": name,
                "cat": "flow",
                "pid": pid,
                "tid": dst,
                "ts": ts,
            }
        )
    return events


def trace_document(recording: Recording) -> dict[str, Any]:
    """``{"traceEvents": [...], ...}``: what ``--trace`` writes."""
    first = next((rec.wall for rec in recording.lines if rec.wall), None)
    return {
        "traceEvents": trace_events(recording),
        "displayTimeUnit": "ms",
        "otherData": {
            "session_id": recording.session_id,
            "recording": str(recording.path),
            "first_wall": first,
        },
    }


__all__ = ["trace_document", "trace_events", "wall_micros"]
