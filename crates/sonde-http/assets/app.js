// sonde dashboard: plain JS, SVG charts drawn from the JSON API (docs/http.md). No library.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
// A token (needed off loopback) comes in the page's fragment: #token=…; it is never sent to
// the server as part of the page's URL.
const TOKEN = new URLSearchParams(location.hash.slice(1)).get("token");
const COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#7f7f7f"];

async function api(path, options = {}) {
  const headers = Object.assign({}, options.headers || {});
  if (TOKEN) headers.Authorization = "Bearer " + TOKEN;
  const res = await fetch(path, Object.assign({}, options, { headers }));
  const body = await res.json().catch(() => null);
  if (!res.ok) throw Object.assign(new Error((body && body.message) || res.statusText), { status: res.status, body });
  return body;
}

function el(name, attrs = {}, parent = null) {
  const node = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (parent) parent.appendChild(node);
  return node;
}

function fmt(v) {
  const a = Math.abs(v);
  if (a >= 1e9) return (v / 1e9).toFixed(1) + "G";
  if (a >= 1e6) return (v / 1e6).toFixed(1) + "M";
  if (a >= 1e3) return (v / 1e3).toFixed(1) + "k";
  if (a > 0 && a < 1) return v.toPrecision(2);
  return String(Math.round(v * 100) / 100);
}

// A value with an SI prefix and its unit: 1.2 Mbit/s, 340 B.
function si(v, unit) {
  const a = Math.abs(v);
  for (const [f, p] of [[1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]]) {
    if (a >= f) return (v / f).toFixed(1) + " " + p + unit;
  }
  return String(Math.round(v * 100) / 100) + " " + unit;
}

// Milliseconds (the flow logs' durations and RTTs) as a duration with its unit.
function ms(v) {
  if (v < 1) return v.toFixed(3) + " ms";
  if (v < 10) return v.toFixed(2) + " ms";
  if (v < 1000) return v.toFixed(1) + " ms";
  if (v < 60000) return (v / 1000).toFixed(2) + " s";
  const s = Math.round(v / 1000);
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
}

// A time in ms since the epoch (the flow logs' `first`) as a UTC date and time to the ms.
function utc(msSinceEpoch) {
  return new Date(msSinceEpoch).toISOString().replace("T", " ").replace("Z", "");
}

// Seconds since the epoch as a UTC time of day (the charts' time axis).
function clock(s, digits = 8) {
  return new Date(s * 1000).toISOString().slice(11, 11 + digits);
}

function empty(container, text) {
  container.innerHTML = "";
  const div = document.createElement("div");
  div.className = "empty";
  div.textContent = text;
  container.appendChild(div);
}

// Lines over time. series: [{name, points: [[x, y]…], dash?}]; y may be negative (out below).
function lineChart(container, series, opts = {}) {
  // A null y is unknown (the store's gaps): no point, and the line breaks there.
  const all = series.flatMap((s) => s.points).filter((p) => p[1] !== null);
  if (all.length === 0) return empty(container, opts.emptyText || "no data");
  container.innerHTML = "";
  const xs = all.map((p) => p[0]), ys = all.map((p) => p[1]);
  let [x0, x1] = [Math.min(...xs), Math.max(...xs)];
  let [y0, y1] = [Math.min(0, ...ys), Math.max(0, ...ys)];
  if (opts.square) { x0 = y0 = Math.min(x0, y0); x1 = y1 = Math.max(x1, y1); }
  if (x1 === x0) x1 = x0 + 1;
  if (y1 === y0) y1 = y0 + 1;
  // The y axis' labels carry the unit (opts.yLabel); the margin fits the longest.
  const yLabel = opts.yLabel || fmt;
  // The ends, and the zero line when it is inside (in above it, out below), else the middle.
  const ticks = [y0, y0 < 0 && y1 > 0 ? 0 : (y0 + y1) / 2, y1].map((v) => [v, yLabel(v)]);
  // Drawn at the container's width, so text keeps its shape in wide panels.
  const W = Math.max(320, container.clientWidth || 640), H = 220, R = 10, T = 10, B = 22;
  const L = Math.max(40, 6 * Math.max(...ticks.map((t) => t[1].length)) + 8);
  const svg = el("svg", { viewBox: `0 0 ${W} ${H}` }, container);
  const X = (x) => L + ((x - x0) / (x1 - x0)) * (W - L - R);
  const Y = (y) => T + (1 - (y - y0) / (y1 - y0)) * (H - T - B);
  el("line", { class: "axis", x1: L, x2: W - R, y1: Y(0), y2: Y(0) }, svg);
  el("line", { class: "axis", x1: L, x2: L, y1: T, y2: H - B }, svg);
  for (const [v, label] of ticks) {
    el("text", { class: "tick", x: 2, y: Y(v) + 3 }, svg).textContent = label;
  }
  const xLabel = opts.xLabel || ((x) => clock(x) + " UTC");
  el("text", { class: "tick", x: L, y: H - 6 }, svg).textContent = xLabel(x0);
  el("text", { class: "tick", x: W - R, y: H - 6, "text-anchor": "end" }, svg).textContent = xLabel(x1);
  series.forEach((s, i) => {
    if (s.points.length === 0) return;
    const color = s.color || COLORS[i % COLORS.length];
    const known = s.points.filter((p) => p[1] !== null);
    // data-max: the largest magnitude drawn (0: a line of zeros).
    const max = Math.max(0, ...known.map((p) => Math.abs(p[1])));
    const attrs = { "data-series": s.name, "data-points": known.length, "data-max": max, fill: "none", stroke: color };
    if (opts.dots) {
      const g = el("g", attrs, svg);
      known.forEach((p) => el("circle", { cx: X(p[0]), cy: Y(p[1]), r: 3, fill: color }, g));
    } else {
      let pen = "M";
      const d = s.points.map((p) => {
        if (p[1] === null) { pen = "M"; return ""; }
        const step = pen + X(p[0]).toFixed(1) + "," + Y(p[1]).toFixed(1);
        pen = "L";
        return step;
      }).join("");
      el("path", Object.assign(attrs, { d, "stroke-width": 1.5, "stroke-dasharray": s.dash || "" }), svg);
    }
    el("text", { class: "legend", x: L + 8 + i * 110, y: T + 10, fill: color }, svg).textContent = s.label || s.name;
  });
}

// Horizontal bars: items [{label, value}], largest first.
function barChart(container, items, unit) {
  if (items.length === 0) return empty(container, "no table (run with --tables)");
  container.innerHTML = "";
  const W = Math.max(320, container.clientWidth || 640), rowH = 20, H = Math.max(60, items.length * rowH + 10), L = 230;
  const svg = el("svg", { viewBox: `0 0 ${W} ${H}`, style: `height:${H}px` }, container);
  const max = Math.max(...items.map((d) => d.value), 1);
  items.forEach((d, i) => {
    const y = 5 + i * rowH;
    el("text", { class: "tick", x: 2, y: y + 13 }, svg).textContent = d.label;
    const w = ((W - L - 60) * d.value) / max;
    el("rect", { x: L, y, width: Math.max(1, w), height: rowH - 4, fill: COLORS[0], "data-value": d.value }, svg);
    el("text", { class: "tick", x: L + w + 4, y: y + 13 }, svg).textContent = si(d.value, unit);
  });
}

// Sums a table's `value` column by a key over every interval; the top n. A key of several
// columns is labelled with them joined by `sep`, those without a value left out.
function topBy(table, key, value, n = 10, sep = " → ") {
  const idx = (c) => table.columns.indexOf(c);
  const v = idx(value);
  const keys = key.map(idx);
  if (v < 0 || keys.some((k) => k < 0)) return [];
  const sums = new Map();
  for (const row of table.rows) {
    const label = keys.map((k) => row[k]).filter((v) => v !== null && v !== "").join(sep);
    sums.set(label, (sums.get(label) || 0) + (row[v] || 0));
  }
  return [...sums].map(([label, value]) => ({ label, value })).sort((a, b) => b.value - a.value).slice(0, n);
}

const state = {
  intervals: [], intervalS: 0, factor: 1, flows: { offset: 0, limit: 25, sort: null, order: "asc" },
  // A live run's traffic bins (10 ms), oldest first, and the resolution they are summed to.
  bins: [], binS: 0, liveRes: 1, lastReload: 0,
  // The run has ended (a trace analysed, a monitor stopped).
  finished: false,
  // A merged view of several probes (sonde serve --merged): no flows, tables, definitions,
  // live bins or store; a probes table instead.
  merged: false,
  // How many internal networks (--internal) the run classifies with (/api/status).
  internalNetworks: 0,
};
// Bins kept in the page (two minutes at 10 ms), and points drawn at most.
const MAX_BINS = 12000, MAX_POINTS = 300;

// In and out mean something only with internal networks (--internal): without, every packet
// is "ext" and they would be lines of zeros, so the throughput is one "all" series. Traffic that
// has in, out or local bytes is split anyway (a merged view's probes have their own networks; a
// monitor's --internal-file may be reloaded by SIGHUP).
//
// points: [[t, [in, out, loc, ext] bytes]…], each over `seconds`. Returns the series to draw
// and whether they are split.
function throughput(points, seconds) {
  const bits = (b, nets) => (nets.reduce((a, n) => a + b[n], 0) * 8) / seconds;
  const directed = points.some(([, b]) => b[0] + b[1] + b[2] > 0);
  if (state.internalNetworks === 0 && !directed) {
    return { split: false, series: [{ name: "all", points: points.map(([t, b]) => [t, bits(b, [0, 1, 2, 3])]) }] };
  }
  const series = [
    { name: "in", points: points.map(([t, b]) => [t, bits(b, [0])]) },
    { name: "out", points: points.map(([t, b]) => [t, -bits(b, [1])]) },
  ];
  // Local and external traffic (neither end, or both, internal): dashed, when there is any.
  const other = points.map(([t, b]) => [t, bits(b, [2, 3])]);
  if (other.some((p) => p[1] > 0)) series.push({ name: "local+external", dash: "4 3", color: "#7f7f7f", points: other });
  return { split: true, series };
}

// What a throughput panel shows, and its unit.
function throughputWhat(split, per) {
  return split
    ? `in (to the internal networks) above the axis, out (from them) below, the rest dashed; ${per} (bit/s)`
    : `all traffic, no in/out split (${state.merged ? "the probes' intervals have none" : "no --internal networks given"}); ${per} (bit/s)`;
}

const BITS = { yLabel: (v) => si(Math.abs(v), "bit/s") };

// The live chart: bins summed to the chosen resolution.
function drawLive() {
  const chart = document.getElementById("chart-live");
  // A finished run that never had live traffic (a trace: analyze --http) has no live panel.
  document.getElementById("live-panel").hidden = state.finished && !state.bins.length;
  const res = state.liveRes, what = document.getElementById("live-what");
  if (!state.bins.length) {
    what.textContent = throughputWhat(state.internalNetworks > 0, `per ${duration(res)}`);
    return empty(chart, "no live traffic yet (a live run: sonde monitor --http)");
  }
  const groups = new Map();
  for (const b of state.bins) {
    const t = Math.floor(b.start_s / res + 1e-9) * res;
    const g = groups.get(t) || [0, 0, 0, 0];
    b.bytes.forEach((v, i) => { g[i] += v; });
    groups.set(t, g);
  }
  const points = [...groups].sort((a, b) => a[0] - b[0]).slice(-MAX_POINTS);
  const { split, series } = throughput(points, res);
  lineChart(chart, series, Object.assign({ xLabel: (x) => clock(x, 11) + " UTC" }, BITS));
  const span = points.length ? points[points.length - 1][0] - points[0][0] + res : 0;
  what.textContent = throughputWhat(split, `per ${duration(res)}, the last ${fmt(span)} s`);
}

function addBins(bins) {
  if (!bins || !bins.length) return;
  state.bins.push(...bins);
  if (state.bins.length > MAX_BINS) state.bins.splice(0, state.bins.length - MAX_BINS);
  drawLive();
}

async function loadLive() {
  const live = await api("/api/live");
  state.binS = live.bin_s;
  state.bins = live.bins;
  drawLive();
}

// Intervals merged `factor` at a time (the selectable resolution).
function grouped() {
  const out = [];
  for (const it of state.intervals) {
    const g = Math.floor(it.index / state.factor);
    if (!out.length || out[out.length - 1].g !== g) out.push({ g, start: it.start_s, items: [] });
    out[out.length - 1].items.push(it);
  }
  return out;
}

// Count-weighted mean of a quantile over a metric's rows (every direction and side).
function quantile(items, metric, field) {
  let sum = 0, n = 0;
  for (const it of items) for (const q of it.quantiles) if (q.metric === metric) { sum += q[field] * q.count; n += q.count; }
  return n ? sum / n : null;
}

const NETS = ["in", "out", "loc", "ext"];

function drawIntervals() {
  const groups = grouped();
  const seconds = state.intervalS * state.factor;
  const sumTraffic = (g, nets, field) => g.items.reduce((a, it) => a + it.traffic.filter((t) => nets.includes(t.net)).reduce((b, t) => b + t[field], 0), 0);
  const { split, series } = throughput(groups.map((g) => [g.start, NETS.map((n) => sumTraffic(g, [n], "bytes"))]), seconds);
  lineChart(document.getElementById("chart-throughput"), series, Object.assign({ emptyText: "no interval (monitoring off: --interval 0)" }, BITS));
  document.getElementById("throughput-what").textContent = throughputWhat(split, seconds ? `per ${duration(seconds)}` : "per interval");
  // A live run's intervals count a flow (and its RTT, its retransmissions) once it has ended:
  // the newest fill as flows end.
  const live = !state.finished && !state.merged;
  const ended = live ? ", counted once a flow has ended" : "";
  document.getElementById("flows-what").textContent = `active during each ${duration(seconds || state.intervalS)} and opened in it${ended} (flows)`;
  const last = (g, field) => g.items[g.items.length - 1].traffic.reduce((a, t) => a + t[field], 0);
  const flows = [
    { name: "active", points: groups.map((g) => [g.start, last(g, "flows_active")]) },
    { name: "opened", points: groups.map((g) => [g.start, sumTraffic(g, NETS, "flows_opened")]) },
  ];
  // Lines of zeros say nothing: a sentence instead.
  const noFlow = live ? "no flow has ended yet (a flow counts in the intervals once it has ended)" : "no flow";
  if (groups.length && flows.every((f) => f.points.every((p) => p[1] === 0))) empty(document.getElementById("chart-flows"), noFlow);
  else lineChart(document.getElementById("chart-flows"), flows, { emptyText: "no interval (monitoring off: --interval 0)" });
  const q = (metric, field) => groups.map((g) => [g.start, quantile(g.items, metric, field)]).filter((p) => p[1] !== null);
  lineChart(document.getElementById("chart-rtt"), [
    { name: "p50", points: q("tcp_rtt_avg", "p50") },
    { name: "p95", points: q("tcp_rtt_avg", "p95") },
  ], { emptyText: "no TCP RTT sample" + (live ? " yet (a flow's RTT counts once it has ended)" : ""), yLabel: (v) => fmt(v) + " ms" });
  lineChart(document.getElementById("chart-retx"), [
    { name: "mean", points: q("tcp_retx_rate", "mean") },
    { name: "p95", points: q("tcp_retx_rate", "p95") },
  ], { emptyText: "no TCP flow ended" + (live ? " yet" : ""), yLabel: (v) => fmt(v) + " %" });
  state.intervalRtt = q("tcp_rtt_avg", "p50").map((p) => p[1]);
  drawPhase();
}

// Phase plot, as Kitatsuji et al.'s Fig. 11: RTT n against RTT n+1, of the intervals' p50 or of
// an association's samples (e.g. data -> ack), one by one.
function drawPhase() {
  const source = document.getElementById("phase-source").value;
  const assoc = (state.associations || []).find((a) => a.name === source);
  const rtt = assoc ? assoc.samples.map((s) => s[1]) : state.intervalRtt || [];
  const phase = rtt.slice(1).map((v, i) => [rtt[i], v]);
  document.getElementById("phase-what").textContent = assoc ? `RTT sample n (x) against sample n+1 (y) of ${assoc.name} (ms)` : "RTT p50 of interval n (x) against interval n+1 (y) (ms)";
  lineChart(document.getElementById("chart-phase"), [{ name: assoc ? `${assoc.name} n → n+1` : "p50 n → n+1", points: phase }], {
    dots: true, square: true, xLabel: (x) => fmt(x) + " ms", yLabel: (y) => fmt(y) + " ms", emptyText: assoc ? "fewer than two samples" : "fewer than two intervals with RTT",
  });
}

// The associations a phase plot can show, kept in the selector.
function setAssociations(list) {
  state.associations = list || [];
  const select = document.getElementById("phase-source");
  const names = state.associations.map((a) => a.name);
  const have = [...select.options].slice(1).map((o) => o.value);
  if (names.join("\n") !== have.join("\n")) {
    const chosen = select.value;
    select.replaceChildren(select.options[0]);
    for (const n of names) {
      const o = document.createElement("option");
      o.value = n;
      o.textContent = `association ${n}`;
      select.appendChild(o);
    }
    select.value = names.includes(chosen) ? chosen : "";
  }
  drawPhase();
}

async function loadTables() {
  const get = (name) => api(`/api/tables/${name}`);
  const [top, matrix, protocols] = await Promise.all([get("top"), get("matrix"), get("protocols")]);
  const byBytes = { columns: top.columns, rows: top.rows.filter((r) => r[top.columns.indexOf("by")] === "bytes") };
  barChart(document.getElementById("chart-top"), topBy(byBytes, ["addr"], "value"), "B");
  barChart(document.getElementById("chart-pairs"), topBy(matrix, ["src", "dst"], "bytes"), "B");
  barChart(document.getElementById("chart-protocols"), topBy(protocols, ["protocol", "service"], "bytes", 10, " / "), "B");
}

const FLOW_COLUMNS = {
  tcp: ["c_ip", "c_port", "s_ip", "s_port", "first", "durat", "c_bytes_all", "s_bytes_all", "c_pkts_retx", "c_rtt_avg", "s_rtt_avg", "complete", "end_reason"],
  udp: ["c_ip", "c_port", "s_ip", "s_port", "first", "durat", "c_bytes_all", "s_bytes_all", "c_pkts_all", "s_pkts_all", "end_reason"],
};

// How the flow table heads and shows a column: its heading (with the unit where the cells do
// not carry one), what it is, and the cell's text. The API gives `first` in ms since the epoch,
// durations and RTTs in ms (docs/metrics.md), and null for no value; an RTT whose count column
// is 0 has no sample (the log writes 0): such cells are left empty, never 0.
const FLOW_COLUMN = {
  c_ip: { label: "client", what: "client address" },
  c_port: { label: "port", what: "client port" },
  s_ip: { label: "server", what: "server address" },
  s_port: { label: "port", what: "server port" },
  first: { label: "start (UTC)", what: "first packet, UTC (the API: ms since the epoch)", show: utc },
  durat: { label: "duration", what: "first to last packet", show: ms },
  c_bytes_all: { label: "bytes c→s", what: "payload bytes the client sent (bytes)" },
  s_bytes_all: { label: "bytes s→c", what: "payload bytes the server sent (bytes)" },
  c_pkts_all: { label: "packets c→s", what: "packets the client sent" },
  s_pkts_all: { label: "packets s→c", what: "packets the server sent" },
  c_pkts_retx: { label: "retx c→s (packets)", what: "packets the client retransmitted" },
  c_rtt_avg: { label: "RTT c→s", what: "mean data→ACK round trip of the client's segments, as seen at the probe; empty without a sample", show: ms, count: "c_rtt_cnt" },
  s_rtt_avg: { label: "RTT s→c", what: "mean data→ACK round trip of the server's segments, as seen at the probe; empty without a sample", show: ms, count: "s_rtt_cnt" },
  complete: { label: "complete", what: "handshake seen and closed (FIN both ways or RST)", show: (v) => (v ? "yes" : "no") },
  end_reason: { label: "ended by", what: "what ended the flow" },
};

async function loadFlows() {
  const form = document.getElementById("flow-filter");
  const f = state.flows;
  const params = new URLSearchParams({ proto: form.proto.value, offset: f.offset, limit: f.limit });
  if (f.sort) { params.set("sort", f.sort); params.set("order", f.order); }
  for (const k of ["addr", "port", "complete"]) if (form[k].value) params.set(k, form[k].value);
  const table = document.getElementById("flow-table");
  let page;
  try {
    page = await api("/api/flows?" + params);
  } catch (e) {
    document.getElementById("flow-count").textContent = e.message;
    return;
  }
  const wanted = FLOW_COLUMNS[page.proto].filter((c) => page.columns.includes(c));
  const cols = wanted.length ? wanted : page.columns.slice(0, 10);
  const head = document.createElement("tr");
  for (const c of cols) {
    const th = document.createElement("th");
    const info = FLOW_COLUMN[c] || { label: c, what: c };
    th.textContent = info.label;
    // The log's own name under the heading: what to ask the API for.
    if (info.label !== c) {
      const name = document.createElement("small");
      name.textContent = c;
      th.append(document.createElement("br"), name);
    }
    th.title = `${c}: ${info.what}`;
    th.dataset.column = c;
    if (f.sort === c) th.className = "sorted-" + f.order;
    th.onclick = () => {
      f.order = f.sort === c && f.order === "asc" ? "desc" : "asc";
      f.sort = c;
      f.offset = 0;
      loadFlows();
    };
    head.appendChild(th);
  }
  table.tHead.replaceChildren(head);
  const idx = cols.map((c) => page.columns.indexOf(c));
  const body = document.createElement("tbody");
  for (const row of page.rows) {
    const tr = document.createElement("tr");
    cols.forEach((c, n) => {
      const td = document.createElement("td");
      const info = FLOW_COLUMN[c] || {};
      const v = row[idx[n]];
      const count = info.count ? row[page.columns.indexOf(info.count)] : null;
      if (v === null || v === undefined || count === 0) {
        // No value, or no sample: empty, not 0.
        td.className = "none";
        td.title = "no sample";
      } else {
        td.textContent = info.show ? info.show(v) : v;
        td.dataset.value = v;
      }
      tr.appendChild(td);
    });
    body.appendChild(tr);
  }
  table.tBodies[0].replaceWith(body);
  const end = Math.min(page.total, page.offset + page.rows.length);
  document.getElementById("flow-count").textContent = `${page.offset + (page.rows.length ? 1 : 0)}–${end} of ${page.total}`;
  table.dataset.total = page.total;
}

async function loadDefinitions() {
  const defs = await api("/api/definitions");
  state.defVersion = defs.version;
  setAssociations(defs.associations);
  document.getElementById("def-version").textContent = `packets each definition matched, per interval (packets) · set version ${defs.version}` + (defs.editable ? "" : " (finished run: read only)");
  const box = document.getElementById("definitions");
  box.innerHTML = "";
  if (defs.items.length === 0) {
    box.textContent = defs.editable ? "no definition yet: add one above" : "no definition (run with --definitions FILE)";
    return;
  }
  for (const d of defs.items) {
    const div = document.createElement("div");
    div.className = "definition";
    const title = document.createElement("div");
    const code = document.createElement("code");
    code.textContent = d.definition;
    title.append(`${d.name} (v${d.version}${d.retired ? ", retired" : ""}): ${d.packets} packets, ${d.bytes} bytes `, code);
    const chart = document.createElement("div");
    chart.className = "chart";
    chart.dataset.definition = d.name;
    div.append(title, chart);
    box.appendChild(div);
    const counts = await api("/api/definitions/counts?name=" + encodeURIComponent(d.name));
    const s = counts.columns.indexOf("start"), p = counts.columns.indexOf("packets");
    const per = new Map();
    for (const r of counts.rows) per.set(r[s], (per.get(r[s]) || 0) + r[p]);
    lineChart(chart, [{ name: "packets", points: [...per].sort((a, b) => a[0] - b[0]) }], { emptyText: "nothing counted" });
  }
}

async function loadStatus() {
  const s = await api("/api/status");
  state.finished = s.state === "finished";
  state.internalNetworks = s.internal_networks || 0;
  state.merged = Boolean(s.merged);
  document.getElementById("probes-panel").hidden = !state.merged;
  for (const section of document.querySelectorAll("[data-single-run]")) section.hidden = state.merged;
  if (state.merged) {
    document.getElementById("live-panel").hidden = true;
    const m = s.merged;
    const newest = m.newest_end_s === null ? "no interval yet" : "newest interval ends " + clock(m.newest_end_s) + " UTC";
    const unreadable = m.files_unreadable ? ` · ${m.files_unreadable} file(s) unreadable` : "";
    document.getElementById("status").textContent =
      `merged view of ${m.probes} probes · ${newest} · ${s.packets} packets · ${si(s.bytes, "B")} · ${state.intervals.length} intervals of ${duration(state.intervalS)}${unreadable}`;
    const banner = document.getElementById("clock-banner");
    banner.hidden = m.clock_off.length === 0;
    banner.textContent = `clock off by more than an interval: ${m.clock_off.join(", ")}`;
    return;
  }
  drawLive();
  document.getElementById("status").textContent =
    `${s.input} · ${s.state} · ${s.packets} packets · ${si(s.bytes, "B")} · ${state.intervals.length} intervals of ${duration(state.intervalS)}`;
}

// A merged view's probes: the newest interval each published, its lag and its clock's offset.
async function loadProbes() {
  const data = await api("/api/probes");
  const body = document.createElement("tbody");
  for (const p of data.items) {
    const tr = document.createElement("tr");
    tr.dataset.probe = p.probe;
    if (p.clock_off) tr.className = "clock-off";
    const last = new Date(p.last_start_s * 1000).toISOString().slice(11, 19) + "–" + new Date(p.last_end_s * 1000).toISOString().slice(11, 19);
    for (const v of [p.probe, last, p.lag_s.toFixed(2), p.offset_s.toFixed(2), p.clock_off ? "off" : "ok"]) {
      const td = document.createElement("td");
      td.textContent = v;
      tr.appendChild(td);
    }
    body.appendChild(tr);
  }
  document.getElementById("probe-table").tBodies[0].replaceWith(body);
}

// What follows the intervals and status: one run's tables, flows, definitions and store, or a
// merged view's probes.
function loadRest() {
  if (state.merged) return loadProbes();
  return Promise.all([loadTables(), loadFlows(), loadDefinitions(), loadStore()]);
}

async function loadIntervals() {
  const data = await api("/api/intervals");
  state.intervals = data.items;
  state.intervalS = data.interval_s;
  drawIntervals();
}

function setupResolution() {
  const select = document.getElementById("resolution");
  for (const f of [1, 5, 10, 60, 300]) {
    const o = document.createElement("option");
    o.value = f;
    o.textContent = `${f} × interval`;
    select.appendChild(o);
  }
  select.onchange = () => { state.factor = Number(select.value); drawIntervals(); };
}

// The long-term store (--store): its series at a chosen resolution, as Tstat's web interface
// browses its archives. Hidden when the run keeps no store.
function duration(s) {
  s = Number(s.toPrecision(6));
  if (s === 0) return "0 s";
  if (s % 86400 === 0) return s === 86400 ? "1 day" : `${s / 86400} days`;
  if (s % 3600 === 0) return `${s / 3600} h`;
  if (s % 60 === 0) return `${s / 60} min`;
  return `${s} s`;
}

function fill(select, values, label = (v) => v) {
  const chosen = select.value;
  select.innerHTML = "";
  for (const v of values) {
    const o = document.createElement("option");
    o.value = v;
    o.textContent = label(v);
    select.appendChild(o);
  }
  if (values.map(String).includes(chosen)) select.value = chosen;
}

async function loadStore() {
  const panel = document.getElementById("store-panel");
  let listing;
  try {
    listing = await api("/api/store");
  } catch (e) {
    panel.hidden = true;
    if (e.status === 404) return;
    throw e;
  }
  panel.hidden = false;
  state.store = listing;
  const series = document.getElementById("store-series");
  const first = !series.options.length;
  fill(series, listing.series);
  // Throughput first: the series a user of Tstat's interface opens first.
  if (first) series.value = listing.series.find((n) => n.endsWith("_bytes")) || listing.series[0];
  fill(document.getElementById("store-resolution"), listing.resolutions_s, duration);
  fill(document.getElementById("store-cf"), [...new Set(listing.archives.map((a) => a.cf))]);
  await drawStore();
}

// The unit of a store's series, by its name (docs/monitoring.md, "The store"): counters per
// interval, active flows, and the distributions in quantiles.tsv's units.
// Returns the unit and how the axis shows a value.
function storeUnit(name) {
  const plain = (v) => fmt(v), with_ = (u) => (v) => fmt(v) + " " + u;
  if (/_(in|out|loc|ext)_bytes$/.test(name)) return ["bytes per interval", (v) => si(v, "B")];
  if (/_(in|out|loc|ext)_pkts$/.test(name)) return ["packets per interval", plain];
  if (/_(in|out|loc|ext)_flows$/.test(name)) return ["active flows", plain];
  if (/^(rtt_|hs_rtt|tcp_dur)/.test(name)) return ["ms", with_("ms")];
  if (/^(tcp_bytes|ip_len)/.test(name)) return ["bytes", (v) => si(v, "B")];
  if (/^tcp_thru/.test(name)) return ["bit/s", (v) => si(v, "bit/s")];
  if (/^tcp_retx/.test(name)) return ["%", with_("%")];
  return ["the series' own unit", plain];
}

async function drawStore() {
  const chart = document.getElementById("chart-store");
  const name = document.getElementById("store-series").value;
  const resolution = document.getElementById("store-resolution").value;
  const cf = document.getElementById("store-cf").value;
  const what = document.getElementById("store-what");
  if (!name) return empty(chart, "the store holds no series");
  try {
    // The newest rows the server gives at once (--http-max-store-points), of the whole archive.
    const archive = state.store.archives.find((a) => a.cf === cf && String(a.resolution_s) === resolution);
    const start = archive ? Math.max(archive.first_s, archive.last_s - (state.store.max_points - 1) * archive.resolution_s) : 0;
    const q = new URLSearchParams({ name, resolution_s: resolution, cf, start_s: start });
    const data = await api("/api/store/series?" + q);
    const known = data.points.filter((p) => p[1] !== null).length;
    const [unit, yLabel] = storeUnit(name);
    what.textContent = `${state.store.name} · ${name}, ${data.cf} of ${duration(data.resolution_s)} rows · ${known} of ${data.points.length} known (${unit})`;
    chart.dataset.resolution = data.resolution_s;
    lineChart(chart, [{ name, points: data.points }], {
      yLabel,
      emptyText: "no known value at this resolution yet",
      xLabel: (x) => new Date(x * 1000).toISOString().slice(0, 16).replace("T", " ") + " UTC",
    });
  } catch (e) {
    what.textContent = "";
    empty(chart, e.message);
  }
}

// Everything but the live chart, again: at most once a second.
async function reload() {
  const now = Date.now();
  if (now - state.lastReload < 1000) return;
  state.lastReload = now;
  try {
    await loadIntervals();
    await loadStatus();
    await loadRest();
  } catch (e) {
    document.getElementById("status").textContent = "error: " + e.message;
  }
}

function connectStream() {
  const url = "/api/stream?resolution_ms=250" + (TOKEN ? "&token=" + encodeURIComponent(TOKEN) : "");
  const src = new EventSource(url);
  const show = (text) => { document.getElementById("stream-state").textContent = "stream: " + text; };
  // The first event repeats the bins loadLive() fetched: only newer ones are added.
  const fresh = (bins) => (bins || []).filter((b) => !state.bins.length || b.start_s > state.bins[state.bins.length - 1].start_s);
  src.addEventListener("final", (e) => { show("run finished"); addBins(fresh(JSON.parse(e.data).bins)); state.lastReload = 0; reload(); });
  src.addEventListener("tick", (e) => { show("live"); addBins(fresh(JSON.parse(e.data).bins)); });
  src.addEventListener("interval", (e) => { show("live"); addBins(fresh(JSON.parse(e.data).bins)); reload(); });
  src.onerror = () => show("reconnecting");
}

document.getElementById("flow-filter").onsubmit = (e) => { e.preventDefault(); state.flows.offset = 0; loadFlows(); };
document.getElementById("flow-prev").onclick = () => { state.flows.offset = Math.max(0, state.flows.offset - state.flows.limit); loadFlows(); };
document.getElementById("flow-next").onclick = () => { state.flows.offset += state.flows.limit; loadFlows(); };
document.getElementById("def-form").onsubmit = async (e) => {
  e.preventDefault();
  const msg = document.getElementById("def-message");
  try {
    await api("/api/definitions", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ version: state.defVersion || 0, definition: e.target.definition.value }),
    });
    msg.className = "";
    msg.textContent = "added";
    loadDefinitions();
  } catch (err) {
    msg.className = "error";
    msg.textContent = err.message;
  }
};

document.getElementById("phase-source").onchange = drawPhase;
for (const id of ["store-series", "store-resolution", "store-cf"]) document.getElementById(id).onchange = drawStore;
document.getElementById("live-resolution").onchange = (e) => { state.liveRes = Number(e.target.value); drawLive(); };

(async function main() {
  setupResolution();
  try {
    await loadStatus();
    if (!state.merged) await loadLive();
    await loadIntervals();
    await loadStatus();
    await loadRest();
  } catch (e) {
    document.getElementById("status").textContent = "error: " + e.message;
  }
  connectStream();
  document.body.dataset.ready = "1";
})();
