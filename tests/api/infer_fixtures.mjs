// infer_fixtures.mjs — what the inference tests (API and browser) share: PNG files
// made in memory (one colour, or a bare header that claims any size, for the
// decoder's pixel cap), and a small convolutional network.
import { deflateSync } from 'node:zlib';

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
/** An 8-bit RGB PNG, w×h, of one colour (a header only, claiming w×h, when bare). */
export function png(w, h, [r, g, b], { bare = false } = {}) {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(w, 0); ihdr.writeUInt32BE(h, 4);
  ihdr.set([8, 2, 0, 0, 0], 8);
  const sig = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  if (bare) return Buffer.concat([sig, chunk('IHDR', ihdr), chunk('IDAT', deflateSync(Buffer.alloc(16))), chunk('IEND', Buffer.alloc(0))]);
  const raw = Buffer.alloc(h * (1 + w * 3));
  for (let y = 0; y < h; y++) for (let x = 0; x < w; x++) raw.set([r, g, b], y * (1 + w * 3) + 1 + x * 3);
  return Buffer.concat([sig, chunk('IHDR', ihdr), chunk('IDAT', deflateSync(raw)), chunk('IEND', Buffer.alloc(0))]);
}

/** A small convolutional network: conv (4 filters, 3×3) + in-place ReLU, then an
 *  InnerProduct and the deploy Softmax. */
export const CONV_NET = `name: "convy"
layer { name: "train-data" type: "Data" top: "data" top: "label" include { stage: "train" }
  data_param { batch_size: 4 } transform_param { scale: 0.0039 } }
layer { name: "val-data" type: "Data" top: "data" top: "label" include { stage: "val" }
  data_param { batch_size: 4 } transform_param { scale: 0.0039 } }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
  convolution_param { num_output: 4 kernel_size: 3 weight_filler { type: "xavier" } } }
layer { name: "relu" type: "ReLU" bottom: "conv" top: "conv" }
layer { name: "ip" type: "InnerProduct" bottom: "conv" top: "ip"
  inner_product_param { num_output: 3 weight_filler { type: "xavier" } } }
layer { name: "accuracy" type: "Accuracy" bottom: "ip" bottom: "label" top: "accuracy" include { stage: "val" } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" exclude { stage: "deploy" } }
layer { name: "prob" type: "Softmax" bottom: "ip" top: "prob" include { stage: "deploy" } }
`;
