// segmentation.test.mjs — segmentation datasets through the server: an archive
// made from `deepdesk example segmentation` (with an image without its label, a
// label without its image and a label of the wrong size) uploaded and built into
// features and labels LMDBs; dataset.json's task, classes, palette, counts and
// skipped pairs; a colour map inline and as a .txt upload; a hostile archive
// and a bad colour map are clear errors.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, copyFileSync, readFileSync, existsSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServer, waitState, assertError, killTrackedPids } from './helpers.mjs';
import { BIN } from '../lib/server.mjs';

const PY = '/usr/bin/python3';

async function upload(server, name, data) {
  const res = await fetch(`${server.url}/api/v1/uploads?name=${encodeURIComponent(name)}`, { method: 'POST', body: data });
  return { status: res.status, body: await res.json() };
}

describe('segmentation datasets', () => {
  let server, work, archive;
  before(async () => {
    work = mkdtempSync(join(tmpdir(), 'deepdesk-seg-'));
    const shapes = join(work, 'shapes'), small = join(work, 'small');
    execFileSync(BIN, ['example', 'segmentation', shapes, '--count', '20', '--size', '64x48', '--seed', '1']);
    execFileSync(BIN, ['example', 'segmentation', small, '--count', '1', '--size', '32x32', '--seed', '2']);
    copyFileSync(join(small, 'labels', '00000.png'), join(shapes, 'labels', '00003.png')); // the wrong size
    copyFileSync(join(shapes, 'labels', '00001.png'), join(shapes, 'labels', 'orphan.png')); // no image
    copyFileSync(join(shapes, 'images', '00002.png'), join(shapes, 'images', 'lonely.png')); // no label
    archive = join(work, 'shapes.tar.gz');
    execFileSync('tar', ['czf', archive, '-C', work, 'shapes']);
    server = await startServer();
  });
  after(() => { killTrackedPids(); server?.stop(); server?.cleanup(); rmSync(work, { recursive: true, force: true }); });

  test('an uploaded archive of images/ and labels/ becomes a segmentation dataset', async () => {
    const up = await upload(server, 'shapes.tar.gz', readFileSync(archive));
    assert.equal(up.status, 201);
    const r = await server.api('POST', '/api/v1/datasets', {
      name: 'shapes', task: 'segmentation',
      source: { type: 'upload', upload: up.body.upload.id, name: 'shapes.tar.gz' },
      options: { width: 64, height: 48, seed: 3 },
    });
    assert.equal(r.status, 202, JSON.stringify(r.body));
    const job = await waitState(server, r.body.job.id, ['done', 'error'], 60000);
    assert.equal(job.state, 'done', job.error);
    const d = await server.api('GET', `/api/v1/datasets/${r.body.job.id}`);
    assert.equal(d.status, 200);
    const s = d.body.dataset.summary;
    assert.equal(s.task, 'segmentation');
    assert.equal(s.classes, 4);
    assert.deepEqual(s.labels, ['background', 'circle', 'square', 'triangle']);
    assert.deepEqual(s.palette, [[0, 0, 0], [128, 0, 0], [0, 128, 0], [128, 128, 0]]);
    assert.deepEqual(s.label_modes, ['palette']);
    assert.equal(s.options.val_pct, 10); // DIGITS' segmentation default
    assert.equal(s.splits.train.images + s.splits.val.images, 19);
    assert.equal(s.splits.train.listed + s.splits.val.listed, 20);
    assert.ok(s.splits.val.images >= 1);
    const why = Object.fromEntries(s.skipped.map((k) => [k.path, k.reason]));
    assert.match(why['images/00003.png'] || '', /its label 00003\.png is 32x32 but the image is 64x48/, JSON.stringify(s.skipped));
    assert.match(why['labels/orphan.png'] || '', /a label with no image/);
    assert.match(why['images/lonely.png'] || '', /an image with no label/);
    assert.equal(s.skipped.length, 3);
    // the features and the labels databases, side by side in the job's folder
    const dir = join(server.dataDir, 'jobs', String(r.body.job.id));
    for (const db of ['train_db', 'val_db', 'train_labels_db', 'val_labels_db', 'labels.txt'])
      assert.ok(existsSync(join(dir, db)), db);
    assert.ok(!existsSync(join(dir, 'source')), 'the unpacked copy is removed');
  });

  test('a colour map inline or uploaded as .txt maps palette colours to classes; a bad line is refused', async () => {
    const map = '0 0 0\n128,0,0\n0, 128, 0\n128 128 0\n';
    const up = await upload(server, 'shapes.tar.gz', readFileSync(archive));
    const txt = await upload(server, 'classes.txt', Buffer.from(map));
    assert.equal(txt.status, 201);
    const r = await server.api('POST', '/api/v1/jobs', {
      kind: 'dataset', name: 'mapped',
      params: { task: 'segmentation', colormap: { upload: txt.body.upload.id },
        source: { type: 'upload', upload: up.body.upload.id }, options: { width: 32, height: 24, val_pct: 20 } },
    });
    assert.equal(r.status, 202, JSON.stringify(r.body));
    const job = await waitState(server, r.body.job.id, ['done', 'error'], 60000);
    assert.equal(job.state, 'done', job.error);
    const d = await server.api('GET', `/api/v1/datasets/${r.body.job.id}`);
    assert.equal(d.body.dataset.summary.options.colormap, true);
    assert.equal(d.body.dataset.summary.classes, 4);

    const up2 = await upload(server, 'shapes.tar.gz', readFileSync(archive));
    const bad = await server.api('POST', '/api/v1/datasets', {
      name: 'bad map', task: 'segmentation', colormap: { text: '0 0 0\n1 2\n' },
      source: { type: 'upload', upload: up2.body.upload.id },
    });
    assertError(bad, 400, 'invalid', /colormap line 2: expected three numbers 0 to 255/);
    const badtxt = await upload(server, 'bad.txt', Buffer.from('0 0 0\n300 0 0\n'));
    const bad2 = await server.api('POST', '/api/v1/datasets', {
      name: 'bad map', task: 'segmentation', colormap: { upload: badtxt.body.upload.id },
      source: { type: 'upload', upload: up2.body.upload.id },
    });
    assertError(bad2, 400, 'invalid', /colormap line 2/);
    // a text upload is never an archive source, and a colour map is for segmentation only
    const asSource = await server.api('POST', '/api/v1/datasets', { name: 'x', source: { type: 'upload', upload: txt.body.upload.id } });
    assertError(asSource, 400, 'invalid', /source\.upload/);
    const cls = await server.api('POST', '/api/v1/datasets', {
      name: 'x', colormap: { text: map }, source: { type: 'upload', upload: up2.body.upload.id } });
    assertError(cls, 400, 'invalid', /colormap: only for "task": "segmentation"/);
    const task = await server.api('POST', '/api/v1/datasets', {
      name: 'x', task: 'detection', source: { type: 'upload', upload: up2.body.upload.id } });
    assertError(task, 400, 'invalid', /task: must be "classification" or "segmentation"/);
    const tp = await server.api('POST', '/api/v1/datasets', {
      name: 'x', task: 'segmentation', options: { test_pct: 10 }, source: { type: 'upload', upload: up2.body.upload.id } });
    assertError(tp, 400, 'invalid', /options\.test_pct: not for a segmentation dataset/);
  });

  test('a hostile archive fails the job with its reason; an archive without labels/ explains the layout', async () => {
    const evil = join(work, 'evil.tar');
    execFileSync(PY, ['-c', `
import tarfile, io, sys
with tarfile.open(sys.argv[1], 'w') as t:
    for name in ['images/1.ppm', 'labels/1.ppm', '../../escaped.ppm']:
        data = b'P6\\n1 1\\n255\\n' + bytes(3)
        i = tarfile.TarInfo(name); i.size = len(data); t.addfile(i, io.BytesIO(data))`, evil]);
    const up = await upload(server, 'evil.tar', readFileSync(evil));
    const r = await server.api('POST', '/api/v1/datasets', { name: 'evil', task: 'segmentation', source: { type: 'upload', upload: up.body.upload.id } });
    assert.equal(r.status, 202);
    const job = await waitState(server, r.body.job.id, ['done', 'error'], 60000);
    assert.equal(job.state, 'error');
    assert.match(job.error, /climbs out/);
    assert.ok(!existsSync(join(server.dataDir, 'escaped.ppm')) && !existsSync(join(server.dataDir, 'jobs', 'escaped.ppm')));

    const flat = join(work, 'flat.tar');
    execFileSync('tar', ['cf', flat, '-C', join(work, 'shapes'), 'images']);
    const up2 = await upload(server, 'flat.tar', readFileSync(flat));
    const r2 = await server.api('POST', '/api/v1/datasets', { name: 'flat', task: 'segmentation', source: { type: 'upload', upload: up2.body.upload.id } });
    const job2 = await waitState(server, r2.body.job.id, ['done', 'error'], 60000);
    assert.equal(job2.state, 'error');
    assert.match(job2.error, /holds no images\/ and labels\/ folders/);
  });

  test('the synthetic example as a source; a server folder needs a --data-root', async () => {
    const r = await server.api('POST', '/api/v1/datasets', {
      name: 'example', task: 'segmentation', source: { type: 'example', name: 'segmentation' },
      options: { width: 64, height: 64 } });
    assert.equal(r.status, 202, JSON.stringify(r.body));
    const job = await waitState(server, r.body.job.id, ['done', 'error'], 120000);
    assert.equal(job.state, 'done', job.error);
    const d = await server.api('GET', `/api/v1/datasets/${r.body.job.id}`);
    assert.equal(d.body.dataset.summary.splits.train.images + d.body.dataset.summary.splits.val.images, 200);
    // no --data-root: a server folder is refused
    const f = await server.api('POST', '/api/v1/datasets', {
      name: 'f', task: 'segmentation', source: { type: 'folder', train: join(work, 'shapes') } });
    assert.ok(f.status === 400 || f.status === 403, JSON.stringify(f.body));
    assert.match(f.body.error.message, /source\.train/);
  });
});

describe('segmentation datasets from server folders', () => {
  let server, work;
  before(async () => {
    work = mkdtempSync(join(tmpdir(), 'deepdesk-segf-'));
    execFileSync(BIN, ['example', 'segmentation', join(work, 'root', 'train'), '--count', '12', '--size', '40x30', '--seed', '4']);
    execFileSync(BIN, ['example', 'segmentation', join(work, 'root', 'val'), '--count', '5', '--size', '40x30', '--seed', '5']);
    rmSync(join(work, 'root', 'val', 'labels', '00004.png'));
    execFileSync(BIN, ['example', 'segmentation', join(work, 'outside'), '--count', '2', '--size', '40x30']);
    server = await startServer({ args: ['--data-root', join(work, 'root')] });
  });
  after(() => { killTrackedPids(); server?.stop(); server?.cleanup(); rmSync(work, { recursive: true, force: true }); });

  test('a separate validation folder gives the val split; folders outside --data-root are refused', async () => {
    const r = await server.api('POST', '/api/v1/datasets', {
      name: 'folders', task: 'segmentation',
      source: { type: 'folder', train: join(work, 'root', 'train'), val: join(work, 'root', 'val') },
      options: { width: 40, height: 30 } });
    assert.equal(r.status, 202, JSON.stringify(r.body));
    const job = await waitState(server, r.body.job.id, ['done', 'error'], 60000);
    assert.equal(job.state, 'done', job.error);
    const s = (await server.api('GET', `/api/v1/datasets/${r.body.job.id}`)).body.dataset.summary;
    assert.equal(s.splits.train.images, 12);
    assert.equal(s.splits.val.images, 4);
    assert.equal(s.options.val_folder, true);
    assert.deepEqual(s.skipped.map((k) => k.path), ['val/images/00004.png']);
    const out = await server.api('POST', '/api/v1/datasets', {
      name: 'outside', task: 'segmentation', source: { type: 'folder', train: join(work, 'outside') } });
    assertError(out, 403, 'forbidden', /source\.train: .* is not a folder or file below an allowed --data-root/);
    const escape = await server.api('POST', '/api/v1/datasets', {
      name: 'escape', task: 'segmentation', source: { type: 'folder', train: join(work, 'root', '..', 'outside') } });
    assertError(escape, 403, 'forbidden', /source\.train/);
  });
});
