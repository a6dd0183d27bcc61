"""``LazyPattern``: a module-level regular expression compiled by its first use, which
answers as the compiled pattern does."""

from __future__ import annotations

import re

from actors.common import LazyPattern


def test_compiled_by_its_first_use_and_once() -> None:
    lazy = LazyPattern(r"(\d+)-(?P<word>[a-z]+)", re.IGNORECASE)
    assert lazy._compiled is None
    assert lazy.compiled is lazy.compiled
    assert lazy.compiled.flags & re.IGNORECASE


def test_answers_as_the_compiled_pattern() -> None:
    source, flags = r"^(\d+)-(?P<word>[a-z]+)$|x", re.IGNORECASE | re.MULTILINE
    lazy, real = LazyPattern(source, flags), re.compile(source, flags)
    text = "12-AB\n3-cd\nzx"

    def shown(m: re.Match[str] | None) -> object:
        return None if m is None else (m.span(), m.groups(), m.groupdict())

    for name in ("match", "search", "fullmatch"):
        for args in ((text,), (text, 6), (text, 6, 10), ("12-ab",)):
            assert shown(getattr(lazy, name)(*args)) == shown(getattr(real, name)(*args)), (name, args)
    assert [shown(m) for m in lazy.finditer(text, 1)] == [shown(m) for m in real.finditer(text, 1)]
    assert lazy.sub("#", text) == real.sub("#", text)
    assert lazy.sub(lambda m: m.group(0).upper(), text, 1) == real.sub(lambda m: m.group(0).upper(), text, 1)
    assert lazy.pattern == real.pattern
