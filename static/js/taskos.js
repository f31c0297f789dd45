// TaskOS page glue: the websocket resync handshake and a few small conveniences.
(function () {
  "use strict";

  function lastSeq() {
    var input = document.getElementById("last-seq");
    return input ? Number(input.value) || 0 : 0;
  }

  function setConnection(text, state) {
    var el = document.getElementById("ws-state");
    if (el) { el.textContent = text; el.dataset.state = state; }
  }

  var socket = null;

  function openPanels() {
    return Array.prototype.filter.call(document.querySelectorAll("#drawer details.panel"),
      function (d) { return d.open; }).map(function (d) { return d.id.replace(/^panel-/, ""); });
  }

  // On every (re)connect tell the consumer which events this page already has: it
  // answers with everything stored after them, so a dropped socket never leaves the
  // drawer stale (SPEC W5). It also learns which panels are open: folded ones are not
  // re-rendered while the task runs, and are brought up to date when unfolded.
  document.addEventListener("htmx:wsOpen", function (event) {
    socket = event.detail.socketWrapper;
    socket.send(JSON.stringify({ after: lastSeq(), open: openPanels() }));
    setConnection("live", "open");
  });
  document.addEventListener("htmx:wsClose", function () {
    socket = null;
    setConnection("reconnecting…", "closed");
  });
  document.addEventListener("toggle", function (event) {  // "toggle" does not bubble
    var panel = event.target;
    if (!socket || !panel.matches || !panel.matches("#drawer details.panel")) { return; }
    var name = panel.id.replace(/^panel-/, "");
    socket.send(JSON.stringify({ open: openPanels(), refresh: panel.open ? [name] : [] }));
  }, true);

  // Messages are applied in batches, once per animation frame: a burst of events costs
  // one swap, and a panel replaced several times in the burst is swapped once (the last).
  var queue = [];
  var scheduled = false;
  // Transcript entries kept while following a run live (the newest, at the top, in
  // view): each frame lays out the whole document again (profiled on long-1000, 13 900
  // transcript elements: ~100 ms of layout a frame), so the window stays small.
  var KEEP_ENTRIES = 60;
  var MAX_ENTRIES = 120;
  // "Following": the top of the transcript (its newest entries) at most this far above
  // the window's top edge.
  var FOLLOW_PX = 400;

  document.addEventListener("htmx:wsBeforeMessage", function (event) {
    event.preventDefault();
    queue.push(event.detail.message);
    if (!scheduled) { scheduled = true; window.requestAnimationFrame(flush); }
  });

  // The fragments of a batch, parsed once; of an element sent several times in the batch
  // (a panel re-rendered by two updates) only the last copy is kept.
  function parseBatch(messages) {
    var template = document.createElement("template");
    template.innerHTML = messages.join("\n");
    var seen = {};
    var nodes = Array.prototype.slice.call(template.content.children);
    for (var i = nodes.length - 1; i >= 0; i--) {
      var node = nodes[i];
      if (node.getAttribute("hx-swap-oob") !== "true" || !node.id) { continue; }
      if (seen[node.id]) { nodes.splice(i, 1); } else { seen[node.id] = true; }
    }
    return nodes;
  }

  var HTMX_ATTRS = "[hx-get],[hx-post],[hx-trigger],[hx-on]";

  // Applies out-of-band fragments itself instead of through htmx.swap: htmx walks every
  // element it removes and fires two events per element (profiled with drawer_bench.py
  // --trace: most of each long task on a long run). Only the added nodes that carry hx-*
  // attributes are handed to htmx, so their buttons and pickers work.
  //
  // An element sent whole ("true") is merged into the one on the page (morph below), so
  // rows that did not change stay the same elements: the browser lays out and paints only
  // what changed, and a <details> a person opened inside a panel stays open. Rows of the
  // logs (anchor changes, compactions, hints, transcript) arrive as appends instead.
  function applyFragment(node, added, trimmed) {
    var how = node.getAttribute("hx-swap-oob");
    node.removeAttribute("hx-swap-oob");
    if (how === "true" || how === "delete") {
      var old = document.getElementById(node.id);
      if (!old || foldedAway(old)) { return; }
      if (how === "delete") { old.remove(); }
      else if (old.tagName === node.tagName) { morph(old, node, added); }
      else { old.replaceWith(node); added.push(node); }
      return;
    }
    var parts = /^(beforeend|afterbegin):#(.+)$/.exec(how || "");
    var target = parts && document.getElementById(parts[2]);
    if (!target || foldedAway(target)) { return; }
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
    else { target.insertBefore(moved, target.firstChild); }
    var kept = target.closest("[data-keep]");
    if (kept && trimmed.indexOf(kept) < 0) { trimmed.push(kept); }
  }

  // A folded panel is not updated (the server stops sending once it knows; this covers
  // what was already on the way): unfolding it asks for the panel whole.
  function foldedAway(el) {
    var panel = el.closest && el.closest("#drawer details.panel");
    return Boolean(panel && !panel.open && el !== panel);
  }

  // Makes `old` look like `fresh` while keeping every node that is already right.
  // Children with an id are matched by id (a row that moved is moved, not rebuilt), the
  // others by position and tag. The "open" state of <details> is the person's: kept.
  function morph(old, fresh, added) {
    if (old.nodeType !== 1) {
      if (old.nodeValue !== fresh.nodeValue) { old.nodeValue = fresh.nodeValue; }
      return;
    }
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
    morphChildren(old, fresh, added);
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
  function trim(list) {
    var rows = list.querySelectorAll("[data-row]");
    for (var i = Number(list.dataset.keep); i < rows.length; i++) { rows[i].remove(); }
    list.querySelectorAll("[data-group]").forEach(function (group) {
      if (!group.querySelector("[data-row]")) { group.remove(); }
    });
  }

  function flush() {
    scheduled = false;
    var started = performance.now();
    var nodes = parseBatch(queue);
    queue = [];
    // Read before the batch changes anything: layout is still clean from the last frame.
    var transcript = document.getElementById("transcript");
    var following = Boolean(transcript) && transcript.getBoundingClientRect().top > -FOLLOW_PX;
    // Only a batch that brings the curve's scale box can reset it (the body class stays):
    // no localStorage read and document-wide query on every frame. Asked before applying,
    // which moves the fragments' children onto the page.
    var curveBoxCame = nodes.some(function (n) { return n.querySelector("[data-curve-full]"); });
    var added = [], trimmed = [];
    nodes.forEach(function (node) { applyFragment(node, added, trimmed); });
    trimmed.forEach(trim);
    added.forEach(function (el) {
      if (el.matches(HTMX_ATTRS) || el.querySelector(HTMX_ATTRS)) { htmx.process(el); }
    });
    if (following) { trimTranscript(transcript); }
    if (curveBoxCame) { syncCurveScale(); }
    var status = document.querySelector("#session-status .status");
    if (status) {
      var ended = ["finished", "failed", "cancelled"].indexOf(status.dataset.status) >= 0;
      document.body.classList.toggle("session-ended", ended);
      // "Cancel requested…" and the like are about a running session: gone once it ended.
      var flash = document.getElementById("flash");
      if (ended && flash) { flash.textContent = ""; }
    }
    // For scripts/drawer_bench.py: how long applying one batch took.
    performance.measure("taskos-flush", { start: started });
    document.dispatchEvent(new CustomEvent("taskos:applied", { detail: { seq: lastSeq() } }));
  }

  // Following a long run live, the oldest entries leave the page at the bottom, where a
  // button (or scrolling down to it) loads them back. Someone scrolled down to older
  // entries keeps them: new ones still arrive on top, and the browser's scroll anchoring
  // holds what they read in place; the window closes again once they are back on top.
  function trimTranscript(transcript) {
    var entries = transcript.querySelectorAll(":scope > article.ev");
    if (entries.length <= MAX_ENTRIES) { return; }
    for (var i = KEEP_ENTRIES; i < entries.length; i++) { entries[i].remove(); }
    var old = transcript.querySelector(":scope > .older-button");
    if (old) { old.remove(); }
    var before = entries[KEEP_ENTRIES - 1].dataset.seq;
    var button = document.createElement("button");
    button.type = "button";
    button.className = "older-button link";
    button.textContent = "Load older entries";
    button.dataset.before = before;
    button.setAttribute("hx-get", transcript.dataset.olderUrl + "?before=" + before);
    // As templates/drawer/_older.html: a click or scrolling it into view, one request.
    button.setAttribute("hx-trigger", "click, intersect once");
    button.setAttribute("hx-sync", "this:drop");
    button.setAttribute("hx-target", "this");
    button.setAttribute("hx-swap", "outerHTML");
    transcript.appendChild(button);
    htmx.process(button);
  }

  document.addEventListener("click", function (event) {
    var toggle = event.target.closest("[data-toggle-drawer]");
    if (!toggle) { return; }
    var panels = document.querySelectorAll("#drawer details.panel");
    var anyOpen = Array.prototype.some.call(panels, function (d) { return d.open; });
    panels.forEach(function (d) { d.open = !anyOpen; });
    toggle.textContent = anyOpen ? "unfold all" : "fold all";
  });

  // Pins (issue 13): a sentence selected in the transcript goes into the drawer's pin
  // form, ready to be made a hard constraint with one click.
  document.addEventListener("mouseup", function () {
    var transcript = document.getElementById("transcript");
    var input = document.querySelector("form.pin-sentence input[name=text]");
    var selection = window.getSelection();
    if (!transcript || !input || !selection || selection.isCollapsed) { return; }
    if (!transcript.contains(selection.anchorNode)) { return; }
    var text = selection.toString().replace(/\s+/g, " ").trim();
    if (text) { input.value = text.slice(0, 500); }
  });

  // Below 900 px the drawer is a bottom sheet: the floating tab opens it from anywhere on
  // the page, its close button (or Escape) puts it away.
  document.addEventListener("click", function (event) {
    if (event.target.closest("[data-open-drawer]")) {
      document.body.classList.add("drawer-open");
    } else if (event.target.closest("[data-close-drawer]")) {
      document.body.classList.remove("drawer-open");
    }
  });
  document.addEventListener("keydown", function (event) {
    if (event.key === "Escape") { document.body.classList.remove("drawer-open"); }
  });

  // The curve's "full window" choice outlives the panel's live re-renders and reloads.
  function syncCurveScale() {
    var full = localStorage.getItem("taskos.curveFull") === "1";
    document.body.classList.toggle("curve-full", full);
    document.querySelectorAll("[data-curve-full]").forEach(function (box) { box.checked = full; });
  }
  document.addEventListener("change", function (event) {
    if (!event.target.matches("[data-curve-full]")) { return; }
    localStorage.setItem("taskos.curveFull", event.target.checked ? "1" : "0");
    syncCurveScale();
  });
  document.addEventListener("DOMContentLoaded", syncCurveScale);
  document.addEventListener("htmx:afterSettle", syncCurveScale);

  // W8: some browser features need a secure context; say so instead of failing silently.
  document.addEventListener("DOMContentLoaded", function () {
    if (!window.isSecureContext) { document.body.classList.add("insecure-context"); }
  });
})();
