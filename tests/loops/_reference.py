"""A slow, literal model of Gemini CLI's content-loop rule, as its documentation and the
reference describe it (one window per character, indices shifted on every cut): the
oracle the fast detector is compared with."""

from __future__ import annotations

from actors.loops._logic import is_structural


class ReferenceContent:
    def __init__(self) -> None:
        self.history = ""
        self.stats: dict[str, list[int]] = {}
        self.index = 0
        self.in_code = False
        self.detected = False
        self.count = 0

    def reset_content(self) -> None:
        self.history, self.stats, self.index = "", {}, 0

    def tool_call(self) -> None:
        if not self.detected:
            self.reset_content()

    def clear(self) -> None:
        self.detected = False

    def content(self, chunk: str) -> int:
        if self.detected:
            return self.count
        fences, resets, divider = is_structural(chunk)
        if resets:
            self.reset_content()
        was = self.in_code
        if fences % 2:
            self.in_code = not self.in_code
        if was or self.in_code or divider:
            return 0
        self.history += chunk
        if len(self.history) > 5000:
            cut = len(self.history) - 5000
            self.history = self.history[cut:]
            self.index = max(0, self.index - cut)
            stats: dict[str, list[int]] = {}
            for window, indices in self.stats.items():
                kept = [i - cut for i in indices if i - cut >= 0]
                if kept:
                    stats[window] = kept
            self.stats = stats
        while self.index + 50 <= len(self.history):
            window = self.history[self.index : self.index + 50]
            indices = self.stats.get(window)
            if indices is None:
                self.stats[window] = [self.index]
            else:
                indices.append(self.index)
                if len(indices) >= 10:
                    recent = indices[-10:]
                    if (recent[-1] - recent[0]) / 9 <= 250:
                        periods = {self.history[a:b] for a, b in zip(recent, recent[1:], strict=False)}
                        if len(periods) <= 5:
                            self.detected = True
                            self.count += 1
                            return self.count
            self.index += 1
        return 0
