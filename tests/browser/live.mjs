// The live dashboard in a real browser: playwright-core driving Debian's chromium against a
// `sonde monitor --http` capturing a replay on a veth (started by crates/sonde/tests/monitor.rs,
// which passes the URL; the replay runs while this script does).
//
//   node live.mjs URL ARTIFACT_DIR
//
// Checks that the live charts update by themselves (the stream), that the resolution regroups
// the live bins, that flows reach the table, and that a definition added in the page starts
// counting; saves screenshots into ARTIFACT_DIR. Prints one JSON line of what it measured, then
// "N passed, N failed"; exits 1 on any failure.
import { run } from "./harness.mjs";

await run("live.mjs", async ({ page, check, measured, shot }) => {

  // The live chart, as drawn: each series' points and path.
  const live = () => page.evaluate(() => Object.fromEntries([...document.querySelectorAll("#chart-live [data-series]")]
    .map((s) => [s.dataset.series, { points: Number(s.dataset.points), d: s.getAttribute("d"), height: s.getBBox().height }])));
  const status = () => page.textContent("#status");
  // Traffic arrives, and the chart redraws by itself (no reload, no click): the stream.
  await page.waitForFunction(() => {
    const s = document.querySelector("#chart-live [data-series='local+external']");
    return s && s.getBBox().height > 0;
  }, null, { timeout: 20000 });
  const first = await live(), firstStatus = await status();
  await page.waitForTimeout(2500);
  const second = await live(), secondStatus = await status();
  measured.live = { first: first["local+external"].points, second: second["local+external"].points, firstStatus, secondStatus };
  check("live chart updates", first["local+external"].d !== second["local+external"].d, JSON.stringify(measured.live));
  check("in and out drawn", ["in", "out"].every((n) => second[n] && second[n].points > 0 && second[n].height > 0), JSON.stringify(second));
  check("status running and counting", /running/.test(secondStatus) && secondStatus !== firstStatus, `${firstStatus} → ${secondStatus}`);
  check("stream live", /live/.test(await page.textContent("#stream-state")));
  // 10 ms bins give more points than 10 s ones over the same bins.
  await page.selectOption("#live-resolution", "0.01");
  const fine = (await live())["local+external"].points;
  await page.selectOption("#live-resolution", "10");
  const coarse = (await live())["local+external"].points;
  measured.resolution_points = [fine, coarse];
  check("live resolution", fine > coarse && coarse > 0, `${fine} vs ${coarse}`);
  await page.selectOption("#live-resolution", "0.1");
  await shot("live.png");

  // Flows that ended reach the table (the page reloads it as the run goes).
  await page.waitForFunction(() => Number(document.querySelector("#flow-table").dataset.total) > 0, null, { timeout: 20000 });
  measured.flows = Number(await page.getAttribute("#flow-table", "data-total"));
  check("flow table filled", measured.flows > 0, String(measured.flows));

  // A definition added in the page starts counting.
  const before = await page.textContent("#definitions");
  check("no definition yet", /no definition yet/.test(before), before);
  await page.fill("#def-form input[name='definition']", "web = tcp.dport == 80");
  await page.click("#def-form button[type='submit']");
  await page.waitForFunction(() => document.querySelector("#def-message").textContent !== "", null, { timeout: 15000 });
  const added = await page.textContent("#def-message");
  check("definition accepted", added === "added", added);
  await page.waitForFunction(() => {
    const m = /web \(v2\): (\d+) packets/.exec(document.querySelector("#definitions").textContent);
    return m && Number(m[1]) > 0;
  }, null, { timeout: 20000 });
  const counted = /web \(v2\): (\d+) packets/.exec(await page.textContent("#definitions"));
  measured.definition_packets = Number(counted[1]);
  // The chart follows the counts at its next refresh: wait for its first point, not just the text.
  await page.waitForFunction(() => {
    const series = document.querySelector("#definitions .chart[data-definition='web'] [data-series]");
    return series && Number(series.dataset.points) > 0;
  }, null, { timeout: 20000 }).catch(() => {});
  const chartPoints = await page.evaluate(() => Number((document.querySelector("#definitions .chart[data-definition='web'] [data-series]") || { dataset: { points: 0 } }).dataset.points));
  measured.definition_points = chartPoints;
  check("the new definition counts", measured.definition_packets > 0 && chartPoints > 0, JSON.stringify(counted));
  check("set version 2", /set version 2/.test(await page.textContent("#def-version")));
  await shot("live-definition.png");
});
