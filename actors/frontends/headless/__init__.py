"""Headless runs: ``agentbus -p … -o text|json|stream-json``, Gemini CLI's drop-in.

What other front ends reuse (replay and the demo run a prepared headless session; ACP
and replay show text as headless does) is public here, loaded on first use.
"""

from typing import TYPE_CHECKING

from actors.common import lazy_exports

if TYPE_CHECKING:
    from ._force_exit import force_exit
    from ._headless import Prepared, prepare, report_fatal, run_headless, run_prepared
    from ._output import HeadlessPrinter
    from ._retried_text import RetriedText, Shown, discard_notice

__getattr__ = lazy_exports(
    __name__,
    {
        "force_exit": "._force_exit",
        "Prepared": "._headless",
        "prepare": "._headless",
        "report_fatal": "._headless",
        "run_headless": "._headless",
        "run_prepared": "._headless",
        "HeadlessPrinter": "._output",
        "RetriedText": "._retried_text",
        "Shown": "._retried_text",
        "discard_notice": "._retried_text",
    },
)

__all__ = [
    "HeadlessPrinter",
    "Prepared",
    "RetriedText",
    "Shown",
    "discard_notice",
    "force_exit",
    "prepare",
    "report_fatal",
    "run_headless",
    "run_prepared",
]
