// jobs_security.test.mjs — issue 16, findings 1 and 5, through the real server.
//
// Every way a job could reach what its caller may not: a server folder outside
// --data-root (straight, through a symlink inside an allowed root, through ".."),
// list files with a labels file outside and a base of "/", an upload "file" path
// that climbs out of DATA/uploads (the old rename-then-delete), other users'
// datasets, models, evaluation sources, fine-tune sources, previous networks and
// parents by id, source.limits, the test kind and an unknown kind, a clone and a
// resume after the dataset's share was revoked, and a job row whose params were
// changed behind the server's back (the worker's own check).  Each is sent through
// POST /api/v1/jobs and through the dedicated route, as learner A (ann), learner
// B (ben), the instructor of A's class (teach), an instructor of no class of A's
// (olga) and the admin (root).  A sentinel tree outside the data folder must be
// exactly as it was after every attack: nothing read into a dataset, moved or
// deleted.  Finding 5: an instructor cannot enrol an admin or another instructor
// (member route, roster), and an admin or instructor a class holds anyway gives
// its instructor no rights over their jobs.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync, readFileSync, readdirSync, statSync, symlinkSync, existsSync, realpathSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { join, basename } from 'node:path';
import {
  TEST_TMP, startServer, waitFor, assertError, writeColourFolders, TINY_NET, endServer } from './helpers.mjs';
import { makeAccounts, userClient } from '../lib/auth.mjs';

const COLOURS = { red: [200, 30, 30], green: [30, 200, 40] };
const ROLES = ['ann', 'ben', 'teach', 'olga', 'root'];

/** Every file under dir with its size and SHA-256: what "untouched" means. */
function snapshot(dir) {
  const out = {};
  const walk = (d, rel) => {
    for (const name of readdirSync(d).sort()) {
      const p = join(d, name), r = rel ? `${rel}/${name}` : name;
      const st = statSync(p);
      if (st.isDirectory()) walk(p, r);
      else out[r] = `${st.size}:${createHash('sha256').update(readFileSync(p)).digest('hex')}`;
    }
  };
  walk(dir, '');
  return out;
}

describe('job security: every route checks every reference, as every role', () => {
  let acc, server, work, allowed, outside, sentinel;
  const as = {};
  let annDs, annModel, annEval, teachDs, classId;
  const own = {}; // each role's own finished dataset and model, to name beside A's
  const counted = new Set(); // "route × role × reference" combinations checked

  /** Wait until job id is in one of states, asked as the admin (the server has accounts). */
  const waitJob = (id, states, timeout = 15000) => {
    const want = Array.isArray(states) ? states : [states];
    return waitFor(async () => {
      const r = await as.root('GET', `/api/v1/jobs/${id}`);
      return r.status === 200 && want.includes(r.body.job.state) ? r.body.job : null;
    }, timeout, `job ${id} to become ${want.join('|')}`);
  };
  const untouched = () => assert.deepEqual(snapshot(outside), sentinel, 'the sentinel tree outside the data folder changed');

  before(async () => {
    acc = makeAccounts({ root: 'admin', teach: 'instructor', olga: 'instructor', ann: 'learner', ben: 'learner' });
    work = mkdtempSync(join(TEST_TMP, 'deepdesk-sec-'));
    allowed = join(work, 'allowed');
    outside = join(work, 'outside');
    writeColourFolders(join(allowed, 'colours'), COLOURS, 6);
    writeColourFolders(join(allowed, 'teach-colours'), COLOURS, 6);
    // the sentinel tree: a class-folder tree a dataset would happily build from,
    // a "passwd", list files with absolute paths into it, and a file to rename
    writeColourFolders(join(outside, 'secret'), COLOURS, 4);
    writeFileSync(join(outside, 'passwd'), 'root:x:0:0:root:/root:/bin/sh\n');
    writeFileSync(join(outside, 'x'), 'sentinel: must not move\n');
    writeFileSync(join(outside, 'train.txt'), `${join(outside, 'secret/red/0.ppm')} 0\n${join(outside, 'secret/green/0.ppm')} 1\n`);
    // inside the allowed root: a symlink out, and a list naming files outside
    symlinkSync(join(outside, 'secret'), join(allowed, 'escape'));
    writeFileSync(join(allowed, 'labels.txt'), 'red\ngreen\n');
    writeFileSync(join(allowed, 'train.txt'), `${join(outside, 'secret/red/0.ppm')} 0\n../outside/secret/green/0.ppm 1\n`);
    sentinel = snapshot(outside);
    server = await startServer({
      dataDir: acc.data, testKindAdminOnly: true,
      args: ['--accounts', 'on', '--data-root', allowed, '--cpu-slots', '2', '--archive-max-files', '50'],
    });
    for (const n of ROLES) as[n] = await userClient(server, n);
    // A's class, instructed by teach; olga instructs nothing of A's
    const k = await as.teach('POST', '/api/v1/classes', { name: 'lab' });
    assert.equal(k.status, 201, JSON.stringify(k.body));
    classId = k.body.class.id;
    assert.equal((await as.teach('POST', `/api/v1/classes/${classId}/members`, { name: 'ann' })).status, 200);

    const dataset = async (who, dir) => {
      const r = await as[who]('POST', '/api/v1/datasets', { name: `${who}-ds`, source: { type: 'folder', train: join(allowed, dir) },
        options: { width: 8, height: 8, channels: 3, val_pct: 25, seed: 1 } });
      assert.equal(r.status, 202, JSON.stringify(r.body));
      const j = await waitJob(r.body.job.id, ['done', 'error'], 30000);
      assert.equal(j.state, 'done', j.error);
      return r.body.job.id;
    };
    const model = async (who, ds) => {
      const r = await as[who]('POST', '/api/v1/models', { name: `${who}-model`, dataset: ds, network: { prototxt: TINY_NET }, epochs: 1 });
      assert.equal(r.status, 202, JSON.stringify(r.body));
      const j = await waitJob(r.body.job.id, ['done', 'error'], 60000);
      assert.equal(j.state, 'done', j.error);
      return r.body.job.id;
    };
    for (const who of ROLES) {
      const ds = await dataset(who, 'colours');
      own[who] = { ds, model: await model(who, ds) };
    }
    annDs = own.ann.ds;
    annModel = own.ann.model;
    teachDs = await dataset('teach', 'teach-colours');
    const ev = await as.ann('POST', '/api/v1/evaluations', { model: annModel, source: { dataset: annDs, split: 'val' } });
    assert.equal(ev.status, 202, JSON.stringify(ev.body));
    annEval = ev.body.job.id;
    await waitJob(annEval, ['done', 'error'], 30000);
  });

  after(() => endServer(server, acc.dir, work));

  /** POST a dataset source through both doors as who; both answers. */
  async function bothDoors(who, source, extra = {}) {
    const generic = await as[who]('POST', '/api/v1/jobs', { kind: 'dataset', name: 'attack', params: { source, ...extra } });
    const dedicated = await as[who]('POST', '/api/v1/datasets', { name: 'attack', source, ...extra });
    return [generic, dedicated];
  }

  test('server paths: outside --data-root, a symlink out, "..", list files with a labels file outside or a base of /', async () => {
    const attacks = [
      ['folder outside', { type: 'folder', train: join(outside, 'secret') }, /^source\.train: /],
      ['symlink inside an allowed root', { type: 'folder', train: join(allowed, 'escape') }, /^source\.train: /],
      ['..', { type: 'folder', train: `${allowed}/../outside/secret` }, /^source\.train: /],
      ['val outside', { type: 'folder', train: join(allowed, 'colours'), val: join(outside, 'secret') }, /^source\.val: /],
      ['labels outside', { type: 'lists', train: join(allowed, 'train.txt'), labels: join(outside, 'passwd'), base: allowed }, /^source\.labels: /],
      ['base of /', { type: 'lists', train: join(allowed, 'train.txt'), labels: join(allowed, 'labels.txt'), base: '/' }, /^source\.base: /],
      ['list outside', { type: 'lists', train: join(outside, 'train.txt'), labels: join(allowed, 'labels.txt') }, /^source\.train: /],
    ];
    for (const who of ROLES) {
      for (const [what, source, field] of attacks) {
        for (const [door, r] of (await bothDoors(who, source)).map((r, i) => [i ? 'POST /datasets' : 'POST /jobs', r])) {
          assertError(r, 403, 'forbidden', field);
          assert.ok(!r.body.error.message.includes(acc.data), `${who} ${what} ${door}: names the data folder`);
          counted.add(`${door}|${who}|${what}`);
        }
      }
    }
    untouched();
  });

  test('a list inside an allowed root naming files outside it builds nothing from them', async () => {
    const r = await as.ann('POST', '/api/v1/jobs', { kind: 'dataset', name: 'lists', params: {
      source: { type: 'lists', train: join(allowed, 'train.txt'), labels: join(allowed, 'labels.txt') } } });
    assert.equal(r.status, 202, JSON.stringify(r.body));
    assert.equal(r.body.job.params.source.base, realpathSync(allowed), 'base: the list\'s own folder');
    const j = await waitJob(r.body.job.id, ['done', 'error'], 30000);
    assert.equal(j.state, 'error', 'every line leads outside the list\'s folder: no images');
    untouched();
  });

  test('uploads by id only: a "file" that climbs out of DATA/uploads is refused, nothing renamed; DELETE deletes nothing of it', async () => {
    assert.equal((await as.ann('POST', '/api/v1/uploads?name=j.zip', 'junk')).status, 201); // DATA/uploads exists
    const climb = `${acc.data}/uploads/../../../${basename(work)}/outside/x`;
    assert.ok(existsSync(climb), climb);
    for (const file of [climb, join(outside, 'x')]) {
      for (const who of ROLES) {
        for (const [door, r] of (await bothDoors(who, { type: 'upload', file })).map((r, i) => [i ? 'POST /datasets' : 'POST /jobs', r])) {
          assertError(r, 400, 'invalid', /^source\.file: unknown field; give an upload by its id/);
          counted.add(`${door}|${who}|upload file`);
        }
        const ev = await as[who]('POST', '/api/v1/evaluations', { model: annModel, source: { file } });
        assert.ok([400].includes(ev.status), JSON.stringify(ev.body));
        const evg = await as[who]('POST', '/api/v1/jobs', { kind: 'evaluation', params: { model: annModel, source: { file } } });
        assert.equal(evg.status, 400, JSON.stringify(evg.body));
        counted.add(`POST /evaluations|${who}|upload file`);
        counted.add(`POST /jobs evaluation|${who}|upload file`);
      }
    }
    // an id that is not one: refused by name, nothing created
    const [g, d] = await bothDoors('ann', { type: 'upload', upload: '../../outside/x' });
    assertError(g, 400, 'invalid', /^source\.upload: /);
    assertError(d, 400, 'invalid', /^source\.upload: /);
    untouched();
  });

  test('the archive caps are the server\'s: source.limits is refused on every route', async () => {
    const up = await as.ann('POST', '/api/v1/uploads?name=a.zip', 'not really a zip');
    assert.equal(up.status, 201);
    for (const who of ROLES) {
      for (const [door, r] of (await bothDoors(who, { type: 'upload', upload: up.body.upload.id, limits: { max_files: 1e9, max_bytes: 1e15 } }))
        .map((r, i) => [i ? 'POST /datasets' : 'POST /jobs', r])) {
        assertError(r, 400, 'invalid', /^source\.limits: unknown field; the caps on unpacking are the server's/);
        counted.add(`${door}|${who}|source.limits`);
      }
      const ev = await as[who]('POST', '/api/v1/jobs', { kind: 'evaluation', params: { model: annModel, source: { upload: up.body.upload.id, limits: { max_files: 1e9 } } } });
      assertError(ev, 400, 'invalid', /^source\.limits: /);
      counted.add(`POST /jobs evaluation|${who}|source.limits`);
    }
  });

  test('other users\' jobs by id: dataset, previous network, fine-tune, evaluation model and source, parents, archive_of', async () => {
    // what each role may use of A's: A, A's instructor and the admin yes; B and olga no
    const mayUse = { ann: true, teach: true, root: true, ben: false, olga: false };
    const none = 999999;
    const refs = [
      // [what, generic body, dedicated [path, body] or null, field]
      ['dataset', (id) => ({ kind: 'model', params: { dataset: id, network: { prototxt: TINY_NET }, epochs: 1 } }),
        (id) => ['/api/v1/models', { name: 'm', dataset: id, network: { prototxt: TINY_NET }, epochs: 1 }], 'dataset', 'ds'],
      ['network.previous', (id) => ({ kind: 'model', params: { dataset: ownDs, network: { previous: id }, epochs: 1 } }),
        (id) => ['/api/v1/models', { name: 'm', dataset: ownDs, network: { previous: id }, epochs: 1 }], 'network.previous', 'model'],
      ['finetune.model', (id) => ({ kind: 'model', params: { dataset: ownDs, network: { prototxt: TINY_NET }, finetune: { model: id }, epochs: 1 } }),
        (id) => ['/api/v1/models', { name: 'm', dataset: ownDs, network: { prototxt: TINY_NET }, finetune: { model: id }, epochs: 1 }], 'finetune.model', 'model'],
      ['evaluation model', (id) => ({ kind: 'evaluation', params: { model: id, source: { dataset: ownDs } } }),
        (id) => ['/api/v1/evaluations', { model: id, source: { dataset: ownDs } }], 'model', 'model'],
      ['evaluation source', (id) => ({ kind: 'evaluation', params: { model: ownModel, source: { dataset: id } } }),
        (id) => ['/api/v1/evaluations', { model: ownModel, source: { dataset: id } }], 'source.dataset', 'ds'],
      ['parents', (id) => ({ kind: 'dataset', params: { source: { type: 'folder', train: join(allowed, 'colours') } }, parents: [id] }),
        null, 'parents', 'ds'],
      ['archive_of', (id) => ({ kind: 'evaluation', params: { model: ownModel, source: { archive_of: id } } }), null, 'source.archive_of', 'eval'],
    ];
    const made = [];
    let ownDs, ownModel; // the caller's own, beside A's in the same body
    for (const who of ROLES) {
      ({ ds: ownDs, model: ownModel } = own[who]);
      for (const [what, generic, dedicated, field, which] of refs) {
        const theirs = which === 'ds' ? annDs : which === 'model' ? annModel : annEval;
        const doors = [['POST /jobs', (id) => as[who]('POST', '/api/v1/jobs', generic(id))]];
        if (dedicated) doors.push([`POST ${dedicated(0)[0].replace('/api/v1', '')}`, (id) => as[who]('POST', ...dedicated(id))]);
        for (const [door, send] of doors) {
          const r = await send(theirs);
          const msg = JSON.stringify(r.body);
          counted.add(`${door}|${who}|${what}`);
          if (mayUse[who]) {
            // allowed to use it: never the "no such job" answer (it may still be refused
            // for another reason, e.g. an evaluation's archive_of without an archive)
            assert.ok(!(r.status === 400 && /there is no job|does not exist/.test(r.body.error.message)), `${who} ${what} ${door}: ${msg}`);
            if (r.status === 202) made.push(r.body.job?.id ?? r.body.models?.[0]?.id);
          } else {
            assertError(r, 400, 'invalid', field === 'parents' ? new RegExp(`^parent job ${theirs} does not exist$`)
              : new RegExp(`^${field.replace('.', '\\.')}: there is no job ${theirs}$`));
            // worded exactly as a job that does not exist
            const absent = await send(none);
            assert.equal(absent.body.error.message.replace(String(none), 'N'), r.body.error.message.replace(String(theirs), 'N'), `${who} ${what} ${door}`);
          }
        }
      }
    }
    for (const id of made.filter(Boolean)) {
      await as.root('POST', `/api/v1/jobs/${id}/abort`);
    }
    untouched();
  });

  test('the test kind and an unknown kind: admins only, named', async () => {
    for (const who of ['ann', 'ben', 'teach', 'olga']) {
      assertError(await as[who]('POST', '/api/v1/jobs', { kind: 'test', params: { steps: 1 } }), 403, 'forbidden', /^kind: "test" jobs are for admins only$/);
      assertError(await as[who]('POST', '/api/v1/jobs', { kind: 'shell', params: { cmd: 'rm -rf /' } }), 400, 'invalid', /^kind: unknown job kind "shell"$/);
      counted.add(`POST /jobs|${who}|kind test`);
      counted.add(`POST /jobs|${who}|kind unknown`);
    }
    const ok = await as.root('POST', '/api/v1/jobs', { kind: 'test', params: { steps: 1, step_ms: 1 } });
    assert.equal(ok.status, 202, JSON.stringify(ok.body));
    assertError(await as.root('POST', '/api/v1/jobs', { kind: 'shell' }), 400, 'invalid', /^kind: unknown job kind/);
    counted.add('POST /jobs|root|kind test');
    counted.add('POST /jobs|root|kind unknown');
    await waitJob(ok.body.job.id, ['done', 'error']);
  });

  test('a clone and a resume are checked again: a revoked share stops both', async () => {
    assert.equal((await as.teach('POST', `/api/v1/classes/${classId}/datasets`, { dataset: teachDs })).status, 200);
    const m = await as.ann('POST', '/api/v1/models', { name: 'on-shared', dataset: teachDs, network: { prototxt: TINY_NET }, epochs: 1 });
    assert.equal(m.status, 202, JSON.stringify(m.body));
    const done = await waitJob(m.body.job.id, ['done', 'error'], 60000);
    assert.equal(done.state, 'done', done.error);
    const before = await as.ann('POST', `/api/v1/jobs/${m.body.job.id}/clone`);
    assert.equal(before.status, 202, JSON.stringify(before.body));
    await as.ann('POST', `/api/v1/jobs/${before.body.job.id}/abort`);
    assert.equal((await as.teach('DELETE', `/api/v1/classes/${classId}/datasets/${teachDs}`)).status, 204);
    for (const who of ['ann', 'teach', 'root']) {
      // the clone is ann's, so it is checked as ann, whoever asks
      assertError(await as[who]('POST', `/api/v1/jobs/${m.body.job.id}/clone`), 400, 'invalid', new RegExp(`^dataset: there is no job ${teachDs}$`));
      assertError(await as[who]('POST', `/api/v1/models/${m.body.job.id}/resume`, { epochs: 3 }), 400, 'invalid', new RegExp(`^dataset: there is no job ${teachDs}$`));
      counted.add(`POST /jobs/{id}/clone|${who}|revoked dataset`);
      counted.add(`POST /models/{id}/resume|${who}|revoked dataset`);
    }
    // a clone of ann's own upload-free model still works
    const own = await as.ann('POST', `/api/v1/jobs/${annModel}/clone`);
    assert.equal(own.status, 202, JSON.stringify(own.body));
    await as.ann('POST', `/api/v1/jobs/${own.body.job.id}/abort`);
  });

  test('the worker\'s own check: params changed behind the server\'s back read and move nothing', async () => {
    // hold both CPU slots, so the next job waits queued while its job.json is changed
    const hold = await as.root('POST', '/api/v1/jobs', { kind: 'test', params: { steps: 2000, step_ms: 10 }, resources: { cpu_slots: 2 } });
    assert.equal(hold.status, 202, JSON.stringify(hold.body));
    await waitJob(hold.body.job.id, 'running');
    const mk = async (name) => {
      const r = await as.ann('POST', '/api/v1/jobs', { kind: 'dataset', name, params: { source: { type: 'folder', train: join(allowed, 'colours') },
        options: { width: 8, height: 8 } } });
      assert.equal(r.status, 202, JSON.stringify(r.body));
      return r.body.job.id;
    };
    const folderJob = await mk('rewritten-folder');
    const uploadJob = await mk('rewritten-upload');
    const listsJob = await mk('rewritten-lists');
    const rewrite = (id, source) => {
      const p = join(acc.data, 'jobs', String(id), 'job.json');
      const j = JSON.parse(readFileSync(p, 'utf8'));
      j.params.source = source;
      j.params.options = { width: 8, height: 8 };
      j.guard = { roots: ['/'], max_files: 1e12, max_bytes: 1e15 }; // the server writes its own again at start
      writeFileSync(p, JSON.stringify(j));
    };
    rewrite(folderJob, { type: 'folder', train: join(outside, 'secret') });
    rewrite(uploadJob, { type: 'upload', file: `${acc.data}/uploads/../../outside/x`, limits: { max_files: 1e12 } });
    rewrite(listsJob, { type: 'lists', train: join(outside, 'train.txt'), labels: join(outside, 'passwd'), base: '/' });
    assert.equal((await as.root('POST', `/api/v1/jobs/${hold.body.job.id}/abort`)).status, 202);
    const f = await waitJob(folderJob, ['done', 'error'], 30000);
    assert.equal(f.state, 'error');
    assert.match(f.error, /^source\.train: .* is not below the server's --data-root folders/);
    const u = await waitJob(uploadJob, ['done', 'error'], 30000);
    assert.equal(u.state, 'error');
    assert.match(u.error, /^source\.file: .* is not an upload/);
    const l = await waitJob(listsJob, ['done', 'error'], 30000);
    assert.equal(l.state, 'error');
    assert.match(l.error, /^source\.train: .* is not below the server's --data-root folders/);
    untouched();
    // DELETE takes the job's own folder, and nothing outside it
    for (const id of [folderJob, uploadJob, listsJob]) {
      assert.equal((await as.ann('DELETE', `/api/v1/jobs/${id}`)).status, 204);
      assert.ok(!existsSync(join(acc.data, 'jobs', String(id))));
    }
    untouched();
  });

  test('finding 5: an instructor enrols learners only, and a class gives no rights over an admin\'s or instructor\'s jobs', async () => {
    const rootJob = (await as.root('POST', '/api/v1/jobs', { kind: 'test', name: 'root-secret', params: { steps: 1, step_ms: 1 } })).body.job.id;
    const up = await as.olga('POST', '/api/v1/uploads?name=o.zip', 'x');
    const olgaJob = (await as.olga('POST', '/api/v1/datasets', { name: 'olga-secret', source: { type: 'upload', upload: up.body.upload.id } })).body.job.id;
    await waitJob(rootJob, ['done', 'error']);
    await waitJob(olgaJob, ['done', 'error']);
    for (const name of ['root', 'olga']) {
      assertError(await as.teach('POST', `/api/v1/classes/${classId}/members`, { name }), 403, 'forbidden', new RegExp(`^name: ${name} is an (admin|instructor); an instructor enrols learners only$`));
      assertError(await as.teach('POST', `/api/v1/classes/${classId}/roster`, { csv: `ann\n${name}\n` }), 403, 'forbidden', new RegExp(`^csv: line 2: ${name} is an `));
      counted.add(`POST /classes/{id}/members|teach|${name}`);
      counted.add(`POST /classes/{id}/roster|teach|${name}`);
    }
    assertError(await as.teach('POST', `/api/v1/classes/${classId}/roster`, { csv: 'newta,instructor\n' }), 403, 'forbidden', /^csv: line 1: role: only an admin's roster makes instructors$/);
    const members = (await as.teach('GET', `/api/v1/classes/${classId}`)).body.class.members.map((m) => m.name);
    assert.deepEqual(members, ['ann']);
    // an admin may enrol anyone; the membership still gives teach nothing over them
    for (const name of ['root', 'olga']) assert.equal((await as.root('POST', `/api/v1/classes/${classId}/members`, { name })).status, 200);
    for (const id of [rootJob, olgaJob]) {
      for (const [method, path] of [['GET', `/api/v1/jobs/${id}`], ['POST', `/api/v1/jobs/${id}/abort`], ['DELETE', `/api/v1/jobs/${id}`],
        ['POST', `/api/v1/jobs/${id}/clone`], ['GET', `/api/v1/jobs/${id}/events`]]) {
        assertError(await as.teach(method, path), 404, 'not_found', new RegExp(`^job ${id} does not exist$`));
        counted.add(`${method} ${path.replace(String(id), '{id}')}|teach|enrolled ${id === rootJob ? 'admin' : 'instructor'}`);
      }
      // nor may teach build on them
      assertError(await as.teach('POST', '/api/v1/jobs', { kind: 'dataset', params: { source: { type: 'folder', train: join(allowed, 'colours') } }, parents: [id] }),
        400, 'invalid', new RegExp(`^parent job ${id} does not exist$`));
    }
    const listed = (await as.teach('GET', '/api/v1/jobs?limit=1000')).body.jobs.map((j) => j.id);
    assert.ok(!listed.includes(rootJob) && !listed.includes(olgaJob), 'teach lists the admin\'s or olga\'s jobs');
    assert.ok(listed.includes(annDs), 'teach still sees her learner\'s');
    const dash = (await as.teach('GET', `/api/v1/classes/${classId}/dashboard`)).body;
    assert.ok(dash.runs.every((r) => r.user.name === 'ann'), JSON.stringify(dash.runs.map((r) => r.user.name)));
    assert.ok(existsSync(join(acc.data, 'jobs', String(rootJob))));
  });

  test('the figure', () => {
    // every combination above is one route × role × reference checked
    assert.ok(counted.size > 150, `${counted.size} combinations`);
    console.log(`# jobs_security: ${counted.size} route × role × reference combinations checked`);
  });
});
