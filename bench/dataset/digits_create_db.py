#!/usr/bin/python3
"""digits_create_db.py — the peer of `deepdesk dataset create`: DIGITS' pipeline in Python.

    /usr/bin/python3 digits_create_db.py SOURCE OUT --size WxH --channels 1|3 \
        [--threads N] [--val-pct 25] [--seed 0] [--lists DIR] [--no-sync] [--json]

What it does, step by step as DIGITS 6 does it (tools/parse_folder.py, then
tools/create_db.py once per split, with digits/utils/image.py):

  parse_folder   SOURCE holds one folder per class, or train/ [val|validation/] [test/]
                 folders of those (resolved as deepdesk resolves them).  Class folders
                 sorted, files with an image extension found by os.walk; each class's
                 images shuffled and split by --val-pct (DIGITS'
                 three_way_split_indices), unless a val folder exists.
  create_db      per split: the list shuffled (create_db --shuffle), then a pool of N
                 workers loads, resizes and encodes each image while the main process
                 writes LMDB in transactions of 100 records (DIGITS' batch size) under
                 keys '%08d_%d' (index, label).
  load_image     PIL.Image.open + load(); RGBA/LA composited on white; other modes
                 converted to RGB (DIGITS load_image).
  resize_image   convert('L' or 'RGB'), np.array; if the size differs, squash: what
                 scipy.misc.imresize(interp='bilinear') did, i.e. Image.fromarray(arr)
                 .resize((W, H), BILINEAR) and back to an array.
  mean           image_sum (float64, H x W x C) += every train image; at the end
                 np.around(sum / count).astype(uint8) -> mean.binaryproto (C x H x W,
                 BGR, as float) and mean.png (DIGITS _save_means).
  Datum          channels, height, width, label, data = PNG bytes from
                 Image.fromarray(image).save(s, format='PNG') (Pillow's default zlib
                 level 6 and filter), encoded = True (DIGITS _array_to_datum).
  LMDB           lmdb.open(dir, map_size, map_async=True, max_dbs=0), the map doubled
                 on MapFullError (DIGITS _write_batch_lmdb); python-lmdb's default
                 sync=True, so each commit is flushed to disk as in DIGITS
                 (--no-sync: sync=False, for comparison; deepdesk opens with
                 MDB_NOSYNC and syncs once at close).

Deliberate differences: DIGITS runs its loaders as threading.Thread (10 for any list of
100+ images) and so under the GIL; this uses a multiprocessing.Pool of --threads
processes (default 2), which is faster than DIGITS was.  Work goes to the workers a
batch (100 images) at a time with Pool.imap, which keeps the output order fixed; each
task returns the serialized Datums and the float64 sum of its images (DIGITS' loader
threads kept one image_sum each and added them at the end: the same arithmetic).
Only PNG encoding and squash are implemented (what the bench measures).

--lists DIR takes DIR/labels.txt and DIR/{train,val,test}.txt ("path label" lines, as
deepdesk writes them) instead of parsing SOURCE, and keeps their order (no shuffle):
then the records come out in deepdesk's order, for a pixel-by-pixel comparison.

Prints a JSON summary (--json) or one line per split.
"""
import argparse
import io
import json
import math
import os
import random
import sys
import time
from multiprocessing import Pool

import lmdb
import numpy as np
import PIL.Image

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'tests', 'interop'))
from caffe_pb2_min import BlobProto, Datum  # noqa: E402  (Caffe's messages, built in code)

EXTENSIONS = ('.png', '.jpg', '.jpeg', '.bmp', '.ppm', '.pgm')  # what deepdesk accepts
BATCH = 100  # DIGITS _calculate_batch_size: min(100, image_count)
SPLITS = ('train', 'val', 'test')


# ---- parse_folder ------------------------------------------------------------

def resolve_layout(root):
    """SOURCE -> {split: folder}, as deepdesk's ds_layout_resolve does."""
    cur = root
    for _ in range(8):
        names = [n for n in os.listdir(cur) if not n.startswith('.')]
        if len(names) == 1 and os.path.isdir(os.path.join(cur, names[0])):
            cur = os.path.join(cur, names[0])
        else:
            break
    if not os.path.isdir(os.path.join(cur, 'train')):
        return {'train': cur}
    out = {'train': os.path.join(cur, 'train')}
    for name in ('val', 'validation'):
        if os.path.isdir(os.path.join(cur, name)):
            out['val'] = os.path.join(cur, name)
            break
    if os.path.isdir(os.path.join(cur, 'test')):
        out['test'] = os.path.join(cur, 'test')
    return out


def class_images(folder):
    found = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames.sort()
        for f in sorted(filenames):
            if f.lower().endswith(EXTENSIONS) and not f.startswith('.'):
                found.append(os.path.join(dirpath, f))
    return found


def py2_round(x):
    return int(math.floor(x + 0.5)) if x >= 0 else int(math.ceil(x - 0.5))


def three_way_split_indices(size, pct_b, pct_c):
    """DIGITS parse_folder.three_way_split_indices (Python 2's round)."""
    pct_a = 100 - (pct_b + pct_c)
    if pct_a >= 100:
        return size, size
    if pct_b >= 100:
        return 0, size
    if pct_c >= 100:
        return 0, 0
    a = py2_round(float(size) * pct_a / 100)
    if pct_a and not a:
        a = 1
    b = py2_round(float(size) * pct_b / 100)
    if a + b > size:
        b = size - a
    if pct_b and not b:
        if a > 1:
            a -= 1
            b = 1
        elif a != size:
            b = 1
    c = size - a - b
    if pct_c and not c:
        if b > 1:
            b -= 1
            c = 1
        elif a > 1:
            a -= 1
            c = 1
    return a, a + b


def parse_folder(source, val_pct, rng):
    """-> labels, {split: [(path, label)]}"""
    folders = resolve_layout(source)
    classes = sorted(n for n in os.listdir(folders['train'])
                     if not n.startswith('.') and os.path.isdir(os.path.join(folders['train'], n)))
    own_val = 'val' in folders
    pct = 0 if own_val else val_pct
    labels, lists = [], {s: [] for s in SPLITS}
    for name in classes:
        images = class_images(os.path.join(folders['train'], name))
        if len(images) < 2:
            continue  # DIGITS' default min_per_category is 2
        label = len(labels)
        labels.append(name.replace('_', ' '))
        rng.shuffle(images)
        n_train, n_train_val = three_way_split_indices(len(images), pct, 0)
        lists['train'] += [(p, label) for p in images[:n_train]]
        lists['val'] += [(p, label) for p in images[n_train:n_train_val]]
        for split in ('val', 'test'):
            if split in folders and (split != 'val' or own_val):
                sub = os.path.join(folders[split], name)
                if os.path.isdir(sub):
                    lists[split] += [(p, label) for p in class_images(sub)]
    return labels, lists


def read_lists(folder):
    with open(os.path.join(folder, 'labels.txt')) as f:
        labels = [line.rstrip('\n') for line in f if line.strip()]
    lists = {}
    for split in SPLITS:
        path = os.path.join(folder, split + '.txt')
        lists[split] = []
        if os.path.exists(path):
            with open(path) as f:
                for line in f:
                    line = line.rstrip('\n')
                    if line:
                        p, label = line.rsplit(' ', 1)
                        lists[split].append((p, int(label)))
    return labels, lists


# ---- the loader (runs in the pool's processes) --------------------------------

OPT = {}


def init_worker(opt):
    OPT.update(opt)


def load_image(path):
    """DIGITS digits.utils.image.load_image for a local file."""
    image = PIL.Image.open(path)
    image.load()
    if image.mode in ('RGBA', 'LA'):
        # DIGITS: "background = PIL.Image.new('RGB', image.size, (255, 255, 255));
        # background.paste(image, mask=image.split()[3])"
        rgba = image.convert('RGBA')
        background = PIL.Image.new('RGB', image.size, (255, 255, 255))
        background.paste(rgba, mask=rgba.split()[3])
        image = background
    if image.mode in ('L', 'RGB'):
        return image
    if image.mode == '1':
        return image.convert('L')
    return image.convert('RGB')


def resize_image(image, height, width, channels):
    """DIGITS resize_image, resize_mode='squash'."""
    mode = 'L' if channels == 1 else 'RGB'
    if image.mode != mode:
        image = image.convert(mode)
    image = np.array(image)
    if image.shape[0] == height and image.shape[1] == width:
        return image
    # scipy.misc.imresize(image, (height, width), interp='bilinear'): toimage (a uint8
    # array goes through as it is), PIL resize, fromimage
    return np.array(PIL.Image.fromarray(image).resize((width, height), PIL.Image.BILINEAR))


def array_to_datum(image, label):
    """DIGITS _array_to_datum with encoding='png'."""
    datum = Datum()
    datum.channels = image.shape[2] if image.ndim == 3 else 1
    datum.height = image.shape[0]
    datum.width = image.shape[1]
    datum.label = label
    s = io.BytesIO()
    PIL.Image.fromarray(image).save(s, format='PNG')
    datum.data = s.getvalue()
    datum.encoded = True
    return datum


def load_batch(task):
    """([(path, label)], mean) -> ([(label, serialized Datum)], image_sum or None, [errors])"""
    batch, mean = task
    h, w, c = OPT['height'], OPT['width'], OPT['channels']
    out, errors = [], []
    image_sum = np.zeros((h, w, c) if c == 3 else (h, w), np.float64) if mean else None
    for path, label in batch:
        try:
            image = load_image(path)
        except Exception as e:  # DIGITS logs LoadImageError and skips the image
            errors.append('%s: %s' % (path, e))
            continue
        image = resize_image(image, h, w, c)
        if mean:
            image_sum += image
        out.append((label, array_to_datum(image, label).SerializeToString()))
    return out, image_sum, errors


# ---- create_db (the main process: LMDB writer) --------------------------------

def write_batch(db, batch, first):
    """DIGITS _write_batch_lmdb: one transaction; on MapFullError double and retry."""
    try:
        with db.begin(write=True) as txn:
            for i, (label, value) in enumerate(batch):
                txn.put(('%08d_%d' % (first + i, label)).encode(), value)
    except lmdb.MapFullError:
        db.set_mapsize(db.info()['map_size'] * 2)
        write_batch(db, batch, first)


def save_mean(image_sum, count, out):
    mean = np.around(image_sum / count).astype(np.uint8)
    data = mean
    if data.ndim == 3:
        data = data.transpose((2, 0, 1))
        if data.shape[0] == 3:
            data = data[[2, 1, 0], ...]
    else:
        data = data[np.newaxis, :, :]
    blob = BlobProto()
    blob.num = 1
    blob.channels, blob.height, blob.width = data.shape
    blob.data.extend(data.astype(float).flat)
    with open(os.path.join(out, 'mean.binaryproto'), 'wb') as f:
        f.write(blob.SerializeToString())
    PIL.Image.fromarray(mean).save(os.path.join(out, 'mean.png'))


def create_db(pool, items, db_dir, opt, mean):
    db = lmdb.open(db_dir, map_size=opt['map_size'], map_async=True, max_dbs=0, sync=opt['sync'])
    written, image_sum, errors = 0, None, []
    batches = [items[i:i + BATCH] for i in range(0, len(items), BATCH)]
    for out, part_sum, errs in pool.imap(load_batch, [(b, mean) for b in batches]):
        errors += errs
        if mean and part_sum is not None:
            image_sum = part_sum if image_sum is None else image_sum + part_sum
        if out:
            write_batch(db, out, written)
            written += len(out)
    db.sync(True)
    db.close()
    return written, image_sum, errors


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('source')
    ap.add_argument('out')
    ap.add_argument('--size', default='256x256')
    ap.add_argument('--channels', type=int, choices=(1, 3), default=3)
    ap.add_argument('--threads', type=int, default=2, help='worker processes')
    ap.add_argument('--val-pct', type=int, default=25)
    ap.add_argument('--seed', type=int, default=0)
    ap.add_argument('--lists', help="use DIR's labels.txt and split lists, in their order")
    ap.add_argument('--no-sync', action='store_true', help='python-lmdb sync=False')
    ap.add_argument('--json', action='store_true')
    a = ap.parse_args()
    width, height = (int(v) for v in a.size.lower().split('x'))
    t0 = time.monotonic()
    rng = random.Random(a.seed)
    if a.lists:
        labels, lists = read_lists(a.lists)
    else:
        labels, lists = parse_folder(os.path.abspath(a.source), a.val_pct, rng)
        for split in SPLITS:
            rng.shuffle(lists[split])  # create_db --shuffle
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, 'labels.txt'), 'w') as f:
        f.write(''.join(l + '\n' for l in labels))
    opt = {'width': width, 'height': height, 'channels': a.channels, 'map_size': 256 << 20, 'sync': not a.no_sync}
    summary = {'labels': labels, 'splits': {}, 'skipped': []}
    with Pool(a.threads, initializer=init_worker, initargs=(opt,)) as pool:
        for split in SPLITS:
            if not lists[split]:
                continue
            t = time.monotonic()
            n, image_sum, errors = create_db(pool, lists[split], os.path.join(a.out, split + '_db'), opt,
                                             split == 'train')
            if split == 'train' and n:
                save_mean(image_sum, n, a.out)
            summary['splits'][split] = {'images': n, 'listed': len(lists[split]),
                                        'seconds': round(time.monotonic() - t, 3)}
            summary['skipped'] += errors
            if not a.json:
                print('%s_db: %d images in %.2f s' % (split, n, time.monotonic() - t))
    summary['seconds'] = round(time.monotonic() - t0, 3)
    if a.json:
        print(json.dumps(summary))


if __name__ == '__main__':
    main()
