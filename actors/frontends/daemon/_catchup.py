"""Which of a session's messages a daemon client gets, live and in catch-up.

A subscriber that starts at seq N, that fell behind (its bus subscription lagged) or
that sees a gap in the live stream reads the missing envelopes from the recording with
an ``actors.recording.RecordingCursor`` (the recorder writes each message before anyone
else sees it, so the file holds everything before what a subscriber receives live).

By default clients get the session's *client events*; ``INTERNAL`` names the messages
left out unless a subscriber asks for everything (``Subscribe.full``). Only those carry
contents by reference (``actors.recording.INTERNED``): a cursor that delivers them reads
every line that defines or refers to contents, from the file's start, to resolve them.
"""

from __future__ import annotations

INTERNAL = frozenset(
    {
        "GenerateRequest",
        "ModelChunk",
        "ModelFinished",
        "GenerationCancelled",
        "CancelGeneration",
        "StartTurn",
        "OpenSession",
        "HistoryCompressed",
        "RunTool",
        "ToolFinished",
        "CancelTool",
        "CancelBatch",
        "BatchCancelAcknowledged",
        "CheckLoop",
        "LoopVerdict",
        "ResetLoopDetection",
        "ClearLoopDetection",
        "CancelLoopCheck",
        "DisableLoopDetection",
        "RunHooks",
        "HookRan",
        "HooksFinished",
        "CancelHooks",
    }
)
"""Message types that are the actors' own traffic rather than something a user sees
(the model's requests and raw chunks, tool runs, loop checks, hook runs)."""


def is_client_event(type_name: str) -> bool:
    return type_name not in INTERNAL
