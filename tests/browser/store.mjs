// The dashboard's long-term store view in a real browser, against `sonde analyze --store FILE
// --http` (started by crates/sonde/tests/http.rs, which passes the URL).
//
//   node store.mjs URL ARTIFACT_DIR
//
// Checks that the panel lists the store's series and resolutions as /api/store gives them, that
// the chart draws the selected series with as many points as /api/store/series has known values,
// and that picking another resolution or series redraws it from the API; saves store.png.
import { run } from "./harness.mjs";

await run("store.mjs", async ({ page, check, measured, shot }) => {
  await page.waitForSelector("#chart-store [data-series]", { timeout: 15000 });
  const listing = await page.evaluate(() => fetch("/api/store").then((r) => r.json()));
  const panel = await page.evaluate(() => {
    const p = document.getElementById("store-panel");
    const opts = (id) => [...document.querySelectorAll(`#${id} option`)].map((o) => [o.value, o.textContent]);
    return { hidden: p.hidden, series: opts("store-series"), resolutions: opts("store-resolution"), cfs: opts("store-cf") };
  });
  measured.panel = { resolutions: panel.resolutions, cfs: panel.cfs, series: panel.series.length };
  check("the store panel is shown", !panel.hidden);
  check("every series is offered", JSON.stringify(panel.series.map((o) => o[0])) === JSON.stringify(listing.series));
  check(
    "every resolution is offered, named",
    JSON.stringify(panel.resolutions.map((o) => Number(o[0]))) === JSON.stringify(listing.resolutions_s) &&
      panel.resolutions.every(([v, label]) => label === (v % 60 ? `${v} s` : `${v / 60} min`)),
    JSON.stringify(panel.resolutions),
  );

  // What the chart draws against what the API answers, for the current choice.
  const drawn = async () => page.evaluate(async () => {
    const name = document.getElementById("store-series").value;
    const resolution = document.getElementById("store-resolution").value;
    const cf = document.getElementById("store-cf").value;
    const q = new URLSearchParams({ name, resolution_s: resolution, cf });
    // (The whole archive: the test's store is within the server's limit.)
    const data = await fetch("/api/store/series?" + q).then((r) => r.json());
    const path = document.querySelector("#chart-store [data-series]");
    return {
      name, resolution: Number(resolution), cf,
      known: data.points.filter((p) => p[1] !== null).length,
      drawn: path ? Number(path.dataset.points) : 0,
      moves: path ? (path.getAttribute("d").match(/[ML]/g) || []).length : 0,
      height: path ? path.getBBox().height : 0,
    };
  });
  const first = await drawn();
  measured.first = first;
  check("a throughput series is drawn first", first.name.endsWith("_bytes"), first.name);
  check("the chart holds the series' known points", first.known > 5 && first.drawn === first.known && first.moves === first.known, JSON.stringify(first));
  check("the series varies", first.height > 0, JSON.stringify(first));
  await shot("store.png");

  // A coarser resolution: fewer rows, redrawn from the API.
  const coarsest = String(listing.resolutions_s[listing.resolutions_s.length - 1]);
  await page.selectOption("#store-resolution", coarsest);
  await page.waitForFunction((r) => document.getElementById("chart-store").dataset.resolution === r, coarsest);
  const coarse = await drawn();
  measured.coarse = coarse;
  check("a coarser resolution draws fewer points", coarse.known > 0 && coarse.drawn === coarse.known && coarse.known < first.known, JSON.stringify(coarse));

  // Another series at the same resolution.
  const other = listing.series.find((n) => n.endsWith("_pkts"));
  await page.selectOption("#store-series", other);
  await page.waitForFunction((n) => document.querySelector(`#chart-store [data-series='${n}']`), other);
  const pkts = await drawn();
  measured.pkts = pkts;
  check("another series is drawn", pkts.name === other && pkts.drawn === pkts.known && pkts.known > 0, JSON.stringify(pkts));
  check("the header says what is drawn", (await page.textContent("#store-what")).includes("link.rrd"));
});
