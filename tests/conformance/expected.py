"""The conformance scenarios agentbus is expected to differ on, each with the reason.

The one list: ``make conformance`` (``tests/conformance/run.py``) exits 0 when exactly
these differ, and ``tests/conformance/test_corpus.py`` requires every other scenario to
pass.
"""

from __future__ import annotations

EXPECTED_DIFFERENCES: dict[str, str] = {
    "hooks-ask-decision-headless": (
        "deliberate: a BeforeTool hook answering `ask` headless fails the call at once "
        "instead of waiting forever (docs/differences.md)"
    ),
    "hooks-after-model-replace-response": (
        "deliberate: an AfterModel replacement repeated per chunk is shown once (docs/differences.md)"
    ),
    "concurrency-limit-web-fetch-dns-shim": (
        "the corpus' DNS shim is a Node preload; ours is AGENTBUS_TEST_DNS_OVERRIDES, with which "
        "tests/conformance/test_corpus.py runs it"
    ),
}
