// datasets.test.mjs — datasets end to end through the API: an archive of class
// folders uploaded and built into LMDB, its counts, keys, mean, skipped files and
// explore pages checked; server folders limited to --data-root; hostile and
// broken input refused with its reason.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, writeFileSync, readFileSync, existsSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServer, waitState, assertError, killTrackedPids } from './helpers.mjs';

const PY = '/usr/bin/python3';

/** A w×h P6 PPM of one colour. */
function ppm(w, h, [r, g, b]) {
  const head = Buffer.from(`P6\n${w} ${h}\n255\n`);
  const px = Buffer.alloc(w * h * 3);
  for (let i = 0; i < w * h; i++) px.set([r, g, b], i * 3);
  return Buffer.concat([head, px]);
}

const COLOURS = { apple: [200, 30, 30], banana: [230, 220, 40], cherry: [120, 0, 40] };

/** Image folder: 12 per class, a broken image, a text file, a one-image class. */
function makeFolder(root) {
  for (const [cls, rgb] of Object.entries(COLOURS)) {
    mkdirSync(join(root, 'fruit', cls, 'more'), { recursive: true });
    for (let i = 0; i < 12; i++)
      writeFileSync(join(root, 'fruit', cls, i % 4 ? '' : 'more', `${i}.ppm`), ppm(20 + i, 10, rgb));
  }
  writeFileSync(join(root, 'fruit', 'banana', 'broken.ppm'), Buffer.from('P6\n20 10\n255\nshort'));
  writeFileSync(join(root, 'fruit', 'cherry', 'notes.txt'), 'not an image');
  mkdirSync(join(root, 'fruit', 'date'));
  writeFileSync(join(root, 'fruit', 'date', '0.ppm'), ppm(4, 4, [90, 60, 20]));
}

/** A fresh work folder (prefix…) holding makeFolder's fruit/ and, beside it, fruit/
 *  archived by tar with flags (cf, czf) as archive. */
function fruitWork(prefix, flags, archive) {
  const work = mkdtempSync(join(tmpdir(), prefix));
  makeFolder(work);
  execFileSync('tar', [flags, join(work, archive), '-C', work, 'fruit']);
  return work;
}

async function upload(server, name, data) {
  const res = await fetch(`${server.url}/api/v1/uploads?name=${encodeURIComponent(name)}`, { method: 'POST', body: data });
  return { status: res.status, body: await res.json() };
}

describe('datasets', () => {
  let server, work;
  before(async () => {
    work = fruitWork('deepdesk-ds-', 'czf', 'fruit.tar.gz');
    server = await startServer({ args: ['--data-root', join(work, 'fruit')] });
  });
  after(() => { killTrackedPids(); server?.stop(); server?.cleanup(); rmSync(work, { recursive: true, force: true }); });

  let dsId, summary;

  test('an uploaded archive becomes a dataset: counts, skipped files, dropped classes', async () => {
    const up = await upload(server, 'fruit.tar.gz', readFileSync(join(work, 'fruit.tar.gz')));
    assert.equal(up.status, 201);
    assert.match(up.body.upload.id, /^[0-9a-f]{24}$/);
    const r = await server.api('POST', '/api/v1/datasets', {
      name: 'fruit', group: 'tests',
      source: { type: 'upload', upload: up.body.upload.id, name: 'fruit.tar.gz' },
      options: { width: 8, height: 8, channels: 3, seed: 5, val_pct: 25 },
    });
    assert.equal(r.status, 202);
    dsId = r.body.job.id;
    const job = await waitState(server, dsId, ['done', 'error'], 30000);
    assert.equal(job.state, 'done', job.error);
    // the upload was used: a second dataset from it is refused
    const again = await server.api('POST', '/api/v1/datasets', { name: 'x', source: { type: 'upload', upload: up.body.upload.id } });
    assertError(again, 400, 'invalid', /source\.upload/);

    const d = await server.api('GET', `/api/v1/datasets/${dsId}`);
    assert.equal(d.status, 200);
    summary = d.body.dataset.summary;
    assert.deepEqual(summary.labels, ['apple', 'banana', 'cherry']);
    const tr = summary.splits.train.per_class, va = summary.splits.val.per_class;
    assert.deepEqual(tr.map((n, i) => n + va[i]), [12, 12, 12]);
    assert.deepEqual(tr, [9, 9, 9]); // 13 banana files listed, the broken one skipped
    const skipped = Object.fromEntries(summary.skipped.map((s) => [s.path, s.reason]));
    assert.ok(skipped['banana/broken.ppm'], JSON.stringify(summary.skipped));
    assert.match(skipped['cherry/notes.txt'], /not an image file name/);
    assert.equal(summary.dropped_classes.length, 1);
    assert.equal(summary.dropped_classes[0].class, 'date');
    assert.equal(summary.options.width, 8);
    // the list shows the headline without the skipped list
    const list = await server.api('GET', '/api/v1/datasets');
    const mine = list.body.datasets.find((x) => x.id === dsId);
    assert.ok(mine.summary && !('skipped' in mine.summary));
  });

  test('the LMDB holds %08d_%d keys in a shuffled order, readable by Python lmdb', async () => {
    const dir = join(server.dataDir, 'jobs', String(dsId), 'train_db');
    const out = execFileSync(PY, ['-c', `
import lmdb, json, sys
env = lmdb.open(sys.argv[1], readonly=True, lock=False)
with env.begin() as t:
    print(json.dumps([k.decode() for k, _ in t.cursor()]))`, dir]).toString();
    const keys = JSON.parse(out);
    assert.equal(keys.length, 27);
    keys.forEach((k, i) => assert.match(k, new RegExp(`^${String(i).padStart(8, '0')}_[012]$`)));
    const labels = keys.map((k) => Number(k.split('_')[1]));
    assert.notDeepEqual(labels, [...labels].sort(), 'records are not shuffled');
  });

  test('the mean: PNG and BlobProto of the train images', async () => {
    const png = await fetch(`${server.url}/api/v1/datasets/${dsId}/files/mean.png`);
    assert.equal(png.status, 200);
    const buf = Buffer.from(await png.arrayBuffer());
    assert.equal(buf.subarray(1, 4).toString(), 'PNG');
    assert.equal(buf.readUInt32BE(16), 8); // IHDR width
    const proto = Buffer.from(await (await fetch(`${server.url}/api/v1/datasets/${dsId}/files/mean.binaryproto`)).arrayBuffer());
    assert.ok(proto.length >= 8 * 8 * 3 * 4, `mean.binaryproto has ${proto.length} bytes`);
    // the mean of equal numbers of three solid colours, rounded: R = (200+230+120)/3
    const meanR = execFileSync(PY, ['-c', `
import sys; sys.path.insert(0, 'tests/interop')
import caffe_pb2_min as pb
b = pb.BlobProto(); b.ParseFromString(open(sys.argv[1], 'rb').read())
print(b.channels, b.height, b.width, b.data[2 * 64], b.data[0])`, join(server.dataDir, 'jobs', String(dsId), 'mean.binaryproto')],
    { cwd: process.cwd() }).toString().trim().split(' ').map(Number);
    assert.deepEqual(meanR.slice(0, 3), [3, 8, 8]);
    assert.equal(meanR[3], Math.round((200 + 230 + 120) / 3)); // plane 2 is R (BGR)
    assert.equal(meanR[4], Math.round((30 + 40 + 40) / 3));    // plane 0 is B
    const labels = await (await fetch(`${server.url}/api/v1/datasets/${dsId}/files/labels.txt`)).text();
    assert.equal(labels, 'apple\nbanana\ncherry\n');
    assertError(await server.api('GET', `/api/v1/datasets/${dsId}/files/secret.txt`), 404, 'not_found', /no file/);
  });

  test('explore: pages by split and class, each image an 8x8 PNG of its class colour', async () => {
    const all = await server.api('GET', `/api/v1/datasets/${dsId}/images?split=train&page=1&size=10`);
    assert.equal(all.status, 200);
    assert.equal(all.body.total, 27);
    assert.equal(all.body.images.length, 10);
    assert.equal(all.body.images[0].index, 10);
    const last = await server.api('GET', `/api/v1/datasets/${dsId}/images?split=train&page=2&size=10`);
    assert.equal(last.body.images.length, 7);
    const banana = await server.api('GET', `/api/v1/datasets/${dsId}/images?split=val&label=1&size=100`);
    assert.equal(banana.body.total, 3);
    for (const im of banana.body.images) {
      assert.equal(im.label, 1);
      const res = await fetch(server.url + im.url);
      assert.equal(res.headers.get('content-type'), 'image/png');
      const b = Buffer.from(await res.arrayBuffer());
      assert.equal(b.readUInt32BE(16), 8);
    }
    assertError(await server.api('GET', `/api/v1/datasets/${dsId}/images?split=nope`), 400, 'invalid', /split/);
    assertError(await server.api('GET', `/api/v1/datasets/${dsId}/images?label=7`), 400, 'invalid', /label/);
    assertError(await server.api('GET', `/api/v1/datasets/${dsId}/images/train/999`), 404, 'not_found', /999/);
  });

  test('a dataset used by another job cannot be deleted', async () => {
    const child = await server.api('POST', '/api/v1/jobs', { kind: 'test', params: { steps: 1, step_ms: 1 }, parents: [dsId] });
    assert.equal(child.status, 202);
    await waitState(server, child.body.job.id, 'done');
    assertError(await server.api('DELETE', `/api/v1/jobs/${dsId}`), 409, 'conflict', new RegExp(`job ${child.body.job.id}`));
    assert.equal((await server.api('DELETE', `/api/v1/jobs/${child.body.job.id}`)).status, 204);
  });

  test('a server folder below --data-root works; anything else is refused with 403', async () => {
    const ok = await server.api('POST', '/api/v1/datasets', {
      name: 'from folder', source: { type: 'folder', train: join(work, 'fruit') },
      options: { width: 4, height: 4, channels: 1, val_pct: 0 },
    });
    assert.equal(ok.status, 202);
    const job = await waitState(server, ok.body.job.id, ['done', 'error'], 30000);
    assert.equal(job.state, 'done', job.error);
    const d = await server.api('GET', `/api/v1/datasets/${job.id}`);
    assert.equal(d.body.dataset.summary.splits.train.images, 36);
    for (const path of ['/etc', join(work), join(work, 'fruit', '..'), '/nonexistent']) {
      const r = await server.api('POST', '/api/v1/datasets', { name: 'x', source: { type: 'folder', train: path } });
      assertError(r, 403, 'forbidden', /data-root/);
    }
  });

  test('bad requests are refused naming the field, and create nothing', async () => {
    const before = (await server.api('GET', '/api/v1/jobs')).body.total;
    assertError(await server.api('POST', '/api/v1/datasets', { source: { type: 'example', name: 'fashion-mnist' } }), 400, 'invalid', /^name/);
    assertError(await server.api('POST', '/api/v1/datasets', { name: 'x', source: { type: 'example', name: 'fashion-mnist' }, options: { width: 0 } }), 400, 'invalid', /options\.width/);
    assertError(await server.api('POST', '/api/v1/datasets', { name: 'x', source: { type: 'example', name: 'fashion-mnist' }, options: { val_pct: 60, test_pct: 50 } }), 400, 'invalid', /exceed 100/);
    assertError(await server.api('POST', '/api/v1/datasets', { name: 'x', source: { type: 'nope' } }), 400, 'invalid', /source\.type/);
    assertError(await server.api('POST', '/api/v1/datasets', { name: 'x', source: { type: 'example', name: 'fashion-mnist' }, options: { colour: true } }), 400, 'invalid', /options\.colour: unknown/);
    const up = await upload(server, 'photo.jpg', Buffer.from('xx'));
    assert.equal(up.status, 400);
    assert.match(up.body.error.message, /\.zip/);
    assert.equal((await server.api('GET', '/api/v1/jobs')).body.total, before);
  });

  test('a hostile archive fails the job with its reason, writing nothing outside', async () => {
    const evil = join(work, 'evil.tar');
    execFileSync(PY, ['-c', `
import tarfile, io, sys
with tarfile.open(sys.argv[1], 'w') as t:
    for name in ['cats/1.ppm', '../../escaped.ppm']:
        data = b'P6\\n1 1\\n255\\n' + bytes(3)
        i = tarfile.TarInfo(name); i.size = len(data); t.addfile(i, io.BytesIO(data))`, evil]);
    const up = await upload(server, 'evil.tar', readFileSync(evil));
    const r = await server.api('POST', '/api/v1/datasets', { name: 'evil', source: { type: 'upload', upload: up.body.upload.id } });
    const job = await waitState(server, r.body.job.id, ['done', 'error'], 60000);
    assert.equal(job.state, 'error');
    assert.match(job.error, /climbs out/);
    assert.ok(!existsSync(join(server.dataDir, 'escaped.ppm')) && !existsSync(join(server.dataDir, 'jobs', 'escaped.ppm')));
    // a flat archive without class folders explains the layout
    const flat = join(work, 'flat.tar');
    execFileSync('tar', ['cf', flat, '-C', join(work, 'fruit', 'apple'), '1.ppm', '2.ppm']);
    const up2 = await upload(server, 'flat.tar', readFileSync(flat));
    const r2 = await server.api('POST', '/api/v1/datasets', { name: 'flat', source: { type: 'upload', upload: up2.body.upload.id } });
    const job2 = await waitState(server, r2.body.job.id, ['done', 'error'], 60000);
    assert.equal(job2.state, 'error');
    assert.match(job2.error, /one folder per class, e\.g\. cats\/1\.jpg/);
  });
});

describe('archive caps set by the server', () => {
  let server, work;
  before(async () => {
    work = fruitWork('deepdesk-caps-', 'cf', 'fruit.tar');
    server = await startServer({ args: ['--archive-max-files', '10'] });
  });
  after(() => { killTrackedPids(); server?.stop(); server?.cleanup(); rmSync(work, { recursive: true, force: true }); });

  test('--archive-max-files refuses a bigger archive, naming the limit', async () => {
    const up = await upload(server, 'fruit.tar', readFileSync(join(work, 'fruit.tar')));
    // the caps are the server's: a request that sets its own is refused, naming the field
    const lifted = await server.api('POST', '/api/v1/datasets', { name: 'capped', source: { type: 'upload', upload: up.body.upload.id, limits: { max_files: 1e9 } } });
    assert.equal(lifted.status, 400, JSON.stringify(lifted.body));
    assert.match(lifted.body.error.message, /^source\.limits: /);
    const r = await server.api('POST', '/api/v1/datasets', { name: 'capped', source: { type: 'upload', upload: up.body.upload.id } });
    assert.equal(r.status, 202);
    assert.equal(r.body.job.params.source.limits, undefined); // the worker takes them from the server
    const job = await waitState(server, r.body.job.id, ['done', 'error'], 60000);
    assert.equal(job.state, 'error');
    assert.match(job.error, /more than 10 entries/);
  });
});
