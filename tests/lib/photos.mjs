// photos.mjs — realistic images for the tests, made by tests/lib/photos.py (Pillow and
// numpy) from a seed: colour JPEG "photos" up to 4000×3000 (a few MB each), a
// 4000×3000 PNG, a phone's portrait photo stored landscape with EXIF Orientation 6,
// Orientation 3 and 8 (and 6 in a little-endian TIFF block), a progressive and a
// CMYK JPEG, a gray JPEG, 16-bit gray and RGB PNGs, palette PNGs with and without
// tRNS, gray+alpha and RGBA PNGs, in six classes by colour; broken files (a JPEG
// and a PNG cut short, a file that only starts like a JPEG); small copies of every
// kind for pixel checks against Pillow.
//
// The folder is made once per seed and generator version (the script's hash is in
// its name) under DEEPDESK_TEST_TMP or the system temp folder, so the ten seconds
// it takes are paid once, however many test files and runs use it; a new version of
// the generator removes the sets other versions made over a day before.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, renameSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
export const PY = '/usr/bin/python3';
const SCRIPT = join(here, 'photos.py');

/** The photo set of seed: {dir, manifest, bad, parity, path(rel)}.
 *  manifest: [{file, class, kind, format, stored: [w, h], shown: [w, h] (after EXIF
 *  orientation), orientation, bytes}], file relative to dir as class/name;
 *  bad: [{file, class, why}]; parity: [{file, kind, stored, shown, orientation}]. */
export function photos(seed = 1) {
  const hash = createHash('sha256').update(readFileSync(SCRIPT)).digest('hex').slice(0, 12);
  const dir = join(process.env.DEEPDESK_TEST_TMP || tmpdir(), `deepdesk-photos-${seed}-${hash}`);
  if (!existsSync(join(dir, 'manifest.json'))) {
    // made beside it and renamed, so a run cut short never leaves half a set
    const tmp = `${dir}.tmp-${process.pid}`;
    rmSync(tmp, { recursive: true, force: true });
    execFileSync(PY, [SCRIPT, String(seed), tmp], { stdio: ['ignore', 'ignore', 'inherit'] });
    try { renameSync(tmp, dir); } catch { rmSync(tmp, { recursive: true, force: true }); /* another run made it */ }
    // sets another version of the generator made a day ago or more (not younger: a
    // checkout beside this one may be using its own right now)
    const base = dirname(dir), mine = basename(dir), prefix = `deepdesk-photos-${seed}-`;
    for (const d of readdirSync(base)) {
      if (!d.startsWith(prefix) || d === mine || d.includes('.tmp-')) continue;
      try {
        if (Date.now() - statSync(join(base, d)).mtimeMs > 86400e3) rmSync(join(base, d), { recursive: true, force: true });
      } catch { /* gone already */ }
    }
  }
  const read = (f) => JSON.parse(readFileSync(join(dir, f), 'utf8'));
  return {
    dir,
    manifest: read('manifest.json'),
    bad: read('bad.json'),
    parity: read('parity.json'),
    path: (rel) => join(dir, rel),
  };
}

/** A JPEG padded after its end-of-image marker to exactly n bytes: still an image
 *  every decoder reads (they stop at EOI), of whatever size a cap test needs. */
export function paddedJpeg(jpeg, n) {
  if (n < jpeg.length) throw new Error(`paddedJpeg: ${n} bytes is less than the JPEG's ${jpeg.length}`);
  return Buffer.concat([jpeg, Buffer.alloc(n - jpeg.length)]);
}
