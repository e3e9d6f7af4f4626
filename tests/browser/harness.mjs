// What the browser tests share: chromium launched by playwright-core with a fresh profile, a
// tally of checks, and the ending (measurements as one JSON line, then "N passed, N failed").
import { chromium } from "playwright-core";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

// Runs `test(page, check, measured)` on a page of URL; the command line is `URL ARTIFACT_DIR`.
export async function run(script, test) {
  const [url, artifacts] = process.argv.slice(2);
  if (!url || !artifacts) {
    console.error(`usage: node ${script} URL ARTIFACT_DIR`);
    process.exit(2);
  }
  mkdirSync(artifacts, { recursive: true });
  const profile = mkdtempSync(join(tmpdir(), "sonde-chromium-"));
  // A fresh profile each run (playwright passes it as --user-data-dir).
  const browser = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    viewport: { width: 1400, height: 1000 },
    args: [
      "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync",
    ],
  });
  let passed = 0, failed = 0;
  const measured = {};
  const check = (name, ok, detail = "") => {
    if (ok) passed++;
    else { failed++; console.error(`FAIL ${name} ${detail}`); }
  };
  try {
    const page = browser.pages()[0] || (await browser.newPage());
    const errors = [];
    page.on("pageerror", (e) => errors.push(String(e)));
    const external = [];
    page.on("request", (r) => { if (!r.url().startsWith(url.replace(/\/$/, ""))) external.push(r.url()); });
    await page.goto(url);
    await page.waitForSelector("body[data-ready='1']", { timeout: 15000 });
    await test({ page, check, measured, shot: (name) => page.screenshot({ path: join(artifacts, name), fullPage: true }) });
    check("no page error", errors.length === 0, errors.join("; "));
    check("nothing fetched from outside", external.length === 0, external.join(" "));
  } catch (e) {
    failed++;
    console.error("FAIL", e);
  } finally {
    await browser.close();
    rmSync(profile, { recursive: true, force: true });
  }
  console.log(JSON.stringify(measured));
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed ? 1 : 0);
}
