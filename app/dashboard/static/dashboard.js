/* streamtree calibration dashboard.
 *
 * Polls this service's JSON API once a second (GET /models, /models/{name}/metrics and
 * /models/{name}/metrics/history?after=SEQ for the points it does not have yet) and draws
 * with the vendored uPlot. No build step, no other origin: the page's content security
 * policy would refuse one anyway.
 *
 * A second model may be picked to compare with (#model=a&compare=b): its metrics and history
 * are polled alike, and both models' recent-window curves are drawn on one chart over the
 * events' seqs (a fork learns its source's events under the same seqs), their metrics side
 * by side in a table.
 */
(function () {
  "use strict";

  var POLL_MS = 1000;
  var MAX_POINTS = 5000; // points kept in the page (the service keeps history_points)
  var RATE_SPAN_MS = 5000; // events/s from the seq seen over the last few polls
  var COLORS = {
    logLoss: "#c0392b", brier: "#7d3c98", accuracy: "#1e8449", ece: "#2471a3",
    swap: "#d35400", detection: "#566573", dropped: "#aab7b8",
    bars: "rgba(36, 113, 163, 0.30)", barsStroke: "#2471a3", confidence: "#d35400", diagonal: "#555555"
  };

  var state = {
    models: [], names: "", selected: null, auto: true, generation: 0,
    points: [], drifts: [], driftKeys: {}, after: 0, seq: -1, samples: [], recent: null,
    lossChart: null, reliabilityChart: null, timer: null, busy: false, again: false,
    compare: null, cmp: { points: [], after: 0, seq: -1 }, compareChart: null
  };

  function $(id) { return document.getElementById(id); }
  function fmt(v, digits) { return v === null || v === undefined ? "\u2013" : Number(v).toFixed(digits); }
  function fmtInt(v) { return v === null || v === undefined ? "\u2013" : Number(v).toLocaleString("en-US"); }
  function setText(id, text) { var el = $(id); if (el.textContent !== text) { el.textContent = text; } }

  // Labels each in its own <bdi>: a right-to-left mark in one label does not reorder the others.
  function setLabels(id, prefix, labels) {
    var el = $(id);
    var key = prefix + "\u0000" + labels.join("\u0000");
    if (el.dataset.shown === key) { return; }
    el.dataset.shown = key;
    el.textContent = prefix;
    labels.forEach(function (label, i) {
      if (i > 0) { el.appendChild(document.createTextNode(", ")); }
      var part = document.createElement("bdi");
      part.textContent = label;
      el.appendChild(part);
    });
  }

  function AuthError() { this.name = "AuthError"; }

  function getJSON(path) {
    return fetch(path, { credentials: "same-origin", headers: { Accept: "application/json" } }).then(function (r) {
      if (r.status === 401 || r.status === 403) { throw new AuthError(); }
      if (!r.ok) { throw new Error(path + ": HTTP " + r.status); }
      return r.json();
    });
  }

  // ---------------------------------------------------------------- charts
  function chartWidth(el) { return Math.max(240, Math.floor(el.clientWidth)); }

  function drawDrifts(u) {
    var ctx = u.ctx, box = u.bbox, dpr = window.devicePixelRatio || 1;
    var min = u.scales.x.min, max = u.scales.x.max;
    if (min === undefined || max === undefined || min === null) { return; }
    ctx.save();
    ctx.font = Math.round(11 * dpr) + "px sans-serif";
    ctx.textBaseline = "top";
    state.drifts.forEach(function (d) {
      if (d.seq < min || d.seq > max) { return; }
      var x = Math.round(u.valToPos(d.seq, "x", true));
      var color = COLORS[d.event] || COLORS.detection;
      ctx.strokeStyle = color;
      ctx.fillStyle = color;
      ctx.lineWidth = (d.event === "swap" ? 2 : 1.5) * dpr;
      ctx.setLineDash(d.event === "swap" ? [] : [5 * dpr, 4 * dpr]);
      ctx.beginPath();
      ctx.moveTo(x, box.top);
      ctx.lineTo(x, box.top + box.height);
      ctx.stroke();
      var label = d.event === "swap" ? "swap " + fmtInt(d.seq) : d.event === "detection" ? "drift" : d.event;
      ctx.fillText(label, x + 4 * dpr, box.top + (d.event === "swap" ? 16 : 3) * dpr);
    });
    ctx.restore();
  }

  function makeLossChart() {
    var el = $("loss-chart");
    var opts = {
      width: chartWidth(el), height: 320,
      scales: {
        x: { time: false },
        loss: { range: function (u, min, max) { return [0, max > 0 ? max * 1.08 : 1]; } },
        prob: { range: [0, 1] }
      },
      axes: [
        { label: "events (seq)", size: 44 },
        { scale: "loss", label: "log loss (nats), Brier", size: 56 },
        { scale: "prob", side: 1, label: "accuracy, ECE", grid: { show: false }, size: 56 }
      ],
      series: [
        { label: "seq" },
        { label: "log loss", scale: "loss", stroke: COLORS.logLoss, width: 2.5, points: { show: false },
          value: function (u, v) { return fmt(v, 4); } },
        { label: "Brier", scale: "loss", stroke: COLORS.brier, width: 1.5, points: { show: false },
          value: function (u, v) { return fmt(v, 4); } },
        { label: "accuracy", scale: "prob", stroke: COLORS.accuracy, width: 1.5, points: { show: false },
          value: function (u, v) { return fmt(v, 3); } },
        { label: "ECE", scale: "prob", stroke: COLORS.ece, width: 1.5, dash: [6, 4], points: { show: false },
          value: function (u, v) { return fmt(v, 3); } }
      ],
      hooks: { draw: [drawDrifts] }
    };
    return new uPlot(opts, [[], [], [], [], []], el);
  }

  function drawReliabilityExtras(u) {
    var ctx = u.ctx, box = u.bbox, dpr = window.devicePixelRatio || 1;
    ctx.save();
    ctx.strokeStyle = COLORS.diagonal;
    ctx.lineWidth = 1 * dpr;
    ctx.setLineDash([6 * dpr, 5 * dpr]);
    ctx.beginPath();
    ctx.moveTo(u.valToPos(0, "x", true), u.valToPos(0, "y", true));
    ctx.lineTo(u.valToPos(1, "x", true), u.valToPos(1, "y", true));
    ctx.stroke();
    ctx.setLineDash([]);
    var recent = state.recent;
    if (recent) {
      ctx.fillStyle = "#1b2631";
      ctx.font = Math.round(11 * dpr) + "px sans-serif";
      ctx.textAlign = "center";
      ctx.textBaseline = "bottom";
      recent.reliability.forEach(function (b) {
        if (!b.count) { return; }
        var x = u.valToPos((b.lower + b.upper) / 2, "x", true);
        var top = Math.max(b.accuracy, b.mean_confidence);
        var y = Math.max(u.valToPos(top, "y", true) - 6 * dpr, box.top + 12 * dpr);
        ctx.fillText(fmtInt(b.count), x, y);
      });
    }
    ctx.restore();
  }

  function makeReliabilityChart() {
    var el = $("reliability-chart");
    var opts = {
      width: Math.min(chartWidth(el), 560), height: 320,
      scales: { x: { time: false, range: [0, 1] }, y: { range: [0, 1] } },
      axes: [
        { label: "confidence of the top class", size: 44 },
        { label: "observed accuracy", size: 56 }
      ],
      series: [
        { label: "bin" },
        { label: "accuracy", stroke: COLORS.barsStroke, fill: COLORS.bars, width: 1,
          paths: uPlot.paths.bars({ size: [0.92, Infinity] }), points: { show: false },
          value: function (u, v) { return fmt(v, 3); } },
        { label: "mean confidence", stroke: COLORS.confidence, width: 0, paths: function () { return null; },
          points: { show: true, size: 9, fill: COLORS.confidence }, value: function (u, v) { return fmt(v, 3); } }
      ],
      legend: { show: true },
      hooks: { draw: [drawReliabilityExtras] }
    };
    return new uPlot(opts, [[], [], []], el);
  }

  function makeCompareChart() {
    var el = $("compare-chart");
    function line(label, scale, color, width, dashed, digits) {
      return { label: label, scale: scale, stroke: color, width: width, dash: dashed ? [7, 5] : undefined,
        spanGaps: true, points: { show: false }, value: function (u, v) { return fmt(v, digits); } };
    }
    var opts = {
      width: Math.min(chartWidth(el), 820), height: 320,
      scales: {
        x: { time: false },
        loss: { range: function (u, min, max) { return [0, max > 0 ? max * 1.08 : 1]; } },
        prob: { range: [0, 1] }
      },
      axes: [
        { label: "events (seq)", size: 44 },
        { scale: "loss", label: "log loss (nats), Brier", size: 56 },
        { scale: "prob", side: 1, label: "accuracy", grid: { show: false }, size: 56 }
      ],
      series: [
        { label: "seq" },
        line("log loss A", "loss", COLORS.logLoss, 2.5, false, 4),
        line("log loss B", "loss", COLORS.logLoss, 2.5, true, 4),
        line("Brier A", "loss", COLORS.brier, 1.5, false, 4),
        line("Brier B", "loss", COLORS.brier, 1.5, true, 4),
        line("accuracy A", "prob", COLORS.accuracy, 1.5, false, 3),
        line("accuracy B", "prob", COLORS.accuracy, 1.5, true, 3)
      ]
    };
    return new uPlot(opts, [[], [], [], [], [], [], []], el);
  }

  function resize() {
    if (state.compareChart) { state.compareChart.setSize({ width: Math.min(chartWidth($("compare-chart")), 820), height: 320 }); }
    if (state.lossChart) { state.lossChart.setSize({ width: chartWidth($("loss-chart")), height: 320 }); }
    if (state.reliabilityChart) {
      state.reliabilityChart.setSize({ width: Math.min(chartWidth($("reliability-chart")), 560), height: 320 });
    }
  }

  // ---------------------------------------------------------------- data
  function resetModel() {
    state.points = [];
    state.drifts = [];
    state.driftKeys = {};
    state.after = 0;
    state.seq = -1;
    state.samples = [];
    state.recent = null;
    state.generation += 1;
  }

  function busiest(models) {
    var best = null;
    models.forEach(function (m) { if (best === null || m.seq > best.seq) { best = m; } });
    return best ? best.name : null;
  }

  function readHash(key) {
    var match = new RegExp("(?:^#|&)" + key + "=([^&]+)").exec(window.location.hash);
    if (!match) { return null; }
    try {
      return decodeURIComponent(match[1]);
    } catch (e) {  // a malformed escape (a truncated paste): as if not given, not a page that never loads
      return null;
    }
  }

  function writeHash(name) {
    var hash = "#model=" + encodeURIComponent(name);
    if (state.compare) { hash += "&compare=" + encodeURIComponent(state.compare); }
    window.history.replaceState(null, "", hash);
  }

  function selectCompare(name) {
    state.compare = name || null;
    state.cmp = { points: [], after: 0, seq: -1 };
    $("comparison").hidden = !state.compare;
    if (state.selected !== null) { writeHash(state.selected); }
    resize();
  }

  function select(name, byUser) {
    if (byUser) {
      state.auto = false;
      writeHash(name);
    }
    if (name !== state.selected) {
      state.selected = name;
      resetModel();
    }
  }

  function updatePicker(models) {
    state.models = models;
    var names = models.map(function (m) { return m.name; }).join("\n");
    var picker = $("model");
    if (names !== state.names) {
      state.names = names;
      while (picker.firstChild) { picker.removeChild(picker.firstChild); }
      models.forEach(function (m) {
        var option = document.createElement("option");
        option.value = m.name;
        option.textContent = m.name;
        picker.appendChild(option);
      });
    }
    if (state.auto || !models.some(function (m) { return m.name === state.selected; })) {
      var wanted = state.auto ? busiest(models) : null;
      if (wanted === null && models.length) { wanted = models[0].name; }
      if (wanted !== null) { select(wanted, false); }
    }
    if (state.selected !== null && picker.value !== state.selected) { picker.value = state.selected; }
    var other = $("compare");
    if (other.dataset.names !== names) {
      other.dataset.names = names;
      while (other.options.length > 1) { other.removeChild(other.lastChild); }
      models.forEach(function (m) {
        var option = document.createElement("option");
        option.value = m.name;
        option.textContent = m.name;
        other.appendChild(option);
      });
    }
    if (state.compare && !models.some(function (m) { return m.name === state.compare; })) { selectCompare(null); }
    if (other.value !== (state.compare || "")) { other.value = state.compare || ""; }
  }

  function addPoints(into, history) {
    history.points.forEach(function (p) {
      if (p.seq > into.after) { into.points.push(p); into.after = p.seq; }
    });
    if (into.points.length > MAX_POINTS) { into.points.splice(0, into.points.length - MAX_POINTS); }
  }

  function addHistory(history) {
    addPoints(state, history);
    history.drifts.forEach(function (d) {
      var key = d.seq + ":" + d.event;
      if (!state.driftKeys[key]) { state.driftKeys[key] = true; state.drifts.push(d); }
    });
  }

  function eventRate(seq) {
    var now = performance.now();
    state.samples.push({ t: now, seq: seq });
    while (state.samples.length > 2 && now - state.samples[1].t > RATE_SPAN_MS) { state.samples.shift(); }
    var first = state.samples[0];
    if (now - first.t >= 900) { return (seq - first.seq) / ((now - first.t) / 1000); }
    var last = state.points.length ? state.points[state.points.length - 1] : null;
    return last ? last.events_per_s : null;
  }

  // ---------------------------------------------------------------- rendering
  function renderSummary(model, metrics) {
    var s = model.summary || {};
    var drift = s.drift || {};
    setText("model-name", model.name);
    setText("seq", fmtInt(model.seq));
    var rate = eventRate(model.seq);
    setText("rate", rate === null ? "\u2013" : fmtInt(Math.round(rate)));
    setText("nodes", fmtInt(s.n_nodes));
    setText("leaves", fmtInt(s.n_leaves));
    setText("depth", fmtInt(s.depth));
    // the service's label keys: exact where JSON numbers are not (integers beyond 2**53)
    var classes = model.labels || (s.classes || []).map(String);
    if (classes.length) { setLabels("classes", classes.length + ": ", classes); } else { setLabels("classes", "none yet", []); }
    var driftText = fmtInt(drift.n_detections || 0) + " / " + fmtInt(drift.n_swaps || 0);
    if (drift.background) { driftText += " (comparing a background tree)"; }
    setText("drift", driftText);
    var fork = model.fork;
    setText("fork", fork ? fork.from + ": " + fork.state + " (" + fmtInt(fork.seq) + " of " +
      fmtInt(fork.source_seq) + ")" : "not a fork");
    var r = metrics.recent;
    setText("window-size", "(last " + fmtInt(r.n) + " of up to " + fmtInt(r.window) + " scored events)");
    setText("w-log-loss", fmt(r.log_loss, 4));
    setText("w-brier", fmt(r.brier, 4));
    setText("w-accuracy", fmt(r.accuracy, 3));
    setText("w-ece", fmt(r.ece, 3));
  }

  function renderLoss() {
    var pts = state.points;
    var data = [
      pts.map(function (p) { return p.seq; }),
      pts.map(function (p) { return p.log_loss; }),
      pts.map(function (p) { return p.brier; }),
      pts.map(function (p) { return p.accuracy; }),
      pts.map(function (p) { return p.ece; })
    ];
    state.lossChart.setData(data);
    var el = $("loss-chart");
    el.dataset.points = String(pts.length);
    el.dataset.drifts = String(state.drifts.length);
    el.dataset.lastSeq = String(state.after);
  }

  function renderReliability(recent) {
    state.recent = recent;
    var bins = recent.reliability;
    state.reliabilityChart.setData([
      bins.map(function (b) { return (b.lower + b.upper) / 2; }),
      bins.map(function (b) { return b.accuracy; }),
      bins.map(function (b) { return b.mean_confidence; })
    ]);
    $("reliability-chart").dataset.n = String(recent.n);
    var body = document.querySelector("#bins tbody");
    while (body.firstChild) { body.removeChild(body.firstChild); }
    bins.forEach(function (b) {
      var row = document.createElement("tr");
      [fmt(b.lower, 1) + "\u2013" + fmt(b.upper, 1), fmtInt(b.count), fmt(b.mean_confidence, 3), fmt(b.accuracy, 3)]
        .forEach(function (text) {
          var cell = document.createElement("td");
          cell.textContent = text;
          row.appendChild(cell);
        });
      body.appendChild(row);
    });
  }

  function renderCompare(a, b, metricsA, metricsB) {
    var bySeq = {};
    function add(points, offset) {
      points.forEach(function (p) {
        var row = bySeq[p.seq] || (bySeq[p.seq] = [null, null, null, null, null, null]);
        row[offset] = p.log_loss;
        row[offset + 2] = p.brier;
        row[offset + 4] = p.accuracy;
      });
    }
    add(state.points, 0);
    add(state.cmp.points, 1);
    var seqs = Object.keys(bySeq).map(Number).sort(function (x, y) { return x - y; });
    var data = [seqs];
    for (var k = 0; k < 6; k++) { data.push(seqs.map(function (q) { return bySeq[q][k]; })); }
    state.compareChart.setData(data);
    var el = $("compare-chart");
    el.dataset.points = String(state.points.length);
    el.dataset.comparePoints = String(state.cmp.points.length);
    setText("compare-a", a.name);
    setText("compare-b", b.name);
    setText("compare-head-a", a.name);
    setText("compare-head-b", b.name);
    function forkOf(m) { return m.fork ? m.fork.from + " (" + m.fork.state + ")" : "\u2013"; }
    var rows = [
      ["events (seq)", fmtInt(a.seq), fmtInt(b.seq)],
      ["fork of", forkOf(a), forkOf(b)]
    ];
    [["recent", "recent window"], ["all", "all events"]].forEach(function (part) {
      var ma = metricsA[part[0]] || {}, mb = metricsB[part[0]] || {};
      [["log_loss", "log loss", 4], ["brier", "Brier", 4], ["accuracy", "accuracy", 3], ["ece", "ECE", 3]]
        .forEach(function (m) { rows.push([m[1] + ", " + part[1], fmt(ma[m[0]], m[2]), fmt(mb[m[0]], m[2])]); });
    });
    var body = document.querySelector("#compare-table tbody");
    while (body.firstChild) { body.removeChild(body.firstChild); }
    rows.forEach(function (r) {
      var row = document.createElement("tr");
      r.forEach(function (text, i) {
        var cell = document.createElement(i ? "td" : "th");
        if (!i) { cell.scope = "row"; }
        cell.textContent = text;
        row.appendChild(cell);
      });
      body.appendChild(row);
    });
  }

  function status(text, kind) {
    var el = $("status");
    setText("status", text);
    el.className = kind || "";
  }

  // ---------------------------------------------------------------- polling
  function tick() {
    state.timer = null;
    state.busy = true;
    getJSON("/models").then(function (list) {
      updatePicker(list.models);
      var name = state.selected;
      var model = list.models.filter(function (m) { return m.name === name; })[0];
      if (!model) { status("No model yet.", "idle"); return null; }
      if (model.seq < state.seq) { resetModel(); } // deleted and created again
      var generation = state.generation;
      var base = "/models/" + encodeURIComponent(name);
      var fetches = [getJSON(base + "/metrics"), getJSON(base + "/metrics/history?after=" + state.after)];
      var compare = state.compare, cmp = state.cmp;
      var other = list.models.filter(function (m) { return m.name === compare; })[0];
      if (other) {
        if (other.seq < cmp.seq) { cmp.points = []; cmp.after = 0; } // deleted and created again
        var otherBase = "/models/" + encodeURIComponent(compare);
        fetches.push(getJSON(otherBase + "/metrics"), getJSON(otherBase + "/metrics/history?after=" + cmp.after));
      }
      return Promise.all(fetches)
        .then(function (results) {
          if (generation !== state.generation || name !== state.selected) { return; } // switched meanwhile
          state.seq = model.seq;
          addHistory(results[1]);
          renderSummary(model, results[0]);
          renderLoss();
          renderReliability(results[0].recent);
          if (other && compare === state.compare && cmp === state.cmp) {
            cmp.seq = other.seq;
            addPoints(cmp, results[3]);
            renderCompare(model, other, results[0], results[2]);
          }
          status("Live: updated " + new Date().toLocaleTimeString("en-GB") + ", every " + POLL_MS / 1000 + " s", "live");
        });
    }).catch(function (err) {
      if (err instanceof AuthError) {
        status("This service needs an API key for reads: reload the page to sign in.", "error");
      } else {
        status("The service does not answer; retrying.", "error");
      }
    }).then(function () {
      state.busy = false;
      state.timer = window.setTimeout(tick, state.again ? 0 : POLL_MS);
      state.again = false;
    });
  }

  // show a change of model at once instead of at the next poll
  function refresh() {
    if (state.busy) { state.again = true; return; }
    if (state.timer !== null) { window.clearTimeout(state.timer); }
    tick();
  }

  function start() {
    var wanted = readHash("model");
    if (wanted !== null) { state.auto = false; state.selected = wanted; }
    state.lossChart = makeLossChart();
    state.reliabilityChart = makeReliabilityChart();
    state.compareChart = makeCompareChart();
    if (readHash("compare") !== null) { selectCompare(readHash("compare")); }
    $("model").addEventListener("change", function (e) { select(e.target.value, true); refresh(); });
    $("compare").addEventListener("change", function (e) { selectCompare(e.target.value); refresh(); });
    window.addEventListener("resize", resize);
    tick();
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
}());
