// classes.test.mjs — classes on a real server with accounts on: an instructor
// makes a class and imports a roster (a bad line refuses it whole; new accounts
// get a password shown once that logs in), shares a dataset that its learners
// read and train on but cannot change or delete, publishes a lab preset whose
// locked and hidden fields a learner cannot override, and sees every member's
// runs on the dashboard.  Learners stay apart, and an instructor sees the
// learners of their own classes only.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import {
  TEST_TMP, startServer, waitState, waitFor, assertError, assertSchema, loadOpenApi,
  writeColourFolders, TINY_NET, WebSocket, endServer } from './helpers.mjs';
import { makeAccounts, userClient, login } from '../lib/auth.mjs';

const DOC = loadOpenApi();
const COLOURS = { red: [200, 30, 30], green: [30, 200, 40] };

/** A WebSocket with one session's cookie, subscribed to everything it may see. */
async function wsAll(url, cookie) {
  const ws = new WebSocket(`${url.replace(/^http/, 'ws')}/api/v1/ws`, { headers: { cookie } });
  const all = [];
  ws.on('message', (d) => all.push(JSON.parse(String(d))));
  await new Promise((resolve, reject) => { ws.once('open', resolve); ws.once('error', reject); });
  ws.send(JSON.stringify({ subscribe: 'all' }));
  await waitFor(() => all.some((m) => m.type === 'subscribed' && m.topic === 'all'), 60000, 'subscribed all');
  return { ws, all };
}

describe('classes', () => {
  let server, acc, work;
  let root, ivy, olga, ann, ben, cat;
  let classX, classY, dsId, annModel, benModel, catJob, presetId;
  const as = (client) => ({ api: (m, p) => client(m, p) });

  before(async () => {
    acc = makeAccounts({
      root: 'admin', ivy: 'instructor', olga: 'instructor', ann: 'learner', ben: 'learner', cat: 'learner',
    });
    work = mkdtempSync(join(TEST_TMP, 'deepdesk-classes-'));
    writeColourFolders(join(work, 'colours'), COLOURS, 12);
    server = await startServer({
      dataDir: acc.data, args: ['--accounts', 'on', '--data-root', work, '--cpu-slots', '2'],
    });
    [root, ivy, olga, ann, ben, cat] = await Promise.all(
      ['root', 'ivy', 'olga', 'ann', 'ben', 'cat'].map((n) => userClient(server, n)));
  });
  after(() => endServer(server, acc.dir, work));

  test('an instructor makes a class; a learner may not', async () => {
    assertError(await ann('POST', '/api/v1/classes', { name: 'mine' }), 403, 'forbidden', /for instructors only/);
    assertError(await ivy('POST', '/api/v1/classes', { name: '' }), 400, 'invalid', /^name: required/);
    assertError(await ivy('POST', '/api/v1/classes', { name: 'x', colour: 1 }), 400, 'invalid', /colour/);
    const x = await ivy('POST', '/api/v1/classes', { name: 'Vision <101>' });
    assert.equal(x.status, 201, JSON.stringify(x.body));
    assertSchema(DOC, 'ClassResponse', x.body);
    assert.equal(x.body.class.name, 'Vision <101>');
    assert.equal(x.body.class.instructor.name, 'ivy');
    assert.deepEqual(x.body.class.members, []);
    classX = x.body.class.id;
    const y = await olga('POST', '/api/v1/classes', { name: 'Other class' });
    assert.equal(y.status, 201);
    classY = y.body.class.id;
    assert.equal((await olga('POST', `/api/v1/classes/${classY}/members`, { name: 'cat' })).status, 200);
    assertError(await olga('POST', `/api/v1/classes/${classY}/members`, { name: 'nobody' }), 400, 'invalid',
      /^name: there is no account called "nobody"$/);
    // each instructor lists their own; a class of another is as missing
    const ivyList = (await ivy('GET', '/api/v1/classes')).body;
    assertSchema(DOC, 'ClassList', ivyList);
    assert.deepEqual(ivyList.classes.map((c) => c.id), [classX]);
    assert.deepEqual((await root('GET', '/api/v1/classes')).body.classes.map((c) => c.id), [classX, classY]);
    assertError(await ivy('GET', `/api/v1/classes/${classY}`), 404, 'not_found', new RegExp(`^class ${classY} does not exist$`));
    assertError(await ivy('POST', `/api/v1/classes/${classY}/members`, { name: 'ann' }), 404, 'not_found');
    assertError(await ivy('GET', '/api/v1/classes/999999'), 404, 'not_found');
  });

  test('a roster with a bad line is refused whole, every bad line named; a good one makes accounts that log in', async () => {
    const bad = await ivy('POST', `/api/v1/classes/${classX}/roster`,
      { csv: 'name,role\nzed\n-dash\nann\nzed\nquinn,admin\n' });
    assertError(bad, 400, 'invalid');
    assert.equal(bad.body.error.message,
      'csv: line 3: "-dash": name: must start with a letter or a digit; line 5: zed is already on line 2; '
      + 'line 6: quinn: role "admin": expected learner or instructor');
    // nothing was made: not zed, not even ann's membership
    assert.equal((await login(server, 'zed', 'whatever-1')).status, 401);
    assert.deepEqual((await ivy('GET', `/api/v1/classes/${classX}`)).body.class.members, []);
    // a learner not in the class does not learn it exists
    assertError(await ann('POST', `/api/v1/classes/${classX}/roster`, { csv: 'ann\n' }), 404, 'not_found');

    // an instructor enrols learners only: a line that makes an instructor (or names
    // an admin or an instructor) refuses the roster whole; an admin's roster may
    const roster = 'ann\r\nben\n\n# new ones\nzed\n"ta.one",instructor\n';
    const notHers = await ivy('POST', `/api/v1/classes/${classX}/roster`, { csv: `${roster}olga\nroot\n` });
    assertError(notHers, 403, 'forbidden');
    assert.equal(notHers.body.error.message, 'csv: line 6: role: only an admin\'s roster makes instructors; '
      + 'line 7: olga is an instructor; an instructor enrols learners only; line 8: root is an admin; an instructor enrols learners only');
    assert.deepEqual((await ivy('GET', `/api/v1/classes/${classX}`)).body.class.members, []);
    const ok = await root('POST', `/api/v1/classes/${classX}/roster`, { csv: roster });
    assert.equal(ok.status, 201, JSON.stringify(ok.body));
    assertSchema(DOC, 'RosterResult', ok.body);
    assert.match(ok.headers.get('cache-control'), /no-store/, 'the passwords are not cached');
    assert.deepEqual(ok.body.added.map((u) => u.name), ['ann', 'ben']);
    assert.deepEqual(ok.body.created.map((u) => [u.name, u.role]), [['zed', 'learner'], ['ta.one', 'instructor']]);
    for (const u of ok.body.created) assert.match(u.password, /^[A-Za-z0-9_-]{16}$/);
    assert.deepEqual(ok.body.class.members.map((m) => m.name), ['ann', 'ben', 'ta.one', 'zed']);
    const zed = ok.body.created[0];
    assert.equal((await login(server, 'zed', zed.password)).status, 200, 'the generated password logs in');
    // the password is never answered again
    const again = await ivy('POST', `/api/v1/classes/${classX}/roster`, { csv: 'zed\n' });
    assert.equal(again.status, 201);
    assert.deepEqual(again.body.created, []);
    assert.deepEqual(again.body.added.map((u) => u.name), ['zed']);
    assert.ok(!JSON.stringify((await ivy('GET', `/api/v1/classes/${classX}`)).body).includes(zed.password));
    // a member reads the class, but does not change it
    assert.equal((await ann('GET', `/api/v1/classes/${classX}`)).status, 200);
    assertError(await ann('POST', `/api/v1/classes/${classX}/members`, { name: 'cat' }), 403, 'forbidden');
    assert.equal((await ivy('DELETE', `/api/v1/classes/${classX}/members/${zed.id}`)).status, 204);
    assertError(await ivy('DELETE', `/api/v1/classes/${classX}/members/${zed.id}`), 404, 'not_found');
  });

  test('a shared dataset: members see it and train on it, never change or delete it; others do not see it', async () => {
    const r = await ivy('POST', '/api/v1/datasets', {
      name: 'colours', source: { type: 'folder', train: join(work, 'colours') },
      options: { width: 8, height: 8, channels: 3, val_pct: 25, seed: 1 },
    });
    assert.equal(r.status, 202, JSON.stringify(r.body));
    dsId = r.body.job.id;
    assert.equal((await waitState(as(ivy), dsId, ['done', 'error'], 60000)).state, 'done');
    // before it is shared a learner cannot see it or train on it
    assertError(await ann('GET', `/api/v1/datasets/${dsId}`), 404, 'not_found');
    assertError(await ann('POST', '/api/v1/models', { name: 'm', dataset: dsId, network: { prototxt: TINY_NET } }),
      400, 'invalid', new RegExp(`^dataset: there is no job ${dsId}$`));
    assertError(await olga('POST', `/api/v1/classes/${classX}/datasets`, { dataset: dsId }), 404, 'not_found');
    assertError(await ivy('POST', `/api/v1/classes/${classX}/datasets`, { dataset: 999999 }), 400, 'invalid',
      /^dataset: there is no job 999999$/);
    const sh = await ivy('POST', `/api/v1/classes/${classX}/datasets`, { dataset: dsId });
    assert.equal(sh.status, 200, JSON.stringify(sh.body));
    assert.deepEqual(sh.body.class.datasets.map((d) => d.id), [dsId]);

    assert.equal((await ann('GET', `/api/v1/datasets/${dsId}`)).status, 200);
    assert.ok((await ann('GET', '/api/v1/datasets')).body.datasets.some((d) => d.id === dsId), 'in the learner\'s list');
    for (const [m, p, body] of [['DELETE', `/api/v1/jobs/${dsId}`], ['PATCH', `/api/v1/jobs/${dsId}`, { name: 'mine' }],
      ['POST', `/api/v1/jobs/${dsId}/abort`], ['POST', `/api/v1/jobs/${dsId}/clone`]]) {
      assertError(await ann(m, p, body), 403, 'forbidden', new RegExp(`dataset ${dsId} is shared with your class read-only`));
    }
    assert.equal((await ivy('GET', `/api/v1/jobs/${dsId}`)).body.job.name, 'colours', 'unchanged');
    // a learner of another class sees nothing of it
    assertError(await cat('GET', `/api/v1/datasets/${dsId}`), 404, 'not_found');
    assertError(await cat('DELETE', `/api/v1/jobs/${dsId}`), 404, 'not_found');
    assert.ok(!(await cat('GET', '/api/v1/datasets')).body.datasets.some((d) => d.id === dsId));

    const am = await ann('POST', '/api/v1/models', { name: 'ann-model', dataset: dsId, network: { prototxt: TINY_NET }, epochs: 2 });
    assert.equal(am.status, 202, JSON.stringify(am.body));
    annModel = am.body.job.id;
    const done = await waitState(as(ann), annModel, ['done', 'error'], 60000);
    assert.equal(done.state, 'done', done.error);
    // the dataset a model was made from cannot go while the model is there
    assert.equal((await ivy('GET', `/api/v1/jobs/${dsId}`)).status, 200);
  });

  test('learners stay apart; an instructor sees their classes\' learners only, admins everyone', async () => {
    const bm = await ben('POST', '/api/v1/models', { name: 'ben-model', dataset: dsId, network: { prototxt: TINY_NET }, epochs: 1000 });
    assert.equal(bm.status, 202, JSON.stringify(bm.body));
    benModel = bm.body.job.id;
    const cj = await cat('POST', '/api/v1/jobs', { kind: 'test', name: 'cat-job', params: { steps: 1, step_ms: 1 } });
    catJob = cj.body.job.id;
    // learner B does not see learner A's model
    assertError(await ben('GET', `/api/v1/models/${annModel}`), 404, 'not_found', new RegExp(`^job ${annModel} does not exist$`));
    assertError(await ben('DELETE', `/api/v1/jobs/${annModel}`), 404, 'not_found');
    assert.ok(!(await ben('GET', '/api/v1/models')).body.models.some((m) => m.id === annModel));
    // the instructor of class Y does not see class X's learners, nor they cat's
    assertError(await olga('GET', `/api/v1/models/${annModel}`), 404, 'not_found');
    assertError(await olga('POST', `/api/v1/jobs/${benModel}/abort`), 404, 'not_found');
    const olgaJobs = (await olga('GET', '/api/v1/jobs?limit=1000')).body.jobs.map((j) => j.id);
    assert.ok(olgaJobs.includes(catJob) && !olgaJobs.includes(annModel) && !olgaJobs.includes(benModel) && !olgaJobs.includes(dsId),
      JSON.stringify(olgaJobs));
    assertError(await ivy('GET', `/api/v1/jobs/${catJob}`), 404, 'not_found');
    // ivy sees both of her learners and may abort one; the admin sees all
    const ivyJobs = (await ivy('GET', '/api/v1/jobs?limit=1000')).body.jobs.map((j) => j.id);
    assert.ok([annModel, benModel, dsId].every((id) => ivyJobs.includes(id)) && !ivyJobs.includes(catJob), JSON.stringify(ivyJobs));
    assert.equal((await ivy('GET', `/api/v1/models/${annModel}`)).status, 200);
    assert.equal((await ivy('POST', `/api/v1/jobs/${benModel}/abort`)).status, 202);
    assert.equal((await waitState(as(ben), benModel, ['aborted', 'done', 'error'], 60000)).state, 'aborted');
    const rootJobs = (await root('GET', '/api/v1/jobs?limit=1000')).body.jobs.map((j) => j.id);
    assert.ok([annModel, benModel, dsId, catJob].every((id) => rootJobs.includes(id)));
  });

  test('on the WebSocket an instructor gets the jobs of their classes\' learners, not another class\'s', async () => {
    const ivyWs = await wsAll(server.url, (await login(server, 'ivy')).cookie);
    const olgaWs = await wsAll(server.url, (await login(server, 'olga')).cookie);
    try {
      const aj = (await ann('POST', '/api/v1/jobs', { kind: 'test', name: 'ann-ws', params: { steps: 3, step_ms: 5, log_lines: 1 } })).body.job;
      const cj = (await cat('POST', '/api/v1/jobs', { kind: 'test', name: 'cat-ws', params: { steps: 3, step_ms: 5, log_lines: 1 } })).body.job;
      await waitState(as(ann), aj.id, 'done');
      await waitState(as(cat), cj.id, 'done');
      await waitFor(() => ivyWs.all.some((m) => m.type === 'job' && m.job.id === aj.id && m.job.state === 'done'), 60000, 'ivy sees ann\'s job');
      await waitFor(() => olgaWs.all.some((m) => m.type === 'job' && m.job.id === cj.id && m.job.state === 'done'), 60000, 'olga sees cat\'s job');
      // fences: a job made after, that each socket may see; once it has it, whatever
      // the server would have sent it before has come (one socket keeps the order)
      const fa = (await ann('POST', '/api/v1/jobs', { kind: 'test', name: 'ann-fence', params: { steps: 1, step_ms: 1 } })).body.job;
      const fc = (await cat('POST', '/api/v1/jobs', { kind: 'test', name: 'cat-fence', params: { steps: 1, step_ms: 1 } })).body.job;
      await waitFor(() => ivyWs.all.some((m) => m.type === 'job' && m.job.id === fa.id), 60000, 'ivy sees ann\'s fence job');
      await waitFor(() => olgaWs.all.some((m) => m.type === 'job' && m.job.id === fc.id), 60000, 'olga sees cat\'s fence job');
      const about = (id) => (m) => m.job?.id === id || m.job === id || m.id === id;
      assert.deepEqual(olgaWs.all.filter(about(aj.id)), [], 'nothing of ann\'s job reached olga');
      assert.deepEqual(ivyWs.all.filter(about(cj.id)), [], 'nothing of cat\'s job reached ivy');
      assert.ok(ivyWs.all.some((m) => m.type === 'events' && m.job === aj.id), 'ivy gets ann\'s events');
    } finally {
      ivyWs.ws.terminate();
      olgaWs.ws.terminate();
    }
  });

  test('a lab preset: learners of the class start from it; locked and hidden fields are refused when overridden', async () => {
    assertError(await ivy('POST', `/api/v1/classes/${classX}/presets`, { name: 'p', settings: { network: { prototxt: TINY_NET } } }),
      400, 'invalid', /^settings\.dataset: required/);
    assertError(await ivy('POST', `/api/v1/classes/${classX}/presets`,
      { name: 'p', settings: { dataset: dsId, network: { prototxt: TINY_NET } }, locked: ['colour'] }),
    400, 'invalid', /^locked\[0\]: not a field a preset sets/);
    assertError(await ivy('POST', `/api/v1/classes/${classX}/presets`,
      { name: 'p', settings: { dataset: dsId, network: { prototxt: TINY_NET }, epochs: 0 } }),
    400, 'invalid', /^settings: epochs:/);
    // checked as POST /models checks a model made from it: AlexNet does not fit the
    // dataset's 8×8 images, so a learner's Start would be refused — so is the preset
    const alex = { dataset: dsId, network: { standard: 'alexnet' }, epochs: 1 };
    const refused = await ivy('POST', '/api/v1/models', { name: 'a', ...alex });
    assert.equal(refused.status, 400, JSON.stringify(refused.body));
    assertError(await ivy('POST', `/api/v1/classes/${classX}/presets`, { name: 'p', settings: alex }),
      400, 'invalid', new RegExp(`^settings: ${refused.body.error.message.replace(/[.*+?^${}()|[\]\\]/g, '\\$&').slice(0, 40)}`));
    const p = await ivy('POST', `/api/v1/classes/${classX}/presets`, {
      name: 'Lab 1', settings: { dataset: dsId, network: { prototxt: TINY_NET }, epochs: 1, solver: { base_lr: 0.02 } },
      locked: ['network', 'epochs'], hidden: ['solver.base_lr'],
    });
    assert.equal(p.status, 201, JSON.stringify(p.body));
    assertSchema(DOC, 'PresetResponse', p.body);
    presetId = p.body.preset.id;
    assert.equal(p.body.preset.settings.solver.base_lr, 0.02, 'the instructor sees the hidden value');
    assertError(await olga('POST', `/api/v1/classes/${classX}/presets`, { name: 'x', settings: {} }), 404, 'not_found');

    const list = (await ann('GET', '/api/v1/presets')).body;
    assertSchema(DOC, 'PresetList', list);
    assert.deepEqual(list.presets.map((x) => x.id), [presetId]);
    assert.deepEqual(list.presets[0].settings.solver, {}, 'hidden from the learner');
    assert.deepEqual((await cat('GET', '/api/v1/presets')).body.presets, [], 'not in the class: no preset');

    assertError(await ann('POST', '/api/v1/models', { preset: presetId, name: 'p1', epochs: 5 }), 400, 'invalid',
      /^epochs: locked by the lab preset "Lab 1"$/);
    assertError(await ann('POST', '/api/v1/models', { preset: presetId, name: 'p1', network: { standard: 'lenet' } }), 400, 'invalid',
      /^network: locked by the lab preset "Lab 1"$/);
    assertError(await ann('POST', '/api/v1/models', { preset: presetId, name: 'p1', solver: { base_lr: 0.5 } }), 400, 'invalid',
      /^solver\.base_lr: locked by the lab preset "Lab 1"$/);
    assertError(await cat('POST', '/api/v1/models', { preset: presetId, name: 'p1' }), 400, 'invalid',
      new RegExp(`^preset: there is no preset ${presetId}$`));
    const before = (await ann('GET', '/api/v1/models')).body.models.length;
    assert.equal((await ann('GET', '/api/v1/models')).body.models.length, before, 'a refusal made nothing');

    const m = await ann('POST', '/api/v1/models', { preset: presetId, name: 'from-preset', batch_size: 4, solver: { momentum: 0.8 } });
    assert.equal(m.status, 202, JSON.stringify(m.body));
    const params = m.body.job.params;
    assert.equal(params.epochs, 1);
    assert.equal(params.batch_size, 4);
    assert.equal(params.solver.base_lr, undefined, 'hidden from the learner in her own model (preset_hidden.test.mjs)');
    assert.deepEqual(params.preset, { id: presetId, class_id: classX, hidden: ['solver.base_lr'] });
    assert.equal((await ivy('GET', `/api/v1/jobs/${m.body.job.id}`)).body.job.params.solver.base_lr, 0.02, 'the instructor sees it');
    assert.equal(params.solver.momentum, 0.8);
    assert.equal(params.network.prototxt, TINY_NET);
    assert.equal(m.body.job.owner, 'ann');
    assert.equal((await waitState(as(ann), m.body.job.id, ['done', 'error'], 60000)).state, 'done');
  });

  test('a lab preset sets any field of the model kind\'s own list (precision too), not the learner\'s', async () => {
    const p = await ivy('POST', `/api/v1/classes/${classX}/presets`, {
      name: 'Lab fp32', settings: { dataset: dsId, network: { prototxt: TINY_NET }, epochs: 1, precision: 'fp32' },
      locked: ['precision'],
    });
    assert.equal(p.status, 201, JSON.stringify(p.body));
    assertSchema(DOC, 'PresetResponse', p.body);
    assert.equal(p.body.preset.settings.precision, 'fp32');
    assert.deepEqual(p.body.preset.locked, ['precision']);
    assertError(await ann('POST', '/api/v1/models', { preset: p.body.preset.id, name: 'p2', precision: 'bf16' }), 400, 'invalid',
      /^precision: locked by the lab preset "Lab fp32"$/);
    for (const [field, value] of [['gpus', 1], ['group', 'g'], ['resume', {}]]) {
      assertError(await ivy('POST', `/api/v1/classes/${classX}/presets`,
        { name: 'x', settings: { dataset: dsId, network: { prototxt: TINY_NET }, [field]: value } }),
      400, 'invalid', new RegExp(`^settings\\.${field}: unknown field$`));
    }
    assert.equal((await ivy('DELETE', `/api/v1/classes/${classX}/presets/${p.body.preset.id}`)).status, 204);
  });

  test('the dashboard lists both learners\' runs with state, progress, best val accuracy and time used', async () => {
    const d = await ivy('GET', `/api/v1/classes/${classX}/dashboard`);
    assert.equal(d.status, 200, JSON.stringify(d.body));
    assertSchema(DOC, 'Dashboard', d.body);
    const runs = d.body.runs;
    assert.deepEqual([...new Set(runs.map((r) => r.user.name))], ['ann', 'ben']);
    const a = runs.find((r) => r.id === annModel);
    assert.equal(a.state, 'done');
    assert.equal(a.progress, 1);
    assert.ok(a.best_val_accuracy >= 0 && a.best_val_accuracy <= 1, String(a.best_val_accuracy));
    assert.ok(a.time_used_s > 0);
    assert.equal(runs.find((r) => r.id === benModel).state, 'aborted');
    assert.ok(!runs.some((r) => r.id === catJob));
    assertError(await ann('GET', `/api/v1/classes/${classX}/dashboard`), 403, 'forbidden');
    assertError(await olga('GET', `/api/v1/classes/${classX}/dashboard`), 404, 'not_found');
    assert.equal((await root('GET', `/api/v1/classes/${classX}/dashboard`)).status, 200);
  });

  test('deleting a class takes its shares and presets, not the accounts or jobs', async () => {
    assert.equal((await ivy('DELETE', `/api/v1/classes/${classX}`)).status, 204);
    assertError(await ann('GET', `/api/v1/datasets/${dsId}`), 404, 'not_found'); // no longer shared
    assert.equal((await ann('GET', `/api/v1/models/${annModel}`)).status, 200);
    assertError(await ivy('GET', `/api/v1/models/${annModel}`), 404, 'not_found'); // no longer her learner
    assert.deepEqual((await ann('GET', '/api/v1/presets')).body.presets, []);
    const audit = (await root('GET', '/api/v1/audit?limit=1000')).body.audit;
    for (const action of ['class_create', 'class_roster', 'class_dataset_share', 'class_preset_add', 'class_delete']) {
      assert.ok(audit.some((e) => e.action === action && e.user === 'ivy'), action);
    }
  });
});
