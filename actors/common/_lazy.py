"""A package's public names, imported when first used (PEP 562 module ``__getattr__``);
a module's regular expressions, compiled when first used (``LazyPattern``).

A package offers other packages its public names from its ``__init__``; some of those
live in modules that a short run never needs (``agentbus --help`` does not need the
tools' path rules). ``lazy_exports`` gives such a package a ``__getattr__`` that imports
the defining module on first use and caches the value in the package, so importing the
package stays cheap. The package also imports the names under ``TYPE_CHECKING`` so that
mypy sees their types.
"""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import Any


def lazy_exports(package: str, names: Mapping[str, str]) -> Callable[[str], Any]:
    """``names`` maps a public name to ``".module"`` or ``".module:attribute"``."""

    def __getattr__(name: str) -> Any:
        try:
            target = names[name]
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        module, _, attribute = target.partition(":")
        value = getattr(importlib.import_module(module, package), attribute or name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__


class LazyPattern:
    """``re.compile(pattern, flags)``, compiled by its first use.

    A module's patterns are compiled when it is imported; a headless run imports some
    hundred modules and uses few of their patterns (what reads a tool's output, parses an
    API error or a policy file's TOML error): compiling them cost about 2 ms of a ``-p hi``
    run's CPU (its imports 79 -> 77 ms, median of 21). The methods are those of
    ``re.Pattern`` that modules use; the compiled pattern is ``compiled``."""

    __slots__ = ("_compiled", "_flags", "pattern")

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self.pattern = pattern
        self._flags = flags
        self._compiled: re.Pattern[str] | None = None

    @property
    def compiled(self) -> re.Pattern[str]:
        compiled = self._compiled
        if compiled is None:
            compiled = self._compiled = re.compile(self.pattern, self._flags)
        return compiled

    def match(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        return self.compiled.match(string, pos, endpos)

    def fullmatch(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        return self.compiled.fullmatch(string, pos, endpos)

    def search(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        return self.compiled.search(string, pos, endpos)

    def finditer(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> Iterator[re.Match[str]]:
        return self.compiled.finditer(string, pos, endpos)

    def sub(self, repl: str | Callable[[re.Match[str]], str], string: str, count: int = 0) -> str:
        return self.compiled.sub(repl, string, count)
