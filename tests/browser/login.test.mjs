// login.test.mjs — the login page in a real Chromium against a server with
// accounts on: a 401 from /api/v1/me shows it, a wrong password shows the server's
// message, logging in shows the job list and the user's name in the header, a
// change (rename a job) carries the CSRF token by itself, a learner does not see
// another learner's job, and logging out comes back to the login page.
//
//   make all && node --test tests/browser/login.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openPage } from '../lib/browser.mjs';
import { startServer, BIN } from '../lib/server.mjs';

const PASSWORD = 'browser-pass-1';
let server, browser, page, dir;
let pageErrors = [];

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'deepdesk-login-'));
  writeFileSync(join(dir, 'pw'), `${PASSWORD}\n`);
  for (const [name, role] of [['root', 'admin'], ['ann', 'learner'], ['ben', 'learner']]) {
    execFileSync(BIN, ['user', 'add', name, '--role', role, '--password-file', join(dir, 'pw'), '--data', join(dir, 'data')]);
  }
  server = await startServer({ dataDir: join(dir, 'data'), args: ['--accounts', 'on'] });
  ({ browser, page, errors: pageErrors } = await openPage());
});

after(async () => {
  if (browser) await browser.close();
  if (server) await server.stop();
  if (dir) rmSync(dir, { recursive: true, force: true, maxRetries: 20, retryDelay: 50 });
});

/** Log in over the API as name: {cookie, csrf}. */
async function apiLogin(name) {
  const r = await server.api('POST', '/api/v1/login', { name, password: PASSWORD });
  const token = /dd_session=([^;]*)/.exec(r.headers.get('set-cookie'))[1];
  return { cookie: `dd_session=${token}`, csrf: r.body.csrf_token };
}

test('login page, wrong password, login, CSRF on changes, only one\'s own jobs, logout', async () => {
  // ben has a job whose name is markup: it must neither run nor show to ann
  const ben = await apiLogin('ben');
  const bj = await server.api('POST', '/api/v1/jobs', { kind: 'test', name: '<img src=x onerror="window.pwned=1">ben', params: { steps: 1, step_ms: 1 } },
    { cookie: ben.cookie, 'x-csrf-token': ben.csrf });
  assert.equal(bj.status, 202);
  const ann = await apiLogin('ann');
  const aj = await server.api('POST', '/api/v1/jobs', { kind: 'test', name: 'ann-job', params: { steps: 1, step_ms: 1 } },
    { cookie: ann.cookie, 'x-csrf-token': ann.csrf });
  assert.equal(aj.status, 202);

  await page.goto(`${server.url}/jobs`);
  await page.waitForSelector('#login-name');
  assert.equal(await page.isVisible('.topnav'), false, 'no navigation before login');
  await page.fill('#login-name', 'ann');
  await page.fill('#login-password', 'wrong-password');
  await page.click('button[type=submit]');
  await page.waitForSelector('#login-error:not([hidden])');
  assert.equal((await page.textContent('#login-error')).trim(), 'wrong name or password');

  await page.fill('#login-password', PASSWORD);
  await page.click('button[type=submit]');
  await page.waitForSelector('#user-box');
  assert.equal((await page.textContent('.user-name')).trim(), 'ann');
  await page.waitForFunction(() => document.body.textContent.includes('ann-job'));
  assert.ok(!(await page.textContent('main')).includes('ben'), 'ben\'s job is not listed');
  assert.equal(await page.evaluate(() => window.pwned), undefined);

  // a change from the page: the wrapper adds X-CSRF-Token (the server refuses it otherwise)
  const status = await page.evaluate(async (id) => {
    const r = await fetch(`/api/v1/jobs/${id}`, { method: 'PATCH', headers: { 'content-type': 'application/json' }, body: '{"notes":"from the page"}' });
    return r.status;
  }, aj.body.job.id);
  assert.equal(status, 200);
  const j = await server.api('GET', `/api/v1/jobs/${aj.body.job.id}`, undefined, { cookie: ann.cookie });
  assert.equal(j.body.job.notes, 'from the page');

  await page.click('#logout');
  await page.waitForSelector('#login-name');
  assert.equal(await page.$('#user-box'), null);
  assert.deepEqual(pageErrors, []);
});
