#!/usr/bin/python3
"""solver.py DIR — torch.optim's answers for the solvers (networks/solver.c).

For each solver and a few settings this makes a seeded InnerProduct-shaped parameter
set, a weight w (M, K) and a bias b (M), and seeded gradients for STEPS steps, all
float32 values; it then runs the matching torch.optim optimizer in float64 on exactly
those values at a constant learning rate and writes into DIR:

  NNN_w0.f32, NNN_b0.f32            the starting parameters
  NNN_gw<t>.f32, NNN_gb<t>.f32      the gradient given at step t (before decay)
  NNN_w<t+1>.f32, NNN_b<t+1>.f32    torch's parameters after step t
  manifest.json   {"torch": version, "cases": [{"solver", "name", "params",
                   "steps", "m", "k", "tensors": {tensor: {"file", "shape"}}}]}

tests/unit/test_solver.c gives the same gradients to our solver (weight and bias of
one InnerProduct, lr_mult 1 and decay_mult 1 both) and compares the parameters after
every step by max|c - torch| / max(1, max|torch|).

Caffe and torch.optim are mapped as follows (weight_decay is L2 added to the gradient
in both: g + wd w):
  sgd       SGD(momentum=m).  Caffe keeps v = m v + lr g and steps w -= v; torch
            keeps v = m v + g and steps w -= lr v.  The two agree only while lr is
            constant (Caffe's velocity carries the old rates), hence constant lr here.
  nesterov  SGD(momentum=m, nesterov=True).  Caffe: w -= (1+m) v_new - m v_prev with
            its lr-scaled v; torch: w -= lr (g + m v_new).  Expanding both gives
            lr (g + m g + m^2 v_prev): equal, again for constant lr only.
  adagrad   Adagrad(lr_decay=0, initial_accumulator_value=0, eps=delta): equal.
  rmsprop   RMSprop(alpha=rms_decay, eps=delta, momentum=0, centered=False): equal.
  adadelta  Adadelta(rho=momentum, eps=delta): equal (Caffe sqrt((a+d)/(b+d)),
            torch sqrt(a+d)/sqrt(b+d)).
  adam      Adam(betas=(momentum, momentum2), eps=delta, amsgrad=False).  Caffe
            divides by sqrt(v) + eps, torch by sqrt(v)/sqrt(1 - b2^t) + eps: they
            differ by eps (1 - sqrt(1 - b2^t)) in the denominator, far below the
            tolerance for eps 1e-8 and gradients of order 0.1.

Exit status: 0 written, 77 when this interpreter has no torch (the C test skips).
"""
import sys

from manifest import put as put_tensor, seeded, torch, write_manifest  # exits 77 where there is no torch

_, rand = seeded(20241203)
STEPS = 3
M, K = 4, 5


def optimizer(solver, params, p):
    lr, wd = p["lr"], p["weight_decay"]
    if solver == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=p["momentum"], weight_decay=wd)
    if solver == "nesterov":
        return torch.optim.SGD(params, lr=lr, momentum=p["momentum"], weight_decay=wd, nesterov=True)
    if solver == "adagrad":
        return torch.optim.Adagrad(params, lr=lr, lr_decay=0, weight_decay=wd, initial_accumulator_value=0,
                                   eps=p["delta"])
    if solver == "rmsprop":
        return torch.optim.RMSprop(params, lr=lr, alpha=p["rms_decay"], eps=p["delta"], weight_decay=wd)
    if solver == "adadelta":
        return torch.optim.Adadelta(params, lr=lr, rho=p["momentum"], eps=p["delta"], weight_decay=wd)
    if solver == "adam":
        return torch.optim.Adam(params, lr=lr, betas=(p["momentum"], p["momentum2"]), eps=p["delta"],
                                weight_decay=wd)
    raise ValueError(solver)


CASES = [
    ("sgd", "sgd m0.9 wd5e-4", dict(lr=0.05, momentum=0.9, weight_decay=5e-4)),
    ("sgd", "sgd m0 wd0", dict(lr=0.1, momentum=0.0, weight_decay=0.0)),
    ("nesterov", "nesterov m0.9 wd1e-3", dict(lr=0.05, momentum=0.9, weight_decay=1e-3)),
    ("adagrad", "adagrad wd5e-4", dict(lr=0.1, delta=1e-8, weight_decay=5e-4)),
    ("rmsprop", "rmsprop 0.99", dict(lr=0.01, rms_decay=0.99, delta=1e-8, weight_decay=5e-4)),
    ("rmsprop", "rmsprop 0.9", dict(lr=0.01, rms_decay=0.9, delta=1e-6, weight_decay=0.0)),
    ("adadelta", "adadelta 0.95", dict(lr=1.0, momentum=0.95, delta=1e-6, weight_decay=5e-4)),
    ("adam", "adam default", dict(lr=0.001, momentum=0.9, momentum2=0.999, delta=1e-8, weight_decay=0.0)),
    ("adam", "adam wd", dict(lr=0.01, momentum=0.8, momentum2=0.99, delta=1e-8, weight_decay=1e-2)),
]


def main():
    if len(sys.argv) != 2:
        sys.stderr.write("usage: solver.py DIR\n")
        return 2
    folder = sys.argv[1]
    cases = []
    for idx, (solver, name, p) in enumerate(CASES):
        tensors = {}

        def put(tname, t):
            put_tensor(folder, idx, tensors, tname, t)

        w = rand(M, K).requires_grad_(True)
        b = rand(M).requires_grad_(True)
        put("w0", w)
        put("b0", b)
        opt = optimizer(solver, [w, b], p)
        for t in range(STEPS):
            gw, gb = rand(M, K, lo=-0.5, hi=0.5), rand(M, lo=-0.5, hi=0.5)
            put("gw%d" % t, gw)
            put("gb%d" % t, gb)
            w.grad, b.grad = gw.clone(), gb.clone()
            opt.step()
            put("w%d" % (t + 1), w)
            put("b%d" % (t + 1), b)
        cases.append({"solver": solver, "name": name, "params": p, "steps": STEPS, "m": M, "k": K,
                      "tensors": tensors})
    write_manifest(folder, cases)
    return 0


if __name__ == "__main__":
    sys.exit(main())
