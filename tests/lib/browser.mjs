// browser.mjs — Debian's chromium driven by playwright-core, as every browser test
// opens it: headless, no network chatter, and a page that records script errors.
import { chromium } from 'playwright-core';

export const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';

/** Launch chromium and open one page.  Returns {browser, page, errors}: errors
 *  collects uncaught page errors and console errors other than the browser's own
 *  "Failed to load resource" lines (every non-2xx fetch logs one, and tests make
 *  some on purpose). */
export async function openPage({ width = 1360, height = 900, timeout = 60000 } = {}) {
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const ctx = await browser.newContext({ viewport: { width, height } });
  const page = await ctx.newPage();
  page.setDefaultTimeout(timeout);
  const errors = [];
  page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error' && !/Failed to load resource/.test(m.text())) errors.push(`console: ${m.text()}`);
  });
  return { browser, page, errors };
}
