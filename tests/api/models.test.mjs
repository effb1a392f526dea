// models.test.mjs — training jobs through the API: a tiny network on a tiny 8×8
// dataset trained to the end with train and val metrics and snapshots; every
// validation error named; abort mid-epoch ends with a fractional snapshot that
// is listed, resumable and resumed exactly; resume continues the same job and
// its curves; the list, one model and a snapshot download match the OpenAPI
// schemas; `deepdesk train` writes the folder a model job writes.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, writeFileSync, existsSync, readFileSync, rmSync } from 'node:fs';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  startServer, waitState, waitFor, assertError, assertSchema, loadOpenApi, allEvents, getJob,
  killTrackedPids, trackPid, assertContiguous, BIN, writeColourFolders, TINY_NET,
  folderDataset, endServer,
} from './helpers.mjs';


const COLOURS = { red: [200, 30, 30], green: [30, 200, 40], blue: [20, 40, 210] };


describe('models', () => {
  let server, work, doc, dsId, bigId;
  const model = (extra = {}) => ({ name: 'tiny', dataset: dsId, network: { prototxt: TINY_NET }, epochs: 2, ...extra });

  before(async () => {
    doc = loadOpenApi();
    work = mkdtempSync(join(tmpdir(), 'deepdesk-models-'));
    writeColourFolders(join(work, 'colours'), COLOURS, 16);
    mkdirSync(join(work, 'empty'));
    server = await startServer({ args: ['--data-root', work] });
    dsId = await folderDataset(server, join(work, 'colours'));
    // 900 training images: at batch 1 an epoch is 900 iterations, so an abort
    // lands inside one (a whole epoch has odds of 1 in 900)
    writeColourFolders(join(work, 'big'), COLOURS, 400);
    bigId = await folderDataset(server, join(work, 'big'), { name: 'big', timeout: 60000 });
  });
  after(() => endServer(server, work));

  let doneId;

  test('a model trains to the end: train and val metrics, progress, snapshots, settings', async () => {
    const r = await server.api('POST', '/api/v1/models', model({ group: 'tests', solver: { base_lr: 0.05 } }));
    assert.equal(r.status, 202, JSON.stringify(r.body));
    assertSchema(doc, 'JobResponse', r.body);
    const job = r.body.job;
    assert.equal(job.kind, 'model');
    assert.deepEqual(job.parents, [dsId]);
    // every default is filled in
    const p = job.params;
    assert.equal(p.epochs, 2);
    assert.equal(p.mean, 'image');
    assert.equal(p.backend, 'cpu');
    assert.equal(p.val_interval, 1);
    assert.equal(p.snapshot_interval, 1);
    assert.deepEqual(p.solver, {
      base_lr: 0.05, type: 'sgd', momentum: 0.9, momentum2: 0.999, delta: 1e-8, rms_decay: 0.99,
      weight_decay: 0.0005, iter_size: 1, lr_policy: { policy: 'step', step_pct: 33, gamma: 0.1 },
    });
    doneId = job.id;
    const end = await waitState(server, doneId, ['done', 'error', 'aborted'], 60000);
    assert.equal(end.state, 'done', end.error);
    assert.equal(end.progress, 1);

    const events = await allEvents(server, doneId);
    assertContiguous(events);
    for (const e of events) assertSchema(doc, 'Event', e);
    const metrics = events.filter((e) => e.type === 'metric');
    const train = metrics.filter((m) => m.kind === 'train'), val = metrics.filter((m) => m.kind === 'val');
    assert.ok(train.length >= 2, `train metrics: ${JSON.stringify(metrics)}`);
    assert.equal(val.length, 2, 'one validation per epoch');
    for (const m of train) {
      for (const k of ['iteration', 'epoch', 'lr', 'loss', 'images_per_s']) assert.equal(typeof m[k], 'number', `${k} in ${JSON.stringify(m)}`);
      assert.ok(m.loss >= 0);
    }
    for (const m of val) {
      for (const k of ['iteration', 'epoch', 'loss', 'accuracy']) assert.equal(typeof m[k], 'number', `${k} in ${JSON.stringify(m)}`);
      assert.ok(m.accuracy >= 0 && m.accuracy <= 1);
    }
    assert.ok(metrics.some((m) => typeof m.eta_s === 'number'), 'an ETA');
    assert.deepEqual(val.map((m) => m.epoch), [1, 2]);
    const iters = train.map((m) => m.iteration);
    assert.deepEqual(iters, [...iters].sort((a, b) => a - b), 'iterations increase');
    const result = events.find((e) => e.type === 'result');
    assert.ok(result, 'a result event');
    assert.equal(result.stopped, false);
    assert.equal(result.snapshot, 'snapshot_epoch_2.safetensors');

    const dir = join(server.dataDir, 'jobs', String(doneId));
    for (const f of ['network.prototxt', 'settings.json', 'labels.txt', 'snapshot_epoch_2.safetensors'])
      assert.ok(existsSync(join(dir, f)), f);
    assert.equal(readFileSync(join(dir, 'network.prototxt'), 'utf8'), TINY_NET);

    const g = await server.api('GET', `/api/v1/models/${doneId}`);
    assert.equal(g.status, 200);
    assertSchema(doc, 'ModelResponse', g.body);
    const m = g.body.model;
    assert.equal(m.dataset, dsId);
    assert.equal(m.network, 'custom');
    assert.equal(m.snapshots.at(-1).epoch, 2);
    assert.ok(m.snapshots.every((s) => s.bytes > 8));
    assert.deepEqual(m.snapshots.map((s) => s.label), ['1', '2']);
    assert.ok(m.snapshots.every((s) => s.resumable === true), JSON.stringify(m.snapshots));
    assert.ok(m.snapshots[1].iteration > m.snapshots[0].iteration && m.snapshots[0].iteration > 0, JSON.stringify(m.snapshots));
    assert.equal(m.snapshots[1].url, `/api/v1/models/${doneId}/snapshots/2`);
    assert.equal(m.settings.batch_size, 4, 'the network\'s batch, resolved');
    assert.deepEqual(m.settings.input, [3, 8, 8]);
    assert.equal(m.settings.classes, 3);
    assert.equal(m.last.val.epoch, 2);
    assert.equal(m.last.train.kind, 'train');
    assert.equal(m.result.snapshot, 'snapshot_epoch_2.safetensors');

    // the snapshot, streamed as it is on disk
    const res = await fetch(`${server.url}${m.snapshots.at(-1).url}`);
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'application/octet-stream');
    const bytes = Buffer.from(await res.arrayBuffer());
    assert.deepEqual(bytes, readFileSync(join(dir, 'snapshot_epoch_2.safetensors')));
    const hlen = Number(bytes.readBigUInt64LE(0));
    const header = JSON.parse(bytes.subarray(8, 8 + hlen).toString('utf8'));
    assert.deepEqual(header['ip.0'].shape, [3, 192]);
    assertError(await server.api('GET', `/api/v1/models/${doneId}/snapshots/7`), 404, 'not_found', /epoch 7/);
    assertError(await server.api('GET', `/api/v1/models/${doneId}/snapshots/1.5`), 404, 'not_found', /epoch 1\.5/);
    assertError(await server.api('GET', `/api/v1/models/${doneId}/snapshots/+2`), 404, 'not_found');
    for (const bad of ['-1', '1e3', '1..5', '02', '.5', '1.2.3', 'x'])
      assertError(await server.api('GET', `/api/v1/models/${doneId}/snapshots/${bad}`), 404, 'not_found', new RegExp(`no snapshot "${bad.replace(/[.+]/g, '\\$&')}"`));
  });

  test('a snapshot every epoch (snapshot_interval 1)', async () => {
    const g = await server.api('GET', `/api/v1/models/${doneId}`);
    assert.deepEqual(g.body.model.snapshots.map((s) => s.epoch).slice(0, 2), [1, 2]);
  });

  test('a standard network is named and checked against the dataset', async () => {
    // LeNet expects 28×28 grayscale; on 8×8 colour images its pooling runs out of pixels
    const r = await server.api('POST', '/api/v1/models', model({ network: { standard: 'lenet' } }));
    assertError(r, 400, 'invalid', /^network: /);
  });

  test('every field is checked, and the message names it', async () => {
    const cases = [
      [{ bogus: 1 }, /^bogus: unknown field/],
      [{ name: '' }, /^name:/],
      [{ solver: { base_lr: 0 } }, /^solver\.base_lr: must be a number above 0/],
      [{ solver: { base_lr: -1 } }, /^solver\.base_lr:/],
      [{ solver: { base_lr: 'x' } }, /^solver\.base_lr:/],
      [{ solver: { type: 'sgdx' } }, /^solver\.type: must be one of sgd, nesterov/],
      [{ solver: { wd: 1 } }, /^solver\.wd: unknown field/],
      [{ solver: { momentum: 1.5 } }, /^solver\.momentum:/],
      [{ solver: { lr_policy: { policy: 'fixed', gamma: 0.5 } } }, /^solver\.lr_policy\.gamma: the fixed policy does not use it/],
      [{ solver: { lr_policy: { policy: 'multistep', multistep_pct: [50, 40] } } }, /^solver\.lr_policy\.multistep_pct\[1\]/],
      [{ solver: { lr_policy: { policy: 'cosine' } } }, /^solver\.lr_policy\.policy: must be one of/],
      [{ solver: { iter_size: 0 } }, /^solver\.iter_size:/],
      [{ epochs: 0 }, /^epochs: must be an integer from 1 and at most 10000/],
      [{ epochs: 10001 }, /^epochs:/],
      [{ epochs: 1.5 }, /^epochs:/],
      [{ batch_size: 5000 }, /^batch_size:/],
      [{ crop_size: 0 }, /^crop_size:/],
      [{ mean: 'median' }, /^mean: must be one of image, none, pixel/],
      [{ backend: 'gpu' }, /^backend: must be one of cpu, ref/],
      [{ val_interval: 0 }, /^val_interval:/],
      [{ snapshot_interval: -1 }, /^snapshot_interval:/],
      [{ seed: -1 }, /^seed:/],
      [{ group: 5 }, /^group:/],
      [{ dataset: 'x' }, /^dataset: required/],
      [{ dataset: 999999 }, /^dataset: there is no job 999999/],
      [{ network: {} }, /^network: required, one of/],
      [{ network: { standard: 'lenet', prototxt: TINY_NET } }, /^network: required, one of/],
      [{ network: { standard: 'vgg' } }, /^network\.standard: must be one of lenet, alexnet/],
      [{ network: { nope: 1 } }, /^network\.nope: unknown field/],
      [{ network: { prototxt: 'layer { name: "a" type: "InnerProduct"\n  bottom: "data" top: }' } }, /^network\.prototxt: 2:\d+: /],
      [{ network: { previous: 999999 } }, /^network\.previous: there is no job 999999/],
      [{ network: { previous: dsId } }, /^network\.previous: job \d+ is a dataset job, not a model/],
      [{ finetune: { model: 999999 } }, /^finetune\.model: there is no job/],
      [{ finetune: { snapshot: 1 } }, /^finetune\.model: required/],
      [{ resume: { snapshot: 1 } }, /^resume: /],
      [{ crop_size: 100 }, /^network: /],
    ];
    for (const [extra, re] of cases) {
      const r = await server.api('POST', '/api/v1/models', model(extra));
      assertError(r, 400, 'invalid', re);
    }
    // a number JSON cannot hold (1e999 is infinite) is refused too
    const inf = await server.api('POST', '/api/v1/models', JSON.stringify(model()).replace('"epochs":2', '"epochs":2,"solver":{"base_lr":1e999}'));
    assertError(inf, 400, 'invalid', /^solver\.base_lr:/);
    // the dataset must be finished
    const bad = await server.api('POST', '/api/v1/datasets', { name: 'empty', source: { type: 'folder', train: join(work, 'empty') } });
    assert.equal(bad.status, 202, JSON.stringify(bad.body));
    await waitState(server, bad.body.job.id, ['error', 'done']);
    assertError(await server.api('POST', '/api/v1/models', model({ dataset: bad.body.job.id })), 409, 'conflict',
      new RegExp(`^dataset: job ${bad.body.job.id} is error; a model needs a finished dataset`));
    // a test job is not a dataset; a finished model is
    assertError(await server.api('POST', '/api/v1/models', model({ finetune: { model: doneId, snapshot: 9 } })), 409, 'conflict', /^finetune\.snapshot: .*epoch 9/);
    // through /api/v1/jobs the kind checks its params the same way
    assertError(await server.api('POST', '/api/v1/jobs', { kind: 'model', params: { ...model(), name: undefined, epochs: 0 } }), 400, 'invalid', /^epochs:/);
  });

  test('a previous model\'s network, fine-tuned from its weights', async () => {
    const r = await server.api('POST', '/api/v1/models', model({ name: 'again', epochs: 1, network: { previous: doneId }, finetune: { model: doneId } }));
    assert.equal(r.status, 202, JSON.stringify(r.body));
    assert.deepEqual(r.body.job.parents.sort(), [dsId, doneId].sort());
    const end = await waitState(server, r.body.job.id, ['done', 'error'], 60000);
    assert.equal(end.state, 'done', end.error);
    const g = await server.api('GET', `/api/v1/models/${r.body.job.id}`);
    assert.equal(g.body.model.network, `model ${doneId}'s network`);
    assert.ok(end.log_tail.some((l) => /fine-tuning from model \d+'s snapshot at epoch 2/.test(l)), end.log_tail.join('\n'));
    // the model it used cannot be deleted under it
    assertError(await server.api('DELETE', `/api/v1/jobs/${doneId}`), 409, 'conflict', /used by job/);
  });

  let abortedId;

  test('abort mid-epoch: the worker stops, writes a fractional snapshot that can be resumed, and the job ends aborted', async () => {
    const r = await server.api('POST', '/api/v1/models', model({ name: 'long', dataset: bigId, epochs: 10000, batch_size: 1 }));
    assert.equal(r.status, 202, JSON.stringify(r.body));
    abortedId = r.body.job.id;
    const running = await waitState(server, abortedId, 'running', 30000);
    trackPid(running.pid);
    // resuming a running model is refused
    assertError(await server.api('POST', `/api/v1/models/${abortedId}/resume`), 409, 'conflict', /is running/);
    await waitFor(async () => (await allEvents(server, abortedId)).some((e) => e.type === 'metric' && e.iteration > 0), 30000, 'a train metric');
    assert.equal((await server.api('POST', `/api/v1/jobs/${abortedId}/abort`)).status, 202);
    const end = await waitState(server, abortedId, ['aborted', 'error', 'done'], 30000);
    assert.equal(end.state, 'aborted', end.error);
    const events = await allEvents(server, abortedId);
    const result = events.find((e) => e.type === 'result');
    assert.ok(result && result.stopped, JSON.stringify(result));
    assert.match(result.snapshot, /^snapshot_epoch_\d+\.\d{1,4}\.safetensors$/, 'a snapshot inside an epoch');
    const g = await server.api('GET', `/api/v1/models/${abortedId}`);
    assertSchema(doc, 'ModelResponse', g.body);
    const snap = g.body.model.snapshots.at(-1);
    assert.equal(`snapshot_epoch_${snap.label}.safetensors`, result.snapshot, JSON.stringify(g.body.model.snapshots));
    assert.ok(snap.epoch !== Math.floor(snap.epoch), `fractional: ${snap.epoch}`);
    assert.ok(Math.abs(snap.epoch - Number(snap.label)) < 1e-9);
    assert.equal(snap.resumable, true);
    assert.equal(snap.iteration, result.iterations);
    assert.equal(snap.url, `/api/v1/models/${abortedId}/snapshots/${snap.label}`);
    const dl = await fetch(`${server.url}${snap.url}`);
    assert.equal(dl.status, 200);
    assert.deepEqual(Buffer.from(await dl.arrayBuffer()), readFileSync(join(server.dataDir, 'jobs', String(abortedId), result.snapshot)));
    aborted = { snap, iteration: result.iterations, events: events.length };
  });

  let aborted;
  let resumed;

  test('resume: the same job goes on from its snapshot, its curves continue, to the new total', async () => {
    // not while it cannot: bad fields, a snapshot it does not have, no more epochs
    assertError(await server.api('POST', `/api/v1/models/${doneId}/resume`, { epochs: 0 }), 400, 'invalid', /^epochs:/);
    assertError(await server.api('POST', `/api/v1/models/${doneId}/resume`, { x: 1 }), 400, 'invalid', /^x: unknown field/);
    assertError(await server.api('POST', `/api/v1/models/${doneId}/resume`, { epochs: 4, snapshot: 9 }), 400, 'invalid', /^snapshot: .*epoch 9/);
    assertError(await server.api('POST', `/api/v1/models/${doneId}/resume`), 400, 'invalid', /^epochs: the snapshot is at epoch 2/);
    assertError(await server.api('POST', `/api/v1/models/${dsId}/resume`, { epochs: 3 }), 404, 'not_found', /not a model/);

    const before = await allEvents(server, doneId);
    const lastIter = Math.max(...before.filter((e) => e.type === 'metric').map((e) => e.iteration));
    const r = await server.api('POST', `/api/v1/models/${doneId}/resume`, { epochs: 3 });
    assert.equal(r.status, 202, JSON.stringify(r.body));
    assertSchema(doc, 'JobResponse', r.body);
    assert.equal(r.body.job.id, doneId);
    assert.equal(r.body.job.params.epochs, 3);
    assert.deepEqual(r.body.job.params.resume, { snapshot: 2 });
    const end = await waitState(server, doneId, ['done', 'error', 'aborted'], 60000);
    assert.equal(end.state, 'done', end.error);
    assert.deepEqual(end.history.map((h) => h.state), ['queued', 'running', 'done', 'queued', 'running', 'done']);

    const all = await allEvents(server, doneId);
    assertContiguous(all);
    assert.deepEqual(all.slice(0, before.length).map((e) => e.seq), before.map((e) => e.seq), 'the old events stay');
    const added = all.slice(before.length);
    resumed = { lastIter, metrics: added.filter((e) => e.type === 'metric') };
    assert.ok(resumed.metrics.length > 0);
    assert.ok(added.some((e) => e.type === 'log' && /resuming from the snapshot at epoch 2, to 3 epochs in all/.test(e.msg)));
    assert.equal(resumed.metrics.filter((m) => m.kind === 'val').at(-1).epoch, 3);
    assert.ok(existsSync(join(server.dataDir, 'jobs', String(doneId), 'snapshot_epoch_3.safetensors')));
    const g = await server.api('GET', `/api/v1/models/${doneId}`);
    assertSchema(doc, 'ModelResponse', g.body);
    assert.equal(g.body.model.epochs, 3);
    assert.equal(g.body.model.settings.epochs, 3);
    assert.equal(g.body.model.snapshots.at(-1).epoch, 3);

    // an aborted model resumes too, from its own latest snapshot (inside an epoch),
    // here to the end of the next whole epoch
    const ra = await server.api('POST', `/api/v1/models/${abortedId}/resume`, { epochs: 20000 });
    assertError(ra, 400, 'invalid', /^epochs: must be an integer from 1 to 10000/);
    const { snap } = aborted;
    if (snap.epoch > 1) // a total the snapshot is already past
      assertError(await server.api('POST', `/api/v1/models/${abortedId}/resume`, { epochs: Math.floor(snap.epoch) }), 400, 'invalid',
        new RegExp(`^epochs: the snapshot is at epoch ${snap.label.replace('.', '\\.')}`));
    assertError(await server.api('POST', `/api/v1/models/${abortedId}/resume`, { snapshot: snap.epoch + 0.01 }), 400, 'invalid', /^snapshot: .*no snapshot at epoch/);
    assertError(await server.api('POST', `/api/v1/models/${abortedId}/resume`, { snapshot: '1e2' }), 400, 'invalid', /^snapshot: must be/);
    const total = Math.floor(snap.epoch) + 1;
    // the label works as well as the number; the default is the latest
    const rb = await server.api('POST', `/api/v1/models/${abortedId}/resume`, { epochs: total, snapshot: snap.label });
    assert.equal(rb.status, 202, JSON.stringify(rb.body));
    assert.deepEqual(rb.body.job.params.resume, { snapshot: snap.epoch });
    const endB = await waitState(server, abortedId, ['done', 'error', 'aborted'], 120000);
    assert.equal(endB.state, 'done', endB.error);
    const after = (await allEvents(server, abortedId)).slice(aborted.events);
    assert.ok(after.some((e) => e.type === 'log' && e.msg.includes(`resuming from the snapshot at epoch ${snap.label}, to ${total} epochs in all`)),
      after.filter((e) => e.type === 'log').map((e) => e.msg).join('\n'));
    const firstTrain = after.find((e) => e.type === 'metric' && e.kind === 'train');
    assert.ok(firstTrain && firstTrain.iteration > aborted.iteration, `first train metric after resume: ${JSON.stringify(firstTrain)}, aborted at ${aborted.iteration}`);
    assert.ok(firstTrain.epoch > snap.epoch, `epoch ${firstTrain.epoch} after ${snap.epoch}`);
    assert.ok(existsSync(join(server.dataDir, 'jobs', String(abortedId), `snapshot_epoch_${total}.safetensors`)));
    const gb = await server.api('GET', `/api/v1/models/${abortedId}`);
    assertSchema(doc, 'ModelResponse', gb.body);
    assert.equal(gb.body.model.snapshots.at(-1).label, String(total));
    assert.equal(gb.body.model.result.snapshot, `snapshot_epoch_${total}.safetensors`);
    assert.ok(gb.body.model.snapshots.some((s) => s.label === snap.label), 'the fractional snapshot stays');

    // a snapshot without its .solverstate can be fine-tuned from, not resumed
    rmSync(join(server.dataDir, 'jobs', String(abortedId), `snapshot_epoch_${snap.label}.solverstate`));
    const gc = await server.api('GET', `/api/v1/models/${abortedId}`);
    assert.equal(gc.body.model.snapshots.find((s) => s.label === snap.label).resumable, false);
    assertError(await server.api('POST', `/api/v1/models/${abortedId}/resume`, { epochs: total + 1, snapshot: snap.epoch }), 409, 'conflict',
      /no \.solverstate/);
    const ft = await server.api('POST', '/api/v1/models', model({ name: 'ft', dataset: bigId, epochs: 1, finetune: { model: abortedId, snapshot: snap.epoch } }));
    assert.equal(ft.status, 202, JSON.stringify(ft.body));
    assert.equal(ft.body.job.params.finetune.snapshot, snap.epoch);
    const endF = await waitState(server, ft.body.job.id, ['done', 'error', 'aborted'], 60000);
    assert.equal(endF.state, 'done', endF.error);
    assert.ok(endF.log_tail.some((l) => l.includes(`fine-tuning from model ${abortedId}'s snapshot at epoch ${snap.label}`)), endF.log_tail.join('\n'));
  });

  test('resume: iterations and epochs go on after the snapshot\'s', () => {
    const { lastIter, metrics } = resumed;
    assert.ok(metrics.every((m) => m.iteration > lastIter), `iterations go on after ${lastIter}: ${metrics.map((m) => m.iteration)}`);
    assert.ok(metrics.every((m) => m.epoch > 2), `epochs go on after 2: ${metrics.map((m) => m.epoch)}`);
  });

  test('the list and the schemas', async () => {
    const l = await server.api('GET', '/api/v1/models');
    assert.equal(l.status, 200);
    assertSchema(doc, 'ModelList', l.body);
    assert.ok(l.body.total >= 3);
    const one = l.body.models.find((m) => m.id === doneId);
    assert.equal(one.dataset, dsId);
    assert.equal(one.network, 'custom');
    assert.equal(one.state, 'done');
    assert.equal(one.snapshots, (await server.api('GET', `/api/v1/models/${doneId}`)).body.model.snapshots.length);
    assert.equal(one.last.val.epoch, 3);
    assert.ok(!l.body.models.some((m) => m.kind !== 'model'));
    assertError(await server.api('GET', `/api/v1/models/${dsId}`), 404, 'not_found');
    assertError(await server.api('GET', '/api/v1/models/999999'), 404, 'not_found');
    assertError(await server.api('GET', '/api/v1/models?limit=0'), 400, 'invalid', /limit/);
    // a clone trains from scratch, not from the original's snapshot
    const c = await server.api('POST', `/api/v1/jobs/${doneId}/clone`);
    assert.equal(c.status, 202);
    assert.equal(c.body.job.params.resume, undefined);
    assert.equal((await server.api('POST', `/api/v1/jobs/${c.body.job.id}/abort`)).status, 202);
    await waitState(server, c.body.job.id, ['aborted', 'done', 'error']);
    assert.ok((await getJob(server, c.body.job.id)).kind === 'model');
  });
  test('deepdesk train writes the folder a model job writes: events, network, settings, snapshots', async () => {
    const ds = join(server.dataDir, 'jobs', String(dsId));
    const out = join(work, 'cli-out');
    const net = join(work, 'tiny.prototxt');
    writeFileSync(net, TINY_NET);
    const { stderr } = await promisify(execFile)(BIN, ['train', '--dataset', ds, '--network', net, '--out', out,
      '--epochs', '2', '--lr', '0.05', '--threads', '1'], { timeout: 60000 });
    // not a terminal: one plain line per metric, as before
    assert.ok(stderr.split('\n').some((l) => /^epoch +\d+\.\d\d  iter +\d+  loss \d/.test(l)), stderr);
    assert.ok(stderr.split('\n').some((l) => /^epoch +2\.00  val loss \d+\.\d+  accuracy /.test(l)), stderr);
    assert.ok(!stderr.includes('\r'), 'no progress bar off a terminal');

    const events = readFileSync(join(out, 'events.jsonl'), 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
    events.forEach((e, i) => assertSchema(doc, 'Event', { ...e, seq: i + 1 }));
    assert.deepEqual(events.filter((e) => e.type === 'status').map((e) => e.state), ['running', 'done']);
    const train = events.filter((e) => e.type === 'metric' && e.kind === 'train');
    const val = events.filter((e) => e.type === 'metric' && e.kind === 'val');
    assert.ok(train.length >= 2);
    assert.deepEqual(val.map((m) => m.epoch), [1, 2]);
    assert.ok(events.some((e) => e.type === 'progress'));
    // the same events, field for field, as the server's job wrote for the same run
    const job = (await allEvents(server, doneId)).filter((e) => e.type === 'metric');
    const keys = (e) => Object.keys(e).filter((k) => k !== 'seq' && k !== 't').sort().join();
    assert.equal(keys(train[0]), keys(job.find((e) => e.kind === 'train')));
    assert.equal(keys(val[0]), keys(job.find((e) => e.kind === 'val')));
    const result = events.find((e) => e.type === 'result');
    assert.equal(result.snapshot, 'snapshot_epoch_2.safetensors');
    assert.equal(result.stopped, false);

    assert.equal(readFileSync(join(out, 'network.prototxt'), 'utf8'), TINY_NET);
    const settings = JSON.parse(readFileSync(join(out, 'settings.json'), 'utf8'));
    assert.equal(settings.network_name, 'custom');
    assert.equal(settings.batch_size, 4);
    assert.deepEqual(settings.input, [3, 8, 8]);
    assert.equal(settings.classes, 3);
    assert.equal(settings.epochs, 2);
    assert.equal(settings.solver.base_lr, 0.05);
    assert.equal(settings.solver.lr_policy.policy, 'step');
    for (const f of ['labels.txt', 'snapshot_epoch_1.safetensors', 'snapshot_epoch_2.safetensors', 'snapshot_epoch_2.solverstate'])
      assert.ok(existsSync(join(out, f)), f);
  });
  test('mirror: stored in the params and settings, refused unless boolean, and it changes what is fed', async () => {
    const bad = await server.api('POST', '/api/v1/models', model({ mirror: 'yes' }));
    assertError(bad, 400, 'invalid');
    assert.match(bad.body.error.message, /^mirror: must be true or false/);
    // the reference backend is deterministic: the same seed gives the same losses
    // unless what is fed differs; TINY_NET's data layers do not mirror
    const losses = {};
    for (const [k, extra] of [['on', { mirror: true }], ['off', { mirror: false }], ['absent', {}]]) {
      const r = await server.api('POST', '/api/v1/models', model({ name: `mirror ${k}`, epochs: 1, backend: 'ref', seed: 3, ...extra }));
      assert.equal(r.status, 202, JSON.stringify(r.body));
      assert.equal(r.body.job.params.mirror, extra.mirror);
      const end = await waitState(server, r.body.job.id, ['done', 'error', 'aborted'], 120000);
      assert.equal(end.state, 'done', end.error);
      const m = (await server.api('GET', `/api/v1/models/${r.body.job.id}`)).body.model;
      assertSchema(doc, 'ModelResponse', { model: m });
      assert.equal(m.settings.mirror, extra.mirror);
      losses[k] = (await allEvents(server, r.body.job.id)).filter((e) => e.type === 'metric' && e.kind === 'train').map((e) => e.loss);
    }
    assert.deepEqual(losses.off, losses.absent);
    assert.notDeepEqual(losses.on, losses.off);
  });
});
