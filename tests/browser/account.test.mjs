// account.test.mjs — /account and /users in a real Chromium against a server with
// accounts on (accounts made by the CLI): a learner changes their password (the
// server's errors under the fields, other sessions end, the new password logs in and
// the old does not); makes an API token whose secret is shown once, used as a Bearer
// token, then revoked (401 after); an admin adds a user on /users (bad names and
// passwords refused under their fields), changes the role and quota, is refused
// demoting or removing themselves, the new user logs in, and is removed; a learner
// gets the "Admins only" page; markup in names stays text; with accounts off /account
// says how to turn them on.
//
//   make all && node --test tests/browser/account.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { openPage } from '../lib/browser.mjs';
import { startServer, waitFor } from '../lib/server.mjs';
import { makeAccounts, login, asUser, PASSWORD } from '../lib/auth.mjs';

const XSS = '<img src=x onerror="window.pwned=1">';
const SHORT_XSS = '<img src=x onerror=pwned=1>'; // within a user name's 32 characters
let server, acc, browser;
const contexts = [];

before(async () => {
  acc = makeAccounts({ root: 'admin', ann: 'learner', ben: 'learner', cy: 'learner', dee: 'learner' });
  server = await startServer({ dataDir: acc.data, args: ['--accounts', 'on'] });
  const o = await openPage();
  browser = o.browser;
  contexts.push(o.page.context());
});

after(async () => {
  if (browser) await browser.close();
  if (server) await server.stop();
  if (acc) rmSync(acc.dir, { recursive: true, force: true, maxRetries: 20, retryDelay: 50 });
});

/** A page of its own (cookies apart from the others'), recording script errors. */
async function freshPage(permissions = []) {
  const ctx = await browser.newContext({ viewport: { width: 1360, height: 900 } });
  if (permissions.length) await ctx.grantPermissions(permissions, { origin: server.url });
  contexts.push(ctx);
  const page = await ctx.newPage();
  page.setDefaultTimeout(10000);
  const errors = [];
  page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error' && !/Failed to load resource/.test(m.text())) errors.push(`console: ${m.text()}`);
  });
  return { page, errors };
}

async function logIn(page, name, password = PASSWORD) {
  await page.waitForSelector('#login-name');
  await page.fill('#login-name', name);
  await page.fill('#login-password', password);
  await page.click('button[type=submit]');
  await page.waitForSelector('#user-box');
}

const visibleText = async (page, sel) => {
  await page.waitForSelector(`${sel}:not([hidden])`);
  return (await page.textContent(sel)).trim();
};

/** Wait until sel shows text matching re (an error line may show an older message first). */
async function shows(page, sel, re) {
  await page.waitForFunction(([s, src]) => {
    const el = document.querySelector(s);
    return el && !el.hidden && new RegExp(src).test(el.textContent);
  }, [sel, re.source]);
  return (await page.textContent(sel)).trim();
}

test('a learner changes their password: errors under the fields, other sessions end, only the new one logs in', async () => {
  const { page, errors } = await freshPage();
  const other = await login(server, 'ann'); // a second session, which the change ends
  assert.equal(other.status, 200);
  await page.goto(`${server.url}/account`);
  await logIn(page, 'ann');
  assert.equal(await visibleText(page, '#account-name'), 'ann');
  assert.equal(await visibleText(page, '#account-role'), 'learner');
  assert.equal(await page.getAttribute('#user-box .user-name', 'href'), '/account', 'the name in the header links here');

  // the server's own messages, each under the field it names
  await page.fill('#pw-current', 'not-my-password');
  await page.fill('#pw-new', 'ann-new-pass-1');
  await page.fill('#pw-repeat', 'ann-new-pass-1');
  await page.click('[data-action=change-password]');
  assert.equal(await visibleText(page, '#pw-current-error'), 'current: that is not your current password');
  assert.equal(await page.getAttribute('#pw-current', 'aria-invalid'), 'true');
  await page.fill('#pw-current', PASSWORD);
  await page.fill('#pw-new', 'short');
  await page.fill('#pw-repeat', 'short');
  await page.click('[data-action=change-password]');
  assert.match(await visibleText(page, '#pw-new-error'), /^new: at least 8 characters/);
  assert.equal(await page.isHidden('#pw-current-error'), true, 'the old error is cleared');
  // the repeat must match before anything is sent
  await page.fill('#pw-new', 'ann-new-pass-1');
  await page.fill('#pw-repeat', 'ann-new-pass-2');
  await page.click('[data-action=change-password]');
  assert.match(await visibleText(page, '#pw-repeat-error'), /differ/);
  assert.equal((await login(server, 'ann')).status, 200, 'nothing was changed yet');

  await page.fill('#pw-repeat', 'ann-new-pass-1');
  await page.click('[data-action=change-password]');
  assert.match(await visibleText(page, '#pw-ok'), /Password changed/);
  assert.equal(await page.inputValue('#pw-current'), '', 'the form is cleared');

  assert.equal((await server.api('GET', '/api/v1/me', undefined, { cookie: other.cookie })).status, 401, 'the other session ended');
  assert.equal(await page.evaluate(async () => (await fetch('/api/v1/me')).status), 200, 'this session stays');
  assert.equal((await login(server, 'ann', PASSWORD)).status, 401, 'the old password no longer logs in');
  assert.equal((await login(server, 'ann', 'ann-new-pass-1')).status, 200, 'the new one does');
  assert.deepEqual(errors, []);
});

test('an API token: made with a hostile name, its secret shown once, used as Bearer, then revoked', async () => {
  const { page, errors } = await freshPage(['clipboard-read', 'clipboard-write']);
  await page.goto(`${server.url}/account`);
  await logIn(page, 'ben');
  await page.waitForSelector('.tokens-empty:not([hidden])');

  await page.click('[data-action=create-token]');
  assert.equal(await visibleText(page, '#token-name-error'), 'name: give the token a name');

  await page.fill('#token-name', `${XSS}ci`);
  await page.click('[data-action=create-token]');
  const secret = await visibleText(page, '#token-secret');
  assert.match(secret, /^ddt_/);
  assert.match(await page.textContent('.token-once'), /shown this once/);
  await page.click('[data-action=copy-token]');
  await page.waitForFunction(() => /Copied|Selected/.test(document.querySelector('[data-action=copy-token]').textContent));
  if ((await page.textContent('[data-action=copy-token]')).includes('Copied')) {
    assert.equal(await page.evaluate(() => navigator.clipboard.readText()), secret);
  }

  // the name is text, not markup
  await page.waitForSelector('.tokens-table tr[data-token] .token-name');
  assert.equal(await page.textContent('.tokens-table tr[data-token] .token-name'), `${XSS}ci`);
  assert.equal(await page.$('.tokens-table img'), null);
  assert.equal(await page.evaluate(() => window.pwned), undefined);

  const bearer = { authorization: `Bearer ${secret}` };
  const me = await server.api('GET', '/api/v1/me', undefined, bearer);
  assert.equal(me.status, 200);
  assert.equal(me.body.user.name, 'ben');

  // shown once: a reload lists the token (now used) without its secret
  await page.reload();
  await page.waitForSelector('.tokens-table tr[data-token]');
  assert.equal(await page.$('#token-secret'), null);
  assert.ok(!(await page.textContent('main')).includes(secret), 'the secret is nowhere on the page');
  assert.notEqual((await page.textContent('.tokens-table tr[data-token] td:nth-child(3)')).trim(), 'never');

  // cancelling the confirm keeps it
  await page.click('[data-action=revoke-token]');
  await page.click('dialog button[value=cancel]');
  assert.equal((await server.api('GET', '/api/v1/me', undefined, bearer)).status, 200);
  await page.click('[data-action=revoke-token]');
  await page.click('dialog button[value=ok]');
  await page.waitForSelector('.tokens-table tr.token-revoked');
  assert.equal(await page.$('[data-action=revoke-token]'), null);
  assert.equal((await server.api('GET', '/api/v1/me', undefined, bearer)).status, 401, 'a revoked token is refused');
  assert.deepEqual(errors, []);
});

test('a password change that also revokes the API tokens: the box, the message, the list redrawn, the token refused', async () => {
  const { page, errors } = await freshPage();
  const dee = asUser(server, await login(server, 'dee'));
  const made = await dee('POST', '/api/v1/me/tokens', { name: 'old laptop' });
  assert.equal(made.status, 201);
  const bearer = { authorization: `Bearer ${made.body.token.secret}` };
  await page.goto(`${server.url}/account`);
  await logIn(page, 'dee');
  await page.waitForSelector('.tokens-table tr[data-token]:not(.token-revoked)');
  await page.fill('#pw-current', PASSWORD);
  await page.fill('#pw-new', 'dee-new-pass-1');
  await page.fill('#pw-repeat', 'dee-new-pass-1');
  await page.check('#pw-revoke-tokens');
  await page.click('[data-action=change-password]');
  assert.match(await visibleText(page, '#pw-ok'), /API tokens are revoked/);
  await page.waitForSelector('.tokens-table tr.token-revoked');
  assert.equal(await page.isChecked('#pw-revoke-tokens'), false, 'the form is reset');
  assert.equal((await server.api('GET', '/api/v1/me', undefined, bearer)).status, 401);
  assert.deepEqual(errors, []);
});

test('an admin adds a user on /users, changes role and quota, cannot demote or remove themselves; the user logs in and is removed', async () => {
  const { page, errors } = await freshPage();
  const root = asUser(server, await login(server, 'root'));
  await page.goto(`${server.url}/`);
  await logIn(page, 'root');
  await page.click('#nav-users');
  await page.waitForSelector('tbody[data-user=root]');
  assert.equal(new URL(page.url()).pathname, '/users');
  assert.match(await page.textContent('tbody[data-user=root] .user-name-cell'), /you/);
  assert.notEqual((await page.textContent('tbody[data-user=root] td:nth-child(8)')).trim(), '—', 'root\'s last login is known');

  // refused input, each under its field, as text
  await page.fill('#user-new-name', SHORT_XSS);
  await page.fill('#user-new-password', 'newbie-pass-1');
  await page.click('[data-action=add-user]');
  assert.match(await visibleText(page, '#user-new-name-error'), /^name: must start with a letter or a digit/);
  assert.equal(await page.$('.users-page img'), null);
  assert.equal(await page.evaluate(() => window.pwned), undefined);
  await page.fill('#user-new-name', 'ann');
  await page.click('[data-action=add-user]');
  assert.equal(await shows(page, '#user-new-name-error', /already exists/), 'a user called "ann" already exists');
  await page.fill('#user-new-name', 'newbie');
  await page.fill('#user-new-password', 'short');
  await page.click('[data-action=add-user]');
  assert.match(await visibleText(page, '#user-new-password-error'), /^password: at least 8 characters/);
  assert.equal(await page.isHidden('#user-new-name-error'), true);

  await page.click('[data-action=generate-password]');
  const newbiePw = await page.inputValue('#user-new-password');
  assert.match(newbiePw, /^[A-Za-z0-9]{16}$/);
  await page.click('[data-action=add-user]');
  await page.waitForSelector('tbody[data-user=newbie]');
  assert.match(await page.textContent('.user-created'), /newbie made as learner/);
  assert.equal(await page.textContent('.user-created-password'), newbiePw, 'a generated password is shown once');
  assert.equal(await page.inputValue('#user-new-password'), '', 'the form is cleared');
  const listed = async () => (await root('GET', '/api/v1/users')).body.users.find((u) => u.name === 'newbie');
  assert.equal((await listed()).role, 'learner');

  // the role
  await page.selectOption('tbody[data-user=newbie] .role-select', 'instructor');
  await waitFor(async () => (await listed()).role === 'instructor', 60000, 'newbie an instructor');
  await page.waitForSelector('tbody[data-user=newbie] .role-select:not([disabled])');
  assert.equal(await page.inputValue('tbody[data-user=newbie] .role-select'), 'instructor');
  // making an admin asks first; cancelled, nothing changes
  await page.selectOption('tbody[data-user=newbie] .role-select', 'admin');
  await page.click('dialog button[value=cancel]');
  // (the dialog's close event, and so the select's reset, comes a task after the click)
  await page.waitForFunction(() => document.querySelector('tbody[data-user=newbie] .role-select').value === 'instructor');
  assert.equal((await listed()).role, 'instructor');

  // the quota: a bad value is named before anything is sent; then jobs 3, disk 2 GiB
  await page.click('tbody[data-user=newbie] [data-action=edit-quota]');
  const jobsIn = `#quota-${(await listed()).id}-jobs`;
  const diskIn = `#quota-${(await listed()).id}-disk_bytes`;
  await page.fill(jobsIn, '-1');
  await page.click('tbody[data-user=newbie] [data-action=save-quota]');
  assert.match(await visibleText(page, `${jobsIn}-error`), /^quota\.jobs: a whole number/);
  await page.fill(jobsIn, '3');
  await page.fill(diskIn, '2');
  await page.click('tbody[data-user=newbie] [data-action=save-quota]');
  await waitFor(async () => (await listed()).quota.jobs === 3, 60000, 'newbie\'s quota');
  assert.equal((await listed()).quota.disk_bytes, 2 * 2 ** 30);
  await page.waitForSelector('tbody[data-user=newbie] .user-panel-row[hidden]', { state: 'attached' });
  assert.match(await page.textContent('tbody[data-user=newbie] .user-row td:nth-child(3)'), /\/ 3$/);

  // the server refuses an admin demoting or removing themselves: its message in the row
  await page.selectOption('tbody[data-user=root] .role-select', 'learner');
  assert.match(await visibleText(page, 'tbody[data-user=root] .row-error-msg'), /you cannot demote or disable your own account/);
  assert.equal(await page.inputValue('tbody[data-user=root] .role-select'), 'admin');
  await page.click('tbody[data-user=root] [data-action=remove-user]');
  await page.click('dialog button[value=ok]');
  await page.waitForFunction(() => /you cannot remove your own account/.test(document.querySelector('tbody[data-user=root] .row-error-msg').textContent));
  assert.equal((await root('GET', '/api/v1/me')).status, 200);

  // newbie logs in, an instructor now
  const nb = await freshPage();
  await nb.page.goto(`${server.url}/`);
  await logIn(nb.page, 'newbie', newbiePw);
  assert.equal((await nb.page.textContent('.user-name')).trim(), 'newbie');
  await nb.page.waitForSelector('#nav-classes');
  assert.equal(await nb.page.$('#nav-users'), null, 'no Users link for a non-admin');
  assert.deepEqual(nb.errors, []);

  // disabled: no login until enabled again
  await page.click('tbody[data-user=newbie] [data-action=disable]');
  await page.click('dialog button[value=ok]');
  await page.waitForSelector('tbody[data-user=newbie] .user-disabled-tag');
  assert.equal((await listed()).disabled, true);
  assert.equal((await login(server, 'newbie', newbiePw)).status, 401);
  await page.click('tbody[data-user=newbie] [data-action=enable]');
  await page.waitForSelector('tbody[data-user=newbie] [data-action=disable]');
  assert.equal((await login(server, 'newbie', newbiePw)).status, 200);

  // a password reset: a generated one, shown once; the old one stops working, newbie's page is signed out
  await page.click('tbody[data-user=newbie] [data-action=reset-password]');
  const resetIn = page.locator('tbody[data-user=newbie] .password-reset input');
  await resetIn.fill('short');
  await page.click('tbody[data-user=newbie] [data-action=save-password]');
  await page.waitForFunction(() => /^password: /.test(document.querySelector('tbody[data-user=newbie] .password-reset .field-error:not([hidden])')?.textContent || ''));
  await resetIn.fill('reset-by-the-admin-1');
  await page.click('tbody[data-user=newbie] [data-action=save-password]');
  await page.waitForFunction(() => /Password set/.test(document.querySelector('tbody[data-user=newbie] .password-reset .alert')?.textContent || ''));
  assert.equal((await login(server, 'newbie', newbiePw)).status, 401, 'the old password is gone');
  assert.equal((await login(server, 'newbie', 'reset-by-the-admin-1')).status, 200);
  assert.equal((await nb.page.evaluate(async () => (await fetch('/api/v1/me')).status)), 401, 'newbie\'s session ended');

  // removed, after a confirm
  await page.click('tbody[data-user=newbie] [data-action=remove-user]');
  await page.click('dialog button[value=ok]');
  await page.waitForSelector('tbody[data-user=newbie]', { state: 'detached' });
  assert.equal(await listed(), undefined);
  assert.equal((await login(server, 'newbie', newbiePw)).status, 401);
  assert.deepEqual(errors, []);
});

test('a learner opening /users gets the admins-only page (and the server says 403)', async () => {
  const { page, errors } = await freshPage();
  await page.goto(`${server.url}/users`);
  await logIn(page, 'cy');
  assert.equal(await visibleText(page, '.admins-only .empty-title'), 'Admins only');
  assert.equal(await page.$('.users-table tbody'), null);
  assert.equal(await page.$('#nav-users'), null);
  const cy = asUser(server, await login(server, 'cy'));
  assert.equal((await cy('GET', '/api/v1/users')).status, 403);
  assert.deepEqual(errors, []);
});

test('without accounts, /account says they are off and how to turn them on', async () => {
  const plain = await startServer();
  try {
    const { page, errors } = await freshPage();
    await page.goto(`${plain.url}/account`);
    const note = await visibleText(page, '.accounts-off');
    assert.match(note, /Accounts are off on this server/);
    assert.match(note, /--accounts on/);
    assert.equal(await page.$('#pw-current'), null);
    assert.equal(await page.$('#user-box'), null);
    // /users still works there (accounts made now are used once they are on) and says so
    await page.goto(`${plain.url}/users`);
    assert.match(await visibleText(page, '.accounts-off'), /accounts made here are used once they are on/);
    await page.waitForSelector('.users-empty');
    assert.deepEqual(errors, []);
  } finally {
    await plain.stop();
    plain.cleanup();
  }
});
