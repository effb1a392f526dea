// datasets.test.mjs — the new-dataset form and the dataset page in a real Chromium
// against a real server (the test build, with the UI embedded: run `make all` first).
//
//   cd /work/main && make all && node --test tests/browser/datasets.test.mjs
//
// The images are made here: PPM files (a header and raw RGB bytes) in class folders,
// packed into a .tar written by hand.  DEEPDESK_SCREENSHOTS=/tmp also writes light and
// dark screenshots (ui-dataset-*.png) there.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, writeFileSync, rmSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openPage } from '../lib/browser.mjs';
import { startServer, waitState, BIN } from '../lib/server.mjs';
import { apiSaying } from '../api/helpers.mjs';

const SHOTS = process.env.DEEPDESK_SCREENSHOTS || '';

const CLASSES = ['circles', 'squares', 'stripes'];
const PER_CLASS = 12;

let server, browser, page, work, archive, textFile, rootDir;
let pageErrors = [];

/* ---------- test data ---------- */

/** A w×h PPM whose picture depends on the class and the index. */
function ppm(cls, i, w, h) {
  const px = Buffer.alloc(w * h * 3);
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      const o = (y * w + x) * 3;
      let on;
      if (cls === 0) on = (x - w / 2) ** 2 + (y - h / 2) ** 2 < (Math.min(w, h) / (2.5 + (i % 3) * 0.4)) ** 2;
      else if (cls === 1) on = Math.abs(x - w / 2) < w / (3 + (i % 4)) && Math.abs(y - h / 2) < h / (3 + (i % 4));
      else on = Math.floor((x + i) / 4) % 2 === 0;
      const base = [[220, 60, 50], [40, 170, 80], [50, 90, 220]][cls];
      for (let c = 0; c < 3; c++) px[o + c] = on ? base[c] : 20 + ((i * 13 + c * 40) % 60);
    }
  }
  return Buffer.concat([Buffer.from(`P6\n${w} ${h}\n255\n`, 'ascii'), px]);
}

/** A POSIX ustar archive of [{name, data}] (folders get their own entries). */
function tar(files) {
  const blocks = [];
  const header = (name, size, type) => {
    const b = Buffer.alloc(512);
    const put = (off, len, s) => b.write(s, off, Math.min(len, Buffer.byteLength(s)), 'ascii');
    put(0, 100, name);
    put(100, 8, type === '5' ? '0000755\0' : '0000644\0');
    put(108, 8, '0000000\0');
    put(116, 8, '0000000\0');
    put(124, 12, `${size.toString(8).padStart(11, '0')}\0`);
    put(136, 12, `${Math.floor(Date.now() / 1000).toString(8).padStart(11, '0')}\0`);
    b.fill(0x20, 148, 156);
    put(156, 1, type);
    put(257, 6, 'ustar\0');
    put(263, 2, '00');
    let sum = 0;
    for (const x of b) sum += x;
    put(148, 8, `${sum.toString(8).padStart(6, '0')}\0 `);
    return b;
  };
  const dirs = new Set();
  for (const f of files) {
    const parts = f.name.split('/');
    for (let i = 1; i < parts.length; i++) {
      const d = `${parts.slice(0, i).join('/')}/`;
      if (!dirs.has(d)) { dirs.add(d); blocks.push(header(d, 0, '5')); }
    }
    blocks.push(header(f.name, f.data.length, '0'), f.data);
    const pad = (512 - (f.data.length % 512)) % 512;
    if (pad) blocks.push(Buffer.alloc(pad));
  }
  blocks.push(Buffer.alloc(1024));
  return Buffer.concat(blocks);
}

before(async () => {
  assert.ok(existsSync(BIN), `${BIN} is missing: run make all first`);
  work = mkdtempSync(join(tmpdir(), 'deepdesk-dstest-'));
  const files = [];
  CLASSES.forEach((cls, c) => {
    for (let i = 0; i < PER_CLASS; i++) files.push({ name: `${cls}/img_${String(i).padStart(2, '0')}.ppm`, data: ppm(c, i, 40 + (i % 3) * 8, 32 + (i % 2) * 8) });
  });
  files.push({ name: 'circles/broken.ppm', data: Buffer.from('P6\n40 30\n255\nnot enough pixels') });
  files.push({ name: 'squares/README.txt', data: Buffer.from('not an image\n') });
  files.push({ name: 'lonely/only_one.ppm', data: ppm(0, 1, 20, 20) }); // under min_per_class: dropped
  archive = join(work, 'shapes_set.tar');
  writeFileSync(archive, tar(files));
  textFile = join(work, 'notes.txt');
  writeFileSync(textFile, 'hello\n');
  rootDir = join(work, 'root');
  mkdirSync(rootDir);

  server = await startServer({ args: ['--data-root', rootDir] }); // no --ui-dir: the embedded UI
  ({ browser, page, errors: pageErrors } = await openPage());
});

after(async () => {
  if (browser) await browser.close();
  if (server) { await server.stop(); server.cleanup(); }
  if (work) rmSync(work, { recursive: true, force: true });
});

const api = (method, path, body) => apiSaying(server, method, path, body);

async function screenshots(name) {
  if (!SHOTS) return;
  for (const scheme of ['light', 'dark']) {
    await page.emulateMedia({ colorScheme: scheme });
    await page.waitForTimeout(400);
    await page.screenshot({ path: join(SHOTS, `ui-${name}-${scheme}.png`), fullPage: true, timeout: 30000 });
  }
  await page.emulateMedia({ colorScheme: 'light' });
}

/** The explorer's thumbnails once every one has loaded: [{label, w, index}]. */
async function thumbs(expected) {
  try {
    await page.waitForFunction((n) => {
      const imgs = [...document.querySelectorAll('.thumbs .thumb img')];
      return document.querySelector('.thumbs:not([aria-busy])') && imgs.length === n && imgs.every((i) => i.complete && i.naturalWidth > 0);
    }, expected);
  } catch (e) {
    const seen = await page.evaluate(() => [...document.querySelectorAll('.thumbs .thumb img')].map((i) => `${i.complete}/${i.naturalWidth}`));
    throw new Error(`expected ${expected} loaded thumbnails at ${page.url()}; the page has ${seen.length}: [${seen.join(' ')}] (${e.message})`);
  }
  return page.locator('.thumbs .thumb').evaluateAll((els) => els.map((e) => ({
    label: e.querySelector('.thumb-label').textContent,
    w: e.querySelector('img').naturalWidth,
    index: Number(e.dataset.index),
  })));
}

const query = () => Object.fromEntries(new URL(page.url()).searchParams);

let datasetId = null;

test('new dataset: upload an archive, preview, create, and explore the result', async () => {
  await page.goto(`${server.url}/datasets`);
  await page.locator('#conn[data-state="open"]').waitFor();
  await page.evaluate(() => { window.__sameDocument = true; });
  await page.getByRole('link', { name: 'New dataset' }).first().click();
  await page.waitForURL('**/datasets/new');
  await page.getByRole('heading', { level: 1, name: 'New dataset' }).waitFor();

  // The preview shows one record at the default size, with its encoded size.
  const preview = page.locator('.preview-img');
  await page.waitForFunction(() => document.querySelector('.preview-img').naturalWidth === 256);
  await page.locator('[data-encoded]').filter({ hasText: /encoded record: \d/ }).waitFor();
  const bytes256 = await page.locator('[data-encoded] strong').textContent();

  // Choose the archive: it uploads at once, with its progress shown.
  await page.setInputFiles('#f-file', archive);
  await page.locator('.filebox[data-state="done"]').waitFor();
  const meta = await page.locator('.filebox-meta').textContent();
  assert.match(meta, /uploaded · 100%/);
  assert.equal(await page.locator('.filebox-name').textContent(), 'shapes_set.tar');
  assert.equal(Number(await page.locator('.filebox [role=progressbar]').getAttribute('aria-valuenow')), 100);
  // The name is suggested from the file name.
  assert.equal(await page.locator('#f-name').inputValue(), 'shapes set');

  // 16×16: the preview follows, smaller.
  await page.locator('#f-width').fill('16');
  await page.locator('#f-height').fill('16');
  await page.waitForFunction(() => document.querySelector('.preview-img').naturalWidth === 16);
  await page.locator('.preview-caption').filter({ hasText: '16 × 16' }).waitFor();
  const bytes16 = await page.locator('[data-encoded] strong').textContent();
  assert.notEqual(bytes16, bytes256, 'the encoded size changed with the size');
  assert.equal(await preview.evaluate((i) => getComputedStyle(i).imageRendering), 'pixelated');

  await page.locator('#f-name').fill('browser shapes');
  await page.getByRole('button', { name: 'Create dataset' }).click();
  await page.waitForURL(/\/datasets\/\d+$/);
  assert.equal(await page.evaluate(() => window.__sameDocument), true, 'creating reloaded the page');
  datasetId = Number(new URL(page.url()).pathname.split('/').pop());
  await page.getByRole('heading', { level: 1, name: 'browser shapes' }).waitFor();

  // It runs and finishes, live: the log streams in, the badge ends "done" at 100%.
  await page.getByRole('log').getByText(/^writing train_db/).waitFor();
  await page.waitForFunction(() => document.querySelector('.job-meta .badge').textContent === 'done');
  assert.equal(Number(await page.locator('.job-progress [role=progressbar]').getAttribute('aria-valuenow')), 100);
  await page.locator('.timeline > li[data-state="done"]').waitFor(); // the detail record follows the live one
  const history = await page.locator('.timeline > li').evaluateAll((els) => els.map((e) => e.dataset.state));
  assert.deepEqual(history, ['queued', 'running', 'done']);

  // The summary matches the server's.
  const ds = (await api('GET', `/api/v1/datasets/${datasetId}`)).body.dataset;
  const s = ds.summary;
  assert.deepEqual(s.labels, CLASSES);
  assert.equal(s.splits.train.images + s.splits.val.images, CLASSES.length * PER_CLASS);
  assert.equal(s.splits.test.images, 0);
  await page.locator('.tile[data-tile="train"]').waitFor();
  const tile = (k) => page.locator(`.tile[data-tile="${k}"] .tile-value`).textContent();
  assert.equal(await tile('train'), String(s.splits.train.images));
  assert.equal(await tile('val'), String(s.splits.val.images));
  assert.equal(await tile('test'), '0');
  assert.equal(await tile('classes'), '3');
  assert.equal(await tile('size'), '16×16');

  // Skipped files and the dropped class, with their reasons.
  const skipped = await page.locator('.skipped-table tbody tr').evaluateAll((rows) => rows.map((r) => r.cells[0].textContent));
  assert.equal(skipped.length, s.skipped.length);
  assert.ok(skipped.some((p) => p.endsWith('broken.ppm')), `broken.ppm is listed: ${skipped}`);
  assert.ok(skipped.some((p) => p.endsWith('README.txt')), `README.txt is listed: ${skipped}`);
  assert.match(await page.locator('[data-dropped="lonely"]').textContent(), /not enough images/);

  // The chart is drawn (pixels on the canvas), the mean image is the dataset's size.
  await page.locator('canvas[data-ready]').waitFor();
  const inked = await page.locator('canvas[data-ready]').evaluate((c) => {
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++;
    return n;
  });
  assert.ok(inked > 1000, `the chart drew ${inked} pixels`);
  await page.waitForFunction(() => { const i = document.querySelector('[data-role="mean"]'); return i && i.complete && i.naturalWidth > 0; });
  assert.equal(await page.locator('[data-role="mean"]').evaluate((i) => i.naturalWidth), 16);
  assert.equal(await page.locator('a[data-file="labels.txt"]').getAttribute('href'), `/api/v1/datasets/${datasetId}/files/labels.txt`);

  // Explore: the first page of the training split, 25 at a time.
  const train = s.splits.train.images;
  let t = await thumbs(Math.min(25, train));
  assert.ok(t.every((x) => x.w === 16 && CLASSES.includes(x.label)), JSON.stringify(t));
  assert.equal(await page.locator('.pg-text').textContent(), `Page 1 of ${Math.ceil(train / 25)}`);
  await page.getByRole('button', { name: 'Next page' }).click();
  t = await thumbs(train - 25);
  assert.equal(await page.locator('.pg-text').textContent(), 'Page 2 of 2');
  assert.equal(query().page, '2');
  assert.equal(await page.getByRole('button', { name: 'Next page' }).isDisabled(), true);
  await page.getByRole('button', { name: 'First page' }).click();
  await thumbs(25);

  // The validation split, then one class of it.
  await page.locator('.seg-btn[data-split="val"]').click();
  t = await thumbs(s.splits.val.images);
  assert.equal(query().split, 'val');
  await page.locator('#ex-class').selectOption('1');
  t = await thumbs(s.splits.val.per_class[1]);
  assert.ok(t.every((x) => x.label === 'squares'), JSON.stringify(t));
  assert.equal(query().class, '1');

  // Page size 10 on the training split pages through all of it, and the state survives a reload.
  await page.locator('.seg-btn[data-split="train"]').click();
  await page.locator('#ex-class').selectOption('-1');
  await page.locator('#ex-size').selectOption('10');
  await thumbs(10);
  const pages = Math.ceil(train / 10);
  await page.getByRole('button', { name: 'Last page' }).click();
  t = await thumbs(train - (pages - 1) * 10);
  assert.equal(await page.locator('.pg-text').textContent(), `Page ${pages} of ${pages}`);
  await page.getByRole('button', { name: 'Previous page' }).click();
  await thumbs(10);
  assert.deepEqual(query(), { page: String(pages - 1), size: '10' });
  await page.reload();
  await page.locator('.pg-text').filter({ hasText: `Page ${pages - 1} of ${pages}` }).waitFor();
  await thumbs(10);
  assert.equal(await page.locator('#ex-size').inputValue(), '10');
  await screenshots('dataset');

  // Clone opens the form with this dataset's settings; the archive must be chosen again.
  await page.getByRole('button', { name: 'Clone' }).click();
  await page.waitForURL(`**/datasets/new?from=${datasetId}`);
  await page.locator('.alert-info').filter({ hasText: 'shapes_set.tar' }).waitFor();
  assert.equal(await page.locator('#f-name').inputValue(), 'browser shapes (clone)');
  assert.equal(await page.locator('#f-width').inputValue(), '16');
  assert.equal(await page.locator('#f-height').inputValue(), '16');
  assert.equal(await page.locator('.source-card.selected').getAttribute('data-source'), 'upload');
  await page.waitForFunction(() => document.querySelector('.preview-img').naturalWidth === 16);
});

test('datasets tab: the new dataset with its headline', async () => {
  assert.ok(datasetId, 'needs the dataset of the first test');
  await page.goto(`${server.url}/datasets`);
  const row = page.locator(`tr[data-id="${datasetId}"]`);
  await row.locator('.ds-headline').filter({ hasText: '3 classes' }).waitFor();
  const s = (await api('GET', `/api/v1/datasets/${datasetId}`)).body.dataset.summary;
  assert.equal(await row.locator('.ds-headline').textContent(),
    `3 classes · ${s.splits.train.images} train / ${s.splits.val.images} val · 16×16 colour · ${await page.evaluate((n) => {
      const u = ['B', 'kB', 'MB', 'GB']; let i = 0; while (n >= 1000 && i < 3) { n /= 1000; i++; }
      return `${i === 0 ? n : n < 10 ? n.toFixed(1) : Math.round(n)} ${u[i]}`;
    }, s.disk_bytes)}`);
  assert.equal(await row.getByRole('link', { name: 'browser shapes' }).getAttribute('href'), `/datasets/${datasetId}`);
  await screenshots('datasets-tab');
});

test('new dataset: mistakes are shown next to their field, before and after the server', async () => {
  const before = (await api('GET', '/api/v1/datasets')).body.total;
  await page.goto(`${server.url}/datasets/new`);
  await page.getByRole('heading', { level: 1, name: 'New dataset' }).waitFor();

  // Nothing filled in: the archive and the name are asked for, nothing is sent.
  await page.getByRole('button', { name: 'Create dataset' }).click();
  await page.locator('#err-name').filter({ hasText: 'Give the dataset a name.' }).waitFor();
  assert.equal(await page.locator('#f-name').getAttribute('aria-invalid'), 'true');
  assert.match(await page.locator('#err-file').textContent(), /Choose an archive/);

  // A text file is refused before it is uploaded, chosen or dropped.
  await page.setInputFiles('#f-file', textFile);
  await page.locator('#err-file').filter({ hasText: '“notes.txt” is not an archive' }).waitFor();
  assert.equal(await page.locator('.filebox').isHidden(), true);
  const drop = (name) => page.evaluate((n) => {
    const dt = new DataTransfer();
    dt.items.add(new File(['not really an archive'], n));
    const zone = document.querySelector('.dropzone');
    for (const type of ['dragenter', 'dragover', 'drop']) zone.dispatchEvent(new DragEvent(type, { dataTransfer: dt, bubbles: true, cancelable: true }));
  }, name);
  await drop('dropped.txt');
  await page.locator('#err-file').filter({ hasText: '“dropped.txt” is not an archive' }).waitFor();
  assert.equal(await page.locator('.filebox').isHidden(), true);
  // A dropped archive is uploaded (the server looks inside only when the job runs).
  await drop('dropped.tgz');
  await page.locator('.filebox[data-state="done"]').waitFor();
  assert.equal(await page.locator('.filebox-name').textContent(), 'dropped.tgz');
  assert.equal(await page.locator('#err-file').isHidden(), true);
  await page.locator('#f-name').fill('');

  // Numbers out of range, and splits over 100%.
  await page.locator('#f-width').fill('0');
  await page.locator('#f-val_pct').fill('80');
  await page.locator('#f-test_pct').fill('30');
  await page.locator('#f-name').fill('mistakes');
  await page.getByRole('button', { name: 'Create dataset' }).click();
  await page.locator('#err-width').filter({ hasText: 'from 1 to 4096' }).waitFor();
  assert.match(await page.locator('#err-splits').textContent(), /must not exceed 100%/);
  assert.equal(await page.locator('#err-name').isHidden(), true, 'the name is fine now');
  // Typing in a field clears its error.
  await page.locator('#f-width').fill('32');
  assert.equal(await page.locator('#err-width').isHidden(), true);
  await page.locator('#f-test_pct').fill('0');

  // The server's own refusal lands next to the field it names: a folder outside --data-root.
  await page.locator('label[for="src-folder"]').click();
  await page.locator('.chip-path').filter({ hasText: rootDir }).waitFor();
  await page.locator('#f-train').fill('/etc');
  await page.getByRole('button', { name: 'Create dataset' }).click();
  await page.locator('#err-train').filter({ hasText: 'below an allowed --data-root' }).waitFor();
  assert.equal(await page.locator('#f-train').getAttribute('aria-invalid'), 'true');
  assert.equal(await page.locator('.newds-page > .alert-error').isHidden(), true, 'not at the top: at its field');
  await screenshots('dataset-new-errors');

  assert.equal((await api('GET', '/api/v1/datasets')).body.total, before, 'no dataset was created');
  assert.deepEqual(pageErrors, [], 'no script errors in the page');
});
