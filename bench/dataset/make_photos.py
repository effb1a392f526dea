#!/usr/bin/python3
"""make_photos.py OUT_DIR [COUNT] — deterministic photo-like colour JPEGs for the dataset bench.

Writes COUNT (default 2,000; the bench asks for 1,000) JPEGs into OUT_DIR/class_0 ...
OUT_DIR/class_9 (COUNT/10 each), sizes drawn from 320x240 ... 640x480.  Each image is a smooth two-axis colour
gradient with a few soft-edged shapes, slightly blurred, plus Gaussian sensor noise,
saved at quality 90 with 4:2:0 subsampling: that compresses (as JPEG and, after the
resize, as PNG) about as a photo does, unlike flat synthetic pictures.  The same
COUNT always gives the same bytes (numpy's PCG64 seeded per image, Pillow's encoder).

It writes into OUT_DIR.tmp and renames that to OUT_DIR at the end, so an interrupted
run never leaves a half set behind.  Run it with Debian's /usr/bin/python3 (PIL, numpy).
"""
import os
import shutil
import sys
from multiprocessing import Pool

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

CLASSES = 10


def make(args):
    out, idx = args
    rng = np.random.Generator(np.random.PCG64(1000 + idx))
    cls = idx % CLASSES
    w = int(rng.integers(320, 641))
    h = int(rng.integers(240, 481))
    # smooth gradient: each channel a + b*x + c*y + a low-frequency wave
    ys, xs = np.mgrid[0:h, 0:w].astype(np.float32)
    xs /= w
    ys /= h
    base = np.empty((h, w, 3), np.float32)
    hue = (cls * 0.1 + rng.uniform(-0.05, 0.05)) * 2 * np.pi
    for c in range(3):
        a = 128 + 70 * np.cos(hue + c * 2.1)
        b, d = rng.uniform(-90, 90, 2)
        fx, fy, ph = rng.uniform(0.5, 3.0), rng.uniform(0.5, 3.0), rng.uniform(0, 2 * np.pi)
        base[..., c] = a + b * (xs - 0.5) + d * (ys - 0.5) + 25 * np.sin(2 * np.pi * (fx * xs + fy * ys) + ph)
    img = Image.fromarray(np.clip(base, 0, 255).astype(np.uint8), 'RGB')
    # a few shapes (the class decides how many ellipses vs rectangles)
    draw = ImageDraw.Draw(img)
    for k in range(int(rng.integers(3, 9))):
        x0, y0 = int(rng.integers(0, w - 20)), int(rng.integers(0, h - 20))
        x1 = min(w, x0 + int(rng.integers(20, w // 2)))
        y1 = min(h, y0 + int(rng.integers(20, h // 2)))
        col = tuple(int(v) for v in rng.integers(0, 256, 3))
        if (k + cls) % 3:
            draw.ellipse((x0, y0, x1, y1), fill=col)
        else:
            draw.rectangle((x0, y0, x1, y1), fill=col)
    img = img.filter(ImageFilter.GaussianBlur(1.5))
    arr = np.asarray(img).astype(np.int16)
    arr = arr + rng.normal(0, 12, arr.shape).astype(np.int16)  # sensor noise
    img = Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8), 'RGB')
    path = os.path.join(out, 'class_%d' % cls, '%05d.jpg' % idx)
    img.save(path, format='JPEG', quality=90)
    return w, h


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    final = sys.argv[1].rstrip('/')
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    tmp = final + '.tmp'
    shutil.rmtree(tmp, ignore_errors=True)
    for c in range(CLASSES):
        os.makedirs(os.path.join(tmp, 'class_%d' % c))
    with Pool(os.cpu_count() or 2) as pool:
        sizes = pool.map(make, [(tmp, i) for i in range(count)], chunksize=16)
    os.rename(tmp, final)
    px = sum(w * h for w, h in sizes)
    print('wrote %d JPEGs to %s (%.0f kpixels on average)' % (count, final, px / count / 1000))


if __name__ == '__main__':
    main()
