"""Shared leaf helpers: code that several actors and front ends need and no actor owns.

The layers (``docs/actors.md``): bus ← **leaf helpers** ← actors ← host ← front ends.
This package is the leaf layer. It holds plain functions that reproduce what Gemini CLI
gets from Node and its npm packages, so every actor computes them the same way:

- ``_js``: JavaScript semantics — ``JSON.stringify``, ``String(number)``, ``String.length`` in UTF-16 code
  units, ``String.prototype.trim``, ``Math.round``.
- ``_procs``: process groups and process trees (psutil).
- ``_ansi``: ``strip-ansi``, the terminal escapes Gemini removes from output.
- ``_node_path``: Node's ``path`` module (POSIX) and Gemini's ``isSubpath``.
- ``_net``: Node's network error codes that Gemini retries.
- ``_truncation``: Gemini's head-and-tail rendering of a long text, UTF-16 slices.
- ``_regex``: JavaScript regular expressions on Python's ``re``, with V8's errors.
- ``_model_json``: a model's JSON answer, fenced or not (the side requests' checks);
  a count of its usage metadata.
- ``_env``: which environment variables a child process may see (shell, MCP servers).
- ``_lazy``: a package's public names imported on first use; patterns compiled on first use.
- ``_cache_files``: a cache file read whole and written aside (``$XDG_CACHE_HOME/agentbus``).
- ``_shell``: shell syntax — shell-quote's ``parse`` and ``quote``, Gemini's
  ``stripShellWrapper`` and ``escapeShellArg``.
- ``_shell_quote``: the npm ``shell-quote`` package's ``parse``, ported (Gemini reads
  words with it, not with the bash grammar).
- ``_untrusted``: Gemini's ``wrapUntrusted`` (tool output the model reads as data).
- ``_bash``: bash command lines read through tree-sitter-bash, as Gemini's policy reads them.

It imports only ``bus``, the standard library and third-party packages, never an actor,
the host or a front end (``tests/check_dependencies.py`` enforces it); everything may
import it. It lives under ``actors/`` rather than ``bus/`` because the bus is the
protocol (messages, codec, numbering) and these helpers are not part of the protocol;
the design card keeps the top level to ``actors/``, ``bus/``, ``tests/``, ``scenarios/``.
"""

from typing import TYPE_CHECKING

from ._cache_files import file_stamps, read_cache_file, write_cache_file
from ._lazy import LazyPattern, lazy_exports

if TYPE_CHECKING:
    from ._ansi import strip_ansi
    from ._bash import (
        REDIRECTION_NAMES,
        CommandDetail,
        CommandParse,
        command_roots,
        has_redirection,
        parse_command_details,
        split_commands,
    )
    from ._env import ALWAYS_ALLOWED_VARIABLES, NEVER_ALLOWED_VARIABLES, env_redacted
    from ._js import (
        JS_WHITESPACE,
        js_json,
        js_number,
        js_parse_int,
        js_round,
        js_to_fixed,
        js_trim,
        js_trim_end,
        js_trim_start,
        utf16_len,
    )
    from ._model_json import json_answer, token_count
    from ._net import RETRYABLE_NETWORK_CODES, is_network_retryable
    from ._node_path import (
        is_subpath,
        is_within_root,
        node_extname,
        node_join,
        node_relative,
        node_resolve,
    )
    from ._procs import (
        child_process_groups,
        descendants,
        group_has_live_members,
        group_members,
        signal_group,
        spawn_error,
    )
    from ._regex import JsRegexError, LazyJsRegex, compile_js_regex, js_regex_to_python
    from ._shell import escape_shell_arg, strip_shell_wrapper
    from ._shell_quote import (
        ShellComment,
        ShellEntry,
        ShellGlob,
        ShellOp,
        ShellQuoteError,
        entry_text,
        shell_quote_parse,
        shell_words,
    )
    from ._truncation import (
        format_count,
        format_truncated_output,
        split_budget,
        truncation_text,
        utf16_head,
        utf16_tail,
    )
    from ._untrusted import UNTRUSTED_CLOSE, UNTRUSTED_OPEN, escape_untrusted, wrap_untrusted

# Each helper's module is imported when one of its names is first used: a run imports
# only the helpers it calls (a headless prompt needs neither the bash grammar nor the
# shell's environment rules).
__getattr__ = lazy_exports(
    __name__,
    {
        "strip_ansi": "._ansi",
        "REDIRECTION_NAMES": "._bash",
        "CommandDetail": "._bash",
        "CommandParse": "._bash",
        "command_roots": "._bash",
        "has_redirection": "._bash",
        "parse_command_details": "._bash",
        "split_commands": "._bash",
        "ALWAYS_ALLOWED_VARIABLES": "._env",
        "NEVER_ALLOWED_VARIABLES": "._env",
        "env_redacted": "._env",
        "JS_WHITESPACE": "._js",
        "js_json": "._js",
        "js_number": "._js",
        "js_parse_int": "._js",
        "js_round": "._js",
        "js_to_fixed": "._js",
        "js_trim": "._js",
        "js_trim_end": "._js",
        "js_trim_start": "._js",
        "utf16_len": "._js",
        "json_answer": "._model_json",
        "token_count": "._model_json",
        "RETRYABLE_NETWORK_CODES": "._net",
        "is_network_retryable": "._net",
        "is_subpath": "._node_path",
        "is_within_root": "._node_path",
        "node_extname": "._node_path",
        "node_join": "._node_path",
        "node_relative": "._node_path",
        "node_resolve": "._node_path",
        "child_process_groups": "._procs",
        "descendants": "._procs",
        "group_has_live_members": "._procs",
        "group_members": "._procs",
        "signal_group": "._procs",
        "spawn_error": "._procs",
        "JsRegexError": "._regex",
        "compile_js_regex": "._regex",
        "LazyJsRegex": "._regex",
        "js_regex_to_python": "._regex",
        "escape_shell_arg": "._shell",
        "strip_shell_wrapper": "._shell",
        "ShellComment": "._shell_quote",
        "ShellEntry": "._shell_quote",
        "ShellGlob": "._shell_quote",
        "ShellOp": "._shell_quote",
        "ShellQuoteError": "._shell_quote",
        "entry_text": "._shell_quote",
        "shell_quote_parse": "._shell_quote",
        "shell_words": "._shell_quote",
        "format_count": "._truncation",
        "format_truncated_output": "._truncation",
        "split_budget": "._truncation",
        "truncation_text": "._truncation",
        "utf16_head": "._truncation",
        "utf16_tail": "._truncation",
        "UNTRUSTED_CLOSE": "._untrusted",
        "UNTRUSTED_OPEN": "._untrusted",
        "escape_untrusted": "._untrusted",
        "wrap_untrusted": "._untrusted",
    },
)

__all__ = [
    "ALWAYS_ALLOWED_VARIABLES",
    "NEVER_ALLOWED_VARIABLES",
    "env_redacted",
    "UNTRUSTED_CLOSE",
    "UNTRUSTED_OPEN",
    "escape_untrusted",
    "wrap_untrusted",
    "json_answer",
    "token_count",
    "REDIRECTION_NAMES",
    "ShellComment",
    "ShellEntry",
    "ShellGlob",
    "ShellOp",
    "ShellQuoteError",
    "entry_text",
    "shell_quote_parse",
    "shell_words",
    "CommandDetail",
    "CommandParse",
    "command_roots",
    "has_redirection",
    "parse_command_details",
    "split_commands",
    "lazy_exports",
    "LazyPattern",
    "LazyJsRegex",
    "file_stamps",
    "read_cache_file",
    "write_cache_file",
    "JS_WHITESPACE",
    "JsRegexError",
    "RETRYABLE_NETWORK_CODES",
    "child_process_groups",
    "compile_js_regex",
    "escape_shell_arg",
    "descendants",
    "format_count",
    "format_truncated_output",
    "group_has_live_members",
    "group_members",
    "signal_group",
    "spawn_error",
    "strip_ansi",
    "split_budget",
    "is_network_retryable",
    "is_subpath",
    "is_within_root",
    "js_json",
    "js_number",
    "js_parse_int",
    "js_regex_to_python",
    "js_round",
    "js_to_fixed",
    "js_trim",
    "js_trim_end",
    "js_trim_start",
    "node_extname",
    "node_join",
    "node_relative",
    "node_resolve",
    "strip_shell_wrapper",
    "truncation_text",
    "utf16_head",
    "utf16_tail",
    "utf16_len",
]
