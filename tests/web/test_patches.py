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
    assert patches(old, new) == ['<b hx-swap-oob="path:b@3/0/0!b">4</b>',
                                 '<td hx-swap-oob="path:b@3/1/0/0/1!td">2</td>']
    assert patches(old, old) == []


def test_rows_with_ids_are_inserted_and_removed_and_changed_rows_patched():
    old = '<ul id="l"><li id="a3">three</li>\n<li id="a2">two</li>\n<li id="a1">one</li></ul>'
    new = '<ul id="l"><li id="a4">four</li>\n<li id="a3">three!</li>\n<li id="a2">two</li></ul>'
    assert patches(old, new) == ['<i hx-swap-oob="remove:l@3/2!li"></i>',
                                 '<li hx-swap-oob="insert:l@3/0!ul" id="a4">four</li>',
                                 '<li hx-swap-oob="path:l@3/1!li" id="a3">three!</li>']


def test_attributes_alone_and_a_list_longer_at_its_end():
    old = '<div id="d"><tr class="x"><td>1</td></tr><p>a</p></div>'
    new = '<div id="d"><tr class="y" title="t"><td>1</td></tr><p>a</p>\n<p class="o">over</p></div>'
    assert patches(old, new) == ['<p hx-swap-oob="insert:d@3/2!div" class="o">over</p>',
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
