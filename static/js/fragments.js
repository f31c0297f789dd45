// TaskOS: how the drawer's out-of-band fragments reach the page (static/js/taskos.js
// batches them): appended rows, elements merged in place, logs trimmed to their length.
window.TaskOSFragments = (function () {
  "use strict";

  // Applies out-of-band fragments itself instead of through htmx.swap: htmx walks every
  // element it removes and fires two events per element (profiled with drawer_bench.py
  // --trace: most of each long task on a long run). Only the added nodes that carry hx-*
  // attributes are handed to htmx, so their buttons and pickers work.
  //
  // An element sent whole ("true") is merged into the one on the page (morph below), so
  // rows that did not change stay the same elements: the browser lays out and paints only
  // what changed, and a <details> a person opened inside a panel stays open. Rows of the
  // logs (anchor changes, compactions, hints, transcript) arrive as appends instead.
  function applyFragment(node, added, trimmed, stale) {
    var how = node.getAttribute("hx-swap-oob");
    node.removeAttribute("hx-swap-oob");
    var patch = /^(path|attrs|insert|remove|text):(.+)$/.exec(how || "");
    if (patch) { applyPatch(patch[1], patch[2], node, added, stale); return; }
    var through = /^delete-through:#(.+)$/.exec(how || "");
    if (through) { removeThrough(document.getElementById(node.id), through[1]); return; }
    if (how === "true" || how === "delete" || how === "attributes") {
      var old = document.getElementById(node.id);
      if (!old) { return; }
      if (how === "delete") { old.remove(); }
      else if (how === "attributes") { setAttributes(old, node); }
      else if (old.tagName === node.tagName) { morph(old, node, added); }
      else { old.replaceWith(node); added.push(node); }
      return;
    }
    // "beforebegin:#id": rows added before the rows a list ends with (the inspector's
    // tail), which then stay instead of leaving and coming back after them; "afterend:#id"
    // and "beforebegin:#id" also place rows next to a row that stays (the inspector's
    // messages, named by the message, not by their place: a compaction removes rows in
    // the middle, and those after them stay where they are).
    var parts = /^(beforeend|afterbegin|beforebegin|afterend):#(.+)$/.exec(how || "");
    var target = parts && document.getElementById(parts[2]);
    if (!target) { return; }
    Array.prototype.push.apply(added, node.children);
    // A row arriving again (a resync raced a delta, a reconnect replayed a batch) takes
    // the place of the one shown, where it is shown: appends are idempotent, never a
    // duplicate row or one out of order. (A turn's group of rows is left alone: replacing
    // it would drop the rows it already holds.)
    Array.prototype.slice.call(node.children).forEach(function (row) {
      var shown = row.id && document.getElementById(row.id);
      if (shown && !shown.hasAttribute("data-group")) { shown.replaceWith(row); }
    });
    var moved = document.createDocumentFragment();
    while (node.firstChild) { moved.appendChild(node.firstChild); }
    if (parts[1] === "beforeend") { target.appendChild(moved); }
    else if (parts[1] === "beforebegin") { target.parentNode.insertBefore(moved, target); }
    else if (parts[1] === "afterend") { target.parentNode.insertBefore(moved, target.nextSibling); }
    else { target.insertBefore(moved, target.firstChild); }
    var beside = parts[1] === "beforebegin" || parts[1] === "afterend";
    var kept = (beside ? target.parentNode : target).closest("[data-keep]");
    if (kept && trimmed.indexOf(kept) < 0) { trimmed.push(kept); }
  }

  // "delete-through:#last": the rows from this one to `last`, both included, in one
  // fragment (a compaction drops hundreds of the inspector's messages: one "delete" per
  // row was ~600 KB of long-1000's traffic). Only when `last` follows it in the same list
  // before the rows the list always ends with (data-tail): applied again, or to a list
  // that is not the one it was made for, it removes nothing.
  function removeThrough(first, lastId) {
    var row = first;
    while (row && row.id !== lastId) {
      if (row.nodeType === 1 && row.hasAttribute("data-tail")) { return; }
      row = row.nextElementSibling;
    }
    if (!row) { return; }
    var end = row.nextSibling;
    row = first;
    while (row !== end) {
      var next = row.nextSibling;
      row.remove();
      row = next;
    }
  }

  // A folded panel is updated too: the server stops sending its fragments once it knows
  // it is folded, and what was already on the way is applied (its content is not laid out
  // while folded). Skipping those made the page ask for the panel whole when unfolded: on
  // a long run the whole compactions panel, ~170 KB parsed and merged in one task.

  // A patch of an element the server sent whole before (taskos/drawer/patches.py):
  // "id@rev/2/0!td" is the element with that id, as sent with revision rev (its data-rev),
  // then its children by position, which must be a <td>. An element that is not the one the patch was made
  // for (a person swapped it) is not patched: its panel
  // is asked for whole instead, so the page never drifts from what the server renders.
  function applyPatch(kind, where, node, added, stale) {
    var spaced = /\+$/.test(where);
    if (spaced) { where = where.slice(0, -1); }
    var expected = where.split("!");  // "id@rev/2/0!td": the element the page should find
    var steps = expected[0].split("/");
    var head = /^(.*)@(\d+)$/.exec(steps.shift());
    var root = head && document.getElementById(head[1]);
    if (!root) { return; }  // not on the page (the inspector shows a picked call)
    if (kind === "text") { applyTexts(root, head[2], JSON.parse(node.textContent), stale); return; }
    var index = kind === "insert" ? Number(steps.pop()) : -1;
    var el = root.dataset.rev === head[2] ? root : null;
    for (var i = 0; el && i < steps.length; i++) { el = el.children[Number(steps[i])]; }
    var fits = el && el.tagName.toLowerCase() === expected[1]
                  && (kind !== "insert" || index <= el.children.length);
    if (!fits) { askWhole(root, stale); return; }
    if (kind === "path" && el.tagName === node.tagName) { morph(el, node, added); }
    else if (kind === "path") { el.replaceWith(node); added.push(node); }
    else if (kind === "attrs") {
      // The element's own revision is the page's, not part of what the server renders:
      // patched away, the next patch of this element would not fit.
      if (el.hasAttribute("data-rev")) { node.setAttribute("data-rev", el.getAttribute("data-rev")); }
      morphAttributes(el, node);
    }
    else if (kind === "remove") { el.remove(); }
    else {  // after the last element, not after the whitespace that closes the list
      var last = el.lastElementChild;
      var next = el.children[index];  // the element it goes before, if any
      el.insertBefore(node, next || (last ? last.nextSibling : el.firstChild));
      // "!p+": the template separates it from its neighbour with white space.
      if (spaced) { el.insertBefore(document.createTextNode(" "), next || node); }
      added.push(node);
    }
  }

  // What to ask for whole when a patch of `root` did not fit: its drawer panel, or the
  // status header (patched like a panel, outside the drawer).
  function askWhole(root, stale) {
    var panel = root.closest("#drawer details.panel");
    var name = panel ? panel.id : (root.id === "session-status" ? "status" : null);
    if (name && stale.indexOf(name) < 0) { stale.push(name); }
  }

  // "text:id@rev": [path, text, path, text, …], each path as in a patch ("2/0!td"): the
  // elements whose text alone changed (table figures), all of one element's in a fragment.
  // Checked before any is set: the page shows them all or asks for the panel whole.
  function applyTexts(root, rev, pairs, stale) {
    var found = [];
    for (var i = 0; i < pairs.length; i += 2) {
      var expected = pairs[i].split("!");
      var el = root.dataset.rev === rev ? root : null;
      var steps = expected[0].split("/");
      for (var j = 0; el && j < steps.length; j++) { el = el.children[Number(steps[j])]; }
      if (!el || el.tagName.toLowerCase() !== expected[1] || el.children.length) {
        askWhole(root, stale);
        return;
      }
      found.push(el);
    }
    found.forEach(function (el, k) {
      if (el.textContent !== pairs[2 * k + 1]) { el.textContent = pairs[2 * k + 1]; }
    });
  }

  // Makes `old` look like `fresh` while keeping every node that is already right.
  // Children with an id are matched by id (a row that moved is moved, not rebuilt), the
  // others by position and tag. The "open" state of <details> is the person's: kept.
  function morph(old, fresh, added) {
    if (old.nodeType !== 1) {
      if (old.nodeValue !== fresh.nodeValue) { old.nodeValue = fresh.nodeValue; }
      return;
    }
    morphAttributes(old, fresh);
    morphChildren(old, fresh, added);
  }

  // "attributes": a list whose rows arrive one by one (the inspector's messages) gets its
  // own figures this way, without its rows being sent again; only the attributes sent
  // are set (the others do not change with a call: not sent with each).
  function setAttributes(old, fresh) {
    for (var i = 0; i < fresh.attributes.length; i++) {
      var attr = fresh.attributes[i];
      if (attr.name !== "id" && old.getAttribute(attr.name) !== attr.value) {
        old.setAttribute(attr.name, attr.value);
      }
    }
  }

  function morphAttributes(old, fresh) {
    var keepOpen = old.tagName === "DETAILS";
    var i, attr;
    for (i = old.attributes.length - 1; i >= 0; i--) {
      attr = old.attributes[i].name;
      if (!fresh.hasAttribute(attr) && !(keepOpen && attr === "open")) { old.removeAttribute(attr); }
    }
    for (i = 0; i < fresh.attributes.length; i++) {
      attr = fresh.attributes[i];
      if (keepOpen && attr.name === "open") { continue; }
      if (old.getAttribute(attr.name) !== attr.value) { old.setAttribute(attr.name, attr.value); }
    }
  }

  function sameKind(a, b) {
    return a.nodeType === b.nodeType && (a.nodeType !== 1 || (a.tagName === b.tagName && !a.id));
  }

  function morphChildren(old, fresh, added) {
    var wanted = {};
    var kids = Array.prototype.slice.call(fresh.childNodes);
    kids.forEach(function (kid) { if (kid.nodeType === 1 && kid.id) { wanted[kid.id] = true; } });
    var cursor = old.firstChild;
    kids.forEach(function (kid) {
      // Rows that are gone are dropped here, so the rows after them need not move.
      while (cursor && cursor.nodeType === 1 && cursor.id && !wanted[cursor.id]) {
        var gone = cursor;
        cursor = cursor.nextSibling;
        gone.remove();
      }
      var match = null;
      if (kid.nodeType === 1 && kid.id) {
        match = document.getElementById(kid.id);
        if (match && (match.parentNode !== old || match.tagName !== kid.tagName)) { match = null; }
      } else if (cursor && sameKind(cursor, kid)) {
        match = cursor;
      }
      if (!match) {
        old.insertBefore(kid, cursor);
        if (kid.nodeType === 1) { added.push(kid); }
        return;
      }
      if (match === cursor) { cursor = cursor.nextSibling; } else { old.insertBefore(match, cursor); }
      morph(match, kid, added);
    });
    while (cursor) {
      var rest = cursor;
      cursor = cursor.nextSibling;
      rest.remove();
    }
  }

  // A log keeps its newest rows (data-keep of them); a group left without rows goes too.
  // A list with data-keep-into (the newest compactions) moves the rows past its length to
  // the top of that list (the earlier ones), in order, instead of the server sending them
  // there again; that list is then trimmed to its own length, if it has one.
  function trim(list) {
    var rows = list.querySelectorAll("[data-row]");
    var into = list.dataset.keepInto && document.getElementById(list.dataset.keepInto);
    var top = into && into.firstChild;
    for (var i = Number(list.dataset.keep); i < rows.length; i++) {
      if (into) { into.insertBefore(rows[i], top); } else { rows[i].remove(); }
    }
    if (into && rows.length > Number(list.dataset.keep) && into.hasAttribute("data-keep")) { trim(into); }
    list.querySelectorAll("[data-group]").forEach(function (group) {
      if (!group.querySelector("[data-row]")) { group.remove(); }
    });
  }

  return { apply: applyFragment, trim: trim };
})();
