// infer.test.mjs — classify with a trained model over HTTP, and take it home: a tiny
// network trained through POST /api/v1/models on 8×8 colour squares; a PNG
// classified as a raw body and as a form, with the answer's schema; a snapshot by
// its label; bad input (not an image, a 60000×60000 header, no image, unknown form
// fields, a deleted snapshot, a model with no snapshot); DIGITS' classify_one.json
// shape; the bundle downloaded, unpacked by `deepdesk classify`, giving the same
// top classes and probabilities as the server.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, writeFileSync, rmSync, readdirSync } from 'node:fs';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inflateSync } from 'node:zlib';
import {
  startServer, waitState, assertError, assertSchema, loadOpenApi, killTrackedPids, BIN, writeColourFolders, TINY_NET,
  trainColourModel, serverWithColourModel, endServer, postBody as post, formOf as form,
} from './helpers.mjs';
import { png, CONV_NET } from './infer_fixtures.mjs';

const run = promisify(execFile);


const COLOURS = { blue: [20, 40, 210], green: [30, 200, 40], red: [200, 30, 30] };






/** A data: URL's PNG decoded: {w, h, colourType, px} (8-bit, no interlace, filters undone). */
function decodePng(url) {
  assert.match(url, /^data:image\/png;base64,/);
  const b = Buffer.from(url.slice(url.indexOf(',') + 1), 'base64');
  assert.deepEqual([...b.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  let off = 8, w = 0, h = 0, ct = 0;
  const idat = [];
  while (off < b.length) {
    const len = b.readUInt32BE(off), type = b.toString('latin1', off + 4, off + 8), data = b.subarray(off + 8, off + 8 + len);
    if (type === 'IHDR') { w = data.readUInt32BE(0); h = data.readUInt32BE(4); ct = data[9]; assert.equal(data[8], 8); }
    if (type === 'IDAT') idat.push(data);
    off += 12 + len;
  }
  const bpp = ct === 2 ? 3 : 1, stride = w * bpp, raw = inflateSync(Buffer.concat(idat));
  const px = Buffer.alloc(h * stride);
  for (let y = 0; y < h; y++) {
    const f = raw[y * (stride + 1)];
    for (let x = 0; x < stride; x++) {
      const v = raw[y * (stride + 1) + 1 + x];
      const a = x >= bpp ? px[y * stride + x - bpp] : 0, up = y ? px[(y - 1) * stride + x] : 0;
      const c = x >= bpp && y ? px[(y - 1) * stride + x - bpp] : 0;
      const p = a + up - c, pa = Math.abs(p - a), pb = Math.abs(p - up), pc = Math.abs(p - c);
      const pred = [0, a, up, (a + up) >> 1, pa <= pb && pa <= pc ? a : pb <= pc ? up : c][f];
      px[y * stride + x] = (v + pred) & 255;
    }
  }
  return { w, h, colourType: ct, px };
}

describe('infer', () => {
  let server, work, doc, dsId, modelId;

  before(async () => {
    doc = loadOpenApi();
    ({ server, work, dsId, modelId } = await serverWithColourModel('deepdesk-infer-', COLOURS));
  });
  after(() => endServer(server, work));

  test('a PNG classified as a raw body and as a form: top classes, probabilities, schema', async () => {
    const r = await post(server, `/api/v1/models/${modelId}/classify?top=3`, png(20, 12, COLOURS.red), 'image/png');
    assert.equal(r.status, 200, r.text);
    assertSchema(doc, 'ClassifyResponse', r.body);
    assert.equal(r.body.model, modelId);
    assert.equal(r.body.snapshot, '2');
    assert.deepEqual(r.body.image, { width: 20, height: 12 });
    assert.equal(r.body.predictions.length, 3);
    assert.equal(r.body.predictions[0].label, 'red');
    assert.equal(r.body.predictions[0].index, 2);
    const sum = r.body.predictions.reduce((s, p) => s + p.probability, 0);
    assert.ok(Math.abs(sum - 1) < 1e-5, `sum ${sum}`);
    for (let i = 1; i < 3; i++) assert.ok(r.body.predictions[i - 1].probability >= r.body.predictions[i].probability);
    assert.ok(r.body.time_ms >= 0 && r.body.time_ms < 10000);

    const f = await post(server, `/api/v1/models/${modelId}/classify?top=3`, form({ image: png(20, 12, COLOURS.red) }));
    assert.equal(f.status, 200, f.text);
    assert.deepEqual(f.body.predictions, r.body.predictions);

    const g = await post(server, `/api/v1/models/${modelId}/classify`, png(8, 8, COLOURS.green));
    assert.equal(g.body.predictions[0].label, 'green');
    assert.equal(g.body.predictions.length, 3, 'top 5 of 3 classes is 3');
    const one = await post(server, `/api/v1/models/${modelId}/classify?top=1&snapshot=1`, png(8, 8, COLOURS.blue));
    assert.equal(one.status, 200, one.text);
    assert.equal(one.body.snapshot, '1');
    assert.equal(one.body.predictions.length, 1);
  });

  test('insides=1: the input as the network saw it and every blob, from the same forward pass', async () => {
    const m = await server.api('POST', '/api/v1/models', {
      name: 'convy', dataset: dsId, network: { prototxt: CONV_NET }, epochs: 2, solver: { base_lr: 0.05 },
    });
    assert.equal(m.status, 202, JSON.stringify(m.body));
    assert.equal((await waitState(server, m.body.job.id, ['done', 'error'], 60000)).state, 'done');
    const url = `/api/v1/models/${m.body.job.id}/classify`;
    const img = png(16, 16, COLOURS.green);
    const plain = await post(server, url, img);
    assert.equal(plain.status, 200, plain.text);
    assert.equal(plain.body.input, undefined);
    assert.equal(plain.body.layers, undefined);
    const r = await post(server, `${url}?insides=1`, img);
    assert.equal(r.status, 200, r.text);
    assertSchema(doc, 'ClassifyResponse', r.body);
    assert.deepEqual(r.body.predictions, plain.body.predictions);

    // the input: 3×8×8 after the resize, in colour; green stays the strongest channel
    assert.deepEqual(r.body.input.shape, [3, 8, 8]);
    const inp = decodePng(r.body.input.png);
    assert.equal(inp.colourType, 2);
    assert.equal(inp.w % 8, 0);
    assert.equal(inp.w, inp.h);
    const mid = ((inp.h >> 1) * inp.w + (inp.w >> 1)) * 3;
    const [R, G, B] = inp.px.subarray(mid, mid + 3);
    assert.ok(G > R && G > B, `the green image, less the mean, is greenest: ${[R, G, B]}`);

    // the blobs in execution order; the in-place ReLU is shown under conv
    assert.deepEqual(r.body.layers.map((l) => [l.name, l.type]),
      [['data', 'Input'], ['conv', 'Convolution'], ['ip', 'InnerProduct'], ['prob', 'Softmax']]);
    const by = Object.fromEntries(r.body.layers.map((l) => [l.name, l]));
    for (const l of r.body.layers) {
      const n = l.shape.reduce((a, b) => a * b, 1);
      assert.equal(l.stats.histogram.reduce((a, b) => a + b, 0), n, `${l.name}: every value in a bin`);
      assert.ok(l.stats.min <= l.stats.mean && l.stats.mean <= l.stats.max, l.name);
      assert.ok(l.stats.std >= 0);
      const im = decodePng(l.png);
      assert.ok(im.w >= 1 && im.w <= 1024 && im.h >= 1 && im.h <= 1024, `${l.name}: ${im.w}x${im.h}`);
    }
    assert.deepEqual(by.conv.shape, [1, 4, 6, 6]);
    assert.ok(by.conv.stats.min >= 0, 'the ReLU ran in place: no negative values left');
    assert.deepEqual(by.conv.tiles, { shown: 4, of: 4 });
    assert.equal(decodePng(by.conv.png).colourType, 0, 'a many-channel map is gray tiles');
    assert.deepEqual(by.conv.weights.shape, [4, 3, 3, 3]);
    assert.deepEqual(by.conv.weights.tiles, { shown: 4, of: 4 });
    assert.equal(decodePng(by.conv.weights.png).colourType, 2, '3-channel filters are colour tiles');
    assert.equal(by.ip.weights, undefined, 'weights only for convolutions');
    // the Softmax's values are the probabilities answered
    assert.ok(Math.abs(by.prob.stats.max - r.body.predictions[0].probability) < 1e-6);
    assert.ok(Math.abs(by.prob.stats.mean * 3 - 1) < 1e-5);
    assert.equal(decodePng(by.prob.png).colourType, 2, 'a vector goes through the colour map');

    const only = await post(server, `${url}?input=1`, img);
    assert.equal(only.status, 200, only.text);
    assert.deepEqual(only.body.input, r.body.input);
    assert.equal(only.body.layers, undefined);
    assertError(await post(server, `${url}?insides=2`, img), 400, 'invalid', /insides/);
  });

  test('bad input: clear 4xx errors', async () => {
    const url = `/api/v1/models/${modelId}/classify`;
    assertError(await post(server, url, Buffer.from('hello, not an image')), 400, 'invalid');
    assertError(await post(server, url, Buffer.alloc(0)), 400, 'invalid', /no image/);
    assertError(await post(server, url, png(60000, 60000, [0, 0, 0], { bare: true })), 413, 'too_large', /60000/);
    assertError(await post(server, url, form({ picture: png(8, 8, COLOURS.red) })), 400, 'invalid', /picture/);
    assertError(await post(server, `${url}?snapshot=7`, png(8, 8, COLOURS.red)), 404, 'not_found', /epoch 7/);
    assertError(await post(server, `${url}?snapshot=abc`, png(8, 8, COLOURS.red)), 400, 'invalid', /snapshot/);
    assertError(await post(server, `${url}?top=0`, png(8, 8, COLOURS.red)), 400, 'invalid', /top/);
    assertError(await post(server, `/api/v1/models/${dsId}/classify`, png(8, 8, COLOURS.red)), 404, 'not_found', /not a model/);
    assertError(await post(server, '/api/v1/models/999999/classify', png(8, 8, COLOURS.red)), 404, 'not_found');
    const big = Buffer.alloc(65 << 20);
    assertError(await post(server, url, big), 413, 'too_large');
    assertError(await server.api('GET', url), 405, 'method_not_allowed');
  });

  test('a deleted snapshot is a 404, even once cached; a model with none left is a 409', async () => {
    const m = await server.api('POST', '/api/v1/models', { name: 'gone', dataset: dsId, network: { prototxt: TINY_NET }, epochs: 1 });
    assert.equal(m.status, 202);
    const id = m.body.job.id;
    assert.equal((await waitState(server, id, ['done', 'error'], 60000)).state, 'done');
    const url = `/api/v1/models/${id}/classify?snapshot=1`;
    assert.equal((await post(server, url, png(8, 8, COLOURS.red))).status, 200);
    const dir = join(server.dataDir, 'jobs', String(id));
    for (const f of readdirSync(dir)) if (f.startsWith('snapshot_epoch_')) rmSync(join(dir, f));
    assertError(await post(server, url, png(8, 8, COLOURS.red)), 404, 'not_found', /epoch 1/);
    assertError(await post(server, `/api/v1/models/${id}/classify`, png(8, 8, COLOURS.red)), 409, 'conflict', /no snapshot yet/);
    assertError(await server.api('GET', `/api/v1/models/${id}/bundle`), 409, 'conflict', /no snapshot yet/);
  });

  test("DIGITS' classify_one.json: a form in, [[label, percent]] out", async () => {
    const api = await post(server, `/api/v1/models/${modelId}/classify`, png(8, 8, COLOURS.blue));
    const r = await post(server, '/models/images/classification/classify_one.json',
      form({ job_id: modelId, image_file: png(8, 8, COLOURS.blue) }));
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(Object.keys(r.body), ['predictions']);
    assert.equal(r.body.predictions.length, 3);
    r.body.predictions.forEach(([label, pct], i) => {
      assert.equal(label, api.body.predictions[i].label);
      assert.equal(pct, Math.round(api.body.predictions[i].probability * 10000) / 100);
    });
    const e = await post(server, '/models/images/classification/classify_one.json',
      form({ job_id: modelId, image_file: png(8, 8, COLOURS.blue), snapshot_epoch: '1.0' }));
    assert.equal(e.status, 200, e.text);
    assertError(await post(server, '/models/images/classification/classify_one.json',
      form({ image_file: png(8, 8, COLOURS.blue) })), 400, 'invalid', /job_id/);
    assertError(await post(server, '/models/images/classification/classify_one.json',
      form({ job_id: modelId, image_file: png(8, 8, COLOURS.blue), snapshot_epoch: 9 })), 404, 'not_found');
  });

  test("DIGITS' classify_many.json: a list of server paths in, {classifications: {path: [[label, percent]]}} out", async () => {
    // as DIGITS' docs show it: curl -F job_id=ID -F image_list=@list.txt [-F image_folder=DIR]
    const dir = join(work, 'many');
    mkdirSync(join(dir, 'sub'), { recursive: true });
    const imgs = { 'a.png': png(8, 8, COLOURS.red), 'sub/b.png': png(12, 9, COLOURS.green), 'c.png': png(8, 8, COLOURS.blue) };
    for (const [name, b] of Object.entries(imgs)) writeFileSync(join(dir, name), b);
    const list = (lines) => new Blob([lines.join('\n') + '\n'], { type: 'text/plain' });
    const many = (fields) => {
      const f = new FormData();
      for (const [k, v] of Object.entries(fields)) {
        if (v instanceof Blob) f.append(k, v, 'list.txt'); else f.append(k, String(v));
      }
      return post(server, '/models/images/classification/classify_many.json', f);
    };
    const abs = join(dir, 'a.png');
    const r = await many({ job_id: modelId, image_list: list([abs, 'sub/b.png 1', 'c.png 2']), image_folder: dir });
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(Object.keys(r.body), ['classifications']);
    assert.deepEqual(Object.keys(r.body.classifications).sort(), [abs, 'c.png', 'sub/b.png'].sort());
    for (const [key, name] of [[abs, 'a.png'], ['sub/b.png', 'sub/b.png'], ['c.png', 'c.png']]) {
      const one = await post(server, `/api/v1/models/${modelId}/classify`, imgs[name]);
      const pairs = r.body.classifications[key];
      assert.equal(pairs.length, 3);
      pairs.forEach(([label, pct], i) => {
        assert.equal(label, one.body.predictions[i].label);
        assert.equal(pct, Math.round(one.body.predictions[i].probability * 10000) / 100);
      });
    }
    assert.equal(r.body.classifications[abs][0][0], 'red');
    assert.equal(r.body.classifications['sub/b.png'][0][0], 'green');

    const two = await many({ job_id: modelId, image_list: list([abs, 'c.png']), image_folder: dir, num_test_images: 1, snapshot_epoch: '1.0' });
    assert.equal(two.status, 200, two.text);
    assert.deepEqual(Object.keys(two.body.classifications), [abs]);

    // paths outside the --data-root folders, or climbing out of one, are refused and named
    assertError(await many({ job_id: modelId, image_list: list([abs, '/etc/hostname']) }), 403, 'forbidden', /line 2: \/etc\/hostname.*--data-root/);
    assertError(await many({ job_id: modelId, image_list: list(['../../../../../../etc/hostname']), image_folder: dir }), 403, 'forbidden', /--data-root/);
    assertError(await many({ job_id: modelId, image_list: list(['a.png']) }), 400, 'invalid', /relative path and no image_folder/);
    // a missing file reads as one outside the roots, inside them or not: the
    // answers do not tell which files exist
    assertError(await many({ job_id: modelId, image_list: list([join(dir, 'nope.png')]) }), 403, 'forbidden', /nope\.png is not a file below/);
    const missingOutside = await many({ job_id: modelId, image_list: list(['/etc/no-such-file-here']) });
    const existingOutside = await many({ job_id: modelId, image_list: list(['/etc/hostname']) });
    assert.equal(missingOutside.status, 403);
    assert.equal(existingOutside.status, 403);
    assert.equal(missingOutside.body.error.message.replace('/etc/no-such-file-here', 'P'),
      existingOutside.body.error.message.replace('/etc/hostname', 'P'));
    assertError(await many({ job_id: modelId, image_list: list(['', '  ']) }), 400, 'invalid', /no image paths/);
    assertError(await many({ image_list: list([abs]) }), 400, 'invalid', /job_id/);
    assertError(await many({ job_id: modelId, image_list: list([abs]), num_test_images: 'x' }), 400, 'invalid', /num_test_images/);
    assertError(await many({ job_id: modelId, image_list: list([abs]), colour: 'red' }), 400, 'invalid', /colour/);
    // a file in the list that is not an image: its path in the message
    writeFileSync(join(dir, 'bad.png'), 'not a png');
    assertError(await many({ job_id: modelId, image_list: list(['bad.png']), image_folder: dir }), 400, 'invalid', /bad\.png/);
  });

  test('the bundle: downloaded, run by `deepdesk classify`, the same answers as the server', async () => {
    const res = await fetch(`${server.url}/api/v1/models/${modelId}/bundle`);
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'application/gzip');
    assert.match(res.headers.get('content-disposition'), /model\d+_epoch2\.tar\.gz/);
    const tgz = join(work, 'bundle.tar.gz');
    writeFileSync(tgz, Buffer.from(await res.arrayBuffer()));
    const list = (await run('tar', ['tzf', tgz])).stdout.split('\n').filter(Boolean).sort();
    assert.deepEqual(list, ['deploy.prototxt', 'info.json', 'labels.txt', 'mean.binaryproto', 'mean.png', 'network.prototxt', 'weights.safetensors']);
    const deploy = (await run('tar', ['xzOf', tgz, 'deploy.prototxt'])).stdout;
    assert.match(deploy, /input_shape \{ dim: 1 dim: 3 dim: 8 dim: 8 \}/);
    assert.match(deploy, /num_output: 3/);
    assert.doesNotMatch(deploy, /SoftmaxWithLoss|Accuracy/);
    writeFileSync(join(work, 'deploy.prototxt'), deploy);
    const check = await run(BIN, ['net', 'check', join(work, 'deploy.prototxt'), '--stage', 'deploy', '--input', '3x8x8', '--classes', '3']);
    assert.match(check.stdout, /prob/);
    const info = JSON.parse((await run('tar', ['xzOf', tgz, 'info.json'])).stdout);
    assert.deepEqual(info.input, { channels: 3, height: 8, width: 8, order: 'BGR', layout: 'CHW', range: '0-255' });
    assert.equal(info.resize_mode, 'squash');
    assert.equal(info.mean.mode, 'image');
    assert.equal(info.snapshot, '2');
    assert.equal(info.classes, 3);
    assert.ok(Math.abs(info.scale - 0.0039) < 1e-7);
    assert.equal(info.settings.dataset, dsId);

    const imgs = [png(8, 8, COLOURS.red), png(13, 7, [120, 90, 60]), png(8, 8, [90, 90, 200])];
    const files = imgs.map((b, i) => { const p = join(work, `img${i}.png`); writeFileSync(p, b); return p; });
    const cli = JSON.parse((await run(BIN, ['classify', '--model', tgz, '--json', ...files])).stdout);
    assert.equal(cli.snapshot, '2');
    assert.equal(cli.results.length, 3);
    for (let i = 0; i < imgs.length; i++) {
      const s = await post(server, `/api/v1/models/${modelId}/classify`, imgs[i]);
      assert.equal(s.status, 200);
      const c = cli.results[i];
      assert.equal(c.image, files[i]);
      assert.deepEqual(c.predictions.map((p) => p.label), s.body.predictions.map((p) => p.label));
      c.predictions.forEach((p, k) => assert.ok(Math.abs(p.probability - s.body.predictions[k].probability) <= 1e-6));
    }
    // the job folder itself, by snapshot
    const dir = join(server.dataDir, 'jobs', String(modelId));
    const byDir = JSON.parse((await run(BIN, ['classify', '--model', dir, '--snapshot', '2', '--json', files[0]])).stdout);
    assert.deepEqual(byDir.results[0].predictions, cli.results[0].predictions);
    // a file that is not an image: named, exit status 1, the others still classified
    const bad = join(work, 'bad.png');
    writeFileSync(bad, 'nope');
    await assert.rejects(run(BIN, ['classify', '--model', tgz, files[0], bad]), (e) => e.code === 1 && /bad\.png/.test(e.stderr) && /red/.test(e.stdout));
    assertError(await server.api('GET', `/api/v1/models/${modelId}/bundle?snapshot=7`), 404, 'not_found');

    // a bundle whose entries climb out of the folder is refused, and writes nothing outside
    const evil = join(work, 'evil.tar.gz');
    await run('python3', ['-c', `
import io, tarfile, sys
with tarfile.open(sys.argv[1], 'w:gz') as t:
    for name, data in (('info.json', b'{}'), ('../escaped.txt', b'x')):
        i = tarfile.TarInfo(name); i.size = len(data); t.addfile(i, io.BytesIO(data))
`, evil]);
    await assert.rejects(run(BIN, ['classify', '--model', evil, files[0]], { env: { ...process.env, TMPDIR: work } }),
      (e) => e.code === 2 && /\.\./.test(e.stderr));
    assert.deepEqual(readdirSync(work).filter((f) => f.includes('escaped') || f.startsWith('deepdesk-bundle-')), []);
  });
});
