#!/usr/bin/python3
"""torch_peer.py — the PyTorch side of bench/train: `deepdesk net time` in PyTorch.

  torch_peer.py --net lenet|alexnet --mode train|infer --batch N
                [--iters N] [--warmup N] [--max-seconds S] [--threads N] [--classes N]

Builds DIGITS' LeNet (1x28x28) or AlexNet (3x227x227, the crop of 256x256) in eager
PyTorch, float32, with the same layers as networks/standard/*.prototxt (Caffe's
ceil-mode max pooling, LRN across channels, dropout 0.5 while training), fills the
input with seeded random mean-subtracted pixels (uniform in [-128, 128)) and random
labels, and times, after --warmup untimed iterations, --iters of:

  train   zero_grad, forward, cross-entropy loss, backward, SGD step (momentum 0.9,
          weight decay 5e-4: DIGITS' solver; lr 1e-4)
  infer   forward and softmax under torch.inference_mode() with the model in eval
          mode (dropout off): the deploy network

(stopping early once --max-seconds have passed, after at least one; "iters" in the
output says how many ran) and prints one JSON line: {"net","mode","batch","iters","warmup","threads","torch",
"total_ms" (per iteration), "forward_ms", "backward_ms", "update_ms", "images_per_s",
"peak_rss_kib" (VmHWM of this process), "loss"}.  No data loading on either side:
both time the network on a batch already in memory.
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class LeNet(nn.Module):
    def __init__(self, classes):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 20, 5)
        self.conv2 = nn.Conv2d(20, 50, 5)
        self.ip1 = nn.Linear(800, 500)
        self.ip2 = nn.Linear(500, classes)

    def forward(self, x):
        x = x * 0.0125                                    # Power: scale 0.0125
        x = F.max_pool2d(self.conv1(x), 2, 2, ceil_mode=True)
        x = F.max_pool2d(self.conv2(x), 2, 2, ceil_mode=True)
        x = F.relu(self.ip1(x.flatten(1)))
        return self.ip2(x)


class AlexNet(nn.Module):
    def __init__(self, classes):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 96, 11, stride=4)
        self.conv2 = nn.Conv2d(96, 256, 5, padding=2, groups=2)
        self.conv3 = nn.Conv2d(256, 384, 3, padding=1)
        self.conv4 = nn.Conv2d(384, 384, 3, padding=1, groups=2)
        self.conv5 = nn.Conv2d(384, 256, 3, padding=1, groups=2)
        self.fc6 = nn.Linear(9216, 4096)
        self.fc7 = nn.Linear(4096, 4096)
        self.fc8 = nn.Linear(4096, classes)
        self.lrn = nn.LocalResponseNorm(5, 1e-4, 0.75, 1.0)
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        x = F.max_pool2d(self.lrn(F.relu(self.conv1(x))), 3, 2, ceil_mode=True)
        x = F.max_pool2d(self.lrn(F.relu(self.conv2(x))), 3, 2, ceil_mode=True)
        x = F.relu(self.conv3(x))
        x = F.relu(self.conv4(x))
        x = F.max_pool2d(F.relu(self.conv5(x)), 3, 2, ceil_mode=True)
        x = self.drop(F.relu(self.fc6(x.flatten(1))))
        x = self.drop(F.relu(self.fc7(x)))
        return self.fc8(x)


SHAPES = {"lenet": (LeNet, (1, 28, 28)), "alexnet": (AlexNet, (3, 227, 227))}


def peak_rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--net", choices=sorted(SHAPES), required=True)
    ap.add_argument("--mode", choices=("train", "infer"), required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--max-seconds", type=float, default=0.0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--classes", type=int, default=10)
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    cls, chw = SHAPES[a.net]
    model = cls(a.classes)
    x = torch.rand((a.batch,) + chw) * 256 - 128
    y = torch.randint(0, a.classes, (a.batch,))
    fwd = bwd = upd = 0.0
    loss = None
    ran = 0
    start = time.perf_counter()

    def over(it):
        return it > a.warmup and a.max_seconds > 0 and time.perf_counter() - start >= a.max_seconds

    if a.mode == "train":
        model.train()
        opt = torch.optim.SGD(model.parameters(), lr=1e-4, momentum=0.9, weight_decay=5e-4)
        for it in range(a.warmup + a.iters):
            if it == a.warmup:
                fwd = bwd = upd = 0.0
                start = time.perf_counter()
            elif over(it):
                break
            ran += it >= a.warmup
            t0 = time.perf_counter()
            opt.zero_grad(set_to_none=False)
            out = model(x)
            l = F.cross_entropy(out, y)
            t1 = time.perf_counter()
            l.backward()
            t2 = time.perf_counter()
            opt.step()
            t3 = time.perf_counter()
            fwd += t1 - t0
            bwd += t2 - t1
            upd += t3 - t2
        loss = l.item()
    else:
        model.eval()
        with torch.inference_mode():
            for it in range(a.warmup + a.iters):
                if it == a.warmup:
                    fwd = 0.0
                    start = time.perf_counter()
                elif over(it):
                    break
                ran += it >= a.warmup
                t0 = time.perf_counter()
                F.softmax(model(x), dim=1)
                fwd += time.perf_counter() - t0
    a.iters = ran
    total = (time.perf_counter() - start) / a.iters
    print(json.dumps({
        "net": a.net, "mode": a.mode, "batch": a.batch, "iters": a.iters, "warmup": a.warmup,
        "threads": torch.get_num_threads(), "torch": torch.__version__,
        "total_ms": total * 1e3, "forward_ms": fwd / a.iters * 1e3, "backward_ms": bwd / a.iters * 1e3,
        "update_ms": upd / a.iters * 1e3, "images_per_s": a.batch / total,
        "peak_rss_kib": peak_rss_kib(), "loss": loss,
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
