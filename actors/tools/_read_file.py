"""``read_file`` (Gemini CLI's ``ReadFileTool``, display name ReadFile).

Text files come back as their text (BOM-aware: UTF-8/16/32), at most 2000 lines from
``start_line`` (or up to ``end_line``), lines longer than 2000 UTF-16 units cut with
``... [truncated]``; a partial read is prefixed by Gemini's ``IMPORTANT: The file content
has been truncated.`` notice. Images, PDFs, audio and video come back as one
``inlineData`` part; other binary files as a one-line refusal. ``returnDisplay`` is a
string (``""`` for a plain full read). Files over 20 MB fail with ``file_too_large``.

Type detection mirrors ``detectFileType``: ``.ts/.mts/.cts`` are text, ``.svg`` is read
as text (≤ 1 MB), the ``mime`` package's standard table decides image/audio/video/pdf
(audio/video only when the content looks binary), then a list of known binary
extensions, then the ``isbinaryfile`` heuristic on the first 512 bytes.

Gemini appends "just-in-time" GEMINI.md context of subdirectories to the result; that
needs the session's memory state and is left to the caller.
"""

from __future__ import annotations

import base64
import os
import stat
from collections.abc import Mapping
from typing import Any

import attrs
import trio
from frozendict import frozendict

from actors.common import (
    js_to_fixed,
    js_trim,
    node_extname,
    node_relative,
    node_resolve,
    utf16_len,
)
from bus.messages import ToolResult

from ._base import OutputSink, ToolEnv
from ._discovery import FileDiscovery, respect_flags
from ._fs_errors import NodeFsError, node_fs_error
from ._paths import (
    js_prefix,
    make_relative,
    resolve_defensive_tool_path,
    resolve_to_real_path,
    shorten_path,
    validate_path_access,
)

DEFAULT_MAX_LINES_TEXT_FILE = 2000
MAX_LINE_LENGTH_TEXT_FILE = 2000
MAX_FILE_SIZE_MB = 20

# The `mime` package (lite: standard types only) for the types that decide the read mode.
_MEDIA_TYPES: dict[str, str] = {
    "pdf": "application/pdf",
    "3gpp": "video/3gpp", "adts": "audio/aac", "aac": "audio/aac", "adp": "audio/adpcm",
    "amr": "audio/amr", "au": "audio/basic", "snd": "audio/basic", "mid": "audio/midi",
    "midi": "audio/midi", "kar": "audio/midi", "rmi": "audio/midi",
    "mxmf": "audio/mobile-xmf", "mp3": "audio/mpeg", "m4a": "audio/mp4",
    "mp4a": "audio/mp4", "m4b": "audio/mp4", "mpga": "audio/mpeg", "mp2": "audio/mpeg",
    "mp2a": "audio/mpeg", "m2a": "audio/mpeg", "m3a": "audio/mpeg", "oga": "audio/ogg",
    "ogg": "audio/ogg", "spx": "audio/ogg", "opus": "audio/ogg", "s3m": "audio/s3m",
    "sil": "audio/silk", "wav": "audio/wav", "weba": "audio/webm", "xm": "audio/xm",
    "exr": "image/aces", "apng": "image/apng", "avci": "image/avci", "avcs": "image/avcs",
    "avif": "image/avif", "bmp": "image/bmp", "dib": "image/bmp", "cgm": "image/cgm",
    "drle": "image/dicom-rle", "dpx": "image/dpx", "emf": "image/emf",
    "fits": "image/fits", "g3": "image/g3fax", "gif": "image/gif", "heic": "image/heic",
    "heics": "image/heic-sequence", "heif": "image/heif", "heifs": "image/heif-sequence",
    "hej2": "image/hej2k", "ief": "image/ief", "jaii": "image/jaii", "jais": "image/jais",
    "jls": "image/jls", "jp2": "image/jp2", "jpg2": "image/jp2", "jpg": "image/jpeg",
    "jpeg": "image/jpeg", "jpe": "image/jpeg", "jph": "image/jph", "jhc": "image/jphc",
    "jpm": "image/jpm", "jpgm": "image/jpm", "jpx": "image/jpx", "jpf": "image/jpx",
    "jxl": "image/jxl", "jxr": "image/jxr", "jxra": "image/jxra", "jxrs": "image/jxrs",
    "jxs": "image/jxs", "jxsc": "image/jxsc", "jxsi": "image/jxsi", "jxss": "image/jxss",
    "ktx": "image/ktx", "ktx2": "image/ktx2", "jfif": "image/pjpeg", "png": "image/png",
    "sgi": "image/sgi", "svg": "image/svg+xml", "svgz": "image/svg+xml", "t38": "image/t38",
    "tif": "image/tiff", "tiff": "image/tiff", "tfx": "image/tiff-fx", "webp": "image/webp",
    "wmf": "image/wmf", "3gp": "video/3gpp", "3g2": "video/3gpp2", "h261": "video/h261",
    "h263": "video/h263", "h264": "video/h264", "m4s": "video/iso.segment",
    "jpgv": "video/jpeg", "mj2": "video/mj2", "mjp2": "video/mj2", "ts": "video/mp2t",
    "m2t": "video/mp2t", "m2ts": "video/mp2t", "mts": "video/mp2t", "mp4": "video/mp4",
    "mp4v": "video/mp4", "mpg4": "video/mp4", "mpeg": "video/mpeg", "mpg": "video/mpeg",
    "mpe": "video/mpeg", "m1v": "video/mpeg", "m2v": "video/mpeg", "ogv": "video/ogg",
    "qt": "video/quicktime", "mov": "video/quicktime", "webm": "video/webm",
}  # fmt: skip

_SUPPORTED_AUDIO = {
    ".mp3": "audio/mpeg",
    ".wav": "audio/wav",
    ".aiff": "audio/aiff",
    ".aif": "audio/aiff",
    ".aac": "audio/aac",
    ".ogg": "audio/ogg",
    ".flac": "audio/flac",
}
_AUDIO_NORMALIZATION = {
    "audio/mp3": "audio/mpeg",
    "audio/x-mp3": "audio/mpeg",
    "audio/wave": "audio/wav",
    "audio/x-wav": "audio/wav",
    "audio/vnd.wave": "audio/wav",
    "audio/x-pn-wav": "audio/wav",
    "audio/x-aiff": "audio/aiff",
    "audio/aif": "audio/aiff",
    "audio/x-aac": "audio/aac",
}
_SUPPORTED_AUDIO_DISPLAY = "MP3, WAV, AIFF, AAC, OGG, and FLAC"

BINARY_EXTENSIONS = frozenset(
    ".bin .exe .dll .so .dylib .class .jar .war .zip .tar .gz .bz2 .rar .7z .pak .rpa "
    ".doc .docx .xls .xlsx .ppt .pptx .odt .ods .odp .pdf .png .jpg .jpeg .gif .webp "
    ".bmp .svg .pyc .pyo .dat .obj .o .a .lib .wasm".split()
)
"""Gemini's ``BINARY_EXTENSIONS``."""


def mime_type(file_path: str) -> str | None:
    """``mime.getType(path)`` restricted to the media types that matter here."""
    last = file_path.rsplit("/", 1)[-1].lower()
    has_path = len(last) < len(file_path)
    ext = last.rsplit(".", 1)[-1]
    has_dot = len(ext) < len(last) - 1
    if not has_dot and has_path:
        return None
    return _MEDIA_TYPES.get(ext)


def _supported_audio_mime(file_path: str) -> str | None:
    by_extension = _SUPPORTED_AUDIO.get(node_extname(file_path).lower())
    looked_up = mime_type(file_path)
    normalized = _AUDIO_NORMALIZATION.get(looked_up, looked_up) if looked_up else None
    if normalized and normalized in _SUPPORTED_AUDIO.values():
        return normalized
    return by_extension


# --------------------------------------------------------------------------------------
# isbinaryfile 5


def _int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - 0x1_0000_0000 if value & 0x8000_0000 else value


class _ProtoReader:
    def __init__(self, data: bytes, size: int) -> None:
        self.data = data
        self.size = size
        self.offset = 0
        self.error = False

    def next_byte(self) -> int:
        if self.offset == self.size or self.error:
            self.error = True
            return 0xFF
        byte = self.data[self.offset]
        self.offset += 1
        return byte

    def skip(self, count: int) -> None:
        for _ in range(max(count, 0)):
            if self.error:
                return
            self.next_byte()


def _read_varint(reader: _ProtoReader) -> int:
    idx = 0
    value = 0
    while not reader.error:
        byte = reader.next_byte()
        value = _int32(value | _int32((byte & 0x7F) << ((7 * idx) & 31)))
        if byte & 0x80 == 0:
            break
        if idx >= 10:
            reader.error = True
            break
        idx += 1
    return value


def _read_proto_message(reader: _ProtoReader) -> bool:
    wire = _read_varint(reader) & 0x7
    if wire == 0:
        _read_varint(reader)
        return True
    if wire == 1:
        reader.skip(8)
        return True
    if wire == 2:
        reader.skip(_read_varint(reader))
        return True
    if wire == 5:
        reader.skip(4)
        return True
    return False


def _is_binary_proto(data: bytes, total: int) -> bool:
    reader = _ProtoReader(data, total)
    messages = 0
    while True:
        if not _read_proto_message(reader) and not reader.error:
            return False
        if reader.error:
            break
        messages += 1
    return messages > 0


def is_binary_data(data: bytes) -> bool:
    """The ``isbinaryfile`` heuristic on a file's first bytes (up to 515)."""
    bytes_read = len(data)
    if bytes_read == 0:
        return False
    total = min(bytes_read, 515)
    scan = min(total, 512)
    if data[:3] == b"\xef\xbb\xbf":
        return False
    if data[:4] in (b"\x00\x00\xfe\xff", b"\xff\xfe\x00\x00", b"\x84\x31\x95\x33"):
        return False
    if total >= 5 and data[:5] == b"%PDF-":
        return True
    if data[:2] in (b"\xfe\xff", b"\xff\xfe"):
        return False
    suspicious = 0
    i = 0
    while i < scan:
        byte = data[i]
        if byte == 0:
            return True
        if (byte < 7 or byte > 14) and (byte < 32 or byte > 127):
            if 0xC0 <= byte <= 0xDF and i + 1 < total:
                i += 1
                if 0x80 <= data[i] <= 0xBF:
                    i += 1
                    continue
            elif 0xE0 <= byte <= 0xEF and i + 2 < total:
                i += 1
                if 0x80 <= data[i] <= 0xBF and 0x80 <= data[i + 1] <= 0xBF:
                    i += 2
                    continue
            elif 0xF0 <= byte <= 0xF7 and i + 3 < total:
                i += 1
                if (
                    0x80 <= data[i] <= 0xBF
                    and 0x80 <= data[i + 1] <= 0xBF
                    and 0x80 <= data[i + 2] <= 0xBF
                ):
                    i += 3
                    continue
            suspicious += 1
            if i >= 32 and suspicious * 100 / scan > 10:
                return True
        i += 1
    if suspicious * 100 / scan > 10:
        return True
    return suspicious > 1 and _is_binary_proto(data, scan)


def is_binary_file(path: str) -> bool:
    """Gemini's ``isBinaryFile``: false for non-files and unreadable files."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return False
        with open(path, "rb") as handle:
            return is_binary_data(handle.read(515))
    except OSError:
        return False


def detect_file_type(path: str) -> str:
    """``text``, ``image``, ``pdf``, ``audio``, ``video``, ``binary`` or ``svg``."""
    ext = node_extname(path).lower()
    if ext in (".ts", ".mts", ".cts"):
        return "text"
    if ext == ".svg":
        return "svg"
    looked_up = mime_type(path)
    if looked_up:
        if looked_up.startswith("image/"):
            return "image"
        if looked_up.startswith(("audio/", "video/")):
            if not is_binary_file(path):
                return "text"
            return "audio" if looked_up.startswith("audio/") else "video"
        if looked_up == "application/pdf":
            return "pdf"
    if _supported_audio_mime(path):
        return "text" if not is_binary_file(path) else "audio"
    if ext in BINARY_EXTENSIONS:
        return "binary"
    if is_binary_file(path):
        return "binary"
    return "text"


# --------------------------------------------------------------------------------------
# Text decoding


def decode_text(data: bytes) -> str:
    """Gemini's ``readFileWithEncoding``: honour (and drop) a UTF-8/16/32 BOM."""
    if not data:
        return ""
    if data[:4] == b"\xff\xfe\x00\x00":
        return _decode_utf32(data[4:], little=True)
    if data[:4] == b"\x00\x00\xfe\xff":
        return _decode_utf32(data[4:], little=False)
    if data[:3] == b"\xef\xbb\xbf":
        return data[3:].decode("utf-8", "replace")
    if data[:2] == b"\xff\xfe":
        body = data[2:]
        return body[: len(body) - len(body) % 2].decode("utf-16-le", "replace")
    if data[:2] == b"\xfe\xff":
        body = data[2:]
        return body[: len(body) - len(body) % 2].decode("utf-16-be", "replace")
    return data.decode("utf-8", "replace")


def _decode_utf32(body: bytes, *, little: bool) -> str:
    out: list[str] = []
    for i in range(0, len(body) - len(body) % 4, 4):
        cp = int.from_bytes(body[i : i + 4], "little" if little else "big")
        out.append(chr(cp) if cp <= 0x10FFFF and not 0xD800 <= cp <= 0xDFFF else "\ufffd")
    return "".join(out)


def split_lines(content: str) -> list[str]:
    """``content.split(/\\r?\\n/)``."""
    return content.replace("\r\n", "\n").split("\n") if "\r\n" in content else content.split("\n")


# --------------------------------------------------------------------------------------
# processSingleFileContent


@attrs.frozen(kw_only=True)
class ProcessedFile:
    """Gemini's ``ProcessedFileReadResult``."""

    llm_content: str | frozendict[str, Any]
    return_display: str
    error: str | None = None
    error_type: str | None = None
    is_truncated: bool = False
    original_line_count: int | None = None
    lines_shown: tuple[int, int] | None = None


def process_single_file_content(
    file_path: str,
    root_directory: str,
    start_line: int | None = None,
    end_line: int | None = None,
) -> ProcessedFile:
    """Read one file the way ``read_file`` and ``@file`` do (blocking)."""
    try:
        if not os.path.exists(file_path):
            return ProcessedFile(
                llm_content="Could not read file because no file was found at the specified path.",
                return_display="File not found.",
                error=f"File not found: {file_path}",
                error_type="file_not_found",
            )
        try:
            info = os.stat(file_path)
        except OSError as exc:
            raise node_fs_error(exc, "stat", file_path) from None
        if stat.S_ISDIR(info.st_mode):
            return ProcessedFile(
                llm_content=(
                    "Could not read file because the provided path is a directory, not a file."
                ),
                return_display="Path is a directory.",
                error=f"Path is a directory, not a file: {file_path}",
                error_type="target_is_directory",
            )
        size_mb = info.st_size / (1024 * 1024)
        if size_mb > MAX_FILE_SIZE_MB:
            limit = f"File size exceeds the {MAX_FILE_SIZE_MB}MB limit"
            return ProcessedFile(
                llm_content=f"{limit}.",
                return_display=f"{limit}.",
                error=f"{limit}: {file_path} ({js_to_fixed(size_mb, 2)}MB)",
                error_type="file_too_large",
            )

        file_type = detect_file_type(file_path)
        relative = node_relative(root_directory, file_path).replace("\\", "/")

        if file_type == "binary":
            return ProcessedFile(
                llm_content=f"Cannot display content of binary file: {relative}",
                return_display=f"Skipped binary file: {relative}",
            )
        if file_type == "svg":
            if info.st_size > 1024 * 1024:
                return ProcessedFile(
                    llm_content=f"Cannot display content of SVG file larger than 1MB: {relative}",
                    return_display=f"Skipped large SVG file (>1MB): {relative}",
                )
            return ProcessedFile(
                llm_content=decode_text(_read_bytes(file_path)),
                return_display=f"Read SVG as text: {relative}",
            )
        if file_type == "text":
            return _process_text(
                decode_text(_read_bytes(file_path)), relative, start_line, end_line
            )
        if file_type == "audio":
            audio_type = _supported_audio_mime(file_path)
            if audio_type is None:
                return ProcessedFile(
                    llm_content=(
                        "Could not read audio file because its format is not supported. "
                        f"Supported audio formats are {_SUPPORTED_AUDIO_DISPLAY}."
                    ),
                    return_display=f"Unsupported audio file format: {relative}",
                    error=(
                        f"Unsupported audio file format for {file_path}. "
                        f"Supported audio formats are {_SUPPORTED_AUDIO_DISPLAY}."
                    ),
                    error_type="read_content_failure",
                )
            return ProcessedFile(
                llm_content=_inline_part(_read_bytes(file_path), audio_type),
                return_display=f"Read audio file: {relative}",
            )
        media_type = mime_type(file_path) or "application/octet-stream"
        return ProcessedFile(
            llm_content=_inline_part(_read_bytes(file_path), media_type),
            return_display=f"Read {file_type} file: {relative}",
        )
    except NodeFsError as exc:
        display_path = node_relative(root_directory, file_path).replace("\\", "/")
        return ProcessedFile(
            llm_content=f"Error reading file {display_path}: {exc.message}",
            return_display=f"Error reading file {display_path}: {exc.message}",
            error=f"Error reading file {file_path}: {exc.message}",
            error_type="read_content_failure",
        )


def _read_bytes(path: str) -> bytes:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as exc:
        raise node_fs_error(exc, "open", path) from None


def _inline_part(data: bytes, mime: str) -> frozendict[str, Any]:
    encoded = base64.b64encode(data).decode("ascii")
    return frozendict({"inlineData": frozendict({"data": encoded, "mimeType": mime})})


def _process_text(
    content: str, relative: str, start_line: int | None, end_line: int | None
) -> ProcessedFile:
    lines = split_lines(content)
    count = len(lines)
    if start_line is not None or end_line is not None:
        slice_start = start_line - 1 if start_line else 0
        slice_end = (
            min(end_line, count)
            if end_line
            else min(slice_start + DEFAULT_MAX_LINES_TEXT_FILE, count)
        )
    else:
        slice_start = 0
        slice_end = min(DEFAULT_MAX_LINES_TEXT_FILE, count)
    actual_start = min(slice_start, count)
    selected = lines[actual_start:slice_end] if slice_end > actual_start else []
    shortened = False
    formatted: list[str] = []
    for line in selected:
        if utf16_len(line) > MAX_LINE_LENGTH_TEXT_FILE:
            shortened = True
            formatted.append(js_prefix(line, MAX_LINE_LENGTH_TEXT_FILE) + "... [truncated]")
        else:
            formatted.append(line)
    is_truncated = actual_start > 0 or slice_end < count or shortened
    display = ""
    if actual_start > 0 or slice_end < count:
        display = f"Read lines {actual_start + 1}-{slice_end} of {count} from {relative}"
        if shortened:
            display += " (some lines were shortened)"
    elif shortened:
        display = f"Read all {count} lines from {relative} (some lines were shortened)"
    return ProcessedFile(
        llm_content="\n".join(formatted),
        return_display=display,
        is_truncated=is_truncated,
        original_line_count=count,
        lines_shown=(actual_start + 1, slice_end),
    )


# --------------------------------------------------------------------------------------
# The tool

_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "file_path": {"type": "string", "description": "Path of the file to read."},
        "start_line": {
            "type": "integer",
            "minimum": 1,
            "description": "Optional: first line to return (1-based).",
        },
        "end_line": {
            "type": "integer",
            "minimum": 1,
            "description": "Optional: last line to return (1-based, inclusive).",
        },
    },
    "required": ["file_path"],
}

_DESCRIPTION = (
    "Returns the contents of one file. Long files are cut off, and the reply then says "
    "which lines were shown and how to page on with 'start_line' and 'end_line'. Text "
    "files come back as text; images (PNG, JPG, GIF, WEBP, SVG, BMP), audio (MP3, WAV, "
    "AIFF, AAC, OGG, FLAC) and PDF files come back as their data."
)


def _resolved_path(file_path: str, env: ToolEnv) -> str:
    workspace = str(env.workspace)
    sanitized = resolve_defensive_tool_path(file_path, workspace)
    try:
        return resolve_to_real_path(node_resolve(workspace, sanitized))
    except NodeFsError:
        return node_resolve(workspace, sanitized)


def _optional_int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class ReadFileTool:
    """Gemini CLI's ``read_file`` tool."""

    name = "read_file"
    display_name = "ReadFile"
    kind = "read"

    def declaration(self, model: str) -> dict[str, Any]:
        return {"name": self.name, "description": _DESCRIPTION, "parametersJsonSchema": _SCHEMA}

    def validate(self, args: Mapping[str, Any], env: ToolEnv) -> str | None:
        file_path = args.get("file_path")
        if not isinstance(file_path, str) or js_trim(file_path) == "":
            return "The 'file_path' parameter must be non-empty."
        workspace = str(env.workspace)
        sanitized = resolve_defensive_tool_path(file_path, workspace)
        try:
            resolved = resolve_to_real_path(node_resolve(workspace, sanitized))
        except NodeFsError as exc:
            return f"Failed to resolve path: {exc.message}"
        try:
            problem = validate_path_access(resolved, env, "read")
        except NodeFsError as exc:
            return exc.message
        if problem is not None:
            return problem
        start, end = _optional_int(args.get("start_line")), _optional_int(args.get("end_line"))
        if start is not None and end is not None and start > end:
            return "start_line cannot be greater than end_line"
        git, gemini = respect_flags(env)
        discovery = FileDiscovery.for_env(env)
        if any(
            discovery.should_ignore(p, respect_git_ignore=git, respect_gemini_ignore=gemini)
            for p in (sanitized, resolved)
        ):
            return f"File path '{resolved}' is ignored by configured ignore patterns."
        return None

    def describe(self, args: Mapping[str, Any], env: ToolEnv) -> str:
        file_path = args.get("file_path")
        if not isinstance(file_path, str):
            return ""
        workspace = str(env.workspace)
        return shorten_path(make_relative(_resolved_path(file_path, env), workspace))

    async def execute(
        self, args: Mapping[str, Any], env: ToolEnv, output: OutputSink | None = None
    ) -> ToolResult:
        return await trio.to_thread.run_sync(_run_read, dict(args), env, abandon_on_cancel=True)


def _run_read(args: dict[str, Any], env: ToolEnv) -> ToolResult:
    resolved = _resolved_path(str(args.get("file_path", "")), env)
    try:
        problem = validate_path_access(resolved, env, "read")
    except NodeFsError as exc:
        problem = exc.message
    if problem is not None:
        return ToolResult(
            llm_content=problem,
            return_display="Path not in workspace.",
            error_type="path_not_in_workspace",
            error_message=problem,
        )
    result = process_single_file_content(
        resolved,
        str(env.workspace),
        _optional_int(args.get("start_line")),
        _optional_int(args.get("end_line")),
    )
    if result.error is not None:
        return ToolResult(
            llm_content=result.llm_content,
            return_display=result.return_display or "Error reading file",
            error_type=result.error_type,
            error_message=result.error,
        )
    if isinstance(result.llm_content, str):
        content: Any = result.llm_content
        if result.is_truncated and result.lines_shown and result.original_line_count:
            start, end = result.lines_shown
            content = (
                "\nIMPORTANT: The file content has been truncated.\n"
                f"Status: Showing lines {start}-{end} of {result.original_line_count} "
                "total lines.\n"
                "Action: To read more of the file, you can use the 'start_line' and "
                "'end_line' parameters in a subsequent 'read_file' call. For example, to "
                f"read the next section of the file, use start_line: {end + 1}.\n\n"
                f"--- FILE CONTENT (truncated) ---\n{result.llm_content}"
            )
    else:
        # One part, not a list: hooks see Gemini's ``llmContent`` as the tool returned it.
        content = result.llm_content
    return ToolResult(llm_content=content, return_display=result.return_display or "")


__all__ = [
    "ReadFileTool",
    "decode_text",
    "detect_file_type",
    "is_binary_file",
    "process_single_file_content",
]
