#!/usr/bin/python3
"""write_lmdb.py DIR [N] — write an LMDB the way DIGITS' tools/create_db.py does,
with py-lmdb, google.protobuf and PIL (not with deepdesk's code), for deepdesk's
reader to import.  Also writes DIR/../<basename>.mean.binaryproto as create_db.py's
_save_means does (legacy num/channels/height/width, packed float data, CHW BGR).

Record i (0-based, N records, default 300):
  label    i % 5
  pixels   an RGB image of H=12 x W=10, pixel (y, x, c) = (i*7 + y*13 + x*3 + c*50) % 256
           (grayscale records use channel 0's formula)
  i % 4 == 3   grayscale (1 channel), raw
  i % 2 == 0   raw: data = CHW bytes, planes in BGR order (create_db.py's
               _array_to_datum, "see issue #59"); encoded unset
  i % 2 == 1   encoded: data = a PNG file PIL writes from the RGB HWC array;
               encoded = true; channels/height/width set as well
Keys '%08d_%d' % (i, label); one transaction per batch of 100 puts; on
MapFullError the map is doubled and the batch retried (as create_db.py does).
Prints {"count": N, "mean_path": ...} on stdout."""
import io
import os
import sys

import lmdb
import numpy as np
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from caffe_pb2_min import BlobProto, Datum  # noqa: E402

H, W = 12, 10


def image_rgb(i):
    y, x, c = np.meshgrid(np.arange(H), np.arange(W), np.arange(3), indexing="ij")
    return ((i * 7 + y * 13 + x * 3 + c * 50) % 256).astype(np.uint8)


def record(i):
    label = i % 5
    rgb = image_rgb(i)
    d = Datum()
    if i % 4 == 3:
        gray = rgb[:, :, 0]
        d.channels, d.height, d.width = 1, H, W
        d.data = gray.tobytes()
        pixels = gray[:, :, None]
    elif i % 2 == 0:
        chw = rgb.transpose(2, 0, 1)[[2, 1, 0], ...]  # RGB -> BGR planes
        d.channels, d.height, d.width = chw.shape
        d.data = chw.tobytes()
        pixels = rgb
    else:
        buf = io.BytesIO()
        Image.fromarray(rgb).save(buf, format="PNG")
        d.data = buf.getvalue()
        d.encoded = True
        d.channels, d.height, d.width = 3, H, W
        pixels = rgb
    d.label = label
    return label, d.SerializeToString(), pixels


def write_batch(env, batch):
    # create_db.py's _write_batch_lmdb: retry the whole batch after doubling the map
    while True:
        try:
            with env.begin(write=True) as txn:
                for key, value in batch:
                    txn.put(key, value)
            return
        except lmdb.MapFullError:
            env.set_mapsize(env.info()["map_size"] * 2)


def main():
    if len(sys.argv) not in (2, 3):
        sys.stderr.write("usage: write_lmdb.py DIR [N]\n")
        return 1
    path = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) == 3 else 300
    os.makedirs(path, exist_ok=True)
    # a small map on purpose, so that the MapFullError path runs too
    env = lmdb.open(path, map_size=64 << 10, map_async=True, max_dbs=0)
    batch, total = [], np.zeros((H, W, 3), np.float64)
    for i in range(n):
        label, value, pixels = record(i)
        batch.append((("%08d_%d" % (i, label)).encode("ascii"), value))
        total += pixels if pixels.shape[2] == 3 else np.repeat(pixels, 3, axis=2)
        if len(batch) == 100:
            write_batch(env, batch)
            batch = []
    if batch:
        write_batch(env, batch)
    env.close()

    # _save_means: the mean as rounded uint8, stored CHW with BGR planes
    mean = np.around(total / n).astype(np.uint8)
    chw = mean.transpose(2, 0, 1)[[2, 1, 0], ...]
    blob = BlobProto()
    blob.num = 1
    blob.channels, blob.height, blob.width = chw.shape
    blob.data.extend(chw.astype(float).flat)
    mean_path = os.path.normpath(path) + ".mean.binaryproto"
    with open(mean_path, "wb") as f:
        f.write(blob.SerializeToString())
    print('{"count": %d, "mean_path": "%s"}' % (n, mean_path))
    return 0


if __name__ == "__main__":
    sys.exit(main())
