"""HTML to plain text for ``web_fetch``'s fallback (pure).

Gemini CLI converts pages with the ``html-to-text`` package (``wordwrap: false``, links
without their URLs, images skipped). This module renders the same layout rules for the
elements that matter to a reader:

- only ``<body>`` is rendered when there is one (the whole document otherwise);
- inline text has its whitespace collapsed; blocks are separated by the larger of the
  previous block's trailing and the next block's leading line breaks (``p``, ``pre``,
  lists, tables, ``blockquote``, ``hr``: 2; ``h1``–``h3``: 3 before, 2 after; ``h4``–``h6``:
  2; ``div``, ``section``, ``article``, ``header``, ``footer``, ``nav``, ``main``,
  ``aside``, ``form``: 1);
- headings are upper-cased; ``ul`` items start with `` * ``, ``ol`` items with ``1. ``
  (continuation lines indented to match); ``blockquote`` lines start with ``> ``;
  ``hr`` is 40 dashes; ``br`` is a line break; ``pre`` keeps its text as is;
- table rows become lines, cells padded to their column's width and separated by three
  spaces (header cells upper-cased);
- ``a`` renders its text only; ``img`` renders nothing.

Deliberate differences from html-to-text: the contents of ``script``, ``style``,
``noscript``, ``template`` and ``head`` elements are dropped (html-to-text prints script
text found in the body, which only costs the model tokens), and long table cells are not
wrapped at 60 columns.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

import attrs

_BLOCKS: dict[str, tuple[int, int]] = {
    **dict.fromkeys(
        ("article", "aside", "div", "footer", "form", "header", "main", "nav", "section"),
        (1, 1),
    ),
    **dict.fromkeys(("h1", "h2", "h3"), (3, 2)),
    **dict.fromkeys(("h4", "h5", "h6"), (2, 2)),
    **dict.fromkeys(("p", "pre", "ul", "ol", "table", "blockquote", "hr"), (2, 2)),
}
_VOID = frozenset("area base br col embed hr img input link meta param source track wbr".split())
_SKIPPED = frozenset({"script", "style", "noscript", "template", "head", "img"})
_HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
_WS = re.compile(r"[ \t\r\n\f\u200b]+")
_IMPLIED_CLOSE: dict[str, frozenset[str]] = {
    "li": frozenset({"li"}),
    "dt": frozenset({"dt", "dd"}),
    "dd": frozenset({"dt", "dd"}),
    "tr": frozenset({"tr", "td", "th"}),
    "td": frozenset({"td", "th"}),
    "th": frozenset({"td", "th"}),
    "option": frozenset({"option"}),
}
_CLOSES_P = frozenset(
    "address article aside blockquote div dl fieldset footer form h1 h2 h3 h4 h5 h6 header "
    "hr main nav ol p pre section table ul".split()
)
_SCOPES = frozenset({"ul", "ol", "table", "tbody", "thead", "tfoot", "dl", "select"})


@attrs.define
class _Node:
    tag: str
    children: list[_Node | str] = attrs.field(factory=list)


class _TreeBuilder(HTMLParser):
    """A forgiving DOM: implied end tags for ``p``, list items and table cells."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = _Node("#document")
        self.stack: list[_Node] = [self.root]

    def _close_until(self, names: frozenset[str], stop: frozenset[str]) -> None:
        for i in range(len(self.stack) - 1, 0, -1):
            tag = self.stack[i].tag
            if tag in names:
                del self.stack[i:]
                return
            if tag in stop:
                return

    def handle_starttag(self, tag: str, attrs_: list[tuple[str, str | None]]) -> None:
        if tag in _IMPLIED_CLOSE:
            self._close_until(_IMPLIED_CLOSE[tag], _SCOPES)
        if tag in _CLOSES_P:
            self._close_until(frozenset({"p"}), _SCOPES | {"button"})
        node = _Node(tag)
        self.stack[-1].children.append(node)
        if tag not in _VOID:
            self.stack.append(node)

    def handle_startendtag(self, tag: str, attrs_: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs_)
        if tag not in _VOID and self.stack[-1].tag == tag:
            self.stack.pop()

    def handle_endtag(self, tag: str) -> None:
        if tag == "br":
            self.stack[-1].children.append(_Node("br"))
            return
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                return

    def handle_data(self, data: str) -> None:
        self.stack[-1].children.append(data)


class _Builder:
    """Accumulates words and line breaks with html-to-text's merging rules."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.pending_breaks = 0
        self.pending_space = False
        self.at_line_start = True

    def _flush_breaks(self) -> None:
        if self.parts and self.pending_breaks:
            self.parts.append("\n" * self.pending_breaks)
            self.at_line_start = True
        self.pending_breaks = 0

    def text(self, data: str, *, upper: bool = False) -> None:
        if not data:
            return
        words = _WS.split(data)
        if words[0] == "":
            self.pending_space = True
            words = words[1:]
        trailing = bool(words) and words[-1] == ""
        if trailing:
            words = words[:-1]
        for i, word in enumerate(words):
            if i > 0:
                self.pending_space = True
            self.word(word.upper() if upper else word)
        if trailing:
            self.pending_space = True

    def word(self, word: str) -> None:
        self._flush_breaks()
        if self.pending_space and not self.at_line_start:
            self.parts.append(" ")
        self.parts.append(word)
        self.pending_space = False
        self.at_line_start = word.endswith("\n")

    def raw(self, text: str) -> None:
        """Text kept as is (``pre``, rendered sub-blocks)."""
        if not text:
            return
        self._flush_breaks()
        if self.pending_space and not self.at_line_start:
            self.parts.append(" ")
        self.parts.append(text)
        self.pending_space = False
        self.at_line_start = text.endswith("\n")

    def line_break(self) -> None:
        self._flush_breaks()
        self.parts.append("\n")
        self.pending_space = False
        self.at_line_start = True

    def block(self, leading: int) -> None:
        self.pending_breaks = max(self.pending_breaks, leading) if self.parts else 0
        self.pending_space = False

    def end_block(self, trailing: int) -> None:
        self.pending_breaks = max(self.pending_breaks, trailing)
        self.pending_space = False

    def result(self) -> str:
        return "".join(self.parts).strip("\n")


def _render_children(node: _Node, out: _Builder, upper: bool) -> None:
    for child in node.children:
        if isinstance(child, str):
            out.text(child, upper=upper)
        else:
            _render(child, out, upper)


def _render_into(node: _Node, upper: bool) -> str:
    sub = _Builder()
    _render_children(node, sub, upper)
    return sub.result()


def _prefixed(text: str, first: str, rest: str) -> str:
    lines = text.split("\n")
    return "\n".join((first if i == 0 else rest) + line for i, line in enumerate(lines))


def _render(node: _Node, out: _Builder, upper: bool) -> None:
    tag = node.tag
    if tag in _SKIPPED:
        return
    if tag == "br":
        out.line_break()
        return
    if tag == "wbr":
        return
    leading, trailing = _BLOCKS.get(tag, (0, 0))
    if tag == "hr":
        out.block(leading)
        out.raw("-" * 40)
        out.end_block(trailing)
        return
    if tag == "pre":
        out.block(leading)
        out.raw(_pre_text(node))
        out.end_block(trailing)
        return
    if tag in ("ul", "ol"):
        out.block(leading)
        items = [c for c in node.children if isinstance(c, _Node) and c.tag == "li"]
        width = len(f"{len(items)}. ")
        lines: list[str] = []
        for n, item in enumerate(items, start=1):
            text = _render_into(item, upper)
            if tag == "ul":
                lines.append(_prefixed(text, " * ", "   "))
            else:
                lines.append(_prefixed(text, f"{n}. ".ljust(width), " " * width))
        out.raw("\n".join(lines))
        out.end_block(trailing)
        return
    if tag == "blockquote":
        out.block(leading)
        text = _render_into(node, upper)
        lines_ = [line for line in text.split("\n")]
        while lines_ and not lines_[0].strip():
            lines_.pop(0)
        while lines_ and not lines_[-1].strip():
            lines_.pop()
        out.raw("\n".join("> " + line for line in lines_))
        out.end_block(trailing)
        return
    if tag == "table":
        out.block(leading)
        out.raw(_table_text(node, upper))
        out.end_block(trailing)
        return
    if leading or trailing:
        out.block(leading)
        _render_children(node, out, upper or tag in _HEADINGS)
        out.end_block(trailing)
        return
    _render_children(node, out, upper)


def _pre_text(node: _Node) -> str:
    parts: list[str] = []
    for child in node.children:
        if isinstance(child, str):
            parts.append(child)
        elif child.tag == "br":
            parts.append("\n")
        elif child.tag not in _SKIPPED:
            parts.append(_pre_text(child))
    return "".join(parts)


def _rows(node: _Node) -> list[_Node]:
    rows: list[_Node] = []
    for child in node.children:
        if isinstance(child, _Node):
            if child.tag == "tr":
                rows.append(child)
            elif child.tag in ("thead", "tbody", "tfoot"):
                rows.extend(_rows(child))
    return rows


def _table_text(node: _Node, upper: bool) -> str:
    grid: list[list[str]] = []
    for row in _rows(node):
        cells = [c for c in row.children if isinstance(c, _Node) and c.tag in ("td", "th")]
        grid.append([_render_into(c, upper or c.tag == "th") for c in cells])
    if not grid:
        return ""
    columns = max(len(r) for r in grid)
    widths = [0] * columns
    for r in grid:
        for i, cell in enumerate(r):
            widths[i] = max(widths[i], max((len(line) for line in cell.split("\n")), default=0))
    lines: list[str] = []
    for r in grid:
        split = [cell.split("\n") for cell in r]
        height = max((len(s) for s in split), default=1)
        for h in range(height):
            line = "   ".join(
                (s[h] if h < len(s) else "").ljust(widths[i]) for i, s in enumerate(split)
            )
            lines.append(line.rstrip())
    return "\n".join(lines)


def _find(node: _Node, tag: str) -> _Node | None:
    for child in node.children:
        if isinstance(child, _Node):
            if child.tag == tag:
                return child
            found = _find(child, tag)
            if found is not None:
                return found
    return None


def html_to_text(html: str) -> str:
    """The readable text of an HTML document."""
    parser = _TreeBuilder()
    parser.feed(html)
    parser.close()
    base = _find(parser.root, "body") or parser.root
    out = _Builder()
    _render_children(base, out, False)
    return out.result()


__all__ = ["html_to_text"]
