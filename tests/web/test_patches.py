"""Patches of an element the page was sent (taskos/drawer/patches.py): the smallest parts
that differ, by position from the element; rows with ids or data-seq inserted and removed;
whole when the structure changed in another way."""
from __future__ import annotations

import pytest

from taskos.drawer.patches import NotPatchable, diff, parse


def patches(old: str, new: str, rev: int = 3) -> list[str]:
    return diff(parse(old, rev), new, parse(new, 0))


def test_a_changed_figure_is_sent_alone():
    old = '<div id="b"><p>turn <b>3</b> · <i>900</i> free</p><table><tbody><tr><td>a</td><td>1</td></tr></tbody></table></div>'
    new = old.replace("<b>3</b>", "<b>4</b>").replace("<td>1</td>", "<td>2</td>")
    # Texts alone changed: gathered in one fragment, each with its path and element.
    assert patches(old, new) == ['<i hx-swap-oob="text:b@3">["0/0!b", "4", "1/0/0/1!td", "2"]</i>']
    assert patches(old, old) == []


def test_rows_with_ids_are_inserted_and_removed_and_changed_rows_patched():
    old = '<ul id="l"><li id="a3">three</li>\n<li id="a2">two</li>\n<li id="a1">one</li></ul>'
    new = '<ul id="l"><li id="a4">four</li>\n<li id="a3">three!</li>\n<li id="a2">two</li></ul>'
    assert patches(old, new) == ['<i hx-swap-oob="remove:l@3/2!li"></i>',
                                 # "+": a line break separates it from the next row
                                 '<li hx-swap-oob="insert:l@3/0!ul+" id="a4">four</li>',
                                 '<i hx-swap-oob="text:l@3">["1!li", "three!"]</i>']


def test_attributes_alone_and_a_list_longer_at_its_end():
    old = '<div id="d"><tr class="x"><td>1</td></tr><p>a</p></div>'
    new = '<div id="d"><tr class="y" title="t"><td>1</td></tr><p>a</p>\n<p class="o">over</p></div>'
    # "+": white space separates it, the last, from the one before it.
    assert patches(old, new) == ['<p hx-swap-oob="insert:d@3/2!div+" class="o">over</p>',
                                 '<tr hx-swap-oob="attrs:d@3/0!tr" class="y" title="t"></tr>']


def test_another_structure_is_sent_whole():
    with pytest.raises(NotPatchable):  # the element's own text changed
        patches('<span id="c">3 changes</span>', '<span id="c">4 changes</span>')
    # A child of another kind, or rows that moved, replace that child or list whole.
    assert patches('<div id="e"><p>none</p></div>', '<div id="e"><ul><li>x</li></ul></div>') == [
        '<ul hx-swap-oob="path:e@3/0!p"><li>x</li></ul>']
    moved = patches('<div id="m"><ol><li id="a">a</li><li id="b">b</li></ol></div>',
                    '<div id="m"><ol><li id="b">b</li><li id="a">a</li></ol></div>')
    assert moved == ['<ol hx-swap-oob="path:m@3/0!ol"><li id="b">b</li><li id="a">a</li></ol>']
    # SVG is never patched inside: a lone SVG child would be parsed as HTML on the page.
    assert patches('<div id="s"><svg><line x1="1"/></svg></div>',
                   '<div id="s"><svg><line x1="2"/></svg></div>') == [
        '<svg hx-swap-oob="path:s@3/0!svg"><line x1="2"/></svg>']


def test_html_that_is_not_one_closed_element_is_not_patchable():
    for html in ('<div id="x"><p>open', '<div id="x"></div><div></div>', '<div id="x"></span>'):
        with pytest.raises(NotPatchable):
            parse(html, 1)


def test_a_text_is_sent_as_the_page_reads_it_and_a_changed_tag_whole():
    old = '<div id="c"><p><td>1</td></p><pre>a</pre><span class="x">5</span></div>'
    new = ('<div id="c"><p><td>1 &lt; 2 &amp; &quot;3&quot;</td></p><pre>b</pre>'
           '<span class="y">6</span></div>')
    assert patches(old, new) == [
        # A <pre> drops its first line break when parsed: whole, as is a changed tag.
        '<pre hx-swap-oob="path:c@3/1!pre">b</pre>',
        '<span hx-swap-oob="path:c@3/2!span" class="y">6</span>',
        # JSON of the text itself, escaped for the HTML it travels in.
        '<i hx-swap-oob="text:c@3">["0/0!td", "1 &lt; 2 &amp; \\"3\\""]</i>']


def test_an_inserted_child_is_spaced_only_where_the_template_spaces_it():
    old = '<p id="z"><span>history 9</span> <span>tools 6</span></p>'
    new = '<p id="z"><span>history 9</span> <span>words 7</span> <span>tools 6</span></p>'
    assert patches(old, new) == ['<span hx-swap-oob="insert:z@3/2!p+">tools 6</span>',
                                 '<i hx-swap-oob="text:z@3">["1!span", "words 7"]</i>']
    old = '<select id="s"><option>latest</option>\n<option>2</option></select>'
    new = '<select id="s"><option>latest</option>\n<option>3</option><option>2</option></select>'
    # Appended last, with no space between it and the option before it.
    assert patches(old, new)[0] == '<option hx-swap-oob="insert:s@3/2!select">2</option>'


def test_the_recent_compactions_stay_keyed_while_one_is_running():
    # While a compaction runs the panel starts with its spinner line. Without an id of its
    # own, the rows were matched by position, and the compaction that was newest was sent
    # whole in the next one's place (the page rebuilt a row it already showed).
    from types import SimpleNamespace

    from django.template.loader import render_to_string

    def body(numbers, running=None):
        rows = [{"number": n, "trigger": "rolling", "zones": [], "cleared": 1, "turn": n,
                 "total_before": 900, "total_after": 800, "tokens_saved": 100}
                for n in numbers]
        html = render_to_string("drawer/panels/compactions.html", {
            "rows": rows, "older": [], "recent": 2, "running_trigger": running,
            "session": SimpleNamespace(pk=1, is_active=True)})
        return f'<div id="b">{html}</div>'

    steps = patches(body([4, 3], running="rolling"), body([5, 4]))
    assert not [s for s in steps if "path:" in s], steps  # nothing replaced whole
    assert any("insert:" in s and 'id="compaction-brief-5"' in s for s in steps)
    # The spinner line, compaction 3, and 4's detail (shown in full: the newest only).
    assert sum("remove:" in s for s in steps) == 3, steps
