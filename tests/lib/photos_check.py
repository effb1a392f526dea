#!/usr/bin/python3
"""photos_check.py DB CHANNELS FILE...
   photos_check.py records DATASET SRCDIR

The first form compares the raw records of an LMDB that
`deepdesk dataset create --encoding none` built (each FILE alone in its class, the
classes numbered in name order as labels.txt lists them, images at their own size so
the resize copies) with what Pillow makes of each FILE, and print one JSON object:
{FILE: {"shape": [c, h, w] stored, "want": [c, h, w] from Pillow, "max": the largest
sample difference, "mean": the mean absolute difference}}.

Pillow's reading, as a browser or photo tool shows the image: ImageOps.exif_transpose,
then alpha (and a palette's tRNS) composited on white with paste(mask=), then
convert('RGB') or convert('L').  16-bit gray, which Pillow would clip to 255, is
scaled with rounding, (v*255 + 32767) // 65535; Pillow takes the top byte of 16-bit
RGB, so those may differ by 1.

The second reads every record of DATASET's train_db (a dataset folder as `deepdesk
dataset create` or a dataset job writes it), finds its source among SRCDIR's files
by the base name train.txt gives it (less the skipped files, which it lists too), and prints a JSON list in record order of
{"file", "label", "shape": [c, h, w] of the stored image (a PNG or JPEG record
decoded), "max": the largest difference from Pillow's reading of the source put
through DIGITS' resize_image() with the dataset's options (padding noise left out;
JPEG records are lossy, so only for PNG and raw ones), "compared": how many
samples}."""
import json
import os
import sys

import lmdb
import numpy as np
from PIL import Image, ImageOps

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'interop'))
from caffe_pb2_min import Datum  # noqa: E402


def pillow(path, channels):
    im = ImageOps.exif_transpose(Image.open(path))
    if im.mode in ('I;16', 'I;16B', 'I'):
        a = np.asarray(im).astype(np.int64)
        g = Image.fromarray(((a * 255 + 32767) // 65535).astype(np.uint8), 'L')
        im = g
    if im.mode == 'P':
        im = im.convert('RGBA' if 'transparency' in im.info else 'RGB')
    if im.mode in ('LA', 'RGBA'):
        base = 'L' if im.mode == 'LA' else 'RGB'
        bg = Image.new(base, im.size, 255 if base == 'L' else (255, 255, 255))
        bg.paste(im.convert(base), mask=im.getchannel('A'))
        im = bg
    if channels == 1:
        im = im.convert('L')
        return np.asarray(im)[None, :, :]
    im = im.convert('RGB')
    return np.asarray(im).transpose(2, 0, 1)[::-1]  # BGR planes, as a Datum holds them


def py2round(x):
    """Python 2's round(), half away from zero, as DIGITS ran on."""
    return int(np.floor(x + 0.5)) if x >= 0 else -int(np.floor(-x + 0.5))


def digits_resize(arr, w, h, mode):
    """DIGITS' resize_image() (digits/utils/image.py) on arr (c, h, w): the resized
    image and a mask of the samples that are image, not fill noise."""
    c, ih, iw = arr.shape
    im = Image.fromarray(arr[0] if c == 1 else arr[::-1].transpose(1, 2, 0))
    wr, hr = iw / w, ih / h
    rw, rh = w, h
    if mode == 'squash' or wr == hr:
        pass
    elif mode == 'crop':
        if wr > hr:
            rw = py2round(iw / hr)
        else:
            rh = py2round(ih / wr)
    elif mode == 'fill':
        if wr > hr:
            rh = max(1, py2round(ih / wr))
            rh += (h - rh) % 2
        else:
            rw = max(1, py2round(iw / hr))
            rw += (w - rw) % 2
    elif mode == 'half_crop':
        r = (wr + hr) / 2.0
        rw, rh = max(1, py2round(iw / r)), max(1, py2round(ih / r))
        if wr > hr and (h - rh) % 2 == 1:
            rh += 1
        elif wr < hr and (w - rw) % 2 == 1:
            rw += 1
    r = np.asarray(im.resize((rw, rh), Image.BILINEAR))
    r = r[None] if c == 1 else r.transpose(2, 0, 1)[::-1]
    out = np.zeros((c, h, w), np.int16)
    mask = np.zeros((c, h, w), bool)
    cx = py2round((rw - w) / 2.0) if rw >= w else 0
    cy = py2round((rh - h) / 2.0) if rh >= h else 0
    px = (w - rw) // 2 if rw < w else 0
    py = (h - rh) // 2 if rh < h else 0
    ow, oh = min(w, rw), min(h, rh)
    out[:, py:py + oh, px:px + ow] = r[:, cy:cy + oh, cx:cx + ow]
    mask[:, py:py + oh, px:px + ow] = True
    return out, mask


def records(ds, srcdir):
    import io
    summary = json.load(open(os.path.join(ds, 'dataset.json')))
    opts = summary['options']
    src = {}
    for root, _, names in os.walk(srcdir):
        for n in names:
            src[n] = os.path.join(root, n)
    # train.txt lists what was listed, as DIGITS' does; the skipped files have no record
    skipped = [s['path'] for s in summary['skipped']]
    lines = [ln.rsplit(' ', 1)[0] for ln in open(os.path.join(ds, 'train.txt')).read().splitlines()]
    lines = [ln for ln in lines if not any(ln == p or ln.endswith('/' + p) for p in skipped)]
    env = lmdb.open(os.path.join(ds, 'train_db'), readonly=True, lock=False)
    out = []
    with env.begin() as t:
        for i, (_, v) in enumerate(t.cursor()):
            d = Datum()
            d.ParseFromString(v)
            name = os.path.basename(lines[i])
            r = {'file': name, 'label': d.label}
            lossy = False
            if d.encoded:
                im = Image.open(io.BytesIO(d.data))
                lossy = im.format == 'JPEG'
                a = np.asarray(im)
                got = a[None] if a.ndim == 2 else a.transpose(2, 0, 1)[::-1]
            else:
                got = np.frombuffer(d.data, np.uint8).reshape(d.channels, d.height, d.width)
            r['shape'] = list(got.shape)
            if not lossy and name in src:
                want, mask = digits_resize(pillow(src[name], opts['channels']), opts['width'], opts['height'],
                                           opts['resize_mode'])
                if want.shape == got.shape:
                    diff = np.abs(got.astype(np.int16) - want)[mask]
                    r['max'] = int(diff.max())
                    r['compared'] = int(mask.sum())
            out.append(r)
    print(json.dumps(out))


def main():
    if sys.argv[1] == 'records':
        return records(sys.argv[2], sys.argv[3])
    db, channels, files = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    by_label = {}
    env = lmdb.open(db, readonly=True, lock=False)
    with env.begin() as t:
        for _, v in t.cursor():
            d = Datum()
            d.ParseFromString(v)
            by_label[d.label] = np.frombuffer(d.data, np.uint8).reshape(d.channels, d.height, d.width)
    out = {}
    for i, f in enumerate(files):
        want = pillow(f, channels).astype(np.int16)
        got = by_label.get(i)
        if got is None:
            out[f] = {'shape': None, 'want': list(want.shape)}
            continue
        r = {'shape': list(got.shape), 'want': list(want.shape)}
        if got.shape == want.shape:
            diff = np.abs(got.astype(np.int16) - want)
            r['max'] = int(diff.max())
            r['mean'] = float(diff.mean())
        out[f] = r
    print(json.dumps(out))


if __name__ == '__main__':
    main()
