"""``agentbus replay``: re-drive a session from its recording, deterministically.

See ``_cli`` for the command, ``_run`` for how a recording is re-driven, ``_gate`` for
how the recorded order is enforced, ``_normalise`` for what ``--check`` compares, and
``_trace`` for ``--trace`` (a recording as Chrome trace events: ``trace_events``),
``_hooks`` for a recording's hooks given back (``recorded_hook_config``).
"""

from actors.frontends.replay._cli import ReplayInputError, build_parser, main, replay_file, sniff
from actors.frontends.replay._hooks import hook_points, recorded_hook_config
from actors.frontends.replay._normalise import ID_FIELDS, TIMING_FIELDS, IdLabels, normalise
from actors.frontends.replay._run import Divergence, ReplayOptions, ReplayResult, replay_recording
from actors.frontends.replay._trace import trace_document, trace_events

__all__ = [
    "ID_FIELDS",
    "TIMING_FIELDS",
    "build_parser",
    "hook_points",
    "Divergence",
    "IdLabels",
    "ReplayInputError",
    "ReplayOptions",
    "ReplayResult",
    "main",
    "normalise",
    "recorded_hook_config",
    "replay_file",
    "replay_recording",
    "sniff",
    "trace_document",
    "trace_events",
]
