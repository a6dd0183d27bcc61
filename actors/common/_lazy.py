"""A package's public names, imported when first used (PEP 562 module ``__getattr__``).

A package offers other packages its public names from its ``__init__``; some of those
live in modules that a short run never needs (``agentbus --help`` does not need the
tools' path rules). ``lazy_exports`` gives such a package a ``__getattr__`` that imports
the defining module on first use and caches the value in the package, so importing the
package stays cheap. The package also imports the names under ``TYPE_CHECKING`` so that
mypy sees their types.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
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
