// TaskOS page glue: the websocket resync handshake and a few small conveniences.
(function () {
  "use strict";

  function lastSeq() {
    var input = document.getElementById("last-seq");
    return input ? Number(input.value) || 0 : 0;
  }

  function setConnection(text, state) {
    var el = document.getElementById("ws-state");
    // Once the session ended the feed has nothing more to bring: "live" or
    // "reconnecting…" would promise updates that never come.
    if (document.body.classList.contains("session-ended")) { text = "finished"; state = "ended"; }
    if (el) { el.textContent = text; el.dataset.state = state; }
  }

  var socket = null;

  function openPanels() {
    return Array.prototype.filter.call(document.querySelectorAll("#drawer details.panel"),
      function (d) { return d.open; }).map(function (d) { return d.id.replace(/^panel-/, ""); });
  }
  // The folded lists inside panels (retired anchors, the anchor change log) that are
  // open: the server sends the others no rows until they are opened.
  function openParts() {
    return Array.prototype.filter.call(document.querySelectorAll("#drawer details[data-part]"),
      function (d) { return d.open; }).map(function (d) { return d.dataset.part; });
  }

  // On every (re)connect tell the consumer which events this page already has: it
  // answers with everything stored after them, so a dropped socket never leaves the
  // drawer stale (feature W5). It also learns which panels are open: folded ones are not
  // re-rendered while the task runs, and are brought up to date when unfolded.
  document.addEventListener("htmx:wsOpen", function (event) {
    socket = event.detail.socketWrapper;
    socket.send(JSON.stringify({ after: lastSeq(), open: openPanels(), parts: openParts() }));
    setConnection("live", "open");
  });
  document.addEventListener("htmx:wsClose", function () {
    socket = null;
    setConnection("reconnecting…", "closed");
  });
  document.addEventListener("toggle", function (event) {  // "toggle" does not bubble
    var panel = event.target;
    if (!socket || !panel.matches) { return; }
    if (panel.matches("#drawer details[data-part]")) {
      // A list inside a panel: opened, it was left as it was when folded, and its panel
      // comes whole (merged in place: what is open stays open); folded, it gets no rows.
      var holder = panel.closest("#drawer details.panel");
      socket.send(JSON.stringify({ open: openPanels(), parts: openParts(), stale: panel.open,
        refresh: panel.open && holder ? [holder.id.replace(/^panel-/, "")] : [] }));
      return;
    }
    if (!panel.matches("#drawer details.panel")) { return; }
    var name = panel.id.replace(/^panel-/, "");
    // Unfolded: only what changed while it was folded comes (the page applied every
    // fragment the server sent before it stopped).
    socket.send(JSON.stringify({ open: openPanels(), refresh: panel.open ? [name] : [] }));
  }, true);

  // The earlier compactions, one line each: a running session's page holds the newest few
  // (the list's data-keep), a finished one's none. Opened, their list fetches the rest,
  // those numbered below its last row, and from then on keeps every row: dropping the
  // oldest shown as new ones arrive would leave a gap above the fetched ones. A panel sent
  // whole again brings the list back to the newest few: fetched again while it is open.
  // Asked after every frame's fragments: by id, not a selector matched over the drawer.
  function earlierUnloaded() {
    var details = document.getElementById("compactions-older");
    var list = details && details.open && details.querySelector(":scope > ol");
    return list && !list.hasAttribute("data-loaded") ? list : null;
  }
  function loadEarlier(list) {
    var details = list.parentNode;
    list.setAttribute("data-loaded", "");
    list.removeAttribute("data-keep");
    var last = list.lastElementChild;
    var number = last && /-(\d+)$/.exec(last.id);
    htmx.ajax("GET", details.dataset.earlierUrl + (number ? "?before=" + number[1] : ""),
              { target: list, swap: "beforeend" });
  }
  document.addEventListener("toggle", function (event) {
    var list = event.target.id === "compactions-older" && earlierUnloaded();
    if (list) { loadEarlier(list); }
  }, true);

  // Parts whose content is fetched when a person opens them (`rows`, <details> not yet
  // loaded): `load` runs on opening; the function returned loads the ones already open
  // inside `within` (run after each frame: a merge with a fresh copy drops what was loaded).
  function whenOpened(rows, within, load) {
    document.addEventListener("toggle", function (event) {
      var el = event.target;
      if (el.open && el.matches && el.matches(rows + ":not([data-loaded])")) { load(el); }
    }, true);
    return function () {
      document.querySelectorAll(within + " " + rows + "[open]:not([data-loaded])").forEach(load);
    };
  }

  // A compaction is a line (li.compaction-brief > details): opened, it fetches its detail
  // (zones, summary diff, audit, refs), which a live page is not sent. A line merged with
  // a fresh copy (an audit arrived) loses what it fetched, and fetches it again if open.
  function loadCompaction(details) {
    var list = document.getElementById("compactions-recent");
    var number = /-(\d+)$/.exec(details.parentNode.id);
    if (!list || !number) { return; }
    details.setAttribute("data-loaded", "");
    fetch(list.dataset.detailUrl + "?number=" + number[1], { credentials: "same-origin" })
      .then(function (response) { return response.ok ? response.text() : ""; })
      .then(function (html) {
        while (details.lastElementChild && details.lastElementChild.tagName !== "SUMMARY") {
          details.lastElementChild.remove();
        }
        details.insertAdjacentHTML("beforeend", html);
      });
  }
  var loadOpenCompactions = whenOpened("li.compaction-brief > details", "#panel-compactions-body",
                                       loadCompaction);

  // The inspector's rows come without their message's text: opened, a row fetches it
  // (a long run's live page was sent every message's text, most of it never opened). A
  // row the live inspector merged with a new call's whose text differs (its data-text,
  // the text's digest, changed, and data-loaded went with the merge) is fetched again
  // if it is open (loadOpenMessages after each frame), when opened otherwise.
  function loadMessage(row) {
    var inspector = row.closest(".inspector[data-call]");
    if (!inspector || !inspector.dataset.messageUrl) { return; }
    row.setAttribute("data-loaded", "");
    // Only the newest request's answer is shown: one asked for before a merge answers
    // with the text of the call the row showed then.
    var asked = row.textRequest = (row.textRequest || 0) + 1;
    // A row following the run is named by its id (inspector-msg-<key>), a pinned call's
    // (no ids) by data-message: the key is not sent twice with every row.
    var key = row.dataset.message || row.parentNode.id.replace(/^inspector-msg-/, "");
    fetch(inspector.dataset.messageUrl + "?call=" + inspector.dataset.call + "&message="
          + encodeURIComponent(key), { credentials: "same-origin" })
      .then(function (response) { return response.ok ? response.text() : ""; })
      .then(function (html) {
        if (row.textRequest !== asked) { return; }
        while (row.lastElementChild && row.lastElementChild.tagName !== "SUMMARY") {
          row.lastElementChild.remove();  // the text of the call it showed before
        }
        row.insertAdjacentHTML("beforeend", html);
      });
  }
  var loadOpenMessages = whenOpened("li.msg > details[data-text]", "#panel-inspector", loadMessage);

  // Following live, the inspector's export links name the "latest" call (its bar then
  // need not change with every call): clicked, they name the call it shows, which the
  // newest may already have passed.
  document.addEventListener("click", function (event) {
    var link = event.target.closest && event.target.closest("#inspector-bar a[download]");
    var shown = link && document.getElementById("inspector-detail");
    if (shown) { link.href = link.href.replace(/\/calls\/(latest|\d+)/, "/calls/" + shown.dataset.call); }
  }, true);

  // Messages are applied once per animation frame, and no more of them in one frame than
  // fits the frame's budget: a burst of events costs a few swaps spread over a few frames
  // instead of one long task (on long-1000 a model call brings ~100 KB of fragments:
  // inspector, curve, compactions), and an element replaced several times meanwhile is
  // swapped once (the last copy). Fragments are applied in the order they came, so the
  // page's last seq (sent last in each message) moves only once all before it are shown.
  var pending = [];
  var scheduled = false;
  var FRAME_BUDGET_MS = 10;
  // …and no more than this much HTML: what a frame applies, it also lays out and paints
  // after the script (a 50 KB inspector body alone is 20–50 ms of layout under load).
  var FRAME_BUDGET_CHARS = 20000;
  // A page falling behind (a slow machine, a long burst: more than ~1.5 model calls'
  // fragments waiting) catches up with bigger frames instead: the drawer must stay within
  // a second of the database.
  var BEHIND_CHARS = 150000, BEHIND_BUDGET_MS = 40;
  // Transcript entries kept while following a run live (the newest, at the top, in
  // view): each frame lays out the whole document again (profiled on long-1000, 13 900
  // transcript elements: ~100 ms of layout a frame), so the window stays small.
  var KEEP_ENTRIES = 60;
  var MAX_ENTRIES = 80;  // trimmed often, a few entries at a time: each trim is laid out
  // "Following": the transcript's heading (its newest entries are right under it) at
  // most this far above the window's top edge. Told by an IntersectionObserver: asking
  // for a position in a frame forces a layout first (profiled: 1.4 s over a long-1000 run).
  var FOLLOW_PX = 400;
  var following = true;
  document.addEventListener("DOMContentLoaded", function () {
    var heading = document.querySelector(".transcript-col > h2");
    if (!heading || !window.IntersectionObserver) { return; }
    new IntersectionObserver(function (seen) { following = seen[seen.length - 1].isIntersecting; },
                             { rootMargin: FOLLOW_PX + "px 0px 0px 0px" }).observe(heading);
  });
  // Each fragment of a message starts a line with its tag (taskos/drawer/stream.py
  // FRAGMENT_START); the rows nested in one carry no hx-swap-oob.
  var FRAGMENT_START = /\n(?=<[a-z][a-z0-9]* [^>]*hx-swap-oob=)/;
  var WHOLE = /^\s*<[a-z]+\b[^>]*?\sid="([^"]+)"[^>]*\shx-swap-oob="true"/;

  document.addEventListener("htmx:wsBeforeMessage", function (event) {
    event.preventDefault();
    Array.prototype.push.apply(pending, event.detail.message.split(FRAGMENT_START));
    if (!scheduled) { scheduled = true; window.requestAnimationFrame(flush); }
  });

  // Of an element sent whole several times while waiting, only the last copy is kept, and
  // so are no patches of it made before that copy: they name the revision of an earlier
  // copy, which the page, skipping it, never shows (it would ask for the panel whole).
  var PATCH_OF = /^\s*<[a-z][a-z0-9]* hx-swap-oob="(?:path|attrs|insert|remove|text):([^"@]+)@/;
  function dropSuperseded() {
    var seen = {};
    for (var i = pending.length - 1; i >= 0; i--) {
      var whole = WHOLE.exec(pending[i]);
      var patch = whole ? null : PATCH_OF.exec(pending[i]);
      if (patch && seen[patch[1]]) { pending.splice(i, 1); continue; }
      if (!whole) { continue; }
      if (seen[whole[1]]) { pending.splice(i, 1); } else { seen[whole[1]] = true; }
    }
  }

  var HTMX_ATTRS = "[hx-get],[hx-post],[hx-trigger],[hx-on]";
  var fragments = window.TaskOSFragments;

  function flush() {
    scheduled = false;
    var started = performance.now();
    dropSuperseded();
    var transcript = document.getElementById("transcript");
    var template = document.createElement("template");
    var added = [], trimmed = [], stale = [], curveBoxCame = false, chars = 0;
    var behind = pending.reduce(function (sum, part) { return sum + part.length; }, 0) > BEHIND_CHARS;
    while (pending.length && (chars === 0 || (behind ? performance.now() - started < BEHIND_BUDGET_MS
                                               : chars + pending[0].length <= FRAME_BUDGET_CHARS
                                                 && performance.now() - started < FRAME_BUDGET_MS))) {
      chars += pending[0].length;
      template.innerHTML = pending.shift();
      Array.prototype.slice.call(template.content.children).forEach(function (node) {
        // Only a fragment that brings the curve's scale box can reset it (the body class
        // stays): no localStorage read and document-wide query on every frame. Asked
        // before applying, which moves the fragment's children onto the page.
        curveBoxCame = curveBoxCame || Boolean(node.querySelector("[data-curve-full]"));
        fragments.apply(node, added, trimmed, stale);
      });
    }
    if (stale.length && socket) {  // patches that did not fit: those panels whole
      socket.send(JSON.stringify({ open: openPanels(), parts: openParts(), stale: true,
        refresh: stale.map(function (id) { return id.replace(/^panel-/, ""); }) }));
    }
    if (pending.length) { scheduled = true; window.requestAnimationFrame(flush); }
    trimmed.forEach(fragments.trim);
    added.forEach(function (el) {
      if (el.matches(HTMX_ATTRS) || el.querySelector(HTMX_ATTRS)) { htmx.process(el); }
    });
    if (following && transcript) { trimTranscript(transcript); }
    var earlier = earlierUnloaded();
    if (earlier) { loadEarlier(earlier); }
    loadOpenMessages();
    loadOpenCompactions();
    var inbox = document.getElementById("curve-inbox");  // new points for the curve
    if (inbox && inbox.firstElementChild) { window.TaskOSCurve.take(inbox); }
    if (curveBoxCame) { syncCurveScale(); }
    var status = document.querySelector("#session-status .status");
    if (status) {
      var ended = status.dataset.ended === "true";  // the server's list of final statuses
      document.body.classList.toggle("session-ended", ended);
      if (ended) { setConnection("finished", "ended"); }
      // "Cancel requested…" and the like are about a running session: gone once it ended.
      var flash = document.getElementById("flash");
      if (ended && flash) { flash.textContent = ""; }
    }
    // For scripts/drawer_bench.py: how long applying one frame's fragments took.
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
    var before = entries[KEEP_ENTRIES - 1].id.replace(/^ev-/, "");  // "ev-<seq>"
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

  // A tool result shows the head of its output (taskos/drawer/templatetags/transcript.py);
  // "more" puts the output in its place as archived (the first page of its ref, the
  // header's link): every entry of a live run crosses the websocket, few are read whole.
  document.addEventListener("click", function (event) {
    var more = event.target.closest("#transcript button.more");
    var entry = more && more.closest("article");
    var link = entry && entry.querySelector("header a.ref");
    var preview = entry && entry.querySelector("pre.preview");
    if (!link || !preview) { return; }
    more.disabled = true;
    fetch(link.href, { credentials: "same-origin" })
      .then(function (response) {
        if (!response.ok) { throw new Error(response.status); }
        return response.text();
      })
      .then(function (html) {
        var page = new DOMParser().parseFromString(html, "text/html");
        var text = page.querySelector("pre.archive-text");
        if (!text) { throw new Error("no archived text"); }
        preview.textContent = text.textContent;
        var pager = page.querySelector(".pager");
        if (pager) {  // longer than a page: the rest where the header's link leads
          var note = document.createElement("p");
          note.className = "muted";
          note.textContent = "Page 1 of " + (/of (\d+)/.exec(pager.textContent) || ["", "several"])[1]
            + ": " + link.textContent + " has them all.";
          more.replaceWith(note);
        } else {
          more.remove();
        }
      })
      .catch(function () {
        more.disabled = false;
        more.textContent = "more (failed: try again)";
      });
  });

  // Follow-ups: each Send is queued behind the one in flight (hx-sync on the form; htmx
  // dropped it before), and the box is emptied as a message goes, so the next can be typed
  // at once: emptied when the answer came, it lost what was typed meanwhile. A queued
  // request reads its fields only when it goes out, so each carries the text it had when
  // Send was pressed (on its submit event); one refused or not sent comes back to the box.
  function followupBox(form) { return form.querySelector("textarea[name=text]"); }

  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!form.matches || !form.matches("form.followup[hx-post]")) { return; }
    if (!window.htmx) { return; }  // a plain post: the browser reads the box after this
    var box = followupBox(form);
    event.followupText = box.value;
    box.value = "";
  }, true);

  function sentFollowup(detail) {
    var config = detail.requestConfig || detail;
    var trigger = config.triggeringEvent;
    return trigger && typeof trigger.followupText === "string" ? trigger.followupText : null;
  }

  document.addEventListener("htmx:configRequest", function (event) {
    var sent = sentFollowup(event.detail);
    if (sent === null) { return; }
    var box = followupBox(event.detail.elt);
    event.detail.parameters.text = sent;
    // The box is empty by now: its "required" is no reason to halt a text already taken.
    event.detail.errors = event.detail.errors.filter(function (e) { return e.elt !== box; });
  });

  document.addEventListener("htmx:afterRequest", function (event) {
    var sent = sentFollowup(event.detail);
    if (sent === null || event.detail.xhr.status === 200) { return; }
    var box = followupBox(event.detail.elt);
    box.value = box.value ? sent + "\n\n" + box.value : sent;
  });

  // Pins (issue 13): a sentence selected in the transcript goes into the drawer's pin
  // form, ready to be made a hard constraint with one click.
  // Only the words of the entries count: a selection across entries also covers their
  // labels ("fetch_document result 1,632 tokens · …"), which are in no message, and the
  // texts of several entries joined are in none either. So the pin is the selected text
  // of one entry (the longest part), and the form says so when the selection crossed more.
  var ENTRY_TEXT = "#transcript article .text, #transcript article pre.preview";

  function rangeText(range) {  // line breaks (<br>) as spaces, as the server compares
    var holder = document.createElement("div");
    holder.appendChild(range.cloneContents());
    holder.querySelectorAll("br").forEach(function (br) { br.replaceWith(" "); });
    return holder.textContent.replace(/\s+/g, " ").trim();
  }

  function selectedEntryTexts(selection) {
    var parts = [];
    for (var i = 0; i < selection.rangeCount; i++) {
      var range = selection.getRangeAt(i);
      document.querySelectorAll(ENTRY_TEXT).forEach(function (el) {
        if (!range.intersectsNode(el)) { return; }
        var piece = document.createRange();
        piece.selectNodeContents(el);
        if (range.compareBoundaryPoints(Range.START_TO_START, piece) > 0) {
          piece.setStart(range.startContainer, range.startOffset);
        }
        if (range.compareBoundaryPoints(Range.END_TO_END, piece) < 0) {
          piece.setEnd(range.endContainer, range.endOffset);
        }
        var text = rangeText(piece);
        if (text) { parts.push(text); }
      });
    }
    return parts;
  }

  document.addEventListener("mouseup", function () {
    var transcript = document.getElementById("transcript");
    var input = document.querySelector("form.pin-sentence input[name=text]");
    var note = document.querySelector("form.pin-sentence .pin-note");
    var selection = window.getSelection();
    if (!transcript || !input || !selection || selection.isCollapsed) { return; }
    if (!transcript.contains(selection.anchorNode)) { return; }
    var parts = selectedEntryTexts(selection);
    if (!parts.length) { return; }  // only labels selected: nothing a message said
    var longest = parts.reduce(function (a, b) { return b.length > a.length ? b : a; });
    // Whole: a selection past a pin's 500 characters is refused by the server, which says
    // so, rather than pinned cut mid-word.
    input.value = longest;
    if (note) {
      note.hidden = parts.length < 2;
      note.textContent = parts.length < 2 ? "" : "Your selection crossed " + parts.length +
        " entries: a pin is one entry's words, so it holds the longest part, shown here.";
    }
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
