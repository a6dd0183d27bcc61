"""File-system errors worded as Node words them (``ENOENT: no such file or directory,
open '/x'``).

Gemini CLI's file tools put Node's ``error.message`` in what the model reads; a Python
``OSError`` is turned into the same ``code`` and libuv text here.
"""

from __future__ import annotations

import errno as errno_mod


class NodeFsError(Exception):
    """An ``OSError`` rendered the way Node reports it (``code`` plus libuv text)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


_UV_TEXT: dict[int, str] = {
    errno_mod.ENOENT: "no such file or directory",
    errno_mod.EACCES: "permission denied",
    errno_mod.EPERM: "operation not permitted",
    errno_mod.EISDIR: "illegal operation on a directory",
    errno_mod.ENOTDIR: "not a directory",
    errno_mod.ELOOP: "too many symbolic links encountered",
    errno_mod.ENOSPC: "no space left on device",
    errno_mod.EROFS: "read-only file system",
    errno_mod.ENAMETOOLONG: "name too long",
    errno_mod.EEXIST: "file already exists",
    errno_mod.EBUSY: "resource busy or locked",
    errno_mod.EMFILE: "too many open files",
    errno_mod.ENFILE: "file table overflow",
    errno_mod.EIO: "i/o error",
    errno_mod.EINVAL: "invalid argument",
    errno_mod.ENOTEMPTY: "directory not empty",
    errno_mod.EXDEV: "cross-device link not permitted",
    errno_mod.ETXTBSY: "text file is busy",
    errno_mod.EFBIG: "file too large",
    errno_mod.EDQUOT: "disk quota exceeded",
}


def node_error_code(exc: BaseException) -> str | None:
    """The Node ``error.code`` (``ENOENT``...) of an OS error, else None."""
    if isinstance(exc, NodeFsError):
        return exc.code
    if isinstance(exc, OSError) and exc.errno is not None:
        return errno_mod.errorcode.get(exc.errno, f"E{exc.errno}")
    return None


def node_fs_error(exc: OSError, syscall: str, path: str) -> NodeFsError:
    """``exc`` as Node would word it: ``CODE: text, syscall 'path'``."""
    code = node_error_code(exc) or "UNKNOWN"
    text = _UV_TEXT.get(exc.errno or 0) or (exc.strerror or "unknown error").lower()
    return NodeFsError(code, f"{code}: {text}, {syscall} '{path}'")


def error_message(exc: BaseException) -> str:
    """``error.message`` as Gemini's ``getErrorMessage`` would give it."""
    if isinstance(exc, NodeFsError):
        return exc.message
    if isinstance(exc, OSError) and exc.errno is not None:
        return node_fs_error(exc, "access", str(exc.filename or "")).message
    return str(exc)

