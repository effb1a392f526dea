// queue.test.mjs — the job page of a queued job says where it stands and why it
// waits, and follows its place as the queue moves; with the security headers on
// (Content-Security-Policy without inline script or style) the page runs without
// a single script error or CSP report.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { openPage } from '../lib/browser.mjs';
import { startServer, waitState } from '../lib/server.mjs';

let server, browser, page, errors = [];
before(async () => {
  server = await startServer({ args: ['--cpu-slots', '1'] });
  ({ browser, page, errors } = await openPage());
});
after(async () => {
  if (browser) await browser.close();
  if (server) { await server.stop(); server.cleanup(); }
});

const create = async (name, params) => {
  const r = await server.api('POST', '/api/v1/jobs', { kind: 'test', name, params });
  assert.equal(r.status, 202, JSON.stringify(r.body));
  return r.body.job.id;
};

test('a queued job shows its place and reason, then runs', async () => {
  const blocker = await create('blocker', { steps: 100000, step_ms: 20 });
  await waitState(server, blocker, ['running']);
  const first = await create('first', { steps: 2, step_ms: 10 });
  const second = await create('second', { steps: 2, step_ms: 10 });
  await page.goto(`${server.url}/jobs/${second}`);
  const eta = page.locator('.job-progress .progress-eta');
  await page.waitForFunction(() => /number 2 in the queue: waiting for 1 CPU slot; 1 job ahead/
    .test(document.querySelector('.job-progress .progress-eta')?.textContent || ''));
  // the instructor's move to the front (accounts off: the local user may) shows within a few seconds
  const r = await server.api('POST', `/api/v1/jobs/${second}/priority`, { front: true });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  await page.waitForFunction(() => /number 1 in the queue: waiting for 1 CPU slot \(0 of 1 free\)/
    .test(document.querySelector('.job-progress .progress-eta')?.textContent || ''), null, { timeout: 60000 });
  await server.api('POST', `/api/v1/jobs/${blocker}/abort`);
  await waitState(server, second, ['done'], 30000);
  await waitState(server, first, ['done'], 30000);
  await page.waitForFunction(() => document.querySelector('.job-meta .badge')?.textContent === 'done', null, { timeout: 60000 });
  assert.equal(await eta.textContent(), '');
  assert.deepEqual(errors, []);
});
