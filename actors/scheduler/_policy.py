"""The policy engine: which tool calls run, which need the user, which are refused.

Gemini CLI's policy model (the facts we reproduce; the code is ours):

* Rules (:mod:`._policy_rules`) come from policy files (:mod:`._policy_files`), from
  settings (:mod:`._policy_settings`) and from "always allow" answers. The
  highest-priority matching rule wins (ties: load order).
* Shell commands get extra care: heuristics (:mod:`._command_safety`: dangerous commands
  ask, known read-only commands may skip the question, git in an untrusted folder asks),
  every sub-command of a compound command is checked on its own (the bash syntax tree:
  ``actors.common.parse_command_details``; any deny denies, any ask asks), and
  redirection downgrades allow to ask unless the rule allows redirection or the mode is
  auto-edit / YOLO. A command that does not parse falls back to the default decision.
* Nothing matched: YOLO allows; otherwise the default decision is ask_user when
  interactive and deny when headless.

Pure code: the only I/O is reading policy files in :meth:`PolicyEngine.build`.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from actors.common import compile_js_regex, is_subpath, js_trim

from ._policy_args import build_args_patterns, is_safe_regexp, stable_stringify
from ._policy_files import TIER_NAMES, load_policy_file, named_path_problem, policy_files_in
from ._policy_rules import (
    ADMIN_POLICY_TIER,
    AGENT_TOOL_NAME,
    ALWAYS_ALLOW_FRACTION,
    ASK_USER_TOOL_NAME,
    DEFAULT_POLICY_DIR,
    DEFAULT_POLICY_TIER,
    SHELL_TOOL_NAMES,
    TOOLS_REQUIRING_NARROWING,
    USER_POLICY_TIER,
    WORKSPACE_POLICY_TIER,
    Decision,
    PolicyFileError,
    PolicyVerdict,
    Rule,
    is_always_allow,
    mcp_server_of,
    normalize_approval_mode,
    rule_matches,
    tool_aliases,
    verdict_for,
)
from ._policy_settings import setting, settings_rules, str_list

__all__ = ["PolicyEngine"]


def _sorted_rules(rules: Iterable[Rule]) -> list[Rule]:
    return sorted(rules, key=lambda r: -r.priority)


class PolicyEngine:
    """Decides allow / deny / ask_user for a tool call. Build it with :meth:`build`."""

    def __init__(
        self,
        rules: Iterable[Rule] = (),
        *,
        approval_mode: str = "default",
        interactive: bool = True,
        default_decision: Decision | None = None,
        disable_always_allow: bool = False,
        trusted_folder: bool = True,
        workspace_dir: Path | None = None,
        static_excludes: Iterable[str] = (),
    ) -> None:
        self._rules: list[Rule] = _sorted_rules(rules)
        for rule in self._rules:
            if not rule.tool_name:
                raise ValueError(f"policy rule without toolName (source: {rule.source})")
        self._mode = normalize_approval_mode(approval_mode)
        self._non_interactive = not interactive
        self._default: Decision = default_decision or ("ask_user" if interactive else "deny")
        self._disable_always_allow = disable_always_allow
        self._trusted_folder = trusted_folder
        self._workspace = workspace_dir
        self._static_excludes = tuple(static_excludes)

    # -- construction ---------------------------------------------------------------------

    @classmethod
    def build(
        cls,
        *,
        approval_mode: str,
        interactive: bool,
        settings: Mapping[str, Any],
        policy_paths: Sequence[Path] = (),
        user_policy_dir: Path | None = None,
        workspace_policy_dir: Path | None = None,
        allowed_tools: Sequence[str] = (),
        known_tools: Collection[str] = (),
        admin_policy_paths: Sequence[Path] = (),
        system_policy_dir: Path | None = None,
        trusted_folder: bool = True,
        workspace_policies_enabled: bool = False,
        default_policy_dir: Path | None = None,
        workspace_dir: Path | None = None,
        strict: bool = False,
    ) -> tuple[PolicyEngine, list[str]]:
        """The engine Gemini CLI would assemble, plus warnings to show the user.

        * ``policy_paths`` (``--policy``, else ``settings.policyPaths``) *replace*
          ``user_policy_dir`` (``~/.gemini/policies``; resolve GEMINI_CLI_HOME in the
          caller). Files or directories; their rules are user tier (4).
        * ``admin_policy_paths`` (``--admin-policy``) are tier 5 but ignored when
          ``system_policy_dir`` (``/etc/gemini-cli/policies``) holds ``.toml`` files.
        * ``workspace_policy_dir`` (``.gemini/policies``) is loaded only when
          ``workspace_policies_enabled`` and ``trusted_folder``: Gemini CLI currently
          ships with workspace policies switched off, so by default they are ignored.
        * Headless runs exclude ``ask_user`` (a ``tools.exclude`` entry, as Gemini).
        * An untrusted folder forces the ``default`` approval mode; ``plan`` falls back
          to ``default`` when ``general.plan.enabled`` is false.
        * A broken policy file is skipped with a warning (Gemini reports and goes on);
          with ``strict`` it raises ``PolicyFileError`` instead (agentbus refuses to
          start rather than run with rules the user did not get), as it does for a
          named path that does not exist or is neither a ``.toml`` file nor a
          directory (Gemini skips it silently).
        """
        warnings_out: list[str] = []
        mode = normalize_approval_mode(approval_mode)
        if mode == "plan" and setting(settings, "general", "plan", "enabled") is False:
            warnings_out.append(
                'Approval mode "plan" is disabled in your settings. Falling back to "default".'
            )
            mode = "default"
        if not trusted_folder and mode != "default":
            warnings_out.append(
                'Approval mode overridden to "default" because the current folder is not trusted.'
            )
            mode = "default"

        if not policy_paths:
            policy_paths = [Path(p).expanduser() for p in str_list(setting(settings, "policyPaths"))]
        if not admin_policy_paths:
            admin_policy_paths = [
                Path(p).expanduser() for p in str_list(setting(settings, "adminPolicyPaths"))
            ]
        if admin_policy_paths and system_policy_dir is not None:
            if policy_files_in(system_policy_dir) and system_policy_dir.is_dir():
                warnings_out.append(
                    "Security Warning: Ignoring --admin-policy because system policies are "
                    f"already defined in {system_policy_dir}"
                )
                admin_policy_paths = ()

        locations: list[tuple[Path, int]] = []
        if system_policy_dir is not None:
            locations.append((system_policy_dir, ADMIN_POLICY_TIER))
        locations += [(Path(p), ADMIN_POLICY_TIER) for p in admin_policy_paths]
        if policy_paths:
            locations += [(Path(p), USER_POLICY_TIER) for p in policy_paths]
        elif user_policy_dir is not None:
            locations.append((user_policy_dir, USER_POLICY_TIER))
        if workspace_policies_enabled and trusted_folder and workspace_policy_dir is not None:
            locations.append((workspace_policy_dir, WORKSPACE_POLICY_TIER))
        locations.append((default_policy_dir or DEFAULT_POLICY_DIR, DEFAULT_POLICY_TIER))

        known = tuple(known_tools)
        named = {Path(p) for p in (*admin_policy_paths, *policy_paths)}
        rules: list[Rule] = []
        for location, tier in locations:
            try:
                problem = named_path_problem(location) if strict and location in named else None
                files = policy_files_in(location)
            except OSError as exc:
                if strict and location in named:
                    raise PolicyFileError(location, 0, f"cannot read it: {exc.strerror or exc}") from None
                warnings_out.append(f"{location}: cannot read policy path: {exc}")
                continue
            if problem is not None:
                raise PolicyFileError(location, 0, problem)
            for file in files:
                try:
                    file_rules, file_warnings = load_policy_file(
                        file, tier=tier, known_tools=known
                    )
                except PolicyFileError as exc:
                    if strict:
                        raise
                    warnings_out.append(
                        f"[{TIER_NAMES[tier].upper()}] {exc} (file skipped)"
                    )
                    continue
                rules += file_rules
                warnings_out += file_warnings

        tools_settings = setting(settings, "tools")
        excluded = str_list(setting(tools_settings, "exclude"))
        if not interactive and ASK_USER_TOOL_NAME not in excluded:
            excluded.append(ASK_USER_TOOL_NAME)
        allowed = list(allowed_tools) or str_list(setting(tools_settings, "allowed"))
        rules += settings_rules(
            settings, allowed_tools=allowed, excluded_tools=excluded, interactive=interactive
        )
        disable_always_allow = bool(
            setting(settings, "security", "disableAlwaysAllow")
            or setting(settings, "admin", "secureModeEnabled")
        )
        engine = cls(
            rules,
            approval_mode=mode,
            interactive=interactive,
            disable_always_allow=disable_always_allow,
            trusted_folder=trusted_folder,
            workspace_dir=workspace_dir,
            static_excludes=excluded,
        )
        return engine, warnings_out

    # -- state ----------------------------------------------------------------------------

    @property
    def rules(self) -> tuple[Rule, ...]:
        """All rules, highest priority first."""
        return tuple(self._rules)

    @property
    def approval_mode(self) -> str:
        return self._mode

    @property
    def interactive(self) -> bool:
        return not self._non_interactive

    @property
    def default_decision(self) -> Decision:
        return self._default

    def set_approval_mode(self, mode: str) -> None:
        self._mode = normalize_approval_mode(mode)

    def add_rule(self, rule: Rule) -> None:
        """Add a rule; among equal priorities, earlier rules keep winning."""
        self._rules = _sorted_rules([*self._rules, rule])

    def add_session_rule(
        self,
        tool_name: str,
        *,
        command_prefix: str | Sequence[str] | None = None,
        args_pattern: str | None = None,
        modes: Sequence[str] | None = None,
        allow_redirection: bool | None = None,
        mcp_name: str | None = None,
        persist_scope: Literal["workspace", "user"] | None = None,
    ) -> None:
        """Remember an "allow always" answer (priority 3.95, 4.95 for user scope).

        ``command_prefix`` (shell root commands) or ``args_pattern`` (a JavaScript regex
        over :func:`stable_stringify`, e.g. a file path pattern) narrow the rule. Tools
        that must be narrowed (shell, file tools) get no rule without one, as in Gemini.
        ``modes`` should be the current mode and the more permissive ones.
        """
        tier = USER_POLICY_TIER if persist_scope == "user" else WORKSPACE_POLICY_TIER
        priority = tier + ALWAYS_ALLOW_FRACTION / 1000
        mode_tuple = tuple(normalize_approval_mode(m) for m in modes) if modes else None

        def make(pattern: str | None) -> Rule:
            return Rule(
                tool_name=tool_name,
                decision="allow",
                priority=priority,
                modes=mode_tuple,
                args_pattern=compile_js_regex(pattern) if pattern else None,
                args_pattern_source=pattern or None,
                allow_redirection=bool(allow_redirection),
                mcp_name=mcp_name,
                source="session: always allow",
            )

        if command_prefix or (command_prefix is not None and not isinstance(command_prefix, str)):
            for pattern in build_args_patterns(None, command_prefix, None):
                if pattern:
                    self.add_rule(make(pattern))
            return
        if args_pattern and not is_safe_regexp(args_pattern):
            raise ValueError(
                f"Invalid or unsafe regular expression for tool {tool_name}: {args_pattern}"
            )
        if tool_name in TOOLS_REQUIRING_NARROWING and not args_pattern:
            return
        self.add_rule(make(args_pattern))

    # -- decisions ------------------------------------------------------------------------

    def check(
        self,
        tool_name: str,
        args: Mapping[str, Any],
        *,
        approval_mode: str | None = None,
        subagent: str | None = None,
        server_name: str | None = None,
        tool_annotations: Mapping[str, Any] | None = None,
    ) -> PolicyVerdict:
        """The decision for one call. Headless ask_user is for the caller to refuse."""
        mode = normalize_approval_mode(approval_mode) if approval_mode else self._mode
        return self._check(
            tool_name, args, mode, subagent, server_name, tool_annotations, skip_heuristics=False
        )

    def _check(
        self,
        tool_name: str,
        args: Mapping[str, Any] | None,
        mode: str,
        subagent: str | None,
        server: str | None,
        annotations: Mapping[str, Any] | None,
        *,
        skip_heuristics: bool,
    ) -> PolicyVerdict:
        if server is None and annotations is not None:
            annotated = annotations.get("_serverName")
            if isinstance(annotated, str):
                server = annotated
        if server is None and tool_name:
            server = mcp_server_of(tool_name)
        stringified = stable_stringify(args) if args is not None else None

        is_shell = tool_name in SHELL_TOOL_NAMES
        command: str | None = None
        dir_path: Any = None
        if is_shell and isinstance(args, Mapping):
            raw_command = args.get("command")
            command = raw_command if isinstance(raw_command, str) else None
            dir_path = args.get("dir_path")

        names = tool_aliases(tool_name) if tool_name else []
        if tool_name == AGENT_TOOL_NAME and isinstance(args, Mapping):
            agent = args.get("agent_name")
            if isinstance(agent, str):
                names.append(agent)

        decision: Decision | None = None
        rule: Rule | None = None
        for candidate in self._rules:
            if self._disable_always_allow and is_always_allow(candidate):
                continue
            if not any(
                rule_matches(
                    candidate,
                    name,
                    stringified,
                    server,
                    mode,
                    self._non_interactive,
                    annotations,
                    subagent,
                )
                for name in names
            ):
                continue
            rule_decision = candidate.decision
            if not skip_heuristics and is_shell and command and candidate.args_pattern is None:
                rule_decision = self._shell_heuristics(command, rule_decision, mode)
            if is_shell:
                decision, rule = self._check_shell(
                    tool_name,
                    command,
                    rule_decision,
                    mode,
                    server,
                    dir_path,
                    candidate.allow_redirection,
                    candidate,
                    annotations,
                    subagent,
                )
            else:
                decision, rule = rule_decision, candidate
            break

        if decision is None:
            if mode == "yolo":
                return verdict_for("allow", None)
            if is_shell:
                fallback = self._default
                if not skip_heuristics and command:
                    fallback = self._shell_heuristics(command, fallback, mode)
                decision, rule = self._check_shell(
                    tool_name,
                    command,
                    fallback,
                    mode,
                    server,
                    dir_path,
                    False,
                    None,
                    annotations,
                    subagent,
                )
            else:
                decision = self._default

        if decision == "allow" and isinstance(args, Mapping) and self._outside_workspace(args):
            decision = "ask_user"
        return verdict_for(decision, rule)

    def _outside_workspace(self, args: Mapping[str, Any]) -> bool:
        """Sandbox ``additional_permissions`` naming paths outside the workspace."""
        permissions = args.get("additional_permissions")
        file_system = permissions.get("fileSystem") if isinstance(permissions, Mapping) else None
        if not isinstance(file_system, Mapping):
            return False
        workspace = str(self._workspace) if self._workspace is not None else os.getcwd()
        paths: list[Any] = []
        for key in ("read", "write"):
            value = file_system.get(key)
            if isinstance(value, list):
                paths += value
        for path in paths:
            if not isinstance(path, str):
                continue
            absolute = path if os.path.isabs(path) else os.path.join(workspace, path)
            if not is_subpath(workspace, absolute) and workspace != path:
                return True
        return False

    def _shell_heuristics(self, command: str, decision: Decision, mode: str) -> Decision:
        if decision == "deny":
            return "deny"
        # The shell's readers are imported by the first shell command checked.
        from actors.common import ShellQuoteError, shell_words

        from ._command_safety import (
            contains_git_command,
            is_dangerous_command,
            is_known_safe_command,
        )

        readable = True
        try:
            words = shell_words(command)
        except ShellQuoteError:
            # Gemini skips every heuristic when shell-quote cannot read the words (`${}`),
            # so a shell-wide allow would run `rm -rf x; echo ${}` (bash runs the rm, then
            # fails on `${}`). Deliberate difference: the checks that ask still run, on
            # the words with the bad substitution left empty; nothing becomes allowed.
            readable = False
            words = shell_words(command, strict=False)
        if contains_git_command(words) and not self._trusted_folder:
            return "ask_user"
        if is_dangerous_command(words):
            return decision if mode == "yolo" else "ask_user"
        if readable and is_known_safe_command(words) and decision == "ask_user":
            return "allow"
        return decision

    def _downgrade_for_redirection(self, command: str, allow_redirection: bool, mode: str) -> bool:
        from actors.common import has_redirection

        if allow_redirection or not has_redirection(command):
            return False
        return mode not in ("autoEdit", "yolo")

    def _check_shell(
        self,
        tool_name: str,
        command: str | None,
        rule_decision: Decision,
        mode: str,
        server: str | None,
        dir_path: Any,
        allow_redirection: bool,
        rule: Rule | None,
        annotations: Mapping[str, Any] | None,
        subagent: str | None,
    ) -> tuple[Decision, Rule | None]:
        if not command:
            return rule_decision, rule
        from actors.common import REDIRECTION_NAMES, parse_command_details, strip_shell_wrapper

        parsed = parse_command_details(command)
        if parsed is None or not parsed.details or parsed.has_error:
            if rule_decision == "deny":
                return "deny", rule
            if mode == "yolo":
                if rule is not None and rule.args_pattern is not None:
                    return "deny", rule  # cannot prove the restricted rule applies
                return "allow", rule
            return self._default, rule
        if rule_decision == "deny":
            return "deny", rule

        aggregate: Decision = rule_decision
        responsible = rule if rule is not None and rule_decision == rule.decision else None
        if self._downgrade_for_redirection(command, allow_redirection, mode):
            if aggregate == "allow":
                aggregate = "ask_user"
                responsible = None

        def sub_check(text: str) -> PolicyVerdict:
            sub_args: dict[str, Any] = {"command": text}
            if dir_path is not None:
                sub_args["dir_path"] = dir_path
            return self._check(
                tool_name, sub_args, mode, subagent, server, annotations, skip_heuristics=True
            )

        for detail in parsed.details:
            if detail.name in REDIRECTION_NAMES:
                continue
            sub_command = js_trim(detail.text)
            atomic = sub_command == command or (
                detail.start == 0 and len(detail.text) == len(command)
            )
            stripped = strip_shell_wrapper(sub_command)
            if stripped != sub_command:
                wrapped = sub_check(stripped)
                if wrapped.decision == "deny":
                    return "deny", wrapped.rule
                if wrapped.decision == "ask_user":
                    if aggregate == "allow":
                        responsible = wrapped.rule
                    elif responsible is None:
                        responsible = wrapped.rule
                    aggregate = "ask_user"
            if not atomic:
                sub = sub_check(sub_command)
                if sub.decision == "deny":
                    return "deny", sub.rule
                if sub.decision == "ask_user":
                    if aggregate == "allow":
                        responsible = sub.rule
                    elif responsible is None:
                        responsible = sub.rule
                    aggregate = "ask_user"
                if sub.decision == "allow" and self._downgrade_for_redirection(
                    sub_command, allow_redirection, mode
                ):
                    if aggregate == "allow":
                        aggregate = "ask_user"
                        responsible = None
        return aggregate, (rule if aggregate == rule_decision else responsible)

    def excluded_tools(
        self,
        tool_names: Iterable[str],
        *,
        approval_mode: str | None = None,
        tool_annotations: Mapping[str, Mapping[str, Any]] | None = None,
        class_names: Mapping[str, str] | None = None,
    ) -> set[str]:
        """The tools Gemini drops from the registry: the model never sees them.

        Per tool, rules are walked by priority ignoring arguments: a rule *with* an args
        pattern that denies is skipped (it only denies some calls); one that allows or
        asks keeps the tool; the first rule without a pattern decides (deny excludes).
        No rule: excluded when the default decision is deny (headless). ask_user never
        excludes. ``tools.exclude`` (and headless ``ask_user``) are always excluded, and
        exclusions carry over to legacy aliases (``search_file_content``/``grep_search``).
        A ``tools.exclude`` entry may also name the tool's class (``class_names``:
        ``ShellTool`` excludes ``run_shell_command``, as Gemini's registry checks both).
        A call to an excluded tool fails as ``tool_not_registered``, not a policy error.
        """
        names = list(tool_names)
        mode = normalize_approval_mode(approval_mode) if approval_mode else self._mode
        excluded: set[str] = set(self._static_excludes)
        for name in names:
            annotations = tool_annotations.get(name) if tool_annotations else None
            annotated = annotations.get("_serverName") if annotations else None
            server = annotated if isinstance(annotated, str) else None
            statically_denied = self._default == "deny"
            for rule in self._rules:
                if self._disable_always_allow and is_always_allow(rule):
                    continue
                if not rule_matches(
                    rule,
                    name,
                    None,
                    server,
                    mode,
                    self._non_interactive,
                    annotations,
                    None,
                    ignore_args=True,
                ):
                    continue
                if rule.args_pattern is not None:
                    if rule.decision == "deny":
                        continue
                    statically_denied = False
                    break
                statically_denied = rule.decision == "deny"
                break
            if statically_denied:
                excluded.add(name)
        expanded = {alias for name in excluded for alias in tool_aliases(name)}
        classes = class_names or {}
        return {name for name in names if name in expanded or classes.get(name) in expanded}
