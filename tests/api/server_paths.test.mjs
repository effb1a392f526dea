// server_paths.test.mjs — with accounts on, only an admin's answers name the
// server's own folders: /api/v1/info's data.path, DIGITS' /index.json jobs_dir and
// the "directory" of /datasets/{id}.json and /models/{id}.json.  A learner gets
// the same answers without them (a job folder tells where every other learner's
// data lives, and the server's layout helps an attacker).
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { startServer, waitFor, writeColourFolders, TINY_NET, killTrackedPids, TEST_TMP } from './helpers.mjs';
import { PASSWORD, makeAccounts, userClient } from '../lib/auth.mjs';

/** Wait until job id, seen through client as, has finished; assert it is done. */
async function done(as, id) {
  let job;
  await waitFor(async () => { job = (await as('GET', `/api/v1/jobs/${id}`)).body.job; return ['done', 'error'].includes(job?.state); },
    120000, `job ${id} to finish`);
  assert.equal(job.state, 'done', job.error);
}

describe('server paths with accounts on', () => {
  let acc, server, work, ann, root, dsId, modelId;
  before(async () => {
    acc = makeAccounts({ root: 'admin', ann: 'learner' });
    work = mkdtempSync(join(TEST_TMP, 'deepdesk-paths-'));
    writeColourFolders(join(work, 'colours'), { red: [220, 20, 20], blue: [20, 20, 220] }, 8);
    execFileSync('tar', ['czf', join(work, 'colours.tar.gz'), '-C', work, 'colours']);
    server = await startServer({ dataDir: acc.data, args: ['--accounts', 'on'] });
    ann = await userClient(server, 'ann');
    root = await userClient(server, 'root');
    // ann's own dataset (from an upload) and model
    const s = await server.api('POST', '/api/v1/login', { name: 'ann', password: PASSWORD });
    const cookie = s.headers.get('set-cookie').split(';')[0];
    const res = await fetch(`${server.url}/api/v1/uploads?name=colours.tar.gz`, {
      method: 'POST', body: readFileSync(join(work, 'colours.tar.gz')),
      headers: { cookie, 'x-csrf-token': s.body.csrf_token, 'content-type': 'application/gzip' } });
    const upload = await res.json();
    assert.equal(res.status, 201, JSON.stringify(upload));
    const annS = (method, path, body) => server.api(method, path, body, { cookie, 'x-csrf-token': s.body.csrf_token });
    const d = await annS('POST', '/api/v1/datasets', { name: 'colours', source: { type: 'upload', upload: upload.upload.id },
      options: { width: 8, height: 8, channels: 3, val_pct: 25, seed: 1 } });
    assert.equal(d.status, 202, JSON.stringify(d.body));
    dsId = d.body.job.id;
    await done(annS, dsId);
    const m = await annS('POST', '/api/v1/models', { name: 'tiny', dataset: dsId, network: { prototxt: TINY_NET }, epochs: 1 });
    assert.equal(m.status, 202, JSON.stringify(m.body));
    modelId = m.body.job.id;
    await done(annS, modelId);
  });
  after(async () => { await server?.stop(); killTrackedPids(); rmSync(acc.dir, { recursive: true, force: true }); rmSync(work, { recursive: true, force: true }); });

  const mentionsData = (body) => JSON.stringify(body).includes(acc.data);

  test('a learner\'s answers name no server folder; an admin\'s do', async () => {
    const li = await ann('GET', '/api/v1/info');
    assert.equal(li.status, 200);
    assert.equal(li.body.data.path, undefined);
    assert.equal(typeof (await root('GET', '/api/v1/info')).body.data.path, 'string');

    const lIndex = await ann('GET', '/index.json');
    assert.equal(lIndex.status, 200);
    assert.equal(lIndex.body.jobs_dir, undefined);
    assert.deepEqual(lIndex.body.datasets.map((x) => x.id), [dsId]);
    assert.equal((await root('GET', '/index.json')).body.jobs_dir, join(acc.data, 'jobs'));

    for (const path of [`/datasets/${dsId}.json`, `/models/${modelId}.json`]) {
      const l = await ann('GET', path);
      assert.equal(l.status, 200, path);
      assert.equal(l.body.directory, undefined, path);
      assert.ok(!mentionsData(l.body), `${path} names the data folder: ${JSON.stringify(l.body)}`);
      assert.equal((await root('GET', path)).body.directory, join(acc.data, 'jobs', String(path.includes('datasets') ? dsId : modelId)));
    }
  });
});
