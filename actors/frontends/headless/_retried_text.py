"""A response's streamed text across mid-stream retries: what a front end shows next.

Text that went to stdout or to an ACP client cannot be taken back. When the model
stream fails mid-way and is retried (``StreamRetried``), the new attempt usually
repeats what the failed one said: ``RetriedText`` holds the new attempt's text back
while it repeats what was shown, and shows only what goes beyond it. When the new
attempt says something else, or the response ends before it reached what was shown,
the front end is told (``Shown.diverged``): it says that the text shown before is
discarded, then shows the new attempt's text from its start.

Pure: no I/O. One instance per response (``end`` starts the next).
"""

from __future__ import annotations

import attrs


@attrs.frozen
class Shown:
    """What to show now."""

    text: str
    diverged: bool = False
    """Before ``text``: say that the response's text shown so far is discarded (the
    new attempt does not repeat it); ``text`` is then the new attempt's text so far."""


@attrs.define
class RetriedText:
    _parts: list[str] = attrs.field(factory=list)
    """The response's text as shown (since it began, or since the last divergence)."""
    _shown: str = ""
    """``_parts`` joined, while a new attempt is compared with it."""
    _attempt: str | None = None
    """The new attempt's text while it repeats ``_shown``; ``None`` when in step."""

    def retry(self) -> None:
        """The stream failed and starts again: what comes next is a new attempt."""
        if self._attempt is None:
            if not self._parts:
                return  # nothing shown: the new attempt is simply the response
            self._shown = "".join(self._parts)
            self._parts = [self._shown]
        self._attempt = ""

    def feed(self, text: str) -> Shown | None:
        """Text of the current attempt; returns what to show, or ``None`` (a repeat)."""
        if self._attempt is None:
            self._parts.append(text)
            return Shown(text)
        attempt, shown = self._attempt + text, self._shown
        if shown.startswith(attempt):
            self._attempt = attempt
            return None
        self._parts, self._shown, self._attempt = [attempt], "", None
        if attempt.startswith(shown):
            return Shown(attempt[len(shown) :])
        return Shown(attempt, diverged=True)

    def end(self) -> Shown | None:
        """The response is over. A new attempt that stopped short of the text shown
        diverged: returns what to show (``diverged``), else ``None``. Resets."""
        attempt, shown = self._attempt, self._shown
        self._parts, self._shown, self._attempt = [], "", None
        if attempt is None or attempt == shown:
            return None
        return Shown(attempt, diverged=True)


def discard_notice(reason: str, *, where: str = "before this notice") -> str:
    """What a front end says before the text of a new attempt that diverged."""
    return (
        f"The model stream failed and was retried ({reason}); the new attempt's text differs, "
        f"so this response's text {where} is discarded."
    )
