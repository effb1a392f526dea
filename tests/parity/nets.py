#!/usr/bin/python3
"""nets.py DIR NAME — PyTorch's answers for a whole standard network (LeNet, AlexNet).

tests/unit/test_netparity.c instantiates the TRAIN stage of networks/standard/NAME,
and writes into DIR:

  NAME.safetensors   its freshly filled parameters, as `deepdesk train` snapshots
                     them (train_write_safetensors): "<layer>.<i>", F32, i = 0 the
                     weights, 1 the bias
  NAME_in.json       {"net", "batch", "c", "h", "w", "classes",
                      "data": {"file", "shape"}, "label": {"file", "shape"},
                      "weights": "NAME.safetensors"}
  NAME_data.f32, NAME_label.f32   raw little-endian float32, C order

This script builds the same network by hand in PyTorch — written from the Caffe
definitions, not from deepdesk's parse of them, so that a mistake in parsing or
instantiation shows up as a difference — loads those weights, and runs forward and
backward in float64 (so PyTorch's side is the exact answer and the tolerance
measures only the C code's float32 rounding).  It writes:

  NAME_out.json      {"torch": version, "loss": float, "tensors": {name: {"file",
                      "shape"}}}: "out" (the last InnerProduct's output, N x classes)
                     and, for every parameter blob "<layer>.<i>", its gradient
  NAME_t_*.f32       those tensors, raw float32

Caffe and PyTorch are mapped as in layers.py:
  Convolution      nn.functional.conv2d (same weight layout and groups)
  InnerProduct     nn.functional.linear on the flattened (N, C*H*W) input
  Pooling MAX      max_pool2d(ceil_mode=True): the same output size as Caffe here
                   (no padding, kernel >= stride)
  LRN              local_response_norm(size, alpha, beta, k): both divide alpha by
                   size (scale = k + alpha/size * sum over the window of x^2)
  Power            (shift + scale*x)^power: LeNet's is x * 0.0125
  Dropout          the C test sets dropout_ratio to 0 (training mode, every value
                   kept and scaled by 1/(1-0)): the identity here
  SoftmaxWithLoss  cross_entropy(reduction='mean'): Caffe's VALID normalisation
                   with no ignore_label is the mean over the batch

Exit status: 0 written, 77 when this interpreter has no torch (the C test skips),
1 on anything else (a message on stderr).
"""
import json
import os
import struct
import sys

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    sys.exit(77)

torch.set_num_threads(int(os.environ.get("PARITY_THREADS", "2")))


def read_safetensors(path):
    """{name: float64 tensor} from a safetensors file of F32 tensors"""
    with open(path, "rb") as f:
        blob = f.read()
    (hlen,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + hlen].decode("utf-8"))
    base = 8 + hlen
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        if t["dtype"] != "F32":
            raise ValueError("%s: dtype %s, expected F32" % (name, t["dtype"]))
        a, b = t["data_offsets"]
        v = torch.frombuffer(bytearray(blob[base + a:base + b]), dtype=torch.float32)
        out[name] = v.reshape(t["shape"]).double()
    return out


def read_f32(folder, spec):
    with open(os.path.join(folder, spec["file"]), "rb") as f:
        v = torch.frombuffer(bytearray(f.read()), dtype=torch.float32)
    return v.reshape(spec["shape"]).double()


# ---- the networks, as their prototxt defines them --------------------------------
# Each is a list of (layer name, kind, params); the learned layers take their weights
# from "<name>.0" and "<name>.1".

LENET = [
    ("scale", "power", dict(power=1.0, scale=0.0125, shift=0.0)),
    ("conv1", "conv", dict(c_out=20, k=5, stride=1, pad=0, group=1)),
    ("pool1", "maxpool", dict(k=2, stride=2)),
    ("conv2", "conv", dict(c_out=50, k=5, stride=1, pad=0, group=1)),
    ("pool2", "maxpool", dict(k=2, stride=2)),
    ("ip1", "ip", dict(m=500)),
    ("relu1", "relu", {}),
    ("ip2", "ip", dict(m=None)),  # the class count
]

LRN = dict(size=5, alpha=1e-4, beta=0.75, k=1.0)
ALEXNET = [
    ("conv1", "conv", dict(c_out=96, k=11, stride=4, pad=0, group=1)),
    ("relu1", "relu", {}),
    ("norm1", "lrn", LRN),
    ("pool1", "maxpool", dict(k=3, stride=2)),
    ("conv2", "conv", dict(c_out=256, k=5, stride=1, pad=2, group=2)),
    ("relu2", "relu", {}),
    ("norm2", "lrn", LRN),
    ("pool2", "maxpool", dict(k=3, stride=2)),
    ("conv3", "conv", dict(c_out=384, k=3, stride=1, pad=1, group=1)),
    ("relu3", "relu", {}),
    ("conv4", "conv", dict(c_out=384, k=3, stride=1, pad=1, group=2)),
    ("relu4", "relu", {}),
    ("conv5", "conv", dict(c_out=256, k=3, stride=1, pad=1, group=2)),
    ("relu5", "relu", {}),
    ("pool5", "maxpool", dict(k=3, stride=2)),
    ("fc6", "ip", dict(m=4096)),
    ("relu6", "relu", {}),
    ("drop6", "dropout", {}),
    ("fc7", "ip", dict(m=4096)),
    ("relu7", "relu", {}),
    ("drop7", "dropout", {}),
    ("fc8", "ip", dict(m=None)),
]

NETS = {"lenet": LENET, "alexnet": ALEXNET}


def forward(layers, x, params, classes):
    """The network's output (the last InnerProduct's top); params[name] are leaf
    tensors with requires_grad.  Shapes are checked against the definition."""
    for name, kind, p in layers:
        if kind == "power":
            x = (p["shift"] + p["scale"] * x) ** p["power"]
        elif kind == "conv":
            w, b = params[name + ".0"], params[name + ".1"]
            want = (p["c_out"], x.shape[1] // p["group"], p["k"], p["k"])
            if tuple(w.shape) != want or tuple(b.shape) != (p["c_out"],):
                raise ValueError("%s: weights %s, bias %s; the definition says %s" %
                                 (name, tuple(w.shape), tuple(b.shape), want))
            x = F.conv2d(x, w, b, stride=p["stride"], padding=p["pad"], groups=p["group"])
        elif kind == "maxpool":
            x = F.max_pool2d(x, p["k"], p["stride"], ceil_mode=True)
        elif kind == "ip":
            x = x.reshape(x.shape[0], -1)
            w, b = params[name + ".0"], params[name + ".1"]
            m = p["m"] or classes
            if tuple(w.shape) != (m, x.shape[1]) or tuple(b.shape) != (m,):
                raise ValueError("%s: weights %s, bias %s; the definition says (%d, %d)" %
                                 (name, tuple(w.shape), tuple(b.shape), m, x.shape[1]))
            x = F.linear(x, w, b)
        elif kind == "relu":
            x = F.relu(x)
        elif kind == "lrn":
            x = F.local_response_norm(x, p["size"], p["alpha"], p["beta"], p["k"])
        elif kind == "dropout":
            x = F.dropout(x, 0.0, training=True)
        else:
            raise ValueError("unknown kind " + kind)
    return x


def main():
    if len(sys.argv) != 3 or sys.argv[2] not in NETS:
        sys.stderr.write("usage: nets.py DIR lenet|alexnet\n")
        return 1
    folder, net = sys.argv[1], sys.argv[2]
    with open(os.path.join(folder, net + "_in.json")) as f:
        spec = json.load(f)
    data = read_f32(folder, spec["data"])
    label = read_f32(folder, spec["label"]).long()
    weights = read_safetensors(os.path.join(folder, spec["weights"]))
    params = {k: v.clone().requires_grad_(True) for k, v in weights.items()}
    learned = [n + "." + str(i) for n, kind, _ in NETS[net] if kind in ("conv", "ip") for i in (0, 1)]
    if sorted(learned) != sorted(params):
        sys.stderr.write("nets.py: the snapshot holds %s, the definition %s\n" % (sorted(params), sorted(learned)))
        return 1

    out = forward(NETS[net], data, params, spec["classes"])
    loss = F.cross_entropy(out, label, reduction="mean")
    loss.backward()

    tensors = {}

    def put(name, t):
        fname = "%s_t_%s.f32" % (net, name.replace("/", "_"))
        t.detach().float().contiguous().numpy().tofile(os.path.join(folder, fname))
        tensors[name] = {"file": fname, "shape": list(t.shape)}

    put("out", out)
    for name in learned:
        put(name, params[name].grad)
    with open(os.path.join(folder, net + "_out.json"), "w") as f:
        json.dump({"torch": torch.__version__, "loss": loss.item(), "tensors": tensors}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
