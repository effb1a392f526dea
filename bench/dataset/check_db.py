#!/usr/bin/python3
"""check_db.py OUT_DIR W H C [--parity N] — what a dataset folder holds, read independently.

For each of OUT_DIR/{train,val,test}_db that exists: the record count (LMDB's own
entry count) and the labels in the keys; every record's key must be '%08d_<label>'
numbered 0, 1, 2, ...; N records spread over the database (default 20) are parsed as
Caffe Datums with google.protobuf and their PNGs decoded with PIL, which must give
W x H x C images with Datum.label equal to the key's label.  mean.binaryproto must
hold 1 x C x H x W values.

--parity N (a deepdesk output, whose {split}.txt list the sources in record order):
for N records per split, run DIGITS' load_image + resize_image (squash) on the source
file in Python (digits_create_db.py's code) and count pixels that differ from the
decoded record; deepdesk promises bit-exact output against Pillow's BILINEAR.

Prints one JSON object.  Run with Debian's /usr/bin/python3 (lmdb, protobuf, PIL).
"""
import io
import json
import os
import sys

import lmdb
import numpy as np
import PIL.Image

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', '..', 'tests', 'interop'))
sys.path.insert(0, HERE)
from caffe_pb2_min import BlobProto, Datum  # noqa: E402
import digits_create_db as peer  # noqa: E402


def main():
    args = sys.argv[1:]
    parity = 0
    if '--parity' in args:
        i = args.index('--parity')
        parity = int(args[i + 1])
        del args[i:i + 2]
    out, w, h, c = args[0], int(args[1]), int(args[2]), int(args[3])
    res = {'splits': {}, 'problems': []}
    for split in ('train', 'val', 'test'):
        path = os.path.join(out, split + '_db')
        if not os.path.isdir(path):
            continue
        env = lmdb.open(path, readonly=True, lock=False)
        n = env.stat()['entries']
        s = {'records': n, 'checked': 0}
        want = set(np.linspace(0, n - 1, min(n, 20)).astype(int).tolist()) if n else set()
        listed = []
        if parity:
            with open(os.path.join(out, split + '.txt')) as f:
                listed = [line.rstrip('\n').rsplit(' ', 1) for line in f if line.strip()]
            pwant = set(np.linspace(0, n - 1, min(n, parity)).astype(int).tolist()) if n else set()
            s.update({'parity_checked': 0, 'parity_differing_pixels': 0, 'parity_max_abs_diff': 0})
        labels = {}
        with env.begin() as txn:
            for i, (k, v) in enumerate(txn.cursor()):
                idx, label = k.decode().split('_')
                if int(idx) != i:
                    res['problems'].append('%s: key %s at position %d' % (split, k.decode(), i))
                    break
                labels[int(label)] = labels.get(int(label), 0) + 1
                if i not in want and not (parity and i in pwant):
                    continue
                d = Datum()
                d.ParseFromString(v)
                img = np.array(PIL.Image.open(io.BytesIO(d.data)))
                shape = (h, w, c) if c == 3 else (h, w)
                if (not d.encoded or d.label != int(label) or (d.channels, d.height, d.width) != (c, h, w)
                        or img.shape != shape):
                    res['problems'].append('%s record %d: label %d/%s, %dx%dx%d, PNG %s' % (
                        split, i, d.label, label, d.channels, d.height, d.width, img.shape))
                s['checked'] += 1
                if parity and i in pwant:
                    src, src_label = listed[i]
                    ref = peer.resize_image(peer.load_image(src), h, w, c)
                    diff = np.abs(ref.astype(int) - img.astype(int))
                    s['parity_checked'] += 1
                    s['parity_differing_pixels'] += int((diff > 0).sum())
                    s['parity_max_abs_diff'] = max(s['parity_max_abs_diff'], int(diff.max()))
                    if int(src_label) != int(label):
                        res['problems'].append('%s record %d: list label %s, key label %s' % (
                            split, i, src_label, label))
        s['per_label'] = [labels[k] for k in sorted(labels)]
        env.close()
        res['splits'][split] = s
    mp = os.path.join(out, 'mean.binaryproto')
    if os.path.exists(mp):
        b = BlobProto()
        with open(mp, 'rb') as f:
            b.ParseFromString(f.read())
        res['mean'] = {'shape': [b.num, b.channels, b.height, b.width], 'values': len(b.data),
                       'average': round(float(np.mean(b.data)), 3) if len(b.data) else None}
        if (b.num, b.channels, b.height, b.width) != (1, c, h, w) or len(b.data) != c * h * w:
            res['problems'].append('mean.binaryproto: %s' % res['mean'])
    else:
        res['problems'].append('no mean.binaryproto')
    res['records'] = sum(s['records'] for s in res['splits'].values())
    print(json.dumps(res))


if __name__ == '__main__':
    main()
