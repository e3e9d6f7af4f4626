// The dashboard over a merged view of several probes, in a real browser, against `sonde serve
// --merged DIR` (started by crates/sonde/tests/serve.rs, which passes the URL).
//
//   node merged.mjs URL ARTIFACT_DIR
//
// Checks that the probes panel lists /api/probes with the clock-off probe flagged and named in
// the banner, that the throughput chart draws one point per merged interval (one "all" series:
// the probes' intervals have no in/out traffic), that the panels a
// merged view has no data for are hidden and the page raised no error; saves merged.png.
import { run } from "./harness.mjs";

await run("merged.mjs", async ({ page, check, measured, shot }) => {
  await page.waitForSelector("#probe-table tbody tr", { timeout: 15000 });
  const probes = await page.evaluate(() => fetch("/api/probes").then((r) => r.json()));
  const intervals = await page.evaluate(() => fetch("/api/intervals").then((r) => r.json()));
  const seen = await page.evaluate(() => {
    const rows = [...document.querySelectorAll("#probe-table tbody tr")];
    const hidden = (sel) => document.querySelector(sel).closest("section").hidden;
    // The probes' intervals (the demo analysed without --internal) are all "ext": one "all"
    // series, no in/out lines of zeros.
    const path = document.querySelector("#chart-throughput [data-series='all']");
    return {
      panel: !document.getElementById("probes-panel").hidden,
      rows: rows.map((r) => [r.dataset.probe, r.className === "clock-off"]),
      banner: document.getElementById("clock-banner").hidden ? null : document.getElementById("clock-banner").textContent,
      status: document.getElementById("status").textContent,
      allPoints: path ? Number(path.dataset.points) : 0,
      series: [...document.querySelectorAll("#chart-throughput [data-series]")].map((s) => s.dataset.series),
      hidden: ["#chart-live", "#chart-top", "#flow-table", "#definitions", "#chart-store"].map(hidden),
    };
  });
  measured.merged = seen;
  const want = probes.items.map((p) => [p.probe, p.clock_off]);
  check("the probes panel is shown", seen.panel);
  check("every probe is listed, the clock-off ones flagged", JSON.stringify(seen.rows) === JSON.stringify(want), JSON.stringify(seen.rows));
  const off = probes.items.filter((p) => p.clock_off).map((p) => p.probe);
  check("the banner names the clock-off probes", off.length > 0 && off.every((p) => (seen.banner || "").includes(p)), seen.banner);
  check("the status says it is a merged view", seen.status.startsWith(`merged view of ${probes.items.length} probes`), seen.status);
  check("throughput has a point per merged interval", seen.allPoints === intervals.items.length, `${seen.allPoints} vs ${intervals.items.length}`);
  check("throughput is one all series, no in/out of zeros", JSON.stringify(seen.series) === '["all"]', JSON.stringify(seen.series));
  check("the single-run panels are hidden", seen.hidden.every((h) => h), JSON.stringify(seen.hidden));
  await shot("merged.png");
});
