// slurm.test.mjs — the job page of a job that Slurm runs, in a real Chromium: while
// it waits in the queue the page says so, with Slurm's pending reason and its place
// in line; once it runs, that Slurm runs it.  A real single-node Slurm
// (tests/lib/slurm.mjs).  Where Slurm or chromium is not installed (or not root), the
// test says SKIP and why, or fails where CI is set (need()); a Slurm that is there
// but does not start fails it, with its daemons' logs.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { openPage, CHROMIUM } from '../lib/browser.mjs';
import { startServer, waitState, waitFor, BIN } from '../lib/server.mjs';
import { startSlurm, slurmMissing } from '../lib/slurm.mjs';
import { need } from '../lib/need.mjs';

let cluster, server, browser, page, pageErrors = [];
let skip = slurmMissing() || (existsSync(CHROMIUM) ? null : `${CHROMIUM} is not installed`);

before(async () => {
  if (skip) return;
  assert.ok(existsSync(BIN), `${BIN} is missing: run make all first`);
  cluster = await startSlurm(); // throws, failing the test, with the daemons' logs
  Object.assign(process.env, cluster.env);
  // each Slurm job asks for the whole node: a second one waits for the first
  server = await startServer({ args: ['--executor', 'slurm', '--slurm-cpus', String(cluster.cpus), '--abort-grace', '5'] });
  ({ browser, page, errors: pageErrors } = await openPage({ timeout: 30000 }));
});

after(async () => {
  if (browser) await browser.close();
  if (server) { await server.stop(); server.cleanup(); }
  await cluster?.stop?.();
});

const box = () => page.evaluate(() => {
  const el = document.querySelector('.job-executor');
  return el && !el.hidden ? el.textContent : null;
});

test('the job page says where Slurm has the job: waiting (reason, place in line), then running', async (t) => {
  if (need(t, skip)) return;
  const job = async (body) => {
    const r = await server.api('POST', '/api/v1/jobs', body);
    assert.equal(r.status, 202, JSON.stringify(r.body));
    return r.body.job.id;
  };
  // test jobs that take a while: the first holds the node, the second waits
  const first = await job({ kind: 'test', name: 'holds the node', params: { steps: 400, step_ms: 100 } });
  await waitFor(async () => (await server.api('GET', `/api/v1/jobs/${first}`)).body.job.executor?.state === 'RUNNING', 60000, 'the first job running');
  const second = await job({ kind: 'test', name: 'waits <b>here</b>', params: { steps: 400, step_ms: 100 } });
  const waiting = await waitFor(async () => {
    const j = (await server.api('GET', `/api/v1/jobs/${second}`)).body.job;
    return j.executor?.state === 'PENDING' && /^(Resources|Priority)$/.test(j.executor.reason || '') ? j : null;
  }, 60000, 'the second job pending with a reason');

  await page.goto(`${server.url}/jobs/${second}`);
  const text = await waitFor(async () => {
    const s = await box();
    return s && s.includes('waiting') ? s : null;
  }, 30000, 'the Slurm box saying it waits');
  assert.match(text, new RegExp(`Slurm job ${waiting.executor.job_id}: waiting in the queue \\(1 in line\\), reason: ${waiting.executor.reason}`));

  // the first ends: the second starts, and the page follows without a reload
  assert.equal((await server.api('POST', `/api/v1/jobs/${first}/abort`)).status, 202);
  await waitState(server, first, ['aborted', 'error', 'done'], 60000);
  await waitFor(async () => /Slurm job \d+: running/.test((await box()) || ''), 60000, 'the box saying it runs');

  // and when it has ended the box goes
  assert.equal((await server.api('POST', `/api/v1/jobs/${second}/abort`)).status, 202);
  await waitState(server, second, ['aborted', 'error', 'done'], 60000);
  await waitFor(async () => (await box()) === null, 30000, 'the box to go');
  assert.deepEqual(pageErrors, []);
});
