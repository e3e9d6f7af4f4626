// The dashboard's first view, as a new user sees it (issue 35, item 7): playwright-core driving
// Debian's chromium against a finished `sonde analyze --http` (crates/sonde/tests/http.rs) or a
// live `sonde monitor --http` (crates/sonde/tests/monitor.rs).
//
//   node first-view.mjs URL ARTIFACT_DIR all|split SHOT.png
//
// `all`: the run was given no internal network (--internal), so the throughput charts must draw
// one "all" series and no in/out series; `split`: it was, so they draw in and out. Either way no
// throughput series is a line of zeros. Checks that every panel shown says what it shows and its
// unit, and that the flow table shows its start times as UTC dates, durations and RTTs with a
// unit, and an empty cell (not 0) where the API has no value or the RTT no sample. Waits for
// data first (a live run fills as it goes); saves the whole page as SHOT.png. Prints one JSON
// line of what it measured, then "N passed, N failed"; exits 1 on any failure.
import { run } from "./harness.mjs";

const [expect, shotName] = process.argv.slice(4);
if (!["all", "split"].includes(expect) || !shotName) {
  console.error("usage: node first-view.mjs URL ARTIFACT_DIR all|split SHOT.png");
  process.exit(2);
}

await run("first-view.mjs", async ({ page, check, measured, shot }) => {
  const status = await page.evaluate(() => fetch("/api/status").then((r) => r.json()));
  measured.status = { state: status.state, internal_networks: status.internal_networks };
  check("the API says whether internal networks were given", (status.internal_networks > 0) === (expect === "split"), JSON.stringify(measured.status));
  const live = status.state === "running";

  // A live run fills as it goes: wait for points in its charts and flows in its table (a
  // series of zeros is found below, not waited out).
  const filled = (id) => page.waitForFunction((id) =>
    [...document.querySelectorAll(`#${id} [data-series]`)].some((s) => Number(s.dataset.points) > 1), id, { timeout: 20000 });
  if (live) await filled("chart-live");
  await filled("chart-throughput");
  await page.waitForFunction(() => Number(document.querySelector("#flow-table").dataset.total) > 0, null, { timeout: 20000 });
  // The live chart redraws at every event: read it and the rest in one go.
  const view = await page.evaluate(() => {
    const series = (id) => [...document.querySelectorAll(`#${id} [data-series]`)].map((s) => ({
      name: s.dataset.series, points: Number(s.dataset.points), max: Number(s.dataset.max),
    }));
    // Every panel shown (not hidden, with a size): its title and what the title says of it.
    const panels = [...document.querySelectorAll("main > section")]
      .filter((p) => !p.hidden && p.getBoundingClientRect().height > 0)
      .map((p) => {
        const h2 = p.querySelector("h2");
        const small = h2 && h2.querySelector("small");
        const title = h2 ? h2.firstChild.textContent.trim() : "";
        return { id: p.id || (p.querySelector(".chart[id]") || { id: title }).id, title, what: small ? small.textContent.trim() : "" };
      });
    const head = [...document.querySelectorAll("#flow-table thead th")].map((th) => ({ column: th.dataset.column, text: th.textContent, title: th.title }));
    const rows = [...document.querySelectorAll("#flow-table tbody tr")].map((tr) =>
      Object.fromEntries([...tr.children].map((td, i) => [head[i].column, { text: td.textContent, value: td.dataset.value ?? null, title: td.title }])));
    const flowsEmpty = (document.querySelector("#chart-flows .empty") || { textContent: null }).textContent;
    return { live: series("chart-live"), throughput: series("chart-throughput"), flows: series("chart-flows"), flowsEmpty, panels, head, rows };
  });
  measured.throughput = view.throughput;
  measured.live = view.live;
  measured.panels = view.panels;
  await shot(shotName);

  // The throughput charts: one "all" series, or in and out; never a line of zeros.
  const charts = live ? { "chart-throughput": view.throughput, "chart-live": view.live } : { "chart-throughput": view.throughput };
  for (const [id, series] of Object.entries(charts)) {
    const names = series.map((s) => s.name);
    if (expect === "all") {
      check(`${id}: one "all" series, no in/out`, names.length === 1 && names[0] === "all", JSON.stringify(names));
    } else {
      check(`${id}: in and out`, names.includes("in") && names.includes("out") && !names.includes("all"), JSON.stringify(names));
    }
    const zeros = series.filter((s) => !(s.points > 0 && s.max > 0));
    check(`${id}: no series of zeros`, zeros.length === 0, JSON.stringify(zeros));
  }

  // The flows chart: counts, or a sentence saying why there is none; never lines of zeros only.
  measured.flows = { series: view.flows, empty: view.flowsEmpty };
  check("flows chart not all zeros", view.flows.some((s) => s.max > 0) || (view.flows.length === 0 && /no flow/.test(view.flowsEmpty || "")), JSON.stringify(measured.flows));

  // Every panel says what it shows and in which unit: a title, and a line naming the unit in
  // parentheses.
  const UNIT = /\((bit\/s|flows|ms|%|bytes|packets)\)|\(UTC\)/;
  for (const p of view.panels) {
    check(`panel ${p.id} titled`, p.title.length > 0 && p.what.length >= 20, JSON.stringify(p));
    check(`panel ${p.id} names its unit`, UNIT.test(p.what), JSON.stringify(p));
  }
  const panel = (id) => view.panels.find((p) => p.id === id);
  const throughputWhat = panel("chart-throughput");
  const says = expect === "all" ? /all traffic/ : /\bin\b.*\bout\b/;
  check("the throughput panel says how it splits", throughputWhat && says.test(throughputWhat.what), JSON.stringify(throughputWhat));
  check("the live panel shown on a live run only", Boolean(panel("live-panel")) === live, JSON.stringify(view.panels.map((p) => p.id)));
  if (live) check("the live panel says how it splits", says.test(panel("live-panel").what), JSON.stringify(panel("live-panel")));

  // The flow table: headings say the unit, start times are UTC dates, durations and RTTs carry
  // a unit, and a missing value or RTT sample is an empty cell.
  const heading = (c) => (view.head.find((h) => h.column === c) || { text: "" }).text;
  check("start heading says UTC", /UTC/.test(heading("first")), heading("first"));
  // A live run goes on while the page is read: the last packet is the one the API knows now,
  // after the rows were read, not the one it knew when the test began.
  const last = live ? await page.evaluate(() => fetch("/api/status").then((r) => r.json())) : status;
  const span = [status.first_packet_s * 1000 - 1, (last.last_packet_s ?? last.first_packet_s) * 1000 + 1];
  const DATE = /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}$/;
  const DURATION = /^\d+(\.\d+)? (ms|s)$|^\d+ min \d+ s$|^\d+ h \d+ min$/;
  const bad = { first: [], durat: [], rtt: [] };
  let noSample = 0, withSample = 0;
  for (const r of view.rows) {
    const f = r.first;
    const shown = Date.parse(f.text.replace(" ", "T") + "Z");
    // The date shown is the API's value (ms since the epoch), within the run's packets.
    if (!DATE.test(f.text) || Math.abs(shown - Number(f.value)) > 1 || shown < span[0] || shown > span[1]) bad.first.push(f);
    if (!DURATION.test(r.durat.text)) bad.durat.push(r.durat);
    for (const c of ["c_rtt_avg", "s_rtt_avg"].filter((c) => c in r)) {
      const cell = r[c];
      if (cell.text === "") noSample++;
      else if (DURATION.test(cell.text) && Number(cell.value) > 0) withSample++;
      else bad.rtt.push(cell);
    }
  }
  measured.flow_rows = view.rows.length;
  measured.rtt_cells = { withSample, noSample };
  measured.first_times = view.rows.slice(0, 3).map((r) => r.first.text);
  check("flow rows", view.rows.length > 0, String(view.rows.length));
  check("start times are UTC dates of the run's packets", bad.first.length === 0, JSON.stringify(bad.first.slice(0, 3)));
  check("durations carry a unit", bad.durat.length === 0, JSON.stringify(bad.durat.slice(0, 3)));
  check("RTTs carry a unit, or are empty", bad.rtt.length === 0 && withSample > 0, JSON.stringify({ bad: bad.rtt.slice(0, 3), withSample }));

  // Against the API: on a finished run the table is the API's first page, row for row; each
  // RTT without a sample (its count 0) or a null value is an empty cell, and no other cell is.
  if (!live) {
    const api = await page.evaluate(() => fetch("/api/flows?proto=tcp&offset=0&limit=25").then((r) => r.json()));
    const col = (row, c) => row[api.columns.indexOf(c)];
    let mismatched = [];
    api.rows.forEach((row, i) => {
      const shown = view.rows[i];
      for (const [c, count] of [["c_rtt_avg", "c_rtt_cnt"], ["s_rtt_avg", "s_rtt_cnt"], ["durat", null]]) {
        const none = col(row, c) === null || (count !== null && col(row, count) === 0);
        if (!shown || !shown[c] || (shown[c].text === "") !== none) mismatched.push({ i, c, api: col(row, c), count: count && col(row, count), shown: shown && shown[c] });
      }
    });
    measured.api_rows = api.rows.length;
    check("the table is the API's page", api.rows.length === view.rows.length, `${api.rows.length} vs ${view.rows.length}`);
    check("empty exactly where the API has no sample", mismatched.length === 0, JSON.stringify(mismatched.slice(0, 3)));
    // The demo has TCP flows without an RTT sample (a reset, one cut at the end of the trace).
    check("flows without an RTT sample shown empty", noSample > 0, String(noSample));
  }
});
