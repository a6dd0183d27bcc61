"""Parsed policy files, kept on disk for the next process (a cache).

Every session starts with the default policies (seven TOML files, some sixty rules) and
the user's. A ``-p hi`` run's policy took 3.6 ms of CPU reading and parsing them,
checking Gemini CLI's schema and the tool names, and compiling their regexes; from this
cache 2.0 ms, most of it the regexes, which it cannot keep compiled (median of five
processes each); since they are compiled by their first use, a run that calls no tool
compiles none of them (the session setup 4.0 -> 2.5 ms, with the tools declared
from their own cache). ``reuse_parsed_policies`` makes ``load_policy_file`` look a file up here
before it parses it:

- an entry is found by everything the parse depends on: the file (path, device, inode,
  modification and change times, size), its tier, the names of the known tools, and the
  parser itself (size and modification time of the modules that parse: a changed parser
  parses afresh; two installs sharing the cache keep their own entries);
- an entry holds the rules' fields (a regex as its source, compiled by its first use) and
  the warnings; a file whose rules hold something else (a TOML date) is not kept;
- the file is named after the interpreter's bytecode, like ``__pycache__`` files, lives
  beside the compiled-methods cache (``$XDG_CACHE_HOME/agentbus``), and is written aside
  and moved into place when a process parsed a file it did not hold; one that cannot be
  read or written is as good as none.

The entry point turns it on for a process of its own (``actors.frontends.main``).
"""

from __future__ import annotations

import marshal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from actors.common import LazyJsRegex, file_stamps, read_cache_file, write_cache_file

from ._policy_rules import Rule

Parsed = tuple[list[Rule], list[str]]

_FIELDS = tuple(f.name for f in attrs.fields(Rule) if f.name != "args_pattern")
_PARSER = (
    "_policy_files.py",
    "_policy_args.py",
    "_policy_rules.py",
    "_policy_messages.py",
    "_policy_cache.py",
    "../common/_regex.py",
)
MAX_ENTRIES = 64
"""Above this many files, the oldest entries go (policy files edited again and again)."""

_path: str | None = None
_stored: dict[str, Any] | None = None
_stamp: tuple[Any, ...] = ()


def reuse_parsed_policies(path: str) -> None:
    """Look policy files up in the cache at ``path`` from now on."""
    global _path, _stored
    _path, _stored = path, None


def lookup(key: tuple[Any, ...]) -> Parsed | None:
    if _path is None or not _entries_stamped():
        return None
    entry = _entries().get(_key_text(key))
    if entry is None:
        return None
    try:
        rules = [_rule(fields) for fields in entry[0]]
        return rules, list(entry[1])
    except Exception:  # noqa: BLE001 - an entry of another shape is as good as none
        return None


def store(key: tuple[Any, ...], parsed: Parsed) -> None:
    if _path is None or not _entries_stamped():
        return
    rules, warnings = parsed
    try:
        entry = ([tuple(getattr(r, name) for name in _FIELDS) for r in rules], list(warnings))
        marshal.dumps(entry)
    except ValueError:  # a value marshal does not hold (a TOML date): not kept
        return
    entries = _entries()
    entries[_key_text(key)] = entry
    while len(entries) > MAX_ENTRIES:
        del entries[next(iter(entries))]
    write_cache_file(_path, entries)


def _entries() -> dict[str, Any]:
    global _stored, _stamp
    if _stored is None:
        _stamp = _parser_stamp()
        _stored = {}
        loaded = read_cache_file(_path) if _path is not None else None
        if isinstance(loaded, dict):
            _stored = loaded
    return _stored


def _entries_stamped() -> bool:
    """The parser could be stamped (its source files are there): without a stamp, a
    changed parser could not be told from this one, so nothing is looked up or kept."""
    _entries()
    return bool(_stamp)


def _key_text(key: tuple[Any, ...]) -> str:
    # The parser's stamp in each key: two installs sharing the cache keep their entries.
    _entries()
    return repr((_stamp, key))


def _rule(fields: Sequence[Any]) -> Rule:
    values = dict(zip(_FIELDS, fields, strict=True))
    source = values["args_pattern_source"]
    for name in ("modes", "tool_annotations"):
        if values[name] is not None:
            values[name] = tuple(values[name])
    if values["tool_annotations"] is not None:
        values["tool_annotations"] = tuple(tuple(pair) for pair in values["tool_annotations"])
    if source is not None and not isinstance(source, str):
        raise TypeError("a rule's pattern of another shape")  # the entry is not used
    # Compiled when a call is matched against it: a run that calls no tool compiles none
    # (a source the parse compiled: the parser's stamp, the interpreter's included, keys
    # the entry).
    return Rule(**values, args_pattern=LazyJsRegex(source) if source is not None else None)


def _parser_stamp() -> tuple[Any, ...]:
    """The interpreter and the parser's source files (modification time, size); ``()``
    when one of them is not there (an install without sources)."""
    here = Path(__file__).parent
    stamps = file_stamps(str(here / name) for name in _PARSER)
    return () if stamps is None else (sys.version, *stamps)
