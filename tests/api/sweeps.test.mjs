// sweeps.test.mjs — a sweep of learning rates and batch sizes created by one POST
// /api/v1/models (every combination checked before any job exists), and deleting
// snapshots: one by name, all but the last N, all but the best; the latest is
// kept, refused while the job is queued or running, and the model still resumes.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, existsSync, statSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  startServer, waitState, assertError, assertSchema, loadOpenApi, allEvents, jobCount,
  killTrackedPids, writeColourFolders, TINY_NET,
  folderDataset, endServer,
} from './helpers.mjs';

const COLOURS = { red: [200, 30, 30], green: [30, 200, 40], blue: [20, 40, 210] };

describe('sweeps and snapshot pruning', () => {
  let server, work, doc, dsId;
  const model = (extra = {}) => ({ name: 'sw', dataset: dsId, network: { prototxt: TINY_NET }, epochs: 1, ...extra });
  const abortAll = async (ids) => {
    for (const id of ids) await server.api('POST', `/api/v1/jobs/${id}/abort`);
    for (const id of ids) await waitState(server, id, ['done', 'error', 'aborted'], 60000);
  };

  before(async () => {
    doc = loadOpenApi();
    work = mkdtempSync(join(tmpdir(), 'deepdesk-sweeps-'));
    writeColourFolders(join(work, 'colours'), COLOURS, 16);
    server = await startServer({ args: ['--data-root', work] });
    dsId = await folderDataset(server, join(work, 'colours'));
  });
  after(() => endServer(server, work));

  test('a 2×2 sweep creates four queued jobs in one group, one per combination, each named by it', async () => {
    const before = await jobCount(server);
    const r = await server.api('POST', '/api/v1/models', model({ solver: { base_lr: [0.01, 0.002] }, batch_size: [2, 4], epochs: 50 }));
    assert.equal(r.status, 202, JSON.stringify(r.body));
    assertSchema(doc, 'ModelSweep', r.body);
    assert.equal(r.body.group, 'sw', 'the group is the name when none is given');
    const jobs = r.body.models;
    assert.equal(jobs.length, 4);
    assert.equal(await jobCount(server), before + 4);
    try {
      assert.deepEqual(jobs.map((j) => j.name), ['sw lr=0.01 bs=2', 'sw lr=0.01 bs=4', 'sw lr=0.002 bs=2', 'sw lr=0.002 bs=4']);
      assert.deepEqual(jobs.map((j) => [j.params.solver.base_lr, j.params.batch_size]), [[0.01, 2], [0.01, 4], [0.002, 2], [0.002, 4]]);
      for (const j of jobs) {
        assert.equal(j.kind, 'model');
        assert.equal(j.params.group, 'sw');
        assert.ok(['queued', 'running'].includes(j.state), j.state);
        assert.deepEqual(j.parents, [dsId]);
        assert.equal(j.params.epochs, 50, 'the other fields are the same in every job');
        assert.equal(j.params.solver.momentum, 0.9, 'defaults filled in each');
        const g = await server.api('GET', `/api/v1/jobs/${j.id}`);
        assert.equal(g.body.job.params.group, 'sw');
      }
    } finally {
      await abortAll(jobs.map((j) => j.id));
    }
  });

  test('a sweep in a named group; a one-value list is a single model with the single shape', async () => {
    const r = await server.api('POST', '/api/v1/models', model({ name: 'g', group: 'lr study', solver: { base_lr: [0.1, 0.05, 0.01] } }));
    assert.equal(r.status, 202, JSON.stringify(r.body));
    assert.equal(r.body.group, 'lr study');
    assert.deepEqual(r.body.models.map((j) => j.name), ['g lr=0.1', 'g lr=0.05', 'g lr=0.01']);
    assert.ok(r.body.models.every((j) => j.params.group === 'lr study' && j.params.batch_size === undefined));
    const one = await server.api('POST', '/api/v1/models', model({ name: 'single', solver: { base_lr: [0.03] }, batch_size: [4] }));
    assert.equal(one.status, 202, JSON.stringify(one.body));
    assertSchema(doc, 'JobResponse', one.body);
    assert.equal(one.body.job.name, 'single');
    assert.equal(one.body.job.params.solver.base_lr, 0.03);
    assert.equal(one.body.job.params.batch_size, 4);
    assert.equal(one.body.job.params.group, undefined, 'no group forced on a single model');
    await abortAll([...r.body.models.map((j) => j.id), one.body.job.id]);
  });

  test('a sweep with one bad combination creates no job and names the field, the value and the combination', async () => {
    const before = await jobCount(server);
    const cases = [
      [{ solver: { base_lr: [0.01, 0.1] }, batch_size: [4, 0] }, /batch_size/, /bs=0/],
      [{ solver: { base_lr: [0.01, -1] }, batch_size: [4, 8] }, /solver\.base_lr/, /lr=-1/],
      [{ batch_size: [4, 5000] }, /batch_size.*4096/, /bs=5000/],
      [{ batch_size: [4, 'x'] }, /batch_size: item 2/, /not a number/],
      [{ batch_size: [4, 4] }, /batch_size: 4 is listed twice/, /./],
      [{ batch_size: [] }, /batch_size: a sweep lists 1 to 64/, /./],
      [{ solver: { base_lr: [1, 2, 3, 4, 5, 6, 7, 8, 9] }, batch_size: [1, 2, 3, 4, 5, 6, 7, 8] }, /72 jobs; a sweep makes at most 64/, /./],
      [{ solver: { base_lr: [0.01, 0.02] }, mirror: 'yes' }, /mirror: must be true or false/, /lr=0.01/],
      // the network against the dataset, for each combination: a crop larger than the 8×8 images
      [{ solver: { base_lr: [0.01, 0.02] }, crop_size: 16 }, /^network: /, /\(the sweep's combination lr=0\.01\)$/],
    ];
    for (const [extra, field, value] of cases) {
      const r = await server.api('POST', '/api/v1/models', model(extra));
      assertError(r, 400, 'invalid');
      assert.match(r.body.error.message, field, JSON.stringify(extra));
      assert.match(r.body.error.message, value, JSON.stringify(extra));
    }
    // what needs other jobs is checked too, before any job is created
    const r = await server.api('POST', '/api/v1/models', model({ batch_size: [4, 8], dataset: 999999 }));
    assert.ok(r.status === 404 || r.status === 409 || r.status === 400, JSON.stringify(r.body));
    assert.equal(await jobCount(server), before, 'no job was created by any of them');
  });

  let modelId, dir;
  test('a trained model: delete one snapshot, refused for the latest and while running', async () => {
    const r = await server.api('POST', '/api/v1/models', model({ name: 'prune', epochs: 4, solver: { base_lr: 0.05 } }));
    assert.equal(r.status, 202, JSON.stringify(r.body));
    modelId = r.body.job.id;
    // just created: queued or running
    const early = await server.api('POST', `/api/v1/models/${modelId}/snapshots/prune`, { keep_last: 1 });
    if (early.status !== 200) {
      assertError(early, 409, 'conflict');
      assert.match(early.body.error.message, /is (queued|running)/);
    }
    const end = await waitState(server, modelId, ['done', 'error', 'aborted'], 120000);
    assert.equal(end.state, 'done', end.error);
    dir = join(server.dataDir, 'jobs', String(modelId));
    const m = (await server.api('GET', `/api/v1/models/${modelId}`)).body.model;
    assert.deepEqual(m.snapshots.map((s) => s.label), ['1', '2', '3', '4']);

    const latest = await server.api('DELETE', `/api/v1/models/${modelId}/snapshots/4`);
    assertError(latest, 409, 'conflict');
    assert.match(latest.body.error.message, /latest/);
    assertError(await server.api('DELETE', `/api/v1/models/${modelId}/snapshots/9`), 404, 'not_found');
    assertError(await server.api('DELETE', `/api/v1/models/${dsId}/snapshots/1`), 404, 'not_found');

    const f1 = join(dir, 'snapshot_epoch_1.safetensors'), s1 = join(dir, 'snapshot_epoch_1.solverstate');
    const size = statSync(f1).size + statSync(s1).size;
    const d = await server.api('DELETE', `/api/v1/models/${modelId}/snapshots/1`);
    assert.equal(d.status, 200, JSON.stringify(d.body));
    assertSchema(doc, 'SnapshotsDeleted', d.body);
    assert.deepEqual(d.body.deleted, [{ label: '1', epoch: 1, bytes: size }]);
    assert.equal(d.body.freed_bytes, size);
    assert.deepEqual(d.body.kept, ['2', '3', '4']);
    assert.ok(!existsSync(f1) && !existsSync(s1), 'both files are gone');
    assertError(await server.api('DELETE', `/api/v1/models/${modelId}/snapshots/1`), 404, 'not_found');
  });

  test('prune: bad bodies are named; dry_run deletes nothing; keep best keeps the best validation and the latest', async () => {
    const url = `/api/v1/models/${modelId}/snapshots/prune`;
    for (const [body, re] of [[{}, /keep_last or keep/], [{ keep_last: 1, keep: 'best' }, /keep_last or keep/],
      [{ keep_last: 0 }, /keep_last: must be an integer/], [{ keep_last: 1.5 }, /keep_last/], [{ keep: 'worst' }, /keep: must be "best"/],
      [{ keep_last: 1, dry_run: 'yes' }, /dry_run/], [{ keep_last: 1, extra: 1 }, /extra/]]) {
      const r = await server.api('POST', url, body);
      assertError(r, 400, 'invalid');
      assert.match(r.body.error.message, re, JSON.stringify(body));
    }
    const dry = await server.api('POST', url, { keep_last: 1, dry_run: true });
    assert.equal(dry.status, 200, JSON.stringify(dry.body));
    assert.deepEqual(dry.body.deleted.map((s) => s.label), ['2', '3']);
    assert.equal(dry.body.dry_run, true);
    assert.equal(dry.body.freed_bytes, dry.body.deleted.reduce((a, s) => a + s.bytes, 0));
    assert.ok(existsSync(join(dir, 'snapshot_epoch_2.safetensors')), 'a dry run deletes nothing');

    // the best validation from the job's own events: highest accuracy, the first on a
    // tie (as the model page marks it)
    const val = (await allEvents(server, modelId)).filter((e) => e.type === 'metric' && e.kind === 'val');
    let best = val[0];
    for (const v of val) if (v.accuracy > best.accuracy) best = v;
    // snapshot 1 is gone (the test before): the nearest snapshot to it stands in
    const have = ['2', '3', '4'];
    const bestLabel = have.reduce((a, l) => (Math.abs(Number(l) - best.epoch) < Math.abs(Number(a) - best.epoch) ? l : a));
    const r = await server.api('POST', url, { keep: 'best' });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assertSchema(doc, 'SnapshotsDeleted', r.body);
    assert.deepEqual(r.body.best, { by: 'accuracy', value: best.accuracy, epoch: best.epoch, label: bestLabel });
    const kept = [...new Set([bestLabel, '4'])].sort();
    assert.deepEqual([...r.body.kept].sort(), kept);
    assert.deepEqual(r.body.deleted.map((d) => d.label).sort(), have.filter((l) => !kept.includes(l)));
    const m = (await server.api('GET', `/api/v1/models/${modelId}`)).body.model;
    assert.deepEqual(m.snapshots.map((s) => s.label).sort(), kept);

    const last = await server.api('POST', url, { keep_last: 1 });
    assert.equal(last.status, 200);
    assert.deepEqual(last.body.kept, ['4']);
  });

  test('after pruning the model still resumes from its latest snapshot', async () => {
    const r = await server.api('POST', `/api/v1/models/${modelId}/resume`, { epochs: 5 });
    assert.equal(r.status, 202, JSON.stringify(r.body));
    const end = await waitState(server, modelId, ['done', 'error', 'aborted'], 120000);
    assert.equal(end.state, 'done', end.error);
    const m = (await server.api('GET', `/api/v1/models/${modelId}`)).body.model;
    assert.deepEqual(m.snapshots.map((s) => s.label), ['4', '5']);
  });
  test('keep best without an Accuracy layer goes by the lowest val loss', async () => {
    const net = TINY_NET.split('\n').filter((l) => !l.includes('"Accuracy"')).join('\n');
    const r = await server.api('POST', '/api/v1/models', model({ name: 'no acc', epochs: 3, network: { prototxt: net }, solver: { base_lr: 0.05 } }));
    assert.equal(r.status, 202, JSON.stringify(r.body));
    const end = await waitState(server, r.body.job.id, ['done', 'error', 'aborted'], 120000);
    assert.equal(end.state, 'done', end.error);
    const val = (await allEvents(server, r.body.job.id)).filter((e) => e.type === 'metric' && e.kind === 'val');
    assert.ok(val.every((v) => v.accuracy === undefined));
    const best = val.reduce((a, v) => (v.loss < a.loss ? v : a));
    const p = await server.api('POST', `/api/v1/models/${r.body.job.id}/snapshots/prune`, { keep: 'best', dry_run: true });
    assert.equal(p.status, 200, JSON.stringify(p.body));
    assert.deepEqual(p.body.best, { by: 'loss', value: best.loss, epoch: best.epoch, label: String(best.epoch) });
    assert.deepEqual(p.body.kept.sort(), [...new Set([String(best.epoch), '3'])].sort());
  });
});
