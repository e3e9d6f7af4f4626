// The dashboard in a real browser: playwright-core driving Debian's chromium against a running
// `sonde analyze --http` (started by crates/sonde/tests/http.rs, which passes the URL).
//
//   node dashboard.mjs URL ARTIFACT_DIR
//
// Checks that the charts hold data (SVG paths with points, bars with values), that the flow
// table sorts and filters through the API, and that a definition change on a finished run is
// refused with a readable message; saves screenshots into ARTIFACT_DIR. Prints one JSON line of
// what it measured, then "N passed, N failed"; exits 1 on any failure.
import { run } from "./harness.mjs";

await run("dashboard.mjs", async ({ page, check, measured, shot }) => {

  // Each chart's series: [name, points, path length or circles].
  const series = await page.evaluate(() => {
    const out = {};
    for (const chart of document.querySelectorAll(".chart[id]")) {
      out[chart.id] = [...chart.querySelectorAll("[data-series]")].map((s) => ({
        name: s.dataset.series,
        points: Number(s.dataset.points),
        // The drawn extent: a chart of zeros is a flat line.
        height: s.getBBox().height,
      }));
    }
    return out;
  });
  measured.series = series;
  const has = (chart, name, minPoints) => {
    const s = (series[chart] || []).find((x) => x.name === name);
    check(`${chart} ${name}`, s && s.points >= minPoints && s.height > 0, JSON.stringify(s));
  };
  // A finished trace run has no live traffic: no empty live panel (issue 23).
  const livePanel = await page.evaluate(() => {
    const panel = document.getElementById("live-panel");
    return { hidden: panel.hidden, shown: panel.getBoundingClientRect().height > 0 };
  });
  check("the live panel is hidden on a finished trace run", livePanel.hidden && !livePanel.shown, JSON.stringify(livePanel));
  has("chart-throughput", "in", 10);
  has("chart-throughput", "out", 10);
  has("chart-flows", "active", 10);
  has("chart-flows", "opened", 10);
  has("chart-rtt", "p50", 3);
  has("chart-rtt", "p95", 3);
  has("chart-phase", "p50 n → n+1", 2);
  // The phase plot of an association's samples, one by one (data -> ack RTT).
  await page.selectOption("#phase-source", "rtt");
  const phase = await page.evaluate(() => Number(document.querySelector("#chart-phase [data-series='rtt n → n+1']").dataset.points));
  measured.phase_rtt_points = phase;
  check("phase plot of an association", phase > 10, String(phase));
  await page.selectOption("#phase-source", "");
  // Out is drawn below the axis: its path reaches lower than in's.
  const [inBox, outBox] = await page.evaluate(() => ["in", "out"].map((n) => {
    const b = document.querySelector(`#chart-throughput [data-series='${n}']`).getBBox();
    return { top: b.y, bottom: b.y + b.height };
  }));
  check("out below in", outBox.bottom > inBox.bottom && inBox.top < outBox.top, JSON.stringify({ inBox, outBox }));

  const bars = await page.evaluate(() => Object.fromEntries(["chart-top", "chart-pairs", "chart-protocols"].map((id) =>
    [id, [...document.querySelectorAll(`#${id} rect`)].map((r) => Number(r.dataset.value))])));
  measured.bars = bars;
  for (const [id, values] of Object.entries(bars)) {
    check(`${id} bars`, values.length > 0 && values.every((v) => v > 0) && values.every((v, i) => i === 0 || v <= values[i - 1]), JSON.stringify(values));
  }

  // The resolution: 10 intervals per point draws fewer points.
  const before = series["chart-throughput"].find((s) => s.name === "in").points;
  await page.selectOption("#resolution", "10");
  const after = await page.evaluate(() => Number(document.querySelector("#chart-throughput [data-series='in']").dataset.points));
  measured.resolution_points = [before, after];
  check("resolution", after > 0 && after < before, `${before} → ${after}`);
  await page.selectOption("#resolution", "1");
  await shot("dashboard.png");

  // The flow table: sorted by the server when a header is clicked (twice: descending).
  const rows = () => page.evaluate(() => {
    const head = [...document.querySelectorAll("#flow-table thead th")].map((th) => th.dataset.column);
    return [...document.querySelectorAll("#flow-table tbody tr")].map((tr) =>
      Object.fromEntries([...tr.children].map((td, i) => [head[i], td.textContent])));
  });
  const total = async () => Number(await page.getAttribute("#flow-table", "data-total"));
  const all = await total();
  check("flow table filled", all > 0 && (await rows()).length > 0, String(all));
  for (const order of ["asc", "desc"]) {
    await page.click("#flow-table th[data-column='c_bytes_all']");
    await page.waitForSelector(`#flow-table th.sorted-${order}`);
    const values = (await rows()).map((r) => Number(r.c_bytes_all));
    const sorted = values.every((v, i) => i === 0 || (order === "asc" ? v >= values[i - 1] : v <= values[i - 1]));
    check(`sort ${order}`, values.length > 1 && sorted && values[0] !== values[values.length - 1], JSON.stringify(values));
    measured[`sorted_${order}`] = values;
  }
  await shot("flows-sorted.png");

  // Filter: one server port; every row shown has it, and the count shrinks.
  await page.fill("#flow-filter input[name='port']", "80");
  await page.click("#flow-filter button[type='submit']");
  await page.waitForFunction((n) => Number(document.querySelector("#flow-table").dataset.total) !== n, all);
  const filtered = await rows();
  measured.filtered = [await total(), all];
  check("filter port 80", filtered.length > 0 && filtered.every((r) => r.s_port === "80" || r.c_port === "80") && (await total()) < all, JSON.stringify(filtered.slice(0, 3)));
  await page.selectOption("#flow-filter select[name='proto']", "udp");
  await page.fill("#flow-filter input[name='port']", "");
  await page.click("#flow-filter button[type='submit']");
  await page.waitForFunction(() => document.querySelector("#flow-table th[data-column='s_pkts_all']"));
  check("udp log", (await rows()).length > 0);
  await shot("flows-filtered.png");

  // Definitions: one chart per definition, with its counts; a change on a finished run is
  // refused, and the page says why.
  const defCharts = await page.evaluate(() => [...document.querySelectorAll("#definitions .chart")].map((c) => ({
    name: c.dataset.definition,
    points: Number((c.querySelector("[data-series]") || { dataset: { points: 0 } }).dataset.points),
  })));
  measured.definitions = defCharts;
  // The counting ones (data and ack of the association measure nothing of their own).
  const counting = defCharts.filter((c) => ["web", "udp7000"].includes(c.name));
  check("definition charts", counting.length === 2 && counting.every((c) => c.points > 0), JSON.stringify(defCharts));
  await page.fill("#def-form input[name='definition']", "dns = udp.dport == 53");
  await page.click("#def-form button[type='submit']");
  await page.waitForSelector("#def-message.error");
  const message = await page.textContent("#def-message");
  check("finished run refuses changes", /finished/.test(message), message);
  await shot("definitions.png");

  const stream = await page.textContent("#stream-state");
  check("stream says finished", /finished/.test(stream), stream);
});
