#!/usr/bin/python3
"""Run a deepdesk model bundle in PyTorch, with no deepdesk: the same top-5 and
probabilities as `deepdesk classify --model BUNDLE` (docs/bundles.md).

    /usr/bin/python3 docs/bundle_torch.py BUNDLE_DIR image.png ... [--top 5] [--json]

BUNDLE_DIR is the bundle unpacked (`tar xzf model.tar.gz -C BUNDLE_DIR`).  Needs
PyTorch, NumPy and Pillow (Debian: python3-torch python3-numpy python3-pil).

What it does, in the order deepdesk does it:
  1. info.json, the manifest: checks every file's size and sha256 against it.
  2. weights.safetensors: 8 bytes of header length, a JSON header, raw
     little-endian float32 tensors named "<layer>.0" (weights), "<layer>.1" (bias).
  3. deploy.prototxt: the deploy stage as deepdesk instantiated it, read by a small
     prototxt reader and built from the layers LeNet and AlexNet use.
  4. each image: decoded, converted to the model's channels, resized to
     width x height with the manifest's resize mode (Pillow's bilinear filter,
     which deepdesk reproduces bit for bit), BGR planes, minus the mean, times
     scale, centre crop; then the forward pass and the Softmax's top K.
"""
import argparse
import hashlib
import json
import math
import os
import re
import struct
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image, ImageOps


# ---- the files ----------------------------------------------------------------

def load_manifest(folder):
    """info.json, after checking each file it lists against its size and sha256."""
    with open(os.path.join(folder, "info.json")) as f:
        man = json.load(f)
    if "files" not in man:
        sys.exit("info.json has no \"files\" (each file's size and sha256): not a bundle of format 2")
    for name, want in man["files"].items():
        if "/" in name or name.startswith("."):
            sys.exit(f"info.json: files names {name!r}, which is not a bundle file")
        path = os.path.join(folder, name)
        with open(path, "rb") as f:
            data = f.read()
        if len(data) != want["size"] or hashlib.sha256(data).hexdigest() != want["sha256"]:
            sys.exit(f"{name}: does not match info.json (size or sha256): the bundle was changed")
    return man


def load_safetensors(path):
    """{name: float32 tensor} from a safetensors file (F32 only, as deepdesk writes)."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = memoryview(data)[8 + n:]
    tensors = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        if t["dtype"] != "F32":
            raise ValueError(f"{path}: {name} is {t['dtype']}, only F32 is read here")
        begin, end = t["data_offsets"]
        a = np.frombuffer(body[begin:end], dtype="<f4").reshape(t["shape"])
        tensors[name] = torch.from_numpy(a.astype(np.float32))
    return tensors


def load_mean(path):
    """A Caffe BlobProto (mean.binaryproto) as a (C, H, W) float32 array.  The
    protobuf is read by hand: num=1, channels=2, height=3, width=4 (varints),
    data=5 (floats, packed or not), shape=7 (BlobShape, dim=1)."""
    buf = open(path, "rb").read()
    dims, data, legacy, i = [], [], {}, 0
    while i < len(buf):
        key, i = _varint(buf, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            v, i = _varint(buf, i)
            legacy[field] = v
        elif wire == 5:
            data.append(struct.unpack_from("<f", buf, i)[0])
            i += 4
        elif wire == 2:
            n, i = _varint(buf, i)
            chunk = buf[i:i + n]
            i += n
            if field == 5:
                data.extend(struct.unpack(f"<{n // 4}f", chunk))
            elif field == 7:  # BlobShape: dim = 1, packed varints
                j = 0
                while j < len(chunk):
                    k, j = _varint(chunk, j)
                    if k >> 3 == 1 and k & 7 == 2:
                        m, j = _varint(chunk, j)
                        end = j + m
                        while j < end:
                            d, j = _varint(chunk, j)
                            dims.append(d)
                    else:
                        d, j = _varint(chunk, j)
                        dims.append(d)
        elif wire == 1:
            i += 8
        else:
            raise ValueError(f"{path}: unexpected protobuf wire type {wire}")
    if not dims:
        dims = [legacy.get(1, 1), legacy.get(2, 1), legacy.get(3, 1), legacy.get(4, 1)]
    a = np.array(data, dtype=np.float32)
    return a.reshape(dims[-3:]) if len(dims) >= 3 else a.reshape(dims)


def _varint(b, i):
    """A protobuf varint at b[i]: (value, the index after it)."""
    v = s = 0
    while True:
        x = b[i]
        i += 1
        v |= (x & 0x7F) << s
        s += 7
        if x < 0x80:
            return v, i


# ---- a small prototxt reader --------------------------------------------------

_TOKEN = re.compile(r'\s*(?:#[^\n]*\n?)*\s*("(?:[^"\\]|\\.)*"|[{}:]|[^\s{}:"#]+)')


def parse_prototxt(text):
    """Protobuf text format as nested dicts: every field is a list of values (a
    field may repeat), a message is a dict, a scalar is int, float, bool or str."""
    tokens, pos = [], 0
    while True:
        m = _TOKEN.match(text, pos)
        if not m or not m.group(1):
            break
        tokens.append(m.group(1))
        pos = m.end()
    it = iter(tokens)

    def scalar(tok):
        if tok.startswith('"'):
            return re.sub(r"\\(.)", r"\1", tok[1:-1])
        if tok in ("true", "false"):
            return tok == "true"
        try:
            return int(tok)
        except ValueError:
            try:
                return float(tok)
            except ValueError:
                return tok  # an enum: MAX, AVE, ...

    def message(end):
        out = {}
        for tok in it:
            if tok == end:
                return out
            nxt = next(it)
            if nxt == ":":
                nxt = next(it)
            value = message("}") if nxt == "{" else scalar(nxt)
            out.setdefault(tok, []).append(value)
        return out

    return message(None)


def one(msg, key, default=None):
    """The first value of field key in msg, or default."""
    return msg.get(key, [default])[0]


def pair(p, name, default):
    """Caffe's kernel_size / kernel_h + kernel_w style parameter as (h, w)."""
    if name + "_h" in p:
        return one(p, name + "_h"), one(p, name + "_w")
    v = one(p, name + "_size" if name == "kernel" else name, default)
    return v, v


# ---- the network --------------------------------------------------------------

class Net:
    """The deploy stage of deploy.prototxt with its weights, run layer by layer."""

    def __init__(self, text, weights):
        self.proto = parse_prototxt(text)
        self.layers = self.proto.get("layer", [])
        self.w = weights
        self.input = one(self.proto, "input", "data")

    def forward(self, x):
        blobs = {self.input: x}
        for l in self.layers:
            kind, name = one(l, "type"), one(l, "name")
            bottom = [blobs[b] for b in l.get("bottom", [])]
            top = l.get("top", [])
            if kind == "Input":
                continue
            w, b = self.w.get(name + ".0"), self.w.get(name + ".1")
            if kind in ("Convolution", "Deconvolution"):
                # Caffe's Deconvolution is conv_transpose2d: the same output size and
                # weights (C_in, C_out/group, kh, kw)
                p = one(l, "convolution_param", {})
                op = F.conv2d if kind == "Convolution" else F.conv_transpose2d
                y = op(bottom[0], w, b, stride=pair(p, "stride", 1), padding=pair(p, "pad", 0),
                       dilation=(p.get("dilation", [1])[0], p.get("dilation", [1])[-1]),
                       groups=one(p, "group", 1))
            elif kind == "InnerProduct":
                y = F.linear(bottom[0].flatten(1), w, b)
            elif kind == "Pooling":
                p = one(l, "pooling_param", {})
                h, wd = bottom[0].shape[2:]
                k = (h, wd) if one(p, "global_pooling", False) else pair(p, "kernel", 1)
                s, pad = pair(p, "stride", 1), pair(p, "pad", 0)
                if one(p, "pool", "MAX") == "MAX":
                    y = F.max_pool2d(bottom[0], k, s, pad, ceil_mode=True)  # Caffe rounds up
                else:
                    y = F.avg_pool2d(bottom[0], k, s, pad, ceil_mode=True, count_include_pad=True)
            elif kind == "ReLU":
                slope = one(one(l, "relu_param", {}), "negative_slope", 0.0)
                y = F.leaky_relu(bottom[0], slope) if slope else F.relu(bottom[0])
            elif kind == "LRN":
                p = one(l, "lrn_param", {})
                y = F.local_response_norm(bottom[0], one(p, "local_size", 5), one(p, "alpha", 1.0),
                                          one(p, "beta", 0.75), one(p, "k", 1.0))
            elif kind == "Power":
                p = one(l, "power_param", {})
                y = (one(p, "shift", 0.0) + one(p, "scale", 1.0) * bottom[0]) ** one(p, "power", 1.0)
            elif kind in ("Dropout", "Flatten"):
                y = bottom[0] if kind == "Dropout" else bottom[0].flatten(1)
            elif kind == "Sigmoid":
                y = torch.sigmoid(bottom[0])
            elif kind == "TanH":
                y = torch.tanh(bottom[0])
            elif kind == "Softmax":
                y = F.softmax(bottom[0], dim=1)
            elif kind == "Concat":
                y = torch.cat(bottom, dim=1)
            elif kind == "Eltwise":
                p = one(l, "eltwise_param", {})
                op = one(p, "operation", "SUM")
                coeff = p.get("coeff", [1.0] * len(bottom))
                y = (sum(c * t for c, t in zip(coeff, bottom)) if op == "SUM" else
                     torch.stack(bottom).prod(0) if op == "PROD" else torch.stack(bottom).max(0).values)
            elif kind == "Crop":  # bottom 0 cut to bottom 1's shape from axis on (Caffe's CropLayer)
                p = one(l, "crop_param", {})
                axis = one(p, "axis", 2) % bottom[0].dim()
                off = p.get("offset", [0])
                sl = [slice(None)] * bottom[0].dim()
                for a in range(axis, bottom[0].dim()):
                    o = off[0] if len(off) == 1 else off[a - axis]
                    sl[a] = slice(o, o + bottom[1].shape[a])
                y = bottom[0][tuple(sl)]
            else:
                raise NotImplementedError(f"layer {name}: type {kind} is not in this script")
            blobs[top[0]] = y
        return y


# ---- preprocessing, as deepdesk's datasets/image.c and networks/infer.c ------

def py2_round(x):
    """Half away from zero (C's round, Python 2's round)."""
    return int(math.floor(x + 0.5)) if x >= 0 else -int(math.floor(-x + 0.5))


class Noise:
    """The fill modes' noise: splitmix64 from seed 0, bytes in 0..254, two per draw."""

    def __init__(self, seed=0):
        self.s = seed

    def draw(self):
        M = (1 << 64) - 1
        self.s = (self.s + 0x9E3779B97F4A7C15) & M
        z = self.s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
        return z ^ (z >> 31)

    def fill(self, n):
        out = bytearray(n)
        i = 0
        while i + 2 <= n:
            r = self.draw()
            out[i] = ((r & 0xFFFFFFFF) * 255) >> 32
            out[i + 1] = ((r >> 32) * 255) >> 32
            i += 2
        if i < n:
            out[i] = ((self.draw() & 0xFFFFFFFF) * 255) >> 32
        return np.frombuffer(bytes(out), dtype=np.uint8)


def resize(img, w, h, mode):
    """img (H, W, C) uint8 to (h, w, C) as deepdesk's image_resize (DIGITS' modes)."""
    sh, sw, c = img.shape
    if (sw, sh) == (w, h):
        return img
    wr, hr = sw / w, sh / h
    rw, rh = w, h
    if mode == "squash" or wr == hr:
        pass
    elif mode == "crop":
        if wr > hr:
            rw = py2_round(sw / hr)
        else:
            rh = py2_round(sh / wr)
    elif mode == "fill":
        if wr > hr:
            rh = max(1, py2_round(sh / wr))
            rh += (h - rh) % 2
        else:
            rw = max(1, py2_round(sw / hr))
            rw += (w - rw) % 2
    elif mode == "half_crop":
        ratio = (wr + hr) / 2.0
        rw, rh = max(1, py2_round(sw / ratio)), max(1, py2_round(sh / ratio))
        if wr > hr and (h - rh) % 2 == 1:
            rh += 1
        elif wr < hr and (w - rw) % 2 == 1:
            rw += 1
    else:
        raise ValueError(f"unknown resize mode {mode}")
    pil = Image.fromarray(img[:, :, 0] if c == 1 else img)
    scaled = np.asarray(pil.resize((rw, rh), Image.BILINEAR)).reshape(rh, rw, c)
    cx = py2_round((rw - w) / 2.0) if rw >= w else 0
    cy = py2_round((rh - h) / 2.0) if rh >= h else 0
    px, ow = (0, w) if rw >= w else ((w - rw) // 2, rw)
    py, oh = (0, h) if rh >= h else ((h - rh) // 2, rh)
    out = np.zeros((h, w, c), dtype=np.uint8)
    out[py:py + oh, px:px + ow] = scaled[cy:cy + oh, cx:cx + ow]
    noise = Noise(0)
    if oh < h:  # one block of rows above, the same below, any odd row its own
        top = noise.fill(py * w * c).reshape(py, w, c)
        out[:py] = top
        bot = h - py - oh
        out[py + oh:py + oh + min(py, bot)] = top[:min(py, bot)]
        if bot > py:
            out[py + oh + py:] = noise.fill((bot - py) * w * c).reshape(bot - py, w, c)
    if ow < w:  # per row: the left band, the same on the right, any odd column its own
        r = w - px - ow
        for y in range(h):
            left = noise.fill(px * c).reshape(px, c)
            out[y, :px] = left
            out[y, w - r:w - r + min(px, r)] = left[:min(px, r)]
            if r > px:
                out[y, w - r + px:] = noise.fill((r - px) * c).reshape(r - px, c)
    return out


def decode(path, channels):
    """The image as (H, W, channels) uint8, as deepdesk decodes it: a JPEG turned by
    its EXIF orientation; 16-bit samples rounded to 8 bits; alpha composited over
    white; gray from colour with the ITU-R 601 weights Pillow and deepdesk share,
    colour from gray by copying."""
    im = Image.open(path)
    if im.format == "JPEG":
        im = ImageOps.exif_transpose(im)
    if im.mode in ("I;16", "I;16B", "I;16L", "I"):
        a = np.asarray(im).astype(np.uint32)
        im = Image.fromarray(((a * 255 + 32767) // 65535).astype(np.uint8), "L")
    if im.mode == "P":
        im = im.convert("RGBA" if "transparency" in im.info else "RGB")
    if im.mode in ("LA", "RGBA", "PA"):
        a = np.asarray(im).astype(np.uint32)
        alpha = a[..., -1:]
        x = a[..., :-1] * alpha + (255 - alpha) * 255 + 128  # PIL's DIV255, over white
        a = ((x + (x >> 8)) >> 8).astype(np.uint8)
        im = Image.fromarray(a[..., 0] if a.shape[-1] == 1 else a)
    if im.mode not in ("L", "RGB"):
        im = im.convert("RGB")
    if channels == 1 and im.mode != "L":
        im = im.convert("L")
    elif channels == 3 and im.mode != "RGB":
        im = im.convert("RGB")
    a = np.asarray(im, dtype=np.uint8)
    return a.reshape(a.shape[0], a.shape[1], channels)


def mean_values(folder, count):
    """A data layer's transform_param mean_value (in network.prototxt's val stage)."""
    text = open(os.path.join(folder, "network.prototxt")).read()
    for l in parse_prototxt(text).get("layer", []):
        stages = [one(r, "stage") for r in l.get("include", [])]
        if one(l, "type") == "Data" and (not stages or "val" in stages):
            v = one(l, "transform_param", {}).get("mean_value", [])
            if v:
                return np.array((v * count)[:count] if len(v) == 1 else v, dtype=np.float32)
    raise ValueError("info.json says mean values, network.prototxt's data layer has none")


class Model:
    def __init__(self, folder):
        self.man = man = load_manifest(folder)
        inp = man["input"]
        self.c, self.h, self.w = inp["channels"], inp["height"], inp["width"]
        self.crop, self.scale, self.mode = man["crop"], man["scale"], man["resize_mode"]
        with open(os.path.join(folder, man.get("deploy", "deploy.prototxt"))) as f:
            self.net = Net(f.read(), load_safetensors(os.path.join(folder, man["weights"])))
        labels = os.path.join(folder, man.get("labels", "labels.txt"))
        self.labels = open(labels).read().splitlines() if os.path.exists(labels) else []
        self.labels += [f"class {i}" for i in range(len(self.labels), man["classes"])]
        mean = man.get("mean", {})
        self.mean = None
        if "values" in mean:
            self.mean = mean_values(folder, self.c).reshape(self.c, 1, 1)
        elif mean.get("mode", "none") != "none" and "file" in mean:
            m = load_mean(os.path.join(folder, mean["file"])).reshape(self.c, self.h, self.w)
            self.mean = m.mean(axis=(1, 2), dtype=np.float64).astype(np.float32).reshape(self.c, 1, 1) \
                if mean["mode"] == "pixel" else m

    def prepare(self, path):
        """(C, H', W') float32: what the network's input blob gets."""
        img = decode(path, self.c)
        size = img.shape[1], img.shape[0]
        img = resize(img, self.w, self.h, self.mode)
        x = img.transpose(2, 0, 1)[::-1] if self.c == 3 else img.transpose(2, 0, 1)  # RGB -> BGR planes
        x = x.astype(np.float32)
        if self.mean is not None:
            x = x - self.mean
        x = x * np.float32(self.scale)
        if self.crop:
            y0, x0 = (self.h - self.crop) // 2, (self.w - self.crop) // 2
            x = x[:, y0:y0 + self.crop, x0:x0 + self.crop]
        return np.ascontiguousarray(x), size

    @torch.no_grad()
    def classify(self, batch):
        """Probabilities (N, classes) for a list of prepared inputs."""
        return self.net.forward(torch.from_numpy(np.stack(batch))).reshape(len(batch), -1).numpy()


def top_k(p, k, labels):
    order = np.argsort(-p, kind="stable")[:k]  # ties: the lower index first, as deepdesk
    return [{"label": labels[i], "index": int(i), "probability": float(p[i])} for i in order]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("bundle", help="the bundle, unpacked into a folder")
    ap.add_argument("images", nargs="+")
    ap.add_argument("--top", type=int, default=5)
    ap.add_argument("--batch", type=int, default=1, help="images per forward pass (1)")
    ap.add_argument("--json", action="store_true", help="print what `deepdesk classify --json` prints")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: its default)")
    ap.add_argument("--time", action="store_true", help="print images/s of the classifying (not the start) to stderr")
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    model = Model(a.bundle)
    results, pending = [], []
    t0 = time.perf_counter()

    def flush():
        probs = model.classify([x for _, x, _ in pending])
        for (path, _, size), p in zip(pending, probs):
            r = {"image": path, "width": size[0], "height": size[1],
                 "predictions": top_k(p, min(a.top, len(p)), model.labels)}
            if a.json:
                results.append(r)
            else:
                print(path)
                for q in r["predictions"]:
                    print(f"  {100 * q['probability']:7.3f}%  {q['label']} ({q['index']})")
        pending.clear()

    for path in a.images:
        x, size = model.prepare(path)
        pending.append((path, x, size))
        if len(pending) >= a.batch:
            flush()
    if pending:
        flush()
    if a.time:
        s = time.perf_counter() - t0
        print(f"bundle_torch.py: {len(a.images)} images in {s:.3f} s, {len(a.images) / s:.1f} images/s", file=sys.stderr)
    if a.json:
        print(json.dumps({"model": a.bundle, "snapshot": model.man.get("snapshot", ""), "results": results}, indent=1))


if __name__ == "__main__":
    main()
