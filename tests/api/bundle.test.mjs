// bundle.test.mjs — take a model home and bring it back: a tiny network trained on
// 8×8 colour squares, its bundle downloaded; info.json's size and sha256 of every
// file; `deepdesk classify` refusing tampered bundles, naming the file; the bundle
// imported (multipart and by upload id) as a finished model that classifies as the
// original does and is fine-tuned from; hostile bundles refused with a 400 naming
// the entry and nothing left on disk; docs/bundle_torch.py in Debian's PyTorch
// giving the server's and the CLI's top-5 and probabilities on held-out images.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import {
  mkdtempSync, mkdirSync, writeFileSync, readFileSync, rmSync, readdirSync, existsSync, cpSync,
} from 'node:fs';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  startServer, waitState, assertError, killTrackedPids, BIN, ROOT, writeColourFolders, noisyPpm, TINY_NET,
  trainColourModel, endServer,
} from './helpers.mjs';

const run = promisify(execFile);
const PY = '/usr/bin/python3'; // Debian's, with torch, numpy and PIL
const COLOURS = { blue: [20, 40, 210], green: [30, 200, 40], red: [200, 30, 30] };
// AlexNet's layer types, small: strided and grouped convolutions with pads, LRN, MAX and
// AVE pooling whose windows run off the edge (Caffe rounds the output size up), Dropout,
// Power, a crop and a mean; 24×24 colour images, 20×20 crops.
const MINI_ALEX = `name: "minialex"
layer { name: "train-data" type: "Data" top: "data" top: "label" include { stage: "train" }
  data_param { batch_size: 4 } transform_param { crop_size: 20 scale: 0.0078125 } }
layer { name: "val-data" type: "Data" top: "data" top: "label" include { stage: "val" }
  data_param { batch_size: 4 } transform_param { crop_size: 20 scale: 0.0078125 } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
  convolution_param { num_output: 8 kernel_size: 5 stride: 2 pad: 2 weight_filler { type: "gaussian" std: 0.1 } } }
layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }
layer { name: "norm1" type: "LRN" bottom: "conv1" top: "norm1" lrn_param { local_size: 3 alpha: 0.01 beta: 0.75 } }
layer { name: "pool1" type: "Pooling" bottom: "norm1" top: "pool1" pooling_param { pool: MAX kernel_size: 3 stride: 2 } }
layer { name: "conv2" type: "Convolution" bottom: "pool1" top: "conv2"
  convolution_param { num_output: 8 kernel_size: 3 pad: 1 group: 2 weight_filler { type: "gaussian" std: 0.1 } } }
layer { name: "relu2" type: "ReLU" bottom: "conv2" top: "conv2" }
layer { name: "pool2" type: "Pooling" bottom: "conv2" top: "pool2" pooling_param { pool: AVE kernel_size: 2 stride: 2 } }
layer { name: "fc1" type: "InnerProduct" bottom: "pool2" top: "fc1" inner_product_param { num_output: 16 weight_filler { type: "xavier" } } }
layer { name: "relu3" type: "ReLU" bottom: "fc1" top: "fc1" }
layer { name: "drop1" type: "Dropout" bottom: "fc1" top: "fc1" dropout_param { dropout_ratio: 0.5 } }
layer { name: "fc2" type: "InnerProduct" bottom: "fc1" top: "fc2" inner_product_param { weight_filler { type: "xavier" } } }
layer { name: "pow" type: "Power" bottom: "fc2" top: "out" power_param { scale: 0.9 shift: 0.1 } }
layer { name: "accuracy" type: "Accuracy" bottom: "out" bottom: "label" top: "accuracy" include { stage: "val" } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "out" bottom: "label" top: "loss" exclude { stage: "deploy" } }
layer { name: "prob" type: "Softmax" bottom: "out" top: "prob" include { stage: "deploy" } }
`;
const sha256 = (buf) => createHash('sha256').update(buf).digest('hex');

/** A .tar.gz at path made by Python's tarfile from entries [{name, data?, type?, size?, link?}]:
 *  type 'file' (default), 'dir', 'symlink', 'hardlink', 'chr'; size overrides the header's
 *  size (a huge entry whose body is not there). */
async function makeTar(path, entries) {
  const spec = entries.map((e) => ({ ...e, data: e.data === undefined ? null : Buffer.from(e.data).toString('base64') }));
  await run(PY, ['-c', `
import base64, io, json, sys, tarfile, gzip
spec = json.loads(sys.argv[2])
raw = io.BytesIO()
t = tarfile.open(fileobj=raw, mode='w', format=tarfile.GNU_FORMAT)
for e in spec:
    i = tarfile.TarInfo(e['name'])
    kind = e.get('type', 'file')
    data = base64.b64decode(e['data']) if e['data'] is not None else b''
    if kind == 'dir': i.type = tarfile.DIRTYPE
    elif kind == 'symlink': i.type = tarfile.SYMTYPE; i.linkname = e['link']
    elif kind == 'hardlink': i.type = tarfile.LNKTYPE; i.linkname = e['link']
    elif kind == 'chr': i.type = tarfile.CHRTYPE; i.devmajor, i.devminor = 1, 3
    if 'size' in e:
        i.size = e['size']
        raw.write(i.tobuf(tarfile.GNU_FORMAT)); raw.write(data)
        continue
    i.size = len(data) if kind == 'file' else 0
    t.addfile(i, io.BytesIO(data) if kind == 'file' else None)
if not any('size' in e for e in spec): t.close()
open(sys.argv[1], 'wb').write(gzip.compress(raw.getvalue()))
`, path, JSON.stringify(spec)]);
}

function bundleEntries(dir) {
  return readdirSync(dir).map((name) => ({ name, data: readFileSync(join(dir, name)) }));
}

async function postForm(server, path, fields) {
  const f = new FormData();
  for (const [k, v] of Object.entries(fields)) {
    if (Buffer.isBuffer(v)) f.append(k, new Blob([v], { type: 'application/gzip' }), 'model.tar.gz');
    else f.append(k, String(v));
  }
  const res = await fetch(server.url + path, { method: 'POST', body: f });
  const text = await res.text();
  let body = null;
  try { body = JSON.parse(text); } catch { /* not JSON */ }
  return { status: res.status, body, text, headers: res.headers };
}

async function classify(server, id, file) {
  const res = await fetch(`${server.url}/api/v1/models/${id}/classify?top=5`, { method: 'POST', body: readFileSync(file) });
  assert.equal(res.status, 200);
  return (await res.json()).predictions;
}

describe('bundle', () => {
  let server, work, dsId, modelId, tgz, unpacked, heldOut;

  before(async () => {
    work = mkdtempSync(join(tmpdir(), 'deepdesk-bundle-test-'));
    server = await startServer({ args: ['--data-root', work] });
    ({ dsId, modelId } = await trainColourModel(server, work, COLOURS));

    const res = await fetch(`${server.url}/api/v1/models/${modelId}/bundle`);
    assert.equal(res.status, 200);
    tgz = join(work, 'model.tar.gz');
    writeFileSync(tgz, Buffer.from(await res.arrayBuffer()));
    unpacked = join(work, 'unpacked');
    mkdirSync(unpacked);
    await run('tar', ['xzf', tgz, '-C', unpacked]);

    // held out: colours and sizes the training never saw, one gray, one far off any class
    const held = [
      ['a.ppm', noisyPpm(8, 8, [180, 60, 50], 901)], ['b.ppm', noisyPpm(13, 7, [40, 170, 90], 902)],
      ['c.ppm', noisyPpm(5, 11, [60, 60, 190], 903)], ['d.ppm', noisyPpm(8, 8, [120, 120, 120], 904)],
    ];
    heldOut = held.map(([n, b]) => { const p = join(work, n); writeFileSync(p, b); return p; });
  });
  after(() => endServer(server, work));

  test('info.json lists the size and sha256 of every other file in the bundle', () => {
    const info = JSON.parse(readFileSync(join(unpacked, 'info.json'), 'utf8'));
    assert.equal(info.format_version, 2);
    const names = readdirSync(unpacked).filter((n) => n !== 'info.json').sort();
    assert.deepEqual(Object.keys(info.files).sort(), names);
    for (const n of names) {
      const data = readFileSync(join(unpacked, n));
      assert.equal(info.files[n].size, data.length, n);
      assert.equal(info.files[n].sha256, sha256(data), n);
    }
  });

  test('`deepdesk classify` refuses a tampered bundle, naming the file and what differs', async () => {
    const img = heldOut[0];
    const ok = JSON.parse((await run(BIN, ['classify', '--model', unpacked, '--json', img])).stdout);
    assert.equal(ok.results[0].predictions.length, 3);

    let n = 0;
    async function tampered(change, re) {
      const dir = join(work, `tampered${n++}`);
      cpSync(unpacked, dir, { recursive: true });
      const info = JSON.parse(readFileSync(join(dir, 'info.json'), 'utf8'));
      change(dir, info);
      writeFileSync(join(dir, 'info.json'), JSON.stringify(info));
      await assert.rejects(run(BIN, ['classify', '--model', dir, img]), (e) => {
        assert.equal(e.code, 2, e.stderr);
        assert.match(e.stderr, re);
        return true;
      });
    }
    const rewrite = (dir, info, name, data) => {
      writeFileSync(join(dir, name), data);
      info.files[name] = { size: data.length, sha256: sha256(data) };
    };
    // a weight changed, same size
    await tampered((dir) => {
      const w = readFileSync(join(dir, 'weights.safetensors'));
      w[w.length - 2] ^= 0x40;
      writeFileSync(join(dir, 'weights.safetensors'), w);
    }, /weights\.safetensors: sha256 .* info\.json says/);
    // labels.txt cut short
    await tampered((dir) => writeFileSync(join(dir, 'labels.txt'), 'blue\n'), /labels\.txt: \d+ bytes, info\.json says/);
    // a class more in labels.txt, its checksum made to agree
    await tampered((dir, info) => rewrite(dir, info, 'labels.txt', Buffer.from('blue\ngreen\nred\npink\n')),
      /labels\.txt: 4 lines, info\.json says 3 classes/);
    // the manifest claims a class more than the weights' last layer has
    await tampered((dir, info) => { info.classes = 4; rewrite(dir, info, 'labels.txt', Buffer.from('a\nb\nc\nd\n')); },
      /last layer ip has 3 outputs, info\.json says 4 classes/);
    // another input size than the mean and the network
    await tampered((dir, info) => { info.input.height = 9; }, /mean\.binaryproto is 3x8x8, the images are 3x9x8/);
    // a scale the network's data layer does not have
    await tampered((dir, info) => { info.scale = 1; }, /scale 1, network\.prototxt's data layer scales by 0\.0039/);
    // no checksums at all, a file missing, a file added
    await tampered((dir, info) => { delete info.files; }, /info\.json has no "files"/);
    await tampered((dir) => rmSync(join(dir, 'mean.png')), /mean\.png: named in info\.json but missing/);
    await tampered((dir, info) => { delete info.files['mean.png']; }, /mean\.png is in the bundle but not in info\.json's files/);
    // the archive itself, tampered, as `deepdesk classify --model X.tar.gz` reads it
    const bad = join(work, 'bad.tar.gz');
    await makeTar(bad, bundleEntries(unpacked).map((e) => (e.name === 'deploy.prototxt' ? { ...e, data: `${e.data}# edited\n` } : e)));
    await assert.rejects(run(BIN, ['classify', '--model', bad, img]), (e) => e.code === 2 && /deploy\.prototxt: \d+ bytes, info\.json says/.test(e.stderr));
  });

  test('an imported bundle is a finished model: classify, bundle, fine-tune and previous network', async () => {
    const jobsBefore = (await server.api('GET', '/api/v1/jobs')).body.total;
    const r = await postForm(server, '/api/v1/models/import', { bundle: readFileSync(tgz), name: 'brought back' });
    assert.equal(r.status, 201, r.text);
    const id = r.body.job.id;
    assert.equal(r.body.job.kind, 'model');
    assert.equal(r.body.job.state, 'done');
    assert.equal(r.body.job.name, 'brought back');
    assert.equal(r.body.job.params.pretrained.snapshot, '2');
    assert.equal(r.body.job.params.pretrained.sha256, JSON.parse(readFileSync(join(unpacked, 'info.json'))).files['weights.safetensors'].sha256);
    assert.equal((await server.api('GET', '/api/v1/jobs')).body.total, jobsBefore + 1);
    const m = await server.api('GET', `/api/v1/models/${id}`);
    assert.equal(m.status, 200, JSON.stringify(m.body));
    assert.equal(m.body.model.snapshots.length, 1);
    // the same answers as the model it came from
    for (const img of heldOut) {
      const a = await classify(server, modelId, img), b = await classify(server, id, img);
      assert.deepEqual(b.map((p) => p.label), a.map((p) => p.label));
      b.forEach((p, k) => assert.ok(Math.abs(p.probability - a[k].probability) <= 1e-6));
    }
    // its folder is a model folder `deepdesk classify` runs
    const dir = join(server.dataDir, 'jobs', String(id));
    const byDir = JSON.parse((await run(BIN, ['classify', '--model', dir, '--json', heldOut[0]])).stdout);
    assert.equal(byDir.snapshot, '2');
    // and it bundles again, the weights unchanged
    const again = await fetch(`${server.url}/api/v1/models/${id}/bundle`);
    assert.equal(again.status, 200);
    const again_tgz = join(work, 'again.tar.gz');
    writeFileSync(again_tgz, Buffer.from(await again.arrayBuffer()));
    const info2 = JSON.parse((await run('tar', ['xzOf', again_tgz, 'info.json'])).stdout);
    assert.equal(info2.files['weights.safetensors'].sha256, r.body.job.params.pretrained.sha256);
    assert.equal(info2.resize_mode, 'squash');
    assert.equal(info2.mean.mode, 'image');

    // by upload id, as JSON
    const up = await fetch(`${server.url}/api/v1/uploads?name=model.tar.gz`, { method: 'POST', body: readFileSync(tgz) });
    assert.equal(up.status, 201);
    const upId = (await up.json()).upload.id;
    const r2 = await server.api('POST', '/api/v1/models/import', { upload: upId });
    assert.equal(r2.status, 201, JSON.stringify(r2.body));
    assert.equal(r2.body.job.name, 'imported model');
    assertError(await server.api('POST', '/api/v1/models/import', { upload: upId }), 400, 'invalid', /no upload has this id/);

    // fine-tuned from, and its network trained afresh, on the dataset
    const ft = await server.api('POST', '/api/v1/models', {
      name: 'ft', dataset: dsId, network: { previous: id }, finetune: { model: id }, epochs: 1, solver: { base_lr: 0.01 },
    });
    assert.equal(ft.status, 202, JSON.stringify(ft.body));
    const ftDone = await waitState(server, ft.body.job.id, ['done', 'error'], 60000);
    assert.equal(ftDone.state, 'done', ftDone.error);
    const p = await classify(server, ft.body.job.id, heldOut[0]);
    assert.equal(p[0].label, (await classify(server, modelId, heldOut[0]))[0].label);
  });

  test('hostile or broken bundles: a 400 naming the entry, nothing left on disk', async () => {
    const good = bundleEntries(unpacked);
    const uploads = join(server.dataDir, 'uploads');
    const jobsDir = join(server.dataDir, 'jobs');
    const before = { jobs: (await server.api('GET', '/api/v1/jobs')).body.total, dirs: readdirSync(jobsDir).sort() };
    const weights = good.find((e) => e.name === 'weights.safetensors');
    const flipped = Buffer.from(weights.data);
    flipped[flipped.length - 1] ^= 1;
    const cases = [
      ['traversal', [...good, { name: '../escaped.txt', data: 'x' }], /"\.\.\/escaped\.txt".*climbs out/],
      ['absolute', [...good, { name: '/tmp/deepdesk-absolute.txt', data: 'x' }], /"\/tmp\/deepdesk-absolute\.txt".*absolute path/],
      ['symlink', [...good.filter((e) => e.name !== 'mean.png'), { name: 'mean.png', type: 'symlink', link: '/etc/passwd' }], /"mean\.png" is a symbolic link/],
      ['hardlink', [...good.filter((e) => e.name !== 'mean.png'), { name: 'mean.png', type: 'hardlink', link: 'labels.txt' }], /"mean\.png" is a hard link/],
      ['device', [...good, { name: 'null', type: 'chr' }], /"null" is a device/],
      ['huge entry', [{ name: 'weights.safetensors', size: 3 * 2 ** 30, data: 'x' }], /entry weights\.safetensors is 3221225472 bytes, over the/],
      ['too many entries', Array.from({ length: 20 }, (_, i) => ({ name: `f${i}.txt`, data: 'x' })), /more than 16 entries/],
      ['no manifest', good.filter((e) => e.name !== 'info.json'), /no info\.json at the top/],
      ['manifest not JSON', good.map((e) => (e.name === 'info.json' ? { ...e, data: '{"format": ' } : e)), /info\.json is not a JSON object/],
      ['tampered weights', good.map((e) => (e.name === 'weights.safetensors' ? { ...e, data: flipped } : e)), /weights\.safetensors: sha256 .* info\.json says/],
      ['unknown file', [...good, { name: 'run.sh', data: 'rm -rf /' }], /entry "run\.sh" is not a bundle file/],
      ['a folder', [...good, { name: 'extra/labels.txt', data: 'x' }], /entry "extra\/" is a folder/],
    ];
    for (const [what, entries, re] of cases) {
      const path = join(work, 'hostile.tar.gz');
      await makeTar(path, entries);
      const r = await postForm(server, '/api/v1/models/import', { bundle: readFileSync(path) });
      assert.equal(r.status, 400, `${what}: ${r.text}`);
      assert.equal(r.body.error.code, 'invalid', what);
      assert.match(r.body.error.message, re, what);
      assert.match(r.body.error.message, /model\.tar\.gz/, `${what}: names the upload`);
      assert.deepEqual(readdirSync(uploads), [], `${what}: nothing left in uploads/`);
    }
    assert.ok(!existsSync('/tmp/deepdesk-absolute.txt'));
    assert.ok(!existsSync(join(server.dataDir, 'escaped.txt')) && !existsSync(join(server.dataDir, 'uploads', '..', 'escaped.txt')));
    assert.equal((await server.api('GET', '/api/v1/jobs')).body.total, before.jobs);
    assert.deepEqual(readdirSync(jobsDir).sort(), before.dirs);
    // not an archive, no file, unknown fields
    assertError(await postForm(server, '/api/v1/models/import', { name: 'x' }), 400, 'invalid', /bundle: required/);
    assertError(await postForm(server, '/api/v1/models/import', { bundle: Buffer.from('not a tar'), other: 1 }), 400, 'invalid', /unknown form field|not a readable/);
    const notTar = await postForm(server, '/api/v1/models/import', { bundle: Buffer.from('not a tar at all') });
    assertError(notTar, 400, 'invalid', /model\.tar\.gz: not a readable/);
    assertError(await server.api('POST', '/api/v1/models/import', {}), 400, 'invalid', /upload: required/);
    assertError(await server.api('POST', '/api/v1/models/import', { upload: 'zz', extra: 1 }), 400, 'invalid', /extra/);
    assert.deepEqual(readdirSync(uploads), []);
  });

  test('`deepdesk classify` over folders and list files: CSV and JSON lines as they come, flat memory', async () => {
    // a folder with a sub-folder, a non-image and a hidden file; a list with DIGITS' "path label" lines
    const dir = join(work, 'many');
    mkdirSync(join(dir, 'sub'), { recursive: true });
    writeFileSync(join(dir, 'b.ppm'), readFileSync(heldOut[1]));
    writeFileSync(join(dir, 'a.ppm'), readFileSync(heldOut[0]));
    writeFileSync(join(dir, 'sub', 'c.ppm'), readFileSync(heldOut[2]));
    writeFileSync(join(dir, 'notes.txt'), 'not an image');
    writeFileSync(join(dir, '.hidden.ppm'), 'hidden');
    const csv = join(work, 'out.csv');
    const r = await run(BIN, ['classify', '--model', tgz, '--out', csv, dir]);
    assert.match(r.stderr, /3 images \(0 failed\) in [\d.]+ s, [\d.]+ images\/s/);
    const rows = readFileSync(csv, 'utf8').trim().split('\n').map((l) => l.split(','));
    assert.deepEqual(rows[0], ['image', 'width', 'height', 'label_1', 'index_1', 'probability_1', 'label_2', 'index_2',
      'probability_2', 'label_3', 'index_3', 'probability_3', 'error']);
    assert.deepEqual(rows.slice(1).map((row) => row[0]), [join(dir, 'a.ppm'), join(dir, 'b.ppm'), join(dir, 'sub', 'c.ppm')]);
    const ref = JSON.parse((await run(BIN, ['classify', '--model', tgz, '--json', ...heldOut.slice(0, 3)])).stdout).results;
    rows.slice(1).forEach((row, i) => {
      assert.deepEqual([Number(row[1]), Number(row[2])], [ref[i].width, ref[i].height]);
      ref[i].predictions.forEach((p, k) => {
        assert.equal(row[3 + 3 * k], p.label);
        assert.equal(Number(row[4 + 3 * k]), p.index);
        assert.ok(Math.abs(Number(row[5 + 3 * k]) - p.probability) < 1e-7);
      });
      assert.equal(row[12], '');
    });

    const list = join(dir, 'list.txt');
    writeFileSync(list, `a.ppm 0\n# a comment\n\nsub/c.ppm\t2\nmissing.ppm 1\n${heldOut[3]}\n`);
    const jl = join(work, 'out.jsonl');
    await assert.rejects(run(BIN, ['classify', '--model', unpacked, '--list', list, '--out', jl, '--top', '2']),
      (e) => e.code === 1 && /4 images \(1 failed\)/.test(e.stderr));
    const lines = readFileSync(jl, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    assert.deepEqual(lines.map((l) => l.image), [join(dir, 'a.ppm'), join(dir, 'sub/c.ppm'), join(dir, 'missing.ppm'), heldOut[3]]);
    assert.equal(lines[0].predictions.length, 2);
    assert.deepEqual(lines[0].predictions, ref[0].predictions.slice(0, 2));
    assert.match(lines[2].error, /missing\.ppm/);
    await assert.rejects(run(BIN, ['classify', '--model', unpacked, '--json', '--out', jl, heldOut[0]]), (e) => e.code === 2);

    // memory does not grow with the number of images: 20 times the images, about the same peak
    const big = join(work, 'big');
    mkdirSync(big);
    const img = readFileSync(heldOut[0]);
    for (let i = 0; i < 8000; i++) writeFileSync(join(big, `${String(i).padStart(5, '0')}.ppm`), img);
    const small = join(work, 'small');
    mkdirSync(small);
    for (let i = 0; i < 400; i++) writeFileSync(join(small, `${i}.ppm`), img);
    const peak = async (folder) => Number((await run(PY, ['-c', `
import resource, subprocess, sys
subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
`, BIN, 'classify', '--model', unpacked, '--out', join(work, 'peak.csv'), folder])).stdout);
    const few = await peak(small), many = await peak(big);
    assert.equal(readFileSync(join(work, 'peak.csv'), 'utf8').trim().split('\n').length, 8001);
    assert.ok(many < few + 4096, `peak RSS ${few} KiB for 400 images, ${many} KiB for 8000`);
  });

  test('docs/bundle_torch.py gives the server\'s and the CLI\'s top-5 and probabilities', async () => {
    // besides the PPMs: a PNG with alpha, a gray+alpha one, a 16-bit gray one, a palette one and a JPEG
    const more = ['rgba.png', 'la.png', 'g16.png', 'pal.png', 'photo.jpg'].map((n) => join(work, n));
    await run(PY, ['-c', `
import sys, numpy as np
from PIL import Image
r = np.random.RandomState(5)
Image.fromarray(r.randint(0, 255, (19, 23, 4)).astype('uint8'), 'RGBA').save(sys.argv[1])
Image.fromarray(r.randint(0, 255, (14, 9, 2)).astype('uint8'), 'LA').save(sys.argv[2])
Image.fromarray(r.randint(0, 65535, (10, 12)).astype('uint16')).save(sys.argv[3])
Image.fromarray(r.randint(0, 255, (12, 12, 3)).astype('uint8')).convert('P', palette=Image.ADAPTIVE, colors=16).save(sys.argv[4])
Image.fromarray(np.clip(np.array([200, 40, 30]) + r.randint(-30, 30, (31, 17, 3)), 0, 255).astype('uint8')).save(sys.argv[5], quality=85)
`, ...more]);
    heldOut = [...heldOut, ...more];
    const cli = JSON.parse((await run(BIN, ['classify', '--model', tgz, '--json', ...heldOut])).stdout);
    const py = JSON.parse((await run(PY, [join(ROOT, 'docs', 'bundle_torch.py'), unpacked, '--json', ...heldOut],
      { env: { ...process.env, OMP_NUM_THREADS: '1' } })).stdout);
    assert.equal(py.snapshot, '2');
    assert.equal(py.results.length, heldOut.length);
    for (let i = 0; i < heldOut.length; i++) {
      const s = await classify(server, modelId, heldOut[i]);
      const c = cli.results[i].predictions, t = py.results[i].predictions;
      assert.equal(py.results[i].image, heldOut[i]);
      assert.equal(py.results[i].width, cli.results[i].width);
      assert.deepEqual(t.map((p) => p.index), s.map((p) => p.index), `image ${i}: the server's order`);
      assert.deepEqual(t.map((p) => p.index), c.map((p) => p.index), `image ${i}: the CLI's order`);
      t.forEach((p, k) => {
        assert.equal(p.label, s[k].label);
        assert.ok(Math.abs(p.probability - s[k].probability) <= 1e-4, `image ${i} class ${k}: ${p.probability} vs ${s[k].probability}`);
        assert.ok(Math.abs(p.probability - c[k].probability) <= 1e-4);
      });
    }
    // a tampered bundle is refused by the script too
    const dir = join(work, 'py-tampered');
    cpSync(unpacked, dir, { recursive: true });
    writeFileSync(join(dir, 'labels.txt'), 'x\ny\nz\n');
    await assert.rejects(run(PY, [join(ROOT, 'docs', 'bundle_torch.py'), dir, heldOut[0]]), /labels\.txt: does not match/);
  });

  test('docs/bundle_torch.py on AlexNet\'s layer types, with a crop, a mean and the fill resize mode', async () => {
    writeColourFolders(join(work, 'colours24'), COLOURS, 12, 24);
    const r = await server.api('POST', '/api/v1/datasets', {
      name: 'colours24', source: { type: 'folder', train: join(work, 'colours24') },
      options: { width: 24, height: 24, channels: 3, val_pct: 25, seed: 2, resize_mode: 'fill' },
    });
    assert.equal(r.status, 202, JSON.stringify(r.body));
    assert.equal((await waitState(server, r.body.job.id, ['done', 'error'], 30000)).state, 'done');
    const m = await server.api('POST', '/api/v1/models', {
      name: 'minialex', dataset: r.body.job.id, network: { prototxt: MINI_ALEX }, epochs: 8, solver: { base_lr: 0.05 },
    });
    assert.equal(m.status, 202, JSON.stringify(m.body));
    const done = await waitState(server, m.body.job.id, ['done', 'error'], 120000);
    assert.equal(done.state, 'done', done.error);
    const res = await fetch(`${server.url}/api/v1/models/${m.body.job.id}/bundle`);
    assert.equal(res.status, 200);
    const t = join(work, 'minialex.tar.gz'), dir = join(work, 'minialex');
    writeFileSync(t, Buffer.from(await res.arrayBuffer()));
    mkdirSync(dir);
    await run('tar', ['xzf', t, '-C', dir]);
    const info = JSON.parse(readFileSync(join(dir, 'info.json'), 'utf8'));
    assert.equal(info.crop, 20);
    assert.equal(info.resize_mode, 'fill');
    assert.deepEqual(info.net_input.shape, [1, 3, 20, 20]);
    const deploy = readFileSync(join(dir, 'deploy.prototxt'), 'utf8');
    for (const kind of ['LRN', 'Pooling', 'Dropout', 'Power', 'group: 2']) assert.match(deploy, new RegExp(kind));
    // other shapes than the dataset's: wide and tall, so fill pads both ways with its noise
    const imgs = [[30, 12, [190, 50, 40]], [9, 27, [50, 60, 200]], [24, 24, [60, 190, 70]], [17, 16, [128, 128, 40]], [40, 8, [128, 128, 128]], [6, 30, [100, 110, 120]]]
      .map(([w, h, rgb], i) => { const p = join(work, `alex${i}.ppm`); writeFileSync(p, noisyPpm(w, h, rgb, 700 + i)); return p; });
    const py = JSON.parse((await run(PY, [join(ROOT, 'docs', 'bundle_torch.py'), dir, '--json', ...imgs])).stdout);
    const cli = JSON.parse((await run(BIN, ['classify', '--model', t, '--json', ...imgs])).stdout);
    assert.ok(py.results.some((x) => x.predictions[0].probability > 0.6), 'a model that tells the colours apart');
    for (let i = 0; i < imgs.length; i++) {
      const s = await classify(server, m.body.job.id, imgs[i]);
      const p = py.results[i].predictions;
      assert.deepEqual(p.map((q) => q.index), s.map((q) => q.index), `image ${i}`);
      assert.deepEqual(p.map((q) => q.index), cli.results[i].predictions.map((q) => q.index), `image ${i}`);
      p.forEach((q, k) => {
        assert.ok(Math.abs(q.probability - s[k].probability) <= 1e-4, `image ${i} class ${k}: ${q.probability} vs ${s[k].probability}`);
        assert.ok(Math.abs(q.probability - cli.results[i].predictions[k].probability) <= 1e-4);
      });
    }
  });
});
