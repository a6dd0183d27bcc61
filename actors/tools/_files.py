"""The file tools: one instance of each, in no particular order."""

from __future__ import annotations

from ._base import Tool
from ._glob import GlobTool
from ._grep import GrepTool
from ._ls import LsTool
from ._read_file import ReadFileTool
from ._replace import EditTool
from ._write_file import WriteFileTool

FILE_TOOLS: tuple[Tool, ...] = (
    LsTool(),
    ReadFileTool(),
    GrepTool(),
    GlobTool(),
    EditTool(),
    WriteFileTool(),
)
"""``list_directory``, ``read_file``, ``grep_search``, ``glob``, ``replace``, ``write_file``."""

__all__ = ["FILE_TOOLS"]
