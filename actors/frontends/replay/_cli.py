"""``agentbus replay FILE``: re-drive a session deterministically, on trio's virtual clock.

FILE is one of:

- a recording (``<data dir>/sessions/<id>.jsonl``): the session is re-driven from it —
  model chunks, approvals, cancels and (``--tools=recorded``, the default) tool results
  come from the file; ``--tools=live --workspace DIR`` runs the tools again in a fresh
  copy of DIR. ``--check`` compares every replayed message with the recorded one and
  stops at the first difference (exit 1), printing both;
- a Gemini CLI fake-responses file: a new headless session answers ``-p PROMPT`` from
  it, tools live in a copy of ``--workspace`` (default: an empty folder);
- a scenario folder of ours (``scenario.json``; a ``recording.jsonl`` beside it is
  replayed, else its prompt runs against its ``fake.responses`` in a copy of its
  ``workspace``).

``--trace OUT.json`` writes a recording (a scenario folder's) as a timeline instead of
replaying it: the Chrome trace event format, which Perfetto and ``chrome://tracing``
open (``_trace``; ``-`` writes it to stdout). With ``--check`` the recording is also
replayed and checked, as without ``--trace``; the trace is written first, so a replay
that differs can be looked at.

The file is only ever read. Exit codes: 0, 1 (divergence, stall, or the session's own
failure exit code for fresh runs), 2 (bad arguments or input).
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

import attrs
import trio
import trio.testing

from actors.frontends.replay._run import (
    ReplayOptions,
    ReplayResult,
    UnsupportedRecording,
    check_supported,
    replay_recording,
)
from actors.frontends.replay._trace import trace_document
from actors.frontends.replay._view import HeadlessView, HumanView, View
from actors.host.flags import APPROVAL_MODES
from actors.recording import Recording, RecordingError, TornLine, is_recording_line, load_recording

USAGE_EXIT = 2


class ReplayInputError(Exception):
    """FILE (or an option) cannot be replayed; the message names the file and line."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="agentbus replay",
        description="Re-drive a recorded session (or a fake-responses file, or a scenario folder) "
        "on trio's virtual clock.",
    )
    p.add_argument("file", metavar="FILE", help="a recording (.jsonl), a fake-responses file, or a scenario folder")
    p.add_argument("--check", action="store_true", help="compare with the recording; exit 1 at the first difference")
    p.add_argument(
        "--tools",
        choices=("recorded", "live"),
        default="recorded",
        help="recorded (default): tools answer from the recording; live: they run again (see --workspace)",
    )
    p.add_argument(
        "--workspace", metavar="DIR", help="with --tools live: the tools run in a fresh copy of DIR (a scenario's workspace/ by default)"
    )
    p.add_argument(
        "-o",
        "--output-format",
        choices=("human", "text", "json", "stream-json", "none"),
        default="human",
        help="human (default): the session as a person would follow it; text, json, stream-json: "
        "headless output; none: nothing (with --check, only the verdict)",
    )
    p.add_argument(
        "--trace",
        metavar="OUT.json",
        help="write the recording as a timeline (Chrome trace events: Perfetto, chrome://tracing) to OUT.json "
        "('-': stdout) instead of replaying it; with --check, it is replayed and checked as well",
    )
    p.add_argument("-p", "--prompt", help="the prompt (fake-responses files; a scenario folder's own by default)")
    p.add_argument("-m", "--model", help="the model (fake-responses files)")
    p.add_argument(
        "--approval-mode",
        choices=APPROVAL_MODES,
        default=None,
        help="the approval mode (fake-responses files; default yolo)",
    )
    return p


def sniff(path: Path) -> str:
    """``recording``, ``fake-responses`` or ``scenario``; raises ``ReplayInputError``."""
    if path.is_dir():
        if not (path / "scenario.json").is_file():
            raise ReplayInputError(f"{path}: a folder must be a scenario (no scenario.json in it)")
        return "scenario"
    try:
        with path.open("rb") as fh:
            for number, raw in enumerate(fh, start=1):
                if not raw.strip():
                    continue
                try:
                    data = json.loads(raw)
                except ValueError:
                    raise ReplayInputError(
                        f"{path}:{number}: not JSON; expected a recording or a fake-responses file"
                    ) from None
                if isinstance(data, dict) and "method" in data:
                    return "fake-responses"
                if is_recording_line(data):
                    return "recording"
                raise ReplayInputError(f"{path}:{number}: neither a recording line nor a fake-responses line")
    except FileNotFoundError:
        raise ReplayInputError(f"{path}: no such file") from None
    except OSError as exc:
        raise ReplayInputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    raise ReplayInputError(f"{path}: empty file")


def copy_workspace(source: Path, into: Path) -> Path:
    target = into / (source.name or "workspace")
    shutil.copytree(source, target, symlinks=True)
    return target


def make_view(fmt: str, out: TextIO, err: TextIO, clock_ms: Any) -> View | None:
    if fmt == "none":
        return None
    if fmt == "human":
        return HumanView(out)
    return HeadlessView(fmt, out, err, clock_ms)


def replay_file(
    recording: Recording,
    *,
    check: bool,
    tools_mode: str,
    workspace: Path | None,
    fmt: str,
    out: TextIO,
    err: TextIO,
) -> tuple[int, ReplayResult]:
    """Replay a loaded recording in a fresh ``trio.run`` on a ``MockClock``."""
    check_supported(recording)
    clock = trio.testing.MockClock(autojump_threshold=0)
    with tempfile.TemporaryDirectory(prefix="agentbus-replay-") as tmp:
        live_ws: Path | None = None
        if tools_mode == "live":
            if workspace is None:
                raise ReplayInputError(
                    f"{recording.path}: --tools=live needs --workspace DIR (the session ran in "
                    f"{recording.meta.get('workspace', '?')}, line {recording.segments[0].meta_line or 1})"
                )
            if not workspace.is_dir():
                raise ReplayInputError(
                    f"{recording.path}: --tools=live: workspace {workspace} does not exist "
                    f"(the session ran in {recording.meta.get('workspace', '?')}, line "
                    f"{recording.segments[0].meta_line or 1})"
                )
            live_ws = copy_workspace(workspace, Path(tmp))
        view = make_view(fmt, out, err, lambda: trio.current_time() * 1000)
        options = ReplayOptions(
            tools_mode=tools_mode, workspace=live_ws, check=check, clock=clock, view=view
        )
        result = trio.run(replay_recording, recording, options, clock=clock)
        code = view.close() if view is not None else 0
    if result.divergence is not None:
        err.write(f"agentbus replay: {result.divergence.render(recording.path)}\n")
        return 1, result
    if check:
        err.write(
            f"agentbus replay: check OK: {result.messages} messages in {result.segments} "
            f"process{'es' if result.segments != 1 else ''} match {recording.path}\n"
        )
        return 0, result
    return code if fmt != "human" else 0, result


def run_fresh(
    fixture: Path,
    *,
    prompt: str,
    args: Sequence[str],
    workspace: Path | None,
    fmt: str,
    out: TextIO,
    err: TextIO,
) -> int:
    """A new headless session against a fake-responses file, tools live in a copy of
    ``workspace``, on the virtual clock; nothing is recorded."""
    from actors.frontends.headless import prepare, run_prepared
    from actors.frontends.replay._tools import LiveClock, LiveTool
    from actors.host.args import parse_headless
    from actors.host.errors import FatalError

    clock = trio.testing.MockClock(autojump_threshold=0)
    live = LiveClock(clock)
    old_cwd = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="agentbus-replay-") as tmp:
        if workspace is not None:
            ws = copy_workspace(workspace, Path(tmp))
        else:
            ws = Path(tmp) / "workspace"
            ws.mkdir()
        home = Path(tmp) / "home"
        home.mkdir()
        saved = {k: os.environ.get(k) for k in ("GEMINI_CLI_HOME",)}
        os.environ["GEMINI_CLI_HOME"] = str(home)
        os.chdir(ws)
        try:
            headless = parse_headless(
                [*args, "--fake-responses", str(fixture), "-p", prompt, "-o", "text" if fmt in ("human", "none") else fmt]
            )
            try:
                prepared = prepare(headless, {}, stdin_text=None)
            except FatalError as exc:
                err.write(exc.message + "\n")
                return exc.exit_code
            prepared = attrs.evolve(
                prepared,
                recording=None,
                tools={n: LiveTool(t, live) for n, t in prepared.tools.items()},
            )
            code: int = trio.run(run_prepared, prepared, out, err, clock=clock)
            return code
        finally:
            os.chdir(old_cwd)
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    parser = build_parser()
    try:
        ns = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as exc:
        return int(exc.code or 0) if exc.code in (0, None) else USAGE_EXIT
    path = Path(ns.file).absolute()
    workspace = Path(ns.workspace).resolve() if ns.workspace else None
    try:
        return _dispatch(path, ns, workspace, out, err)
    except ReplayInputError as exc:
        err.write(f"agentbus replay: {exc}\n")
        return USAGE_EXIT
    except (RecordingError, UnsupportedRecording) as exc:
        err.write(f"agentbus replay: {exc}\n")
        return USAGE_EXIT
    except BaseException as exc:
        if _broken_pipe(exc):  # the reader went away (``| head``): not an error
            try:
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, sys.stdout.fileno())
            except (OSError, ValueError):
                pass
            return 0
        raise


def _broken_pipe(exc: BaseException) -> bool:
    if isinstance(exc, BrokenPipeError):
        return True
    if isinstance(exc, BaseExceptionGroup):
        return all(_broken_pipe(e) for e in exc.exceptions)
    return False


def _dispatch(path: Path, ns: argparse.Namespace, workspace: Path | None, out: TextIO, err: TextIO) -> int:
    kind = sniff(path)
    if ns.trace is not None:
        return _trace(path, kind, ns, workspace, out, err)
    if kind == "scenario":
        scenario = _read_scenario(path)
        recorded = path / str(scenario.get("recording", "recording.jsonl"))
        ws_default = path / str(scenario.get("workspace", "workspace"))
        if recorded.is_file():
            if workspace is None and ns.tools == "live" and ws_default.is_dir():
                workspace = ws_default
            return _replay_path(recorded, ns, workspace, out, err)
        if ns.check:
            raise ReplayInputError(f"{path}: --check needs a recording ({recorded} does not exist)")
        fixture = path / str(scenario.get("fixture", "fake.responses"))
        return run_fresh(
            fixture,
            prompt=ns.prompt or str(scenario.get("prompt", "")),
            args=[str(a) for a in scenario.get("args", [])],
            workspace=workspace or (ws_default if ws_default.is_dir() else None),
            fmt=ns.output_format,
            out=out,
            err=err,
        )
    if kind == "fake-responses":
        if ns.check:
            raise ReplayInputError(f"{path}: --check needs a recording, not a fake-responses file")
        if not ns.prompt:
            raise ReplayInputError(f"{path}: a fake-responses file has no prompt: give one with -p PROMPT")
        extra = ["--approval-mode", ns.approval_mode or "yolo"]
        if ns.model:
            extra += ["-m", ns.model]
        return run_fresh(path, prompt=ns.prompt, args=extra, workspace=workspace, fmt=ns.output_format, out=out, err=err)
    return _replay_path(path, ns, workspace, out, err)


def _read_scenario(folder: Path) -> dict[str, Any]:
    f = folder / "scenario.json"
    try:
        data = json.loads(f.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ReplayInputError(f"{f}: malformed JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ReplayInputError(f"{f}:1: a scenario must be a JSON object")
    return data


def _load(path: Path, err: TextIO) -> Recording:
    def report(torn: TornLine) -> None:
        err.write(f"agentbus replay: {path}:{torn.line}: {torn.reason}; ignored\n")

    recording = load_recording(path, on_torn=report)
    if not recording.envelopes:
        raise ReplayInputError(f"{path}: the recording has no messages")
    return recording


def _trace(path: Path, kind: str, ns: argparse.Namespace, workspace: Path | None, out: TextIO, err: TextIO) -> int:
    if kind == "fake-responses":
        raise ReplayInputError(f"{path}: --trace needs a recording, not a fake-responses file")
    if kind == "scenario":
        scenario = _read_scenario(path)
        path = path / str(scenario.get("recording", "recording.jsonl"))
        if not path.is_file():
            raise ReplayInputError(f"{path.parent}: --trace needs a recording ({path} does not exist)")
        ws_default = path.parent / str(scenario.get("workspace", "workspace"))
        if workspace is None and ns.tools == "live" and ws_default.is_dir():
            workspace = ws_default
    recording = _load(path, err)
    document = trace_document(recording)
    write_trace(document, ns.trace, out)
    events = document["traceEvents"]
    slices = sum(1 for e in events if e["ph"] == "X")
    tracks = sum(1 for e in events if e["ph"] == "M" and e["name"] == "thread_name")
    parts = len(recording.segments)
    where = "stdout" if ns.trace == "-" else ns.trace
    err.write(
        f"agentbus replay: wrote {where}: {slices} slices on {tracks} tracks, {parts} "
        f"process{'es' if parts != 1 else ''}; open it in https://ui.perfetto.dev or chrome://tracing\n"
    )
    if not ns.check:
        return 0
    code, _result = replay_file(
        recording, check=True, tools_mode=ns.tools, workspace=workspace, fmt=ns.output_format, out=out, err=err
    )
    return code


def write_trace(document: dict[str, Any], target: str, out: TextIO) -> None:
    """The trace as one JSON document to ``target`` (``-``: ``out``), replacing it whole:
    a write that fails leaves what was there; raises ``ReplayInputError``."""
    text = json.dumps(document, ensure_ascii=False, separators=(",", ":")) + "\n"
    if target == "-":
        out.write(text)
        return
    if not target:
        raise ReplayInputError("--trace needs a file to write (- for stdout)")
    dest = Path(target)
    if not dest.name:  # ".", "/": a directory, and no name to put the temporary file by
        raise ReplayInputError(f"{target}: cannot write the trace: {os.strerror(errno.EISDIR)}")
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, dest)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise ReplayInputError(f"{target}: cannot write the trace: {exc.strerror or exc}") from None


def _replay_path(path: Path, ns: argparse.Namespace, workspace: Path | None, out: TextIO, err: TextIO) -> int:
    recording = _load(path, err)
    code, _result = replay_file(
        recording, check=ns.check, tools_mode=ns.tools, workspace=workspace, fmt=ns.output_format, out=out, err=err
    )
    return code
