"""Which environment variables a child process Gemini CLI starts may see (its
``environmentSanitization``): the shell tool's commands and the MCP stdio servers get the
same rules, so they live here once."""

from __future__ import annotations

import functools
import re
from collections.abc import Collection

ALWAYS_ALLOWED_VARIABLES = frozenset(
    {
        "PATH", "SYSTEMROOT", "COMSPEC", "PATHEXT", "WINDIR", "TEMP", "TMP", "USERPROFILE",
        "SYSTEMDRIVE", "HOME", "LANG", "SHELL", "TMPDIR", "USER", "LOGNAME", "TERM",
        "COLORTERM", "ADDITIONAL_CONTEXT", "AVAILABLE_LABELS", "BRANCH_NAME", "DESCRIPTION",
        "EVENT_NAME", "GITHUB_ENV", "IS_PULL_REQUEST", "ISSUES_TO_TRIAGE", "ISSUE_BODY",
        "ISSUE_NUMBER", "ISSUE_TITLE", "PULL_REQUEST_NUMBER", "REPOSITORY", "TITLE",
        "TRIGGERING_ACTOR",
    }
)  # fmt: skip
NEVER_ALLOWED_VARIABLES = frozenset(
    {
        "CLIENT_ID", "DB_URI", "CONNECTION_STRING", "AWS_DEFAULT_REGION", "AZURE_CLIENT_ID",
        "AZURE_TENANT_ID", "SLACK_WEBHOOK_URL", "TWILIO_ACCOUNT_SID", "DATABASE_URL",
        "GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_ACCOUNT", "FIREBASE_PROJECT_ID",
    }
)  # fmt: skip
_NEVER_ALLOWED_NAME = "TOKEN|SECRET|PASSWORD|PASSWD|KEY|AUTH|CREDENTIAL|CREDS|PRIVATE|CERT"
_NEVER_ALLOWED_VALUE = (
    r"-----BEGIN (RSA|OPENSSH|EC|PGP) PRIVATE KEY-----",
    r"-----BEGIN CERTIFICATE-----",
    r"(https?|ftp|smtp)://[^:\s]{1,1024}:[^@\s]{1,1024}@",
    r"(ghp|gho|ghu|ghs|ghr|github_pat)_[a-zA-Z0-9_]{36,}",
    r"AIzaSy[a-zA-Z0-9_\\-]{33}",
    r"AKIA[A-Z0-9]{16}",
    r"eyJ[a-zA-Z0-9_-]{0,10240}\.[a-zA-Z0-9_-]{0,10240}\.[a-zA-Z0-9_-]{0,10240}",
    r"(s|r)k_(live|test)_[0-9a-zA-Z]{24}",
    r"xox[abpr]-[a-zA-Z0-9-]+",
)


@functools.cache
def _never_allowed() -> tuple[re.Pattern[str], tuple[re.Pattern[str], ...]]:
    """The secret-looking names and values, compiled when a child's environment is first
    built (a run that starts no child does not pay for ten regexes)."""
    return (
        re.compile(_NEVER_ALLOWED_NAME, re.IGNORECASE),
        tuple(re.compile(p, re.IGNORECASE) for p in _NEVER_ALLOWED_VALUE),
    )


def env_redacted(key: str, value: str, allowed: Collection[str], blocked: Collection[str], strict: bool) -> bool:
    """Whether ``key=value`` is kept from the child: Gemini's order of checks (its own
    variables pass, secret-looking values never, then the allow list, the block list, the
    always-allowed names, and in strict mode everything else)."""
    key = key.upper()
    if key.startswith("GEMINI_CLI_"):
        return False
    secret_name, secret_values = _never_allowed()
    if value and any(p.search(value.upper()) for p in secret_values):
        return True
    if key.startswith("GIT_CONFIG_") or key in allowed:
        return False
    if key in blocked:
        return True
    if key in ALWAYS_ALLOWED_VARIABLES:
        return False
    if key in NEVER_ALLOWED_VARIABLES or strict:
        return True
    return secret_name.search(key) is not None
