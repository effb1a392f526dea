// png.mjs — PNG files made in memory, for the tests and the benchmarks: one
// colour, a header alone that claims any size (for the decoders' pixel cap), and
// LeNet-sized gray "bars" whose class a network can learn in an epoch.
import { deflateSync } from 'node:zlib';

const SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
const CRC = new Int32Array(256).map((_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320 ^ (c >>> 1) : c >>> 1;
  return c;
});
function crc32(buf) {
  let c = -1;
  for (const b of buf) c = CRC[(c ^ b) & 0xff] ^ (c >>> 8);
  return (c ^ -1) >>> 0;
}
function chunk(type, data) {
  const len = Buffer.alloc(4); len.writeUInt32BE(data.length);
  const td = Buffer.concat([Buffer.from(type), data]);
  const crc = Buffer.alloc(4); crc.writeUInt32BE(crc32(td));
  return Buffer.concat([len, td, crc]);
}

/** An 8-bit PNG of w×h, colour type 0 (gray) or 2 (RGB), from raw: its rows, each
 *  led by its filter byte. */
export function encodePng(w, h, colourType, raw) {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(w, 0); ihdr.writeUInt32BE(h, 4);
  ihdr.set([8, colourType, 0, 0, 0], 8);
  return Buffer.concat([SIGNATURE, chunk('IHDR', ihdr), chunk('IDAT', deflateSync(raw)), chunk('IEND', Buffer.alloc(0))]);
}

/** An RGB PNG header that claims w×h, with a token IDAT: what a decoder must refuse by its size. */
export function headerPng(w, h) {
  return encodePng(w, h, 2, Buffer.alloc(16));
}

/** An RGB PNG, w×h, of one colour (with bare: the header alone, claiming w×h). */
export function solidPng(w, h, [r, g, b], { bare = false } = {}) {
  if (bare) return headerPng(w, h);
  const raw = Buffer.alloc(h * (1 + w * 3));
  for (let y = 0; y < h; y++) for (let x = 0; x < w; x++) raw.set([r, g, b], y * (1 + w * 3) + 1 + x * 3);
  return encodePng(w, h, 2, raw);
}

/** A 28×28 gray PNG of class k (0..9): a bright bar at rows 2k..2k+4, noise seeded by seed elsewhere. */
export function barsPng(k, seed) {
  const w = 28, h = 28, raw = Buffer.alloc(h * (1 + w));
  let x = (seed * 2654435761) >>> 0;
  for (let y = 0; y < h; y++) {
    for (let i = 0; i < w; i++) {
      x = (x * 1103515245 + 12345) >>> 0;
      raw[y * (1 + w) + 1 + i] = (y >= 2 * k && y < 2 * k + 5 ? 200 : 30) + ((x >>> 16) % 40);
    }
  }
  return encodePng(w, h, 0, raw);
}
