// preset_hidden.test.mjs — a lab preset's hidden fields stay hidden from the learner
// (issue 16, finding 9): ivy (instructor) makes a class and a preset hiding
// solver.base_lr (0.0123); ann (learner) makes a model from it and trains it.  On
// every route the job leaves by — job and model detail, DIGITS' /models/{id}.json,
// the settings a model shows, its events (metric events' lr, the lr curve), its log
// lines, a clone, the WebSocket — ann sees no base_lr value, while ivy and the
// admin see it; the clone still trains with it (server-side).
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  TEST_TMP, startServer, waitState, waitFor, writeColourFolders, TINY_NET, WebSocket, endServer } from './helpers.mjs';
import { makeAccounts, userClient, login } from '../lib/auth.mjs';

const LR = 0.0123;
const COLOURS = { red: [200, 30, 30], green: [30, 200, 40], blue: [20, 40, 210] };

/** Every place the value shows in text: 0.0123 as JSON writes it. */
const leaks = (x) => JSON.stringify(x).includes(String(LR));

describe('a lab preset\'s hidden fields', () => {
  let server, acc, work, root, ivy, ann, annSession, model, clone;
  const as = (client) => ({ api: (m, p) => client(m, p) });
  const annWs = [];

  before(async () => {
    acc = makeAccounts({ root: 'admin', ivy: 'instructor', ann: 'learner' });
    work = mkdtempSync(join(TEST_TMP, 'deepdesk-hidden-'));
    writeColourFolders(join(work, 'colours'), COLOURS, 12);
    server = await startServer({ dataDir: acc.data, args: ['--accounts', 'on', '--data-root', work] });
    [root, ivy, ann] = await Promise.all(['root', 'ivy', 'ann'].map((n) => userClient(server, n)));
    annSession = await login(server, 'ann');
    const cls = (await ivy('POST', '/api/v1/classes', { name: 'Lab' })).body.class.id;
    assert.equal((await ivy('POST', `/api/v1/classes/${cls}/members`, { name: 'ann' })).status, 200);
    const d = await ivy('POST', '/api/v1/datasets', {
      name: 'colours', source: { type: 'folder', train: join(work, 'colours') },
      options: { width: 8, height: 8, channels: 3, val_pct: 25, seed: 1 },
    });
    assert.equal(d.status, 202, JSON.stringify(d.body));
    assert.equal((await waitState(as(ivy), d.body.job.id, ['done', 'error'], 60000)).state, 'done');
    assert.equal((await ivy('POST', `/api/v1/classes/${cls}/datasets`, { dataset: d.body.job.id })).status, 200);
    const p = await ivy('POST', `/api/v1/classes/${cls}/presets`, {
      name: 'Lab 1', settings: { dataset: d.body.job.id, network: { prototxt: TINY_NET }, epochs: 2, solver: { base_lr: LR } },
      locked: ['network'], hidden: ['solver.base_lr'],
    });
    assert.equal(p.status, 201, JSON.stringify(p.body));
    // ann's live view, open while the model is made and trains
    const ws = new WebSocket(`${server.url.replace(/^http/, 'ws')}/api/v1/ws`, { headers: { cookie: annSession.cookie } });
    ws.on('message', (m) => annWs.push(String(m)));
    await new Promise((resolve, reject) => { ws.once('open', resolve); ws.once('error', reject); });
    ws.send(JSON.stringify({ subscribe: 'all' }));
    await waitFor(() => annWs.some((m) => m.includes('"subscribed"')), 10000, 'subscribed');
    after(() => ws.terminate());
    const m = await ann('POST', '/api/v1/models', { preset: p.body.preset.id, name: 'mine', batch_size: 4 });
    assert.equal(m.status, 202, JSON.stringify(m.body));
    assert.ok(!leaks(m.body), `the creation's answer: ${JSON.stringify(m.body.job.params)}`);
    model = m.body.job.id;
    assert.equal((await waitState(as(ann), model, ['done', 'error'], 90000)).state, 'done');
    await waitFor(() => annWs.some((t) => t.includes('"done"')), 10000, 'ann heard the end');
  });
  after(() => endServer(server, acc.dir, work));

  test('the learner sees no base_lr on any route; the instructor and the admin do', async () => {
    const routes = [`/api/v1/jobs/${model}`, `/api/v1/models/${model}`, `/models/${model}.json`,
      `/api/v1/jobs/${model}/events?limit=1000`, '/api/v1/models', '/api/v1/jobs?limit=100'];
    for (const path of routes) {
      const r = await ann('GET', path);
      assert.equal(r.status, 200, `${path}: ${JSON.stringify(r.body)}`);
      if (leaks(r.body)) {
        const text = JSON.stringify(r.body), at = text.indexOf(String(LR));
        assert.fail(`${path} shows the learner ${String(LR)}: …${text.slice(Math.max(0, at - 150), at + 80)}…`);
      }
    }
    const job = (await ann('GET', `/api/v1/jobs/${model}`)).body.job;
    assert.deepEqual(job.params.preset.hidden, ['solver.base_lr'], 'the learner is told which fields are hidden');
    assert.equal(job.params.solver?.base_lr, undefined);
    assert.equal(job.params.batch_size, 4, 'what is not hidden shows');
    const detail = (await ann('GET', `/api/v1/models/${model}`)).body;
    assert.equal(JSON.stringify(detail).includes('"base_lr"'), false, 'no base_lr key in the model detail (settings.json)');
    const events = (await ann('GET', `/api/v1/jobs/${model}/events?limit=1000`)).body.events;
    const metrics = events.filter((e) => e.type === 'metric');
    assert.ok(metrics.length > 0, 'the learner has metric events');
    assert.ok(metrics.every((e) => !('lr' in e)), 'no lr in metric events: no lr curve');
    assert.ok(events.some((e) => /lr \(hidden\)/.test(e.msg || e.message || '')), 'the log line says the lr is hidden');
    for (const t of annWs) assert.ok(!t.includes(String(LR)) && !/"lr":/.test(t), `pushed to the learner: ${t.slice(0, 200)}`);
    // the instructor of the class, and the admin, see it all
    for (const who of [ivy, root]) {
      const j = (await who('GET', `/api/v1/jobs/${model}`)).body.job;
      assert.equal(j.params.solver.base_lr, LR);
      const ev = (await who('GET', `/api/v1/jobs/${model}/events?limit=1000`)).body.events;
      assert.ok(ev.some((e) => e.type === 'metric' && e.lr === LR));
      assert.ok(leaks((await who('GET', `/api/v1/models/${model}`)).body));
    }
  });

  test('a clone by the learner trains with the hidden value and never shows it', async () => {
    const c = await ann('POST', `/api/v1/jobs/${model}/clone`, {});
    assert.equal(c.status, 202, JSON.stringify(c.body));
    assert.ok(!leaks(c.body));
    clone = c.body.job.id;
    assert.equal((await waitState(as(ann), clone, ['done', 'error'], 90000)).state, 'done');
    for (const path of [`/api/v1/jobs/${clone}`, `/api/v1/models/${clone}`, `/models/${clone}.json`, `/api/v1/jobs/${clone}/events?limit=1000`])
      assert.ok(!leaks((await ann('GET', path)).body), `${path} of the clone`);
    // server-side it is the preset's: the worker's job.json, and what the instructor sees
    const jj = JSON.parse(readFileSync(join(acc.data, 'jobs', String(clone), 'job.json'), 'utf8'));
    assert.equal(jj.params.solver.base_lr, LR);
    const ev = (await ivy('GET', `/api/v1/jobs/${clone}/events?limit=1000`)).body.events;
    assert.ok(ev.some((e) => e.type === 'metric' && e.lr === LR), 'the clone trained at the hidden lr');
    // a mark that does not match the preset is refused; none at all is the learner's own model
    const bad = await ann('POST', '/api/v1/jobs', { kind: 'model', name: 'x', params: { ...jj.params, preset: { ...jj.params.preset, hidden: [] } } });
    assert.equal(bad.status, 400, JSON.stringify(bad.body));
    assert.match(bad.body.error.message, /^preset: does not match lab preset/);
  });
});
