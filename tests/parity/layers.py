#!/usr/bin/python3
"""layers.py DIR — PyTorch's answers for the reference layers (networks/ref.c).

For each layer type and a few configurations this makes seeded random inputs and
parameters in float32, runs PyTorch's forward and backward in float64 on exactly
those values (loss = sum(out * R) for a seeded random R), and writes into DIR:

  NNN_<tensor>.f32   raw little-endian float32, C order
  manifest.json      {"torch": version, "cases": [{"layer", "name", "params",
                      "tensors": {tensor: {"file", "shape"}}}]}

tests/unit/test_parity.c runs this script with /usr/bin/python3, feeds the same
inputs to the C reference and compares by max|a - b| / max(1, max|b|).  Computing
PyTorch's side in float64 makes it the exact answer, so the tolerance measures only
the C code's float rounding.

Caffe and PyTorch are mapped as follows; only configurations where the two define the
same function are generated:
  Convolution      F.conv2d(stride, padding, dilation, groups): the same (both are
                   cross-correlations with weight (C_out, C_in/group, kh, kw)).
  Deconvolution    F.conv_transpose2d(stride, padding, dilation, groups), output_padding
                   0: the same function, output (H-1)*s - 2p + d*(k-1) + 1, and the same
                   weight layout (C_in, C_out/group, kh, kw).
  InnerProduct     F.linear: the same weight layout (M, K).
  Pooling MAX      F.max_pool2d(ceil_mode=True).  Output sizes agree whenever there is
                   padding (both drop a last window that would start in the padding).
                   Without padding Caffe never drops it, so when kernel < stride Caffe
                   has one window more (e.g. W=5, k=1, s=3: Caffe 3, PyTorch 2) — not
                   generated.  PyTorch also insists on pad <= kernel/2, Caffe on
                   pad < kernel.
  Pooling AVE      F.avg_pool2d(ceil_mode=True, count_include_pad=True): the same
                   divisor as Caffe (window clipped to input + pad, padding counted),
                   same size caveats as MAX.
  LRN              F.local_response_norm(size, alpha, beta, k) is Caffe's
                   ACROSS_CHANNELS for odd size (scale = k + alpha/size * sum x^2).
  BatchNorm        F.batch_norm(training=True) normalises with the biased batch
                   variance like Caffe, but keeps its running statistics as an
                   exponential average with momentum; Caffe keeps unnormalised sums
                   and a factor.  Compared: the output, the input gradient, and the
                   statistics after one step from zero (momentum 1 makes PyTorch's
                   running_mean the batch mean and running_var the unbiased variance,
                   which is what Caffe's blobs hold after one step with factor 1).
                   With use_global_stats, PyTorch gets mean_acc/factor, var_acc/factor.
  SoftmaxWithLoss  F.cross_entropy(reduction='mean', ignore_index): divides by the
                   number of non-ignored labels, Caffe's VALID normalisation (except
                   when every label is ignored: PyTorch gives NaN, Caffe 0 — not
                   generated; test_ref.c checks Caffe's 0).
                   Caffe's other normalisations over N x C x H x W with N x H x W labels:
                   F.cross_entropy(reduction='sum', ignore_index) divided by N*H*W
                   (FULL), N (BATCH_SIZE) or 1 (NONE).
  EuclideanLoss    F.mse_loss(reduction='sum') / (2N): the same, with gradients into
                   both bottoms.
  Crop             slicing x[:, :, o2:o2+h, o3:o3+w] (from crop_param.axis on);
                   its gradient is zero outside the window.
  Accuracy         torch.topk on scores without ties (ties are where Caffe versions
                   differ; test_ref.c checks the tie rule by hand).
  Dropout          not compared: the mask comes from each side's own generator.

Exit status: 0 written, 77 when this interpreter has no torch (the C test skips).
"""
import sys

from manifest import put, seeded, torch, write_manifest  # exits 77 where there is no torch
import torch.nn.functional as F

GEN, rand = seeded(20240601)


def ladder(*shape):
    """distinct float32 values 0.05 apart in random order: no ties for a max to break"""
    n = 1
    for s in shape:
        n *= s
    v = (torch.arange(n, dtype=torch.float32) - n // 2) * 0.05
    return v[torch.randperm(n, generator=GEN)].reshape(shape).double()


class Writer:
    def __init__(self, folder):
        self.folder = folder
        self.cases = []

    def case(self, layer, name, params, inputs, outputs):
        """inputs: tensors given to C (float64 leaves, requires_grad where a gradient is
        compared); outputs: {name: tensor} from torch's forward.  Writes inputs, R_<out>,
        outputs and d_<input> for every input that has a gradient."""
        idx = len(self.cases)
        tensors = {}

        def put_(tname, t):
            put(self.folder, idx, tensors, tname, t)

        loss = 0.0
        for oname, o in outputs.items():
            put_(oname, o)
            if o.requires_grad:
                r = rand(*o.shape)
                put_("R_" + oname, r)
                loss = loss + (o * r).sum()
        if torch.is_tensor(loss):
            loss.backward()
        for iname, t in inputs.items():
            put_(iname, t)
            if t.requires_grad:
                put_("d_" + iname, t.grad if t.grad is not None else torch.zeros_like(t))
        self.cases.append({"layer": layer, "name": name, "params": params, "tensors": tensors})

    def finish(self):
        write_manifest(self.folder, self.cases)


def conv_like(w, layer, cases):
    """Convolution (layer "conv": F.conv2d, weights (C_out, C_in/g, kh, kw)) or
    Deconvolution ("deconv": F.conv_transpose2d, weights (C_in, C_out/g, kh, kw))."""
    op = F.conv2d if layer == "conv" else F.conv_transpose2d
    for (n, cin, h, wd, cout, kh, kw, sh, sw, ph, pw, dh, dw, g, bias) in cases:
        x = rand(n, cin, h, wd).requires_grad_()
        wshape = (cout, cin // g) if layer == "conv" else (cin, cout // g)
        wt = (rand(*wshape, kh, kw) * 0.5).requires_grad_()
        b = rand(cout).requires_grad_() if bias else None
        out = op(x, wt, b, stride=(sh, sw), padding=(ph, pw), dilation=(dh, dw), groups=g)
        inputs = {"in": x, "w": wt}
        if bias:
            inputs["b"] = b
        w.case(layer, "%s %dx%dx%dx%d->%d k%dx%d s%dx%d p%dx%d d%dx%d g%d%s" %
               (layer, n, cin, h, wd, cout, kh, kw, sh, sw, ph, pw, dh, dw, g, " bias" if bias else ""),
               dict(n=n, c_in=cin, h=h, w=wd, c_out=cout, kh=kh, kw=kw, sh=sh, sw=sw, ph=ph, pw=pw,
                    dh=dh, dw=dw, group=g, bias=bias), inputs, {"out": out})


def conv_cases(w):
    #   n cin  h  w cout kh kw sh sw ph pw dh dw  g bias
    conv_like(w, "conv", [
            (2, 3, 6, 6, 4, 3, 3, 1, 1, 0, 0, 1, 1, 1, 1),
            (2, 3, 6, 6, 4, 3, 3, 1, 1, 0, 0, 1, 1, 1, 0),
            (2, 3, 9, 9, 4, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1),
            (1, 4, 5, 5, 6, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1),
            (1, 3, 9, 8, 2, 5, 5, 1, 1, 2, 2, 1, 1, 1, 1),
            (2, 4, 7, 7, 6, 3, 3, 1, 1, 1, 1, 1, 1, 2, 1),
            (1, 2, 9, 9, 3, 3, 3, 1, 1, 2, 2, 2, 2, 1, 1),
            (1, 2, 10, 9, 3, 3, 2, 2, 1, 1, 0, 1, 1, 1, 1),
            (2, 4, 11, 10, 4, 2, 3, 3, 2, 0, 2, 2, 1, 2, 0),
            (1, 3, 23, 23, 8, 11, 11, 4, 4, 0, 0, 1, 1, 1, 1),  # AlexNet conv1 in small
    ])


def deconv_cases(w):
    #   n cin  h  w cout kh kw sh sw ph pw dh dw  g bias
    conv_like(w, "deconv", [
            (2, 3, 4, 4, 2, 3, 3, 1, 1, 0, 0, 1, 1, 1, 1),
            (2, 4, 4, 5, 6, 4, 4, 2, 2, 1, 1, 1, 1, 2, 0),    # groups, stride 2, pad, no bias
            (1, 6, 3, 3, 6, 4, 4, 2, 2, 1, 1, 1, 1, 6, 0),    # one group per channel (FCN's upsampling)
            (2, 4, 5, 4, 4, 3, 3, 2, 2, 1, 1, 1, 1, 2, 1),    # groups, stride 2, pad, bias
            (1, 2, 4, 3, 3, 3, 2, 2, 3, 1, 0, 2, 1, 1, 1),    # non-square, dilation
            (1, 3, 3, 3, 3, 16, 16, 8, 8, 4, 4, 1, 1, 1, 0),  # FCN-AlexNet's upscore geometry, small
    ])


def ip_cases(w):
    for (n, k, m, bias) in [(4, 20, 7, 1), (3, 50, 10, 0), (1, 800, 500, 1)]:
        x = rand(n, k).requires_grad_()
        wt = (rand(m, k) * 0.1).requires_grad_()
        b = rand(m).requires_grad_() if bias else None
        inputs = {"in": x, "w": wt}
        if bias:
            inputs["b"] = b
        w.case("ip", "ip n%d k%d m%d%s" % (n, k, m, " bias" if bias else ""),
               dict(n=n, k=k, m=m, bias=bias), inputs, {"out": F.linear(x, wt, b)})


def pool_cases(w):
    # every one of these has the same output size in Caffe and PyTorch (see above)
    #   n  c  h   w kh kw sh sw ph pw
    for (n, c, h, wd, kh, kw, sh, sw, ph, pw) in [
            (2, 3, 6, 6, 2, 2, 2, 2, 0, 0),
            (2, 3, 28, 28, 2, 2, 2, 2, 0, 0),    # LeNet
            (1, 2, 13, 13, 3, 3, 2, 2, 0, 0),    # AlexNet pool5
            (1, 2, 6, 6, 3, 3, 2, 2, 0, 0),      # ceil adds a window
            (1, 2, 14, 14, 3, 3, 2, 2, 0, 0),    # ceil adds a window (GoogLeNet style)
            (2, 2, 5, 5, 3, 3, 2, 2, 1, 1),
            (1, 2, 5, 5, 2, 2, 2, 2, 1, 1),      # the pad correction drops a window
            (1, 2, 4, 4, 3, 3, 2, 2, 1, 1),      # the last window overhangs the pad
            (1, 2, 7, 7, 3, 3, 1, 1, 1, 1),      # overlapping, stride 1
            (1, 2, 6, 5, 3, 2, 2, 2, 1, 1),      # non-square
            (1, 2, 9, 7, 2, 3, 3, 2, 1, 1),
    ]:
        for method in ("MAX", "AVE"):
            x = (ladder(n, c, h, wd) if method == "MAX" else rand(n, c, h, wd)).requires_grad_()
            if method == "MAX":
                out = F.max_pool2d(x, (kh, kw), (sh, sw), (ph, pw), ceil_mode=True)
            else:
                out = F.avg_pool2d(x, (kh, kw), (sh, sw), (ph, pw), ceil_mode=True,
                                   count_include_pad=True)
            w.case("pool", "pool %s %dx%dx%dx%d k%dx%d s%dx%d p%dx%d" %
                   (method, n, c, h, wd, kh, kw, sh, sw, ph, pw),
                   dict(n=n, c=c, h=h, w=wd, kh=kh, kw=kw, sh=sh, sw=sw, ph=ph, pw=pw,
                        method=method, glob=0), {"in": x}, {"out": out})
    for method in ("MAX", "AVE"):
        x = (ladder(2, 3, 5, 7) if method == "MAX" else rand(2, 3, 5, 7)).requires_grad_()
        pool = F.max_pool2d if method == "MAX" else F.avg_pool2d
        w.case("pool", "pool %s 2x3x5x7 global" % method,
               dict(n=2, c=3, h=5, w=7, kh=0, kw=0, sh=0, sw=0, ph=0, pw=0, method=method, glob=1),
               {"in": x}, {"out": pool(x, (5, 7))})


def act_cases(w):
    x = rand(3, 4, 5, 5, lo=-2, hi=2).requires_grad_()
    w.case("relu", "relu slope 0", dict(slope=0.0), {"in": x}, {"out": F.relu(x)})
    x = rand(3, 4, 5, 5, lo=-2, hi=2).requires_grad_()
    w.case("relu", "relu slope 0.1", dict(slope=0.1), {"in": x}, {"out": F.leaky_relu(x, 0.1)})
    x = rand(3, 4, 5, 5, lo=-6, hi=6).requires_grad_()
    w.case("sigmoid", "sigmoid", {}, {"in": x}, {"out": torch.sigmoid(x)})
    x = rand(3, 4, 5, 5, lo=-3, hi=3).requires_grad_()
    w.case("tanh", "tanh", {}, {"in": x}, {"out": torch.tanh(x)})
    for (power, scale, shift, lo, hi) in [(2.0, 1.5, 0.5, -1, 1), (3.0, -0.7, 0.2, -1, 1),
                                          (0.5, 1.0, 2.0, -1, 1), (-1.5, 0.5, 2.0, -1, 1),
                                          (2.5, 2.0, 0.0, 0.1, 1), (1.0, -2.0, 0.3, -1, 1),
                                          (0.0, 1.0, 1.0, -1, 1), (0.75, 0.5, 1.0, -1, 1)]:
        x = rand(2, 3, 4, 4, lo=lo, hi=hi).requires_grad_()
        w.case("power", "power %g scale %g shift %g" % (power, scale, shift),
               dict(power=power, scale=scale, shift=shift), {"in": x},
               {"out": (shift + scale * x) ** power})


def lrn_cases(w):
    for (n, c, h, wd, size, alpha, beta, k, rng) in [(2, 8, 5, 5, 5, 1e-4, 0.75, 1.0, 10.0),
                                                     (2, 7, 4, 3, 5, 1.0, 0.75, 2.0, 1.0),
                                                     (1, 6, 3, 3, 3, 0.5, 0.6, 1.0, 1.5),
                                                     (1, 3, 3, 3, 5, 0.8, 0.75, 1.0, 1.0)]:
        x = rand(n, c, h, wd, lo=-rng, hi=rng).requires_grad_()
        w.case("lrn", "lrn %dx%dx%dx%d size %d alpha %g beta %g k %g" % (n, c, h, wd, size, alpha, beta, k),
               dict(n=n, c=c, h=h, w=wd, size=size, alpha=alpha, beta=beta, k=k), {"in": x},
               {"out": F.local_response_norm(x, size, alpha, beta, k)})


def bn_cases(w):
    for (n, c, h, wd) in [(4, 3, 5, 5), (8, 5, 1, 1), (2, 2, 7, 3)]:
        x = rand(n, c, h, wd, lo=-1, hi=3).requires_grad_()
        rm, rv = torch.zeros(c, dtype=torch.float64), torch.zeros(c, dtype=torch.float64)
        out = F.batch_norm(x, rm, rv, training=True, momentum=1.0, eps=1e-5)
        w.case("bn", "batchnorm %dx%dx%dx%d training" % (n, c, h, wd),
               dict(n=n, c=c, h=h, w=wd, eps=1e-5, global_stats=0), {"in": x},
               {"out": out, "mean_acc": rm, "var_acc": rv})
    # the stored statistics: mean = mean_acc/factor, var = var_acc/factor
    n, c, h, wd = 3, 4, 4, 4
    x = rand(n, c, h, wd, lo=-1, hi=3).requires_grad_()
    mean_acc, var_acc, factor = rand(c, lo=0, hi=5), rand(c, lo=1, hi=8), rand(1, lo=2, hi=5)
    out = F.batch_norm(x, mean_acc / factor, var_acc / factor, training=False, eps=1e-5)
    w.case("bn", "batchnorm %dx%dx%dx%d use_global_stats" % (n, c, h, wd),
           dict(n=n, c=c, h=h, w=wd, eps=1e-5, global_stats=1),
           {"in": x, "mean_acc": mean_acc, "var_acc": var_acc, "factor": factor}, {"out": out})


def scale_cases(w):
    for bias in (0, 1):
        x = rand(2, 4, 3, 5).requires_grad_()
        g = rand(4, lo=-2, hi=2).requires_grad_()
        out = x * g.view(1, 4, 1, 1)
        inputs = {"in": x, "gamma": g}
        if bias:
            b = rand(4).requires_grad_()
            out = out + b.view(1, 4, 1, 1)
            inputs["beta"] = b
        w.case("scale", "scale 2x4x15%s" % (" bias" if bias else ""),
               dict(n=2, c=4, inner=15, bias=bias), inputs, {"out": out})


def eltwise_cases(w):
    for (op, k, coeffs) in [("SUM", 2, None), ("SUM", 3, [1.0, -0.5, 2.0]), ("PROD", 2, None),
                            ("PROD", 3, None), ("MAX", 2, None), ("MAX", 4, None)]:
        if op == "MAX":
            pool = ladder(k, 2, 3, 4, 4)
            xs = [pool[i].clone().requires_grad_() for i in range(k)]
        else:
            xs = [rand(2, 3, 4, 4, lo=-1.5, hi=1.5).requires_grad_() for _ in range(k)]
        if op == "SUM":
            out = sum((coeffs[i] if coeffs else 1.0) * xs[i] for i in range(k))
        elif op == "PROD":
            out = xs[0]
            for t in xs[1:]:
                out = out * t
        else:
            out = torch.stack(xs).max(0).values
        w.case("eltwise", "eltwise %s k%d%s" % (op, k, " coeffs" if coeffs else ""),
               dict(op=op, k=k, coeffs=coeffs or []), {"in%d" % i: xs[i] for i in range(k)},
               {"out": out})


def concat_cases(w):
    cs = [2, 1, 3]
    xs = [rand(2, ci, 3, 4).requires_grad_() for ci in cs]
    w.case("concat", "concat 2x(2|1|3)x3x4", dict(n=2, c=cs, inner=12),
           {"in%d" % i: xs[i] for i in range(3)}, {"out": torch.cat(xs, 1)})


def softmax_cases(w):
    for (n, c, h, wd) in [(4, 10, 1, 1), (2, 5, 3, 4)]:
        x = rand(n, c, h, wd, lo=-4, hi=4).requires_grad_()
        w.case("softmax", "softmax %dx%dx%dx%d" % (n, c, h, wd), dict(n=n, c=c, inner=h * wd),
               {"in": x}, {"out": F.softmax(x, 1)})
    for (n, c, h, wd, ignore, lw) in [(8, 10, 1, 1, -1, 1.0), (2, 5, 3, 4, -1, 1.0),
                                      (2, 5, 3, 4, 3, 1.0), (4, 6, 1, 1, 255, 2.5)]:
        x = rand(n, c, h, wd, lo=-4, hi=4).requires_grad_()
        labels = torch.randint(0, c, (n, h, wd), generator=GEN)
        if ignore > c:  # make room for an out-of-range ignore label, as segmentation uses 255
            labels[0, 0, 0] = ignore
        loss = F.cross_entropy(x, labels, ignore_index=ignore if ignore >= 0 else -100) * lw
        # loss_weight lw plays the part of dE/dloss, so the C backward gets it directly
        loss.backward()
        w.case("softmax_loss", "softmax loss %dx%dx%dx%d ignore %d weight %g" % (n, c, h, wd, ignore, lw),
               dict(n=n, c=c, inner=h * wd, ignore_label=ignore, loss_weight=lw, norm="VALID"),
               {"in": x.detach(), "labels": labels.double()},
               {"prob": F.softmax(x.detach(), 1), "loss": (loss / lw).detach().reshape(1),
                "d_in": x.grad})
    # spatial, segmentation-like: N x C x H x W scores, N x H x W labels with 255 ignored
    for norm in ("VALID", "FULL", "BATCH_SIZE", "NONE"):
        n, c, h, wd, ignore, lw = 2, 4, 5, 6, 255, 1.5
        x = rand(n, c, h, wd, lo=-4, hi=4).requires_grad_()
        labels = torch.randint(0, c, (n, h, wd), generator=GEN)
        labels[torch.rand((n, h, wd), generator=GEN) < 0.2] = ignore
        total = F.cross_entropy(x, labels, ignore_index=ignore, reduction="sum")
        valid = (labels != ignore).sum().item()
        div = {"VALID": max(valid, 1), "FULL": n * h * wd, "BATCH_SIZE": n, "NONE": 1}[norm]
        loss = total / div * lw
        loss.backward()
        w.case("softmax_loss", "softmax loss %dx%dx%dx%d ignore %d %s" % (n, c, h, wd, ignore, norm),
               dict(n=n, c=c, inner=h * wd, ignore_label=ignore, loss_weight=lw, norm=norm),
               {"in": x.detach(), "labels": labels.double()},
               {"prob": F.softmax(x.detach(), 1), "loss": (loss / lw).detach().reshape(1),
                "d_in": x.grad})


def euclidean_cases(w):
    for shape in [(3, 7), (2, 3, 4, 5)]:
        a = rand(*shape, lo=-2, hi=2).requires_grad_()
        b = rand(*shape, lo=-2, hi=2).requires_grad_()
        n = shape[0]
        out = (F.mse_loss(a, b, reduction="sum") / (2 * n)).reshape(1)
        w.case("euclidean", "euclidean loss %s" % "x".join(map(str, shape)),
               dict(n=n), {"a": a, "b": b}, {"loss": out})


def crop_cases(w):
    #  bottom 0 shape, bottom 1 shape, axis, offsets (one per cropped axis)
    for (shape, ref, axis, off) in [((2, 3, 8, 9), (2, 3, 5, 4), 2, (1, 3)),
                                    ((2, 3, 8, 9), (2, 3, 5, 5), 2, (3, 3)),
                                    ((2, 5, 6, 6), (2, 2, 3, 6), 1, (2, 1, 0)),
                                    ((1, 21, 40, 36), (1, 3, 22, 18), 2, (18, 18))]:  # FCN's score crop
        x = rand(*shape).requires_grad_()
        sl = [slice(None)] * 4
        for a in range(axis, 4):
            o = off[a - axis]
            sl[a] = slice(o, o + ref[a])
        full = [0] * axis + list(off)
        w.case("crop", "crop %s to %s axis %d offset %s" % ("x".join(map(str, shape)), "x".join(map(str, ref)),
                                                           axis, ",".join(map(str, off))),
               dict(n=shape[0], in_shape=list(shape), out_shape=list(shape[:axis]) + list(ref[axis:]),
                    off=full), {"in": x}, {"out": x[tuple(sl)]})


def accuracy_cases(w):
    for (n, c, inner, k, ignore) in [(16, 10, 1, 1, -1), (16, 10, 1, 5, -1), (3, 6, 4, 2, 1),
                                     (2, 5, 30, 1, 255), (2, 5, 30, 2, 255)]:  # N x C x 5 x 6, N x 5 x 6
        x = rand(n, c, inner)
        labels = torch.randint(0, c, (n, inner), generator=GEN)
        if ignore > c:  # segmentation's 255: a fifth of the positions
            labels[torch.rand((n, inner), generator=GEN) < 0.2] = ignore
        top = x.topk(k, dim=1).indices  # (n, k, inner)
        hit = (top == labels.unsqueeze(1)).any(1)
        valid = labels != ignore
        acc = (hit & valid).sum().double() / valid.sum().double()
        w.case("accuracy", "accuracy %dx%dx%d top-%d%s" % (n, c, inner, k, " ignore" if ignore >= 0 else ""),
               dict(n=n, c=c, inner=inner, top_k=k, ignore_label=ignore),
               {"in": x, "labels": labels.double()}, {"acc": acc.reshape(1)})


def main():
    if len(sys.argv) != 2:
        sys.stderr.write("usage: layers.py DIR\n")
        return 2
    w = Writer(sys.argv[1])
    for make in (conv_cases, deconv_cases, ip_cases, pool_cases, act_cases, lrn_cases, bn_cases, scale_cases,
                 eltwise_cases, concat_cases, softmax_cases, accuracy_cases, euclidean_cases, crop_cases):
        make(w)
    w.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
