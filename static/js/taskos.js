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

  // On every (re)connect tell the consumer which events this page already has: it
  // answers with everything stored after them, so a dropped socket never leaves the
  // drawer stale (SPEC W5).
  document.addEventListener("htmx:wsOpen", function (event) {
    event.detail.socketWrapper.send(JSON.stringify({ after: lastSeq() }));
    setConnection("live", "open");
  });
  document.addEventListener("htmx:wsClose", function () {
    setConnection("reconnecting…", "closed");
  });

  // Keep the transcript pinned to its end while new entries arrive, unless the person
  // scrolled up to read.
  var nearEnd = true;
  document.addEventListener("htmx:wsBeforeMessage", function () {
    nearEnd = window.innerHeight + window.scrollY >= document.body.scrollHeight - 120;
  });
  document.addEventListener("htmx:wsAfterMessage", function () {
    if (nearEnd && document.getElementById("transcript")) {
      window.scrollTo(0, document.body.scrollHeight);
    }
    var status = document.querySelector("#session-status .status");
    if (status) {
      var ended = ["finished", "failed", "cancelled"].indexOf(status.dataset.status) >= 0;
      document.body.classList.toggle("session-ended", ended);
    }
  });

  document.addEventListener("click", function (event) {
    var toggle = event.target.closest("[data-toggle-drawer]");
    if (!toggle) { return; }
    var panels = document.querySelectorAll("#drawer details.panel");
    var anyOpen = Array.prototype.some.call(panels, function (d) { return d.open; });
    panels.forEach(function (d) { d.open = !anyOpen; });
    toggle.textContent = anyOpen ? "unfold all" : "fold all";
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
