"""attrs' generated methods, compiled once and reused by later processes (a cache on disk).

attrs writes the source of each class's ``__init__``, ``__repr__``, ``__eq__``... when the
class is defined and compiles it. A headless run defines some two hundred such classes
(the messages, the actors' state, trio's own) and those compiles took about a quarter of
its imports' time (29 of 115 ms). ``reuse_compiled_methods`` replaces attrs' compile-and-evaluate step with
one that looks the source up in a file of code objects compiled by earlier processes:

- an entry is used only when its source is the class's source now, character for
  character, so a changed class (a new field, another attrs version) is compiled afresh;
- the file is named after the interpreter's bytecode (``importlib.util.MAGIC_NUMBER``) and
  its optimisation level, like ``__pycache__`` files;
- what this process compiled is added to the file when it exits (written aside and moved
  into place, so a concurrent process reads the old file or the new one); a file that
  cannot be read or written is as good as none: the methods are compiled, as without it.

The cache lives in ``$XDG_CACHE_HOME/agentbus`` (else ``~/.cache/agentbus``). The entry
point turns it on for a process of its own (``actors.frontends.main``); nothing changes
but the time it takes: the code objects are the ones ``compile`` makes from that source,
with the ``from __future__`` flags of attrs' module. One difference: ``__hash__`` starts
from a hash of the class's name, which differs between processes (``PYTHONHASHSEED``);
it is kept apart from the source and put back into the code, whose column table then
still has the width of the old number for that constant (no traceback points at it).
"""

from __future__ import annotations
import __future__

import marshal
import os
import sys
from types import CodeType
from typing import Any

MAX_ENTRIES = 1500
"""Above this many entries, the file keeps only those this process used or compiled (the
classes of sources long changed do not pile up). Every module of agentbus and what it
imports define some 420 attrs classes (about 3 KB each in the file)."""


def cache_path() -> str | None:
    """The cache file; None when there is no absolute place for it (no home directory)."""
    from importlib.util import MAGIC_NUMBER

    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):  # unset, or relative: the XDG spec says to ignore it
        base = os.path.join(os.path.expanduser("~"), ".cache")
    if not os.path.isabs(base):
        return None
    optimised = f"-O{sys.flags.optimize}" if sys.flags.optimize else ""
    return os.path.join(base, "agentbus", f"attrs-methods-{MAGIC_NUMBER.hex()}{optimised}.marshal")


def reuse_compiled_methods(path: str | None = None) -> bool:
    """Compile attrs' generated methods through the cache at ``path`` (default
    ``cache_path()``) from now on; False (and nothing changed) when this attrs compiles
    them some other way, or there is no place for the cache.

    Before attrs is imported, the step is replaced as soon as ``attr._make`` has run,
    so the classes attrs defines for itself after that while its package is imported
    (those of ``attr.validators``: 14 compiles) come from the cache too; the answer is then
    True, and stays without effect if that attrs turns out to compile some other way.
    Asked again before attrs is imported, nothing more is done."""
    path = cache_path() if path is None else path
    if path is None:
        return False
    make = sys.modules.get("attr._make")
    if make is not None:
        return _reuse(make, path)
    if not any(isinstance(finder, _AfterAttrsMake) for finder in sys.meta_path):
        sys.meta_path.insert(0, _AfterAttrsMake(path))
    return True


class _AfterAttrsMake:
    """An import finder that finds only ``attr._make``, as the finders after it do, and
    has its loader install the cache right after the module has run (before the rest of
    the ``attr`` package defines its classes); it leaves ``sys.meta_path`` at once."""

    def __init__(self, path: str) -> None:
        self._path = path

    def find_spec(self, name: str, import_path: Any = None, target: Any = None) -> Any:
        if name != "attr._make" or self not in sys.meta_path:
            return None
        sys.meta_path.remove(self)
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(name, import_path, target) if find is not None else None
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _ThenReuse(spec.loader, self._path)
                return spec
        return None


class _ThenReuse:
    """A module's loader that installs the cache once the module (``attr._make``) has run;
    everything else is its original loader's (sources for tracebacks, resources)."""

    def __init__(self, loader: Any, path: str) -> None:
        self._loader = loader
        self._path = path

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self._loader.exec_module(module)
        module.__loader__ = module.__spec__.loader = self._loader
        _reuse(module, self._path)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)


def _reuse(make: Any, path: str) -> bool:
    import atexit

    original = getattr(make, "_compile_and_eval", None)
    code = getattr(original, "__code__", None)
    if code is None or code.co_varnames[:4] != ("script", "globs", "locs", "filename"):
        return False
    # Compiled as attrs compiles them: with the ``from __future__`` flags of its module.
    futures = code.co_flags & sum(
        getattr(__future__, name).compiler_flag for name in __future__.all_feature_names
    )
    stored = _read(path)
    used: dict[str, Entry] = {}
    fresh: dict[str, Entry] = {}

    def compile_and_eval(
        script: str, globs: dict[str, Any] | None, locs: Any = None, filename: str = ""
    ) -> None:
        source, type_hash = _without_type_hash(script)
        entry = stored.get(filename)
        compiled = None
        if entry is not None and entry[0] == source:
            try:
                compiled = marshal.loads(entry[2])
            except (EOFError, ValueError, TypeError):
                compiled = None
            else:
                if entry[1] != type_hash:
                    compiled = _with_type_hash(compiled, entry[1], type_hash)
                used[filename] = entry
        if compiled is None:
            compiled = compile(script, filename, "exec", flags=futures, dont_inherit=True)
            fresh[filename] = (source, type_hash, marshal.dumps(compiled))
        eval(compiled, globs, locs)  # noqa: S307 (attrs' own step: its generated source)

    def save() -> None:
        if not fresh:
            return
        kept = {**stored, **fresh}
        if len(kept) > MAX_ENTRIES:
            kept = {**used, **fresh}
        _write(path, kept)

    make._compile_and_eval = compile_and_eval
    atexit.register(save)
    return True


Entry = tuple[str, int, bytes]
"""The source with its type hash taken out, the type hash, the compiled code."""

_TYPE_HASH = "def __hash__(self"
_HELD = "<type hash>"


def _without_type_hash(script: str) -> tuple[str, int]:
    """attrs' ``__hash__`` starts from a hash of the class's name, which differs from one
    process to the next (``PYTHONHASHSEED``): the source without it, and it (0: none)."""
    at = script.find(_TYPE_HASH)
    if at < 0:
        return script, 0
    start = script.find("hash((\n", at)
    if start < 0:
        return script, 0
    start = script.find("\n", start) + 1
    end = script.find(",\n", start)
    try:
        type_hash = int(script[start:end])
    except ValueError:
        return script, 0
    return f"{script[:start]}{_HELD}{script[end:]}", type_hash


def _with_type_hash(code: CodeType, stored: int, current: int) -> CodeType:
    """``code`` with the ``__hash__`` it defines starting from ``current``, not ``stored``
    (a class without fields hashes ``(type hash,)``, which the compiler folds into one
    tuple constant)."""

    def put(c: Any) -> Any:
        if isinstance(c, CodeType):
            return _with_type_hash(c, stored, current)
        if code.co_name != "__hash__":
            return c
        if type(c) is int and c == stored:
            return current
        if type(c) is tuple and c[:1] == (stored,) and type(c[0]) is int:
            return (current, *c[1:])
        return c

    return code.replace(co_consts=tuple(put(c) for c in code.co_consts))


def _read(path: str) -> dict[str, Entry]:
    try:
        with open(path, "rb") as f:
            data = f.read()
        stored = marshal.loads(data)  # not ``marshal.load(f)``: it reads in small pieces
    except (OSError, EOFError, ValueError, TypeError):
        return {}
    if not isinstance(stored, dict):
        return {}
    return {
        name: entry
        for name, entry in stored.items()
        if isinstance(name, str)
        and isinstance(entry, tuple)
        and len(entry) == 3
        and isinstance(entry[0], str)
        and isinstance(entry[1], int)
        and isinstance(entry[2], bytes)
    }


def _write(path: str, entries: dict[str, Entry]) -> None:
    # Imported here, at exit: at start-up this module runs before any package is imported.
    from actors.common import write_cache_file

    write_cache_file(path, entries)
