// password_tokens.test.mjs — what a password change does to API tokens.  An admin's
// reset (and `deepdesk user passwd`) revokes every token of the user's, since
// whoever knew the old password may have made one; one's own change ends the other
// sessions and revokes the tokens only when asked ("revoke_tokens": true).
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { BIN, startServer, killTrackedPids } from './helpers.mjs';
import { PASSWORD, makeAccounts, login, asUser, userClient } from '../lib/auth.mjs';

describe('password changes and API tokens', () => {
  let acc, server, root;
  before(async () => {
    acc = makeAccounts({ root: 'admin', ann: 'learner', ben: 'learner', cat: 'learner' });
    server = await startServer({ dataDir: acc.data, args: ['--accounts', 'on'] });
    root = await userClient(server, 'root');
  });
  after(async () => { await server?.stop(); killTrackedPids(); rmSync(acc.dir, { recursive: true, force: true }); });

  /** A new API token of the user behind client `as`: its secret. */
  async function token(as, name) {
    const r = await as('POST', '/api/v1/me/tokens', { name });
    assert.equal(r.status, 201, JSON.stringify(r.body));
    return r.body.token.secret;
  }
  const withToken = (secret) => server.api('GET', '/api/v1/me', undefined, { authorization: `Bearer ${secret}` });

  test('an admin\'s reset revokes every token of the user\'s and ends every session', async () => {
    const annS = await login(server, 'ann');
    const ann = asUser(server, annS);
    const [t1, t2] = [await token(ann, 'laptop'), await token(ann, 'ci')];
    assert.equal((await withToken(t1)).status, 200);
    const id = (await root('GET', '/api/v1/users')).body.users.find((u) => u.name === 'ann').id;
    const r = await root('PATCH', `/api/v1/users/${id}`, { password: 'ann-new-password' });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    for (const t of [t1, t2]) assert.equal((await withToken(t)).status, 401, 'a token made before the reset');
    assert.equal((await ann('GET', '/api/v1/me')).status, 401, 'her session');
    const again = await userClient(server, 'ann', 'ann-new-password');
    const list = (await again('GET', '/api/v1/me/tokens')).body.tokens;
    assert.deepEqual(list.map((t) => [t.name, t.revoked]).sort(), [['ci', true], ['laptop', true]]);
    // a token made after the reset works
    assert.equal((await withToken(await token(again, 'new'))).status, 200);
  });

  test('one\'s own change keeps the tokens unless revoke_tokens is true, and ends the other sessions either way', async () => {
    const benS = await login(server, 'ben');
    const other = await login(server, 'ben');
    const ben = asUser(server, benS);
    const t = await token(ben, 'script');
    const bad = await ben('POST', '/api/v1/me/password', { current: PASSWORD, new: 'ben-password-2', revoke_tokens: 'yes' });
    assert.equal(bad.status, 400);
    assert.match(bad.body.error.message, /^revoke_tokens: must be true or false/);
    let r = await ben('POST', '/api/v1/me/password', { current: PASSWORD, new: 'ben-password-2' });
    assert.equal(r.status, 204, JSON.stringify(r.body));
    assert.equal((await withToken(t)).status, 200, 'kept when not asked');
    assert.equal((await server.api('GET', '/api/v1/me', undefined, { cookie: other.cookie })).status, 401, 'the other session');
    r = await ben('POST', '/api/v1/me/password', { current: 'ben-password-2', new: 'ben-password-3', revoke_tokens: true });
    assert.equal(r.status, 204, JSON.stringify(r.body));
    assert.equal((await withToken(t)).status, 401, 'revoked when asked');
    assert.equal((await ben('GET', '/api/v1/me')).status, 200, 'this session stays');
  });

  test('`deepdesk user passwd` revokes the tokens too', async () => {
    const cat = await userClient(server, 'cat');
    const t = await token(cat, 'script');
    await server.stop();
    const pw = join(acc.dir, 'pw-cat');
    writeFileSync(pw, 'cat-new-password\n');
    const out = execFileSync(BIN, ['user', 'passwd', 'cat', '--password-file', pw, '--data', acc.data], { encoding: 'utf8' });
    assert.match(out, /API tokens are revoked/);
    server = await startServer({ dataDir: acc.data, keepData: true, args: ['--accounts', 'on'] });
    assert.equal((await withToken(t)).status, 401);
  });
});
