"""The recording format: a session's append-only log, written, scanned, read and listed.

The recorder actor (``actors/recorder.py``) writes it; resume (``actors/host/sessions.py``),
replay, the daemon (catch-up, resync, resume) and ACP (``session/load``,
``session/list``) read it. This package is the one place that knows the format; it
imports only ``bus``, the standard library and third-party packages (a leaf helper:
``docs/actors.md``, "Layers").

**The file.** ``<data dir>/sessions/<session id>.jsonl`` (``recording_path``; the data
directory is ``default_data_dir()``). One JSON object per line, UTF-8, ``\\n``-terminated,
only ever appended:

- a *meta* line opens each process's part of the file (a resumed session appends a new
  one): ``{"v": 1, "kind": "meta", "session_id", "started", ..., "first_seq",
  "resumed"}`` with what the session was started with (workspace, model, mode, pid)
  between (``meta_line``);
- every message of the session is one *envelope* line, ``bus.codec.encode_envelope``
  plus a wall timestamp: ``{"v": 1, "seq", "session_id", "sender", "to", "wall", "msg"}``
  (``encode_line``). The keys come in that order and the message's ``type`` is its
  last key, so a line starts with its sequence number and ends with its message's
  type: scanners read both without parsing it (``line_seq``, ``line_type``);
- a *void* line, ``{"v": 1, "kind": "void", "first", "last"}``, accounts for sequence
  numbers the bus gave to messages that reached no one (their sender was cancelled
  inside ``Bus.send`` before the first observer took them), so the numbering in the
  file stays whole and a replay can reproduce it (``void_line``).

A lone surrogate (a file name or workspace path that is not UTF-8, held with
``surrogateescape``) is written as its ``\\uXXXX`` escape, which reads back as the same
string (``line_bytes``).

**Contents by reference** (``_refs``). A history is carried whole by every
``StartTurn`` and every model request (``INTERNED`` names the fields), so written as it
is, a recording grows with the square of the session's length. Those fields are written
by reference: each distinct content (a ``Content`` of the conversation, a request's
config) gets a number, 1, 2, ... in the order this process first writes it, and goes in
that line's ``defs`` (``{"17": {...}}``); the field itself leaves ``msg`` for the line's
``refs``: a number, or for a list, its numbers with runs written ``[first, last]``,
after the ``same`` count it shares with the same field of the last message of its type
(``{"same": 210, "then": [[412, 415]]}``). Such a line is version 2 (``REFS_VERSION``:
a reader that predates it refuses it as newer, instead of reading a request without its
contents) and is still one JSON object of one message. Numbers are per process: a meta
line starts them again, so a resumed session never depends on an earlier process's
table, and a torn line (only ever a process's last) is never referred to.
``decode_line`` reads a line back given the ``ContentRefs`` of the lines before it in
the part; the loader and ``RecordingCursor`` use it. Version 1 files, without
references, load as before.

**Ownership** (``_files``). One process runs a session at a time: its recorder holds an
exclusive ``flock`` on the recording for the session's life (``SessionClaim``). A
second claim fails with ``SessionInUseError`` (it names the owner's pid when the
owner's meta line does); ``session_in_use`` lets a front end refuse early, and
``delete_recording`` deletes only a recording nobody holds. ``SessionClaim.lost`` tells
whether the path still names the file being written (it was not deleted or replaced).

**Secrets** (``_scrub``). API keys never reach the file: values of ``GEMINI_API_KEY``,
``GOOGLE_API_KEY`` and other ``*_API_KEY`` variables of the environment (8 characters
or more), Google API keys (``AIza...``), bearer tokens, and the values of
``Authorization``/``x-goog-api-key``-like keys are replaced by ``[REDACTED]``. A
scrubbed message still decodes; it is then not byte-equal to what was delivered.

**Reading** (``_read``). ``load_recording`` parses a file back into its processes'
parts (``Segment``): a torn last line (the process died while writing it) is reported
and ignored, and so is a torn line that ends a process's part of the file (the next
process terminates it with a newline and says so in its meta line, ``"torn_tail":
true``; ``read_tail`` is how it finds out). Any other bad line is a ``RecordingError``
naming the file and line. Nothing is ever truncated or rewritten.

**Scanning** (``_scan``). Without loading a file: ``read_meta`` reads its first line,
``read_tail`` its end, ``last_stamp`` its last wall time, ``lines_forward`` and
``lines_backward`` its lines a block at a time, and ``RecordingCursor`` reads forward
by sequence number (the daemon's catch-up). ``iter_recordings`` lists a data
directory's recordings.
"""

from ._files import (
    RecorderError,
    SessionClaim,
    SessionInUseError,
    default_data_dir,
    delete_recording,
    in_use_message,
    iter_recordings,
    recorder_error_in,
    recording_path,
    session_in_use,
    sessions_dir,
)
from ._lines import (
    REFS_VERSION,
    RecordingError,
    is_meta_line,
    is_recording_line,
    json_object,
    line_seq,
    line_type,
)
from ._read import (
    RecordedLine,
    Recording,
    Segment,
    TornLine,
    cyclic_gc_paused,
    decode_line,
    load_recording,
    parse_recording,
)
from ._refs import INTERNED, INTERNED_TYPES, ContentRefs, ContentTable
from ._scan import (
    SCAN_BLOCK,
    RecordingCursor,
    Tail,
    everything,
    last_stamp,
    lines_backward,
    lines_forward,
    read_meta,
    read_tail,
    stamp_of,
)
from ._scrub import REDACTED, Scrubber, secrets_from_env
from ._write import FileSink, Sink, encode_line, line_bytes, meta_line, void_line, wall_clock_iso

__all__ = [
    "INTERNED",
    "INTERNED_TYPES",
    "REDACTED",
    "REFS_VERSION",
    "SCAN_BLOCK",
    "ContentRefs",
    "ContentTable",
    "FileSink",
    "RecordedLine",
    "RecorderError",
    "Recording",
    "RecordingCursor",
    "RecordingError",
    "Scrubber",
    "Segment",
    "SessionClaim",
    "SessionInUseError",
    "Sink",
    "Tail",
    "TornLine",
    "cyclic_gc_paused",
    "decode_line",
    "default_data_dir",
    "delete_recording",
    "encode_line",
    "everything",
    "in_use_message",
    "is_meta_line",
    "is_recording_line",
    "iter_recordings",
    "json_object",
    "last_stamp",
    "line_bytes",
    "line_seq",
    "line_type",
    "lines_backward",
    "lines_forward",
    "load_recording",
    "meta_line",
    "parse_recording",
    "read_meta",
    "read_tail",
    "recorder_error_in",
    "recording_path",
    "secrets_from_env",
    "session_in_use",
    "sessions_dir",
    "stamp_of",
    "void_line",
    "wall_clock_iso",
]
