// digits_auth.test.mjs — DIGITS' own routes on a server with accounts: they need a
// login like the rest of the API, and a learner sees through them only what the
// /api/v1 routes show: index.json lists their own jobs, another learner's job is
// "no such job" whether asked by its id in the path (/models/{id}.json) or in a
// form field (classify_one.json's job_id).
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { startServer } from './helpers.mjs';
import { makeAccounts, login } from '../lib/auth.mjs';

describe('DIGITS routes with accounts on', () => {
  let server, dir;
  const as = {};

  before(async () => {
    const acc = makeAccounts({ root: 'admin', ann: 'learner', ben: 'learner' });
    dir = acc.dir;
    server = await startServer({ dataDir: acc.data, args: ['--accounts', 'on'] });
    for (const name of ['root', 'ann', 'ben']) {
      const s = await login(server, name);
      assert.equal(s.status, 200);
      as[name] = s;
    }
  });

  after(async () => {
    if (server) { await server.stop(); server.cleanup(); }
    rmSync(dir, { recursive: true, force: true });
  });

  const call = (who, method, path, body) => server.api(method, path, body, who ? { cookie: as[who].cookie, 'x-csrf-token': as[who].csrf } : {});

  async function classifyOne(who, jobId) {
    const form = new FormData();
    form.append('job_id', String(jobId));
    form.append('image_file', new Blob([Buffer.from('P5\n1 1\n255\n\x80', 'latin1')]), 'x.pgm');
    const headers = who ? { cookie: as[who].cookie, 'x-csrf-token': as[who].csrf } : {};
    const res = await fetch(`${server.url}/models/images/classification/classify_one.json`, { method: 'POST', body: form, headers });
    return { status: res.status, body: await res.json() };
  }

  test('anonymous gets 401 on every DIGITS route', async () => {
    for (const path of ['/index.json', '/models/1.json', '/datasets/1.json']) {
      assert.equal((await call(null, 'GET', path)).status, 401, path);
    }
    assert.equal((await classifyOne(null, 1)).status, 401);
  });

  test('a learner sees only their own jobs; another learner\'s is no job at all; an admin sees both', async () => {
    const mk = async (who, name) => {
      const r = await call(who, 'POST', '/api/v1/jobs', { kind: 'test', name, params: { steps: 1, step_ms: 1 } });
      assert.equal(r.status, 202, JSON.stringify(r.body));
      return r.body.job.id;
    };
    const annJob = await mk('ann', 'ann-private');
    const benJob = await mk('ben', 'ben-own');

    // index.json lists jobs by kind; test jobs are neither datasets nor models, so
    // the lists are checked through the job a learner cannot reach by id
    const annModel = await call('ben', 'GET', `/models/${annJob}.json`);
    assert.equal(annModel.status, 404, JSON.stringify(annModel.body));
    assert.ok(!JSON.stringify(annModel.body).includes('ann-private'));
    const annDataset = await call('ben', 'GET', `/datasets/${annJob}.json`);
    assert.equal(annDataset.status, 404);

    // the form's job_id: another learner's job reads exactly as one that does not exist
    const theirs = await classifyOne('ben', annJob);
    const none = await classifyOne('ben', 999999);
    assert.equal(theirs.status, 404);
    assert.equal(none.status, 404);
    assert.equal(theirs.body.error.message.replace(String(annJob), 'N'), none.body.error.message.replace('999999', 'N'));
    // ben's own job is found (and is not a model)
    const own = await classifyOne('ben', benJob);
    assert.equal(own.status, 404);
    assert.match(own.body.error.message, /not a model/);

    // the admin reaches ann's job through the same routes
    const adminView = await call('root', 'GET', `/models/${annJob}.json`);
    assert.equal(adminView.status, 404, 'a test job is not a model, but it is found');
    assert.match(JSON.stringify(adminView.body), /not a model/);

    // a server folder is for --data-root only, whichever route asks: this server
    // has none, so a learner's folder dataset is refused by POST /api/v1/jobs too
    const folder = await call('ann', 'POST', '/api/v1/jobs', { kind: 'dataset', name: 'ann-folder',
      params: { source: { type: 'folder', train: join(dir, 'no-such-folder') } } });
    assert.equal(folder.status, 403, JSON.stringify(folder.body));
    assert.match(folder.body.error.message, /^source\.train: /);
    // index.json: ann's dataset job (from an upload that is no archive, so it ends in
    // error, but it is listed) is in ann's and the admin's lists, not in ben's
    const up = await call('ann', 'POST', '/api/v1/uploads?name=junk.zip', 'not a zip');
    assert.equal(up.status, 201, JSON.stringify(up.body));
    const ds = await call('ann', 'POST', '/api/v1/jobs', { kind: 'dataset', name: 'ann-dataset',
      params: { source: { type: 'upload', upload: up.body.upload.id } } });
    assert.equal(ds.status, 202, JSON.stringify(ds.body));
    const names = async (who) => {
      const idx = await call(who, 'GET', '/index.json');
      assert.equal(idx.status, 200, who);
      assert.ok(Array.isArray(idx.body.models));
      return idx.body.datasets.map((d) => d.name);
    };
    assert.deepEqual(await names('ann'), ['ann-dataset']);
    assert.deepEqual(await names('ben'), []);
    assert.deepEqual(await names('root'), ['ann-dataset']);
    assert.equal((await call('ben', 'GET', `/datasets/${ds.body.job.id}.json`)).status, 404);
    assert.equal((await call('ann', 'GET', `/datasets/${ds.body.job.id}.json`)).status, 200);
  });
});
