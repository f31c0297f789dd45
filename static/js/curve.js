// TaskOS: the drawer's curve (input tokens per call), redrawn from its data on the page.
// A live update brings only the new calls' points (taskos/drawer/panels/curve.py delta,
// into #curve-inbox); this draws what templates/drawer/panels/curve.html would, the
// same numbers formatted the same way, on the elements already there.
window.TaskOSCurve = (function () {
  "use strict";

  var WIDTH = 640, HEIGHT = 200, LEFT = 52, RIGHT = 12, TOP = 12, BOTTOM = 24;
  var PEAK_TICK_GAP = 12;  // closer to the "0" tick than this, the peak's tick is hidden (curve.py)
  var MARKED_CALLS = 150;  // above this many calls only summary and over-window calls
  var SVG = "http://www.w3.org/2000/svg";

  // As Python's round(v, 1) (taskos/drawer/panels/curve.py): the nearest of the exact
  // value, a tie (only x.x5 that a double holds exactly, quarters) to the even digit.
  // Math.round(v * 10) / 10 rounded ties up and drifted from the server's drawing.
  function round1(v) {
    var tenths = v * 10, below = Math.floor(tenths);
    if (tenths - below === 0.5 && Number.isInteger(v * 4)) {
      return (below % 2 === 0 ? below : below + 1) / 10;
    }
    return Number(v.toFixed(1));
  }
  // As Python prints a float: "52.0", "115.30000000000001".
  function pyFloat(v) { return Number.isInteger(v) ? v.toFixed(1) : String(v); }
  function cssNumber(v) { return v.toFixed(2).replace(/0+$/, "").replace(/\.$/, ""); }
  // One formatter for every label: toLocaleString built one per call, ~70 µs each, eight
  // a redraw (profiled on long-1000: 0.6 s of the run's script, the most of any function).
  var GROUPED = new Intl.NumberFormat("en-US");
  function tokens(v) { return GROUPED.format(Math.round(v)); }

  // "1234", "5678s", "9000o": tokens, then s (summary call) and o (over the window).
  function parse(series) {
    return series.split(" ").filter(Boolean).map(function (item) {
      return { tokens: parseInt(item, 10), summary: item.indexOf("s") > 0, over: item.indexOf("o") > 0 };
    });
  }

  function scale(calls, top, windowTokens, trigger, firstCall) {
    var plotW = WIDTH - LEFT - RIGHT, plotH = HEIGHT - TOP - BOTTOM, n = calls.length;
    var step = plotW / Math.max(1, n - 1);
    function yOf(t) { return t <= top ? round1(TOP + plotH * (1 - t / top)) : null; }
    var line = [], marks = [], peak = 0;
    calls.forEach(function (call, i) {
      var x = round1(n > 1 ? LEFT + i * step : LEFT + plotW / 2), y = yOf(call.tokens);
      line.push(pyFloat(x) + "," + pyFloat(y));
      peak = Math.max(peak, call.tokens);
      if (n <= MARKED_CALLS || call.summary || call.over) {
        marks.push({ x: x, y: y, call: call, number: firstCall + i });
      }
    });
    return { line: line.join(" "), marks: marks, zeroY: yOf(0), peakY: yOf(peak),
             windowY: windowTokens ? yOf(windowTokens) : null, triggerY: trigger ? yOf(trigger) : null };
  }

  function set(el, attrs) {
    Object.keys(attrs).forEach(function (name) {
      var value = attrs[name];
      if (value === null) { el.removeAttribute(name); }
      else if (el.getAttribute(name) !== String(value)) { el.setAttribute(name, value); }
    });
  }

  function limit(g, kind, y, text, fallbackY, shown) {
    var on = y !== null;
    set(g.querySelector("line.limit." + kind), { y1: on ? pyFloat(y) : 0, y2: on ? pyFloat(y) : 0,
                                                 visibility: on ? null : "hidden" });
    var label = g.querySelector("text.line-label." + kind);
    set(label, { y: on ? Math.trunc(y) - 4 : fallbackY, visibility: on || shown ? null : "hidden" });
    label.textContent = on ? text : text + (kind === "window" ? " ↑ above this scale" : " ↑");
  }

  function drawMarks(group, marks) {
    marks.forEach(function (mark, i) {
      var tag = mark.call.summary ? "polygon" : "circle";
      var el = group.children[i];
      if (!el || el.tagName !== tag) {
        var made = document.createElementNS(SVG, tag);
        made.appendChild(document.createElementNS(SVG, "title"));
        if (el) { group.replaceChild(made, el); } else { group.appendChild(made); }
        el = made;
      }
      var kind = mark.call.summary ? "summary" : "agent", x = mark.x, y = mark.y;
      set(el, { "class": "pt " + kind + (mark.call.over ? " over" : "") });
      if (tag === "polygon") {
        set(el, { points: pyFloat(x) + "," + pyFloat(y - 5) + " " + pyFloat(x + 5) + "," + pyFloat(y) +
                          " " + pyFloat(x) + "," + pyFloat(y + 5) + " " + pyFloat(x - 5) + "," + pyFloat(y) });
      } else {
        set(el, { cx: cssNumber(x), cy: cssNumber(y), r: 3 });
      }
      el.firstChild.textContent = "call " + mark.number + " (" + kind + "): " + mark.call.tokens + " tokens";
    });
    while (group.children.length > marks.length) { group.lastElementChild.remove(); }
  }

  function draw(svg) {
    var calls = parse(svg.dataset.series), n = calls.length;
    var windowTokens = Number(svg.dataset.window) || 0, trigger = Number(svg.dataset.trigger) || 0;
    var firstCall = Number(svg.dataset.firstCall) || 1;
    var peak = calls.reduce(function (most, call) { return Math.max(most, call.tokens); }, 0);
    var near = trigger && trigger <= peak * 1.5 ? trigger : 0;
    var tops = { fitted: Math.max(peak, near, 1) * 1.08, full: Math.max(windowTokens, peak, 1) * 1.08 };
    Object.keys(tops).forEach(function (name) {
      var g = svg.querySelector("g.scale-" + name), s = scale(calls, tops[name], windowTokens, trigger, firstCall);
      set(g.querySelector("line.axis"), { y1: pyFloat(s.zeroY), y2: pyFloat(s.zeroY) });
      set(g.querySelector("text.tick.zero"), { y: pyFloat(s.zeroY) });
      var peakTick = g.querySelector("text.tick.peak");
      set(peakTick, { y: pyFloat(s.peakY), visibility: s.zeroY - s.peakY < PEAK_TICK_GAP ? "hidden" : null });
      peakTick.textContent = tokens(peak);
      limit(g, "window", s.windowY, "window " + tokens(windowTokens), 22, true);
      limit(g, "trigger", s.triggerY, "trigger " + tokens(trigger), 34, Boolean(trigger));
      set(g.querySelector("polyline.path"), { points: s.line });
      drawMarks(g.querySelector("g.marks"), s.marks);
    });
    svg.querySelector("text.last-call").textContent = "call " + (firstCall + n - 1);
    set(svg, { "data-calls": n, "aria-label": "input tokens of " + n + " model calls, peak " + peak });
    var body = svg.parentNode;
    body.querySelector(".curve-peak").textContent = tokens(peak);
    var over = calls.filter(function (call) { return call.over; }).length;
    body.querySelector(".curve-over").hidden = !over;
    body.querySelector(".curve-over .flag").textContent = over + " over the window";
  }

  // Adds the points waiting in the inbox to the curve and draws it once. Points the curve
  // already holds are skipped by number: after a reconnect the page may be sent whole and
  // then get a delta it had already been sent.
  function take(inbox) {
    var svg = inbox.parentNode.querySelector("svg.curve");
    var series = svg ? svg.dataset.series.trim() : "";
    var shown = series ? series.split(/\s+/).length : 0;
    var last = svg ? (Number(svg.dataset.firstCall) || 1) + shown - 1 : 0;  // its number
    Array.prototype.slice.call(inbox.children).forEach(function (item) {
      var points = item.dataset.points.trim() ? item.dataset.points.trim().split(/\s+/) : [];
      var from = Number(item.dataset.from) || last + 1;
      points = points.slice(Math.max(0, last + 1 - from));
      if (svg && points.length) {
        last += points.length;
        svg.dataset.series = (svg.dataset.series + " " + points.join(" ")).trim();
        svg.dataset.window = item.dataset.window;
        svg.dataset.trigger = item.dataset.trigger;
      }
      item.remove();
    });
    if (svg) { draw(svg); }
  }

  return { take: take, draw: draw };
})();
