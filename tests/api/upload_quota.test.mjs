// upload_quota.test.mjs — uploads are their owner's: they count against the owner's
// disk quota from their first byte until a job takes them in, an upload that would
// go past the quota is refused (403) before anything is stored, on both upload
// routes (POST /uploads and a dataset's multipart form), and another user's upload
// id reads as one that does not exist (an admin may use any).
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { startServer, writeColourFolders, killTrackedPids, TEST_TMP } from './helpers.mjs';
import { makeAccounts, login } from '../lib/auth.mjs';

describe('uploads and the disk quota', () => {
  let acc, server, work, archive, as = {}, annId;
  before(async () => {
    acc = makeAccounts({ root: 'admin', ann: 'learner', ben: 'learner' });
    work = mkdtempSync(join(TEST_TMP, 'deepdesk-upquota-'));
    writeColourFolders(join(work, 'colours'), { red: [200, 20, 20], blue: [20, 20, 200] }, 40, 32);
    execFileSync('tar', ['cf', join(work, 'colours.tar'), '-C', work, 'colours']); // uncompressed: its size is its bytes
    archive = readFileSync(join(work, 'colours.tar'));
    server = await startServer({ dataDir: acc.data, args: ['--accounts', 'on'] });
    for (const n of ['root', 'ann', 'ben']) as[n] = await login(server, n);
    const users = (await call('root', 'GET', '/api/v1/users')).body.users;
    annId = users.find((u) => u.name === 'ann').id;
    // ann may keep 1.5 archives on disk
    const q = await call('root', 'PATCH', `/api/v1/users/${annId}`, { quota: { disk_bytes: Math.floor(archive.length * 1.5) } });
    assert.equal(q.status, 200, JSON.stringify(q.body));
  });
  after(async () => { killTrackedPids(); await server?.stop(); rmSync(acc.dir, { recursive: true, force: true }); rmSync(work, { recursive: true, force: true }); });

  const headers = (who) => ({ cookie: as[who].cookie, 'x-csrf-token': as[who].csrf });
  const call = (who, method, path, body) => server.api(method, path, body, headers(who));
  async function upload(who, data = archive) {
    const res = await fetch(`${server.url}/api/v1/uploads?name=colours.tar`, { method: 'POST', body: data,
      headers: { ...headers(who), 'content-type': 'application/x-tar' } });
    return { status: res.status, body: await res.json() };
  }
  const stored = () => readdirSync(join(acc.data, 'uploads')).filter((f) => !f.endsWith('.owner'));

  test('an upload counts against its owner\'s quota; one that would pass it is refused before it is stored', async () => {
    const first = await upload('ann');
    assert.equal(first.status, 201, JSON.stringify(first.body));
    const usage = (await call('root', 'GET', '/api/v1/users')).body.users.find((u) => u.id === annId).usage;
    assert.ok(usage.disk_bytes >= archive.length, `the upload counts: ${JSON.stringify(usage)}`);
    const before = stored().length;
    const second = await upload('ann');
    assert.equal(second.status, 403, JSON.stringify(second.body));
    assert.match(second.body.error.message, /^quota: your jobs and uploads use \d+ bytes .*limit is \d+/);
    assert.equal(stored().length, before, 'nothing was stored');
    // the dataset form, the other way in, is held to the same rule
    const form = new FormData();
    form.append('name', 'via form');
    form.append('archive', new Blob([archive]), 'colours.tar');
    const res = await fetch(`${server.url}/api/v1/datasets`, { method: 'POST', body: form, headers: headers('ann') });
    const b = await res.json();
    assert.equal(res.status, 403, JSON.stringify(b));
    assert.match(b.error.message, /quota/);
    assert.equal(stored().length, before);
    // ben, without that quota, uploads as before
    assert.equal((await upload('ben')).status, 201);
  });

  test('another user\'s upload id is no upload at all; the owner and an admin may use it', async () => {
    const mine = await upload('ben');
    assert.equal(mine.status, 201);
    const id = mine.body.upload.id;
    const src = { name: 'x', source: { type: 'upload', upload: id }, options: { width: 8, height: 8 } };
    const theirs = await call('ann', 'POST', '/api/v1/datasets', src);
    const none = await call('ann', 'POST', '/api/v1/datasets', { ...src, source: { type: 'upload', upload: 'f'.repeat(24) } });
    assert.equal(theirs.status, 400);
    assert.equal(theirs.body.error.message, none.body.error.message, 'worded as none');
    for (const kind of ['evaluation']) {
      const e = await call('ann', 'POST', '/api/v1/jobs', { kind, params: { model: 1, source: { upload: id } } });
      assert.ok(e.status >= 400, `${kind}: ${JSON.stringify(e.body)}`);
      assert.doesNotMatch(JSON.stringify(e.body), new RegExp(`${id}.*(exists|belongs)`));
    }
    const imp = await call('ann', 'POST', '/api/v1/models/import', { upload: id });
    assert.equal(imp.status, 400);
    assert.match(imp.body.error.message, /no upload has this id/);
    assert.equal((await call('ben', 'POST', '/api/v1/datasets', src)).status, 202, 'the owner');
    const other = await upload('ben');
    assert.equal((await call('root', 'POST', '/api/v1/datasets', { ...src, source: { type: 'upload', upload: other.body.upload.id } })).status, 202, 'an admin');
  });
});
