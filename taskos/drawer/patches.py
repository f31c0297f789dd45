"""Patches instead of whole elements: what changed in a drawer element since it was sent.

A live page's panels re-render on every update, but most of what they render is what the
page already shows: the same anchors, the same zone rows with one figure changed. Sent
whole, those elements were most of a long run's websocket traffic (long-1000: 22 MB, the
active anchors list alone 7.5 MB). So the feed (taskos/drawer/feed.py) remembers the last
HTML it sent of each element sent whole and, the next time, sends only the smallest parts
that differ, addressed from that element by position:

    <td hx-swap-oob="path:panel-budget-body@7/0/3/1/2!td">8,120</td>    morph this element
    <tr hx-swap-oob="attrs:panel-budget-body@7/0/3/1!tr">…</tr>         copy its attributes
    <li hx-swap-oob="insert:anchors-state@4/0/3!ul">…</li>              insert as child 3
                                             ("…!ul+": with a space after it, or before it last)
    <i hx-swap-oob="remove:anchors-state@4/0/5!li"></i>                 remove child 5
    <i hx-swap-oob="text:panel-cost-body@7">["0/1/1!dd", "846,486", …]</i>  set texts

"!td" is the element the page should find there (for an insert, the parent): a browser
that built another tree from the HTML (a <tbody> it added) gets the panel whole instead.
"@7" is the revision the element was sent whole with (its data-rev on the page): an element
a person replaced since (the inspector's call picker swaps its body) has another, and the
page asks for it whole instead of applying a patch to something else
(static/js/fragments.js). Children with ids (or data-seq) are
matched by them (a list gaining rows gets inserts), others by position; when the structure differs in any
other way the element is sent whole, which is always right.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from html import escape, unescape
from html.parser import HTMLParser

VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta",
                  "source", "track", "wbr"})
# The page splits a message into fragments at lines starting with a tag carrying
# hx-swap-oob (static/js/taskos.js FRAGMENT_START): a patch's tag must match it.
PLAIN_TAG = re.compile(r"[a-z][a-z0-9]*")
SPACE = re.compile(r"\s+")
# Sent whole when they change, never patched inside: an SVG element arriving alone in a
# fragment would be parsed as HTML and not drawn.
OPAQUE = frozenset({"svg"})
# Elements whose text the HTML parser does not take as written (a <pre>'s first line
# break is dropped): changed, they are sent whole, never as text.
RAW_TEXT = frozenset({"pre", "textarea", "script", "style", "title"})


class NotPatchable(Exception):
    """The HTML is not one well-formed element tree (or a part cannot be addressed)."""


@dataclass
class Node:
    tag: str
    start: int  # offsets into the source: the start tag, its end, the element's end
    open_end: int
    end: int = 0
    dom_id: str | None = None
    # What matches it among its siblings: its id, else its data-seq or data-key (a row
    # of a list that moves as rows are added), else an <option>'s value.
    key: str | None = None
    children: list[Node] = field(default_factory=list)


class _Tree(HTMLParser):
    def __init__(self, source: str) -> None:
        super().__init__(convert_charrefs=True)
        self.source = source
        self.lines = [0]
        for found in re.finditer("\n", source):
            self.lines.append(found.end())
        self.stack: list[Node] = []
        self.roots: list[Node] = []

    def position(self) -> int:
        line, column = self.getpos()
        return self.lines[line - 1] + column

    def add(self, tag: str, attrs: list, closed: bool) -> None:
        start = self.position()
        named = dict(attrs)
        key = (named.get("id") or named.get("data-seq") or named.get("data-key")
               or (f"={named.get('value')}" if tag == "option" and "value" in named else None))
        node = Node(tag, start, start + len(self.get_starttag_text() or ""),
                    dom_id=named.get("id"), key=key and f"{tag} {key}")
        (self.stack[-1].children if self.stack else self.roots).append(node)
        if closed or tag in VOID:  # <input>, or <line …/> in SVG
            node.end = node.open_end
        else:
            self.stack.append(node)

    def handle_starttag(self, tag, attrs) -> None:
        self.add(tag, attrs, False)

    def handle_startendtag(self, tag, attrs) -> None:
        self.add(tag, attrs, True)

    def handle_endtag(self, tag) -> None:
        if tag in VOID:
            return
        if not self.stack or self.stack[-1].tag != tag:
            raise NotPatchable(f"</{tag}> does not close <{self.stack[-1].tag if self.stack else ''}>")
        start = self.position()
        self.stack.pop().end = self.source.index(">", start) + 1


@dataclass
class Sent:
    """An element as the page was last sent it: its HTML, tree and revision."""

    html: str
    root: Node
    rev: int
    ids: frozenset[str]


def parse(html: str, rev: int) -> Sent:
    """`html` (one element) as a tree; NotPatchable when it is not one well-formed element."""
    tree = _Tree(html)
    tree.feed(html)
    tree.close()
    if tree.stack or len(tree.roots) != 1:
        raise NotPatchable("not one closed element")
    ids: set[str] = set()

    def collect(node: Node) -> None:
        if node.dom_id:
            ids.add(node.dom_id)
        for child in node.children:
            collect(child)

    collect(tree.roots[0])
    return Sent(html, tree.roots[0], rev, frozenset(ids))


def find(node: Node, dom_id: str) -> Node | None:
    """The element with id `dom_id` in `node`'s tree."""
    if node.dom_id == dom_id:
        return node
    for child in node.children:
        found = find(child, dom_id)
        if found is not None:
            return found
    return None


def _text(source: str, node: Node) -> str:
    return source[node.start:node.end]


def _own(source: str, node: Node) -> list[str]:
    """The element's content without its child elements: the text between them."""
    chunks, at = [], node.open_end
    for child in node.children:
        chunks.append(source[at:child.start])
        at = child.end
    closing = source.rfind("</", node.open_end, node.end) if node.end > node.open_end else at
    chunks.append(source[at:closing if closing >= at else node.end])
    # Whitespace between elements is not compared: a template's line breaks around a
    # block it shows or not ("{% if %}\n<div>…") would make every such change whole.
    return [SPACE.sub(" ", chunk) if chunk.strip() else "" for chunk in chunks]


def _closing(source: str, node: Node) -> int:
    """Where the element's end tag starts (its end when it has none)."""
    closing = source.rfind("</", node.open_end, node.end)
    return closing if closing >= node.open_end else node.end


def _placed(source: str, node: Node, how: str) -> str:
    if not PLAIN_TAG.fullmatch(node.tag):
        raise NotPatchable(f"<{node.tag}> cannot start a fragment")
    at = node.start + 1 + len(node.tag)
    return f'{source[node.start:at]} hx-swap-oob="{how}"{source[at:node.end]}'


def _keyed(nodes: list[Node]) -> bool:
    ids = [n.key for n in nodes]
    return bool(nodes) and all(ids) and len(set(ids)) == len(ids)


def diff(old: Sent, new_html: str, new: Sent) -> list[str]:
    """Fragments that turn `old` (as the page shows it) into `new`; NotPatchable when the
    element should be sent whole instead."""
    out: list = []
    root = f"{new.root.dom_id}@{old.rev}"
    _diff(old.html, old.root, new_html, new.root, root, out)
    texts = [step for step in out if isinstance(step, tuple)]
    out = [step for step in out if not isinstance(step, tuple)]
    if texts:
        # Last: their paths name the elements as they are once the other patches are in.
        pairs = [item for where, text in texts
                 for item in (where[len(root) + 1:], text)]
        out.append(f'<i hx-swap-oob="text:{root}">'
                   f'{escape(json.dumps(pairs, ensure_ascii=False), quote=False)}</i>')
    return out


def _diff(old_src: str, old: Node, new_src: str, new: Node, where: str, out: list[str]) -> None:
    if _text(old_src, old) == _text(new_src, new):
        return
    if old.tag != new.tag or old.dom_id != new.dom_id or new.tag in OPAQUE:
        _whole(new_src, new, where, old.tag, out)
        return
    old_kids, new_kids = old.children, new.children
    old_own, new_own = _own(old_src, old), _own(new_src, new)
    keyed = _keyed(old_kids) and _keyed(new_kids)
    if keyed:
        # Rows with ids: only whitespace between them, the same text around them.
        if ([c.strip() for c in old_own[1:-1]] != [""] * (len(old_own) - 2)
                or [c.strip() for c in new_own[1:-1]] != [""] * (len(new_own) - 2)
                or (old_own[0], old_own[-1]) != (new_own[0], new_own[-1])):
            _whole(new_src, new, where, old.tag, out)
            return
        old_ids = [k.key for k in old_kids]
        new_ids = [k.key for k in new_kids]
        kept_old = [i for i in old_ids if i in set(new_ids)]
        if kept_old != [i for i in new_ids if i in set(old_ids)]:
            _whole(new_src, new, where, old.tag, out)  # rows moved: merged whole on the page
            return
    elif old_own != new_own and not (any(old_kids) and not any(old_own) and not any(new_own)):
        if (not old_kids and not new_kids and new.tag not in RAW_TEXT and "/" in where
                and old_src[old.start:old.open_end] == new_src[new.start:new.open_end]):
            # Only its text changed (a figure in a table cell): the text alone, gathered
            # with the element's other texts in one fragment ("text:" in diff).
            out.append((f"{where}!{old.tag}", unescape(new_src[new.open_end:_closing(new_src, new)])))
            return
        _whole(new_src, new, where, old.tag, out)
        return
    if old_src[old.start:old.open_end] != new_src[new.start:new.open_end]:
        out.append(_placed(new_src, Node(new.tag, new.start, new.open_end,
                                         end=new.open_end), f"attrs:{where}!{old.tag}")
                   + ("" if new.tag in VOID else f"</{new.tag}>"))
    if keyed:
        by_key = {k.key: k for k in old_kids}
        wanted = set(new_ids)
        for index in range(len(old_kids) - 1, -1, -1):  # from the end: indices stay valid
            if old_kids[index].key not in wanted:
                out.append(f'<i hx-swap-oob="remove:{where}/{index}!{old_kids[index].tag}"></i>')
        for index, kid in enumerate(new_kids):
            if kid.key not in by_key:
                out.append(_placed(new_src, kid, f"insert:{where}/{index}!{old.tag}"
                                   f"{_spacing(new_src, new_kids, index)}"))
        for index, kid in enumerate(new_kids):
            if kid.key in by_key:
                _diff(old_src, by_key[kid.key], new_src, kid, f"{where}/{index}", out)
        return
    # By position; with only whitespace around the children, a list that got longer or
    # shorter at its end gets those children inserted or removed.
    for index in range(len(old_kids) - 1, len(new_kids) - 1, -1):
        out.append(f'<i hx-swap-oob="remove:{where}/{index}!{old_kids[index].tag}"></i>')
    for index in range(len(old_kids), len(new_kids)):
        out.append(_placed(new_src, new_kids[index], f"insert:{where}/{index}!{old.tag}"
                                                     f"{_spacing(new_src, new_kids, index)}"))
    for index, (before, after) in enumerate(zip(old_kids, new_kids)):
        _diff(old_src, before, new_src, after, f"{where}/{index}", out)


def _spacing(source: str, kids: list[Node], index: int) -> str:
    """"+" when white space separates the inserted child from the one after it (or, the
    last, from the one before it): the page puts a space there too, so inline elements
    read as the template writes them ("history 1,657 tools 617", not "…1,657tools…")."""
    if index + 1 < len(kids):
        gap = source[kids[index].end:kids[index + 1].start]
    elif index > 0:
        gap = source[kids[index - 1].end:kids[index].start]
    else:
        return ""
    return "+" if gap and not gap.strip() else ""


def _whole(source: str, node: Node, where: str, shown: str, out: list[str]) -> None:
    """`node` in place of the element at `where`, a <`shown`> on the page."""
    if "/" not in where:
        raise NotPatchable("the element itself changed")
    out.append(_placed(source, node, f"path:{where}!{shown}"))
