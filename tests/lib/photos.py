#!/usr/bin/python3
"""photos.py SEED OUT — write the test suite's realistic images into OUT (tests/lib/photos.mjs
runs it once per seed and caches the folder).

Every image is a synthetic "photo": a smooth two-colour gradient at a random angle, a few
filled ellipses and rectangles, then seeded noise, so JPEG and PNG compress it as they
would a photo (a 4000x3000 JPEG at quality 90 is a few MB, not a few KB).  Each belongs
to one of six classes by its colours, so a tiny network can learn them.  Deterministic:
the same SEED gives the same bytes (numpy's PCG64 and Pillow's encoders).

OUT/manifest.json is a list of {file, class, kind, format, stored: [w, h] (as the file's
header says), shown: [w, h] (after EXIF orientation), orientation, bytes}; OUT/bad.json
lists the broken files ({file, class, why}).  OUT/parity/<kind>_<w>x<h>.<ext> are 96x96
and 96x64 versions of every kind for pixel checks against Pillow, listed in
OUT/parity.json ({file, kind, stored, shown, orientation})."""
import io
import json
import os
import struct
import sys

import numpy as np
from PIL import Image, ImageDraw

CLASSES = ['sky', 'forest', 'desert', 'sea', 'rose', 'night']
# two colours per class: the gradient runs from one to the other
PALETTE = {
    'sky': ((120, 170, 240), (230, 240, 255)),
    'forest': ((20, 90, 30), (140, 190, 60)),
    'desert': ((230, 190, 110), (170, 100, 40)),
    'sea': ((10, 40, 110), (40, 160, 170)),
    'rose': ((200, 40, 90), (250, 170, 190)),
    'night': ((10, 10, 30), (70, 60, 120)),
}


def photo(rng, w, h, cls, noise=5):
    """An RGB uint8 array h x w x 3 that looks and compresses like a photo of class cls."""
    a, b = (np.array(c, np.float32) for c in PALETTE[cls])
    ang = rng.uniform(0, np.pi)
    # the gradient, computed at a quarter of the size and scaled up (it is smooth)
    sw, sh = max(2, w // 4), max(2, h // 4)
    yy, xx = np.mgrid[0:sh, 0:sw].astype(np.float32)
    t = (xx / sw) * np.cos(ang) + (yy / sh) * np.sin(ang)
    t = (t - t.min()) / max(1e-6, float(t.max() - t.min()))
    small = (a + (b - a) * t[..., None]).clip(0, 255).astype(np.uint8)
    img = Image.fromarray(small, 'RGB').resize((w, h), Image.BILINEAR)
    d = ImageDraw.Draw(img)
    for _ in range(int(rng.integers(4, 9))):
        x0, y0 = int(rng.integers(0, w)), int(rng.integers(0, h))
        x1 = min(w, x0 + int(rng.integers(w // 10 + 1, w // 3 + 2)))
        y1 = min(h, y0 + int(rng.integers(h // 10 + 1, h // 3 + 2)))
        mix = rng.uniform(0.2, 0.8)
        col = tuple(int(v) for v in (a * mix + b * (1 - mix) + rng.integers(-40, 41, 3)).clip(0, 255))
        (d.ellipse if rng.integers(0, 2) else d.rectangle)([x0, y0, x1, y1], fill=col)
    px = np.asarray(img, dtype=np.int16)
    if noise:
        px = px + rng.integers(-noise, noise + 1, size=px.shape, dtype=np.int16)
    return px.clip(0, 255).astype(np.uint8)


def exif_orientation(o, little):
    """An Exif APP1 payload (without the marker) holding IFD0 with Orientation = o."""
    e = '<' if little else '>'
    tiff = (b'II' if little else b'MM') + struct.pack(e + 'HI', 42, 8)
    tiff += struct.pack(e + 'H', 1) + struct.pack(e + 'HHIHH', 0x0112, 3, 1, o, 0) + struct.pack(e + 'I', 0)
    return b'Exif\0\0' + tiff


def jpeg(arr, quality=90, **kw):
    b = io.BytesIO()
    Image.fromarray(arr).save(b, 'JPEG', quality=quality, **kw)
    return b.getvalue()


def png(img, **kw):
    b = io.BytesIO()
    img.save(b, 'PNG', **kw)
    return b.getvalue()


def png16(arr16):
    """A 16-bit PNG (gray if arr16 is 2-D, else RGB) written by hand: Pillow cannot
    write 16-bit RGB."""
    import zlib
    h, w = arr16.shape[:2]
    ct = 0 if arr16.ndim == 2 else 2
    rows = arr16.astype('>u2').reshape(h, -1).tobytes()
    stride = w * (1 if ct == 0 else 3) * 2
    raw = b''.join(b'\0' + rows[y * stride:(y + 1) * stride] for y in range(h))

    def chunk(t, data):
        return struct.pack('>I', len(data)) + t + data + struct.pack('>I', zlib.crc32(t + data) & 0xffffffff)
    ihdr = struct.pack('>IIBBBBB', w, h, 16, ct, 0, 0, 0)
    return b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', ihdr) + chunk(b'IDAT', zlib.compress(raw, 6)) + chunk(b'IEND', b'')


def make(kind, rng, w, h, cls):
    """The bytes of one image of `kind`, stored w x h; returns (bytes, ext, orientation)."""
    if kind in ('jpeg', 'progressive', 'exif3', 'exif6', 'exif8', 'exif6le'):
        arr = photo(rng, w, h, cls, noise=10)
        kw = {}
        o = 1
        if kind == 'progressive':
            kw = {'progressive': True, 'optimize': True}
        elif kind.startswith('exif'):
            o = int(kind[4])
            kw = {'exif': exif_orientation(o, kind.endswith('le'))}
        return jpeg(arr, **kw), 'jpg', o
    if kind == 'gray_jpeg':
        arr = np.asarray(Image.fromarray(photo(rng, w, h, cls)).convert('L'))
        return jpeg(arr), 'jpg', 1
    if kind == 'cmyk':
        b = io.BytesIO()
        Image.fromarray(photo(rng, w, h, cls)).convert('CMYK').save(b, 'JPEG', quality=90)
        return b.getvalue(), 'jpg', 1
    if kind == 'png':
        return png(Image.fromarray(photo(rng, w, h, cls, noise=2)), compress_level=6), 'png', 1
    if kind == 'png_exif6':
        # an eXIf chunk before IDAT, as Pillow writes it (and Chromium honours it)
        return png(Image.fromarray(photo(rng, w, h, cls, noise=2)), exif=exif_orientation(6, False)), 'png', 6
    if kind == 'rgb16':
        arr = photo(rng, w, h, cls, noise=0).astype(np.uint16) * 257
        arr = arr + rng.integers(0, 257, size=arr.shape, dtype=np.uint16) // 2
        return png16(arr), 'png', 1
    if kind == 'gray16':
        g = np.asarray(Image.fromarray(photo(rng, w, h, cls, noise=0)).convert('L')).astype(np.uint16) * 257
        g = g + rng.integers(0, 257, size=g.shape, dtype=np.uint16) // 2
        return png16(g), 'png', 1
    if kind in ('palette', 'palette_trns'):
        p = Image.fromarray(photo(rng, w, h, cls, noise=0)).quantize(colors=48, dither=Image.NONE)
        if kind == 'palette_trns':
            # the first few palette entries transparent or half so
            trns = bytes([0, 128, 200] + [255] * 45)
            return png(p, transparency=trns), 'png', 1
        return png(p), 'png', 1
    if kind == 'gray_alpha':
        arr = photo(rng, w, h, cls, noise=2)
        g = Image.fromarray(arr).convert('L')
        a = Image.fromarray(((np.arange(w)[None, :] * 255 // max(1, w - 1)) * np.ones((h, 1))).astype(np.uint8))
        return png(Image.merge('LA', (g, a))), 'png', 1
    if kind == 'rgba':
        arr = photo(rng, w, h, cls, noise=2)
        a = Image.fromarray(((np.arange(h)[:, None] * 255 // max(1, h - 1)) * np.ones((1, w))).astype(np.uint8))
        return png(Image.merge('RGBA', (*Image.fromarray(arr).split(), a))), 'png', 1
    raise ValueError(kind)


# The classify set: (kind, stored width, height).  The first is the largest JPEG, the
# second the largest PNG; exif6 is a phone's portrait photo, stored landscape;
# png_exif6 a PNG with the same orientation in its eXIf chunk.
SET = [
    ('jpeg', 4000, 3000), ('png', 4000, 3000), ('exif6', 4032, 3024), ('progressive', 1600, 1200),
    ('exif3', 1200, 900), ('exif8', 1200, 900), ('exif6le', 640, 480), ('cmyk', 800, 600),
    ('gray_jpeg', 1024, 768), ('gray16', 1024, 768), ('rgb16', 1024, 768), ('palette', 800, 600),
    ('palette_trns', 800, 600), ('gray_alpha', 640, 480), ('rgba', 640, 480), ('jpeg', 300, 200),
    ('png', 320, 240), ('jpeg', 640, 427), ('png_exif6', 1000, 750),
]
EXTRA_PER_CLASS = 4  # plain training photos per class, so that each class has enough


def main():
    seed, out = int(sys.argv[1]), sys.argv[2]
    os.makedirs(os.path.join(out, 'parity'), exist_ok=True)
    manifest, bad = [], []

    def put(rel, data):
        path = os.path.join(out, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'wb') as f:
            f.write(data)

    def add(i, kind, w, h, cls):
        rng = np.random.default_rng([seed, i])
        data, ext, o = make(kind, rng, w, h, cls)
        rel = f'{cls}/{i:02d}_{kind}_{w}x{h}.{ext}'
        put(rel, data)
        shown = [h, w] if o >= 5 else [w, h]
        manifest.append({'file': rel, 'class': cls, 'kind': kind, 'format': ext, 'stored': [w, h],
                         'shown': shown, 'orientation': o, 'bytes': len(data)})

    for i, (kind, w, h) in enumerate(SET):
        add(i, kind, w, h, CLASSES[i % len(CLASSES)])
    i = len(SET)
    for c in CLASSES:
        for k in range(EXTRA_PER_CLASS):
            add(i, 'jpeg' if k % 2 else 'png', 400 + 40 * k, 300 + 20 * k, c)
            i += 1

    # broken files: cut short, or not an image at all
    rng = np.random.default_rng([seed, 999])
    j = jpeg(photo(rng, 800, 600, 'sea'))
    p = png(Image.fromarray(photo(rng, 400, 300, 'rose')))
    for rel, data, why in [('sea/cut.jpg', j[: len(j) * 3 // 5], 'truncated JPEG'),
                           ('rose/cut.png', p[: len(p) // 2], 'truncated PNG'),
                           ('night/garbage.jpg', b'\xff\xd8\xff\xe0 this is not really a JPEG' * 20, 'corrupt JPEG')]:
        put(rel, data)
        bad.append({'file': rel, 'class': rel.split('/')[0], 'why': why})

    # parity: every kind small, square and not, for pixel comparisons with Pillow
    kinds = sorted({k for k, _, _ in SET})
    parity = []
    for n, kind in enumerate(kinds):
        for (w, h) in ((96, 96), (96, 64)):
            data, ext, o = make(kind, np.random.default_rng([seed, 5000 + n, w, h]), w, h,
                                CLASSES[n % len(CLASSES)])
            rel = f'parity/{kind}_{w}x{h}.{ext}'
            put(rel, data)
            parity.append({'file': rel, 'kind': kind, 'stored': [w, h], 'shown': [h, w] if o >= 5 else [w, h],
                           'orientation': o})
    with open(os.path.join(out, 'parity.json'), 'w') as f:
        json.dump(parity, f, indent=1)

    with open(os.path.join(out, 'manifest.json'), 'w') as f:
        json.dump(manifest, f, indent=1)
    with open(os.path.join(out, 'bad.json'), 'w') as f:
        json.dump(bad, f, indent=1)


if __name__ == '__main__':
    main()
