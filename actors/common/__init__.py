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
- ``_model_json``: a model's JSON answer, fenced or not (the side requests' checks).
- ``_env``: which environment variables a child process may see (shell, MCP servers).
- ``_lazy``: a package's public names imported on first use.
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
from ._lazy import lazy_exports
from ._model_json import json_answer
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
from ._regex import JsRegexError, compile_js_regex, js_regex_to_python
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

__all__ = [
    "ALWAYS_ALLOWED_VARIABLES",
    "NEVER_ALLOWED_VARIABLES",
    "env_redacted",
    "UNTRUSTED_CLOSE",
    "UNTRUSTED_OPEN",
    "escape_untrusted",
    "wrap_untrusted",
    "json_answer",
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
