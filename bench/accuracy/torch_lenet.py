#!/usr/bin/python3
"""torch_lenet.py EPOCHS OUT_JSON — the PyTorch peer of bench/accuracy: DIGITS' LeNet
(networks/standard/lenet.prototxt) on Fashion-MNIST, trained as deepdesk trains it:

  * the 60,000 training images, shuffled each epoch; accuracy on the 10,000 test images
    after every epoch (deepdesk validates on the same 10,000);
  * input: pixels minus the per-pixel mean of the training set (rounded, as
    mean.binaryproto holds it), times 0.0125 (the Power layer);
  * conv 20@5x5 -> max pool 2 -> conv 50@5x5 -> max pool 2 -> fc 500 -> ReLU -> fc 10,
    Caffe's xavier fill (uniform +-sqrt(3/fan_in)) for weights, zero biases;
  * SGD, lr 0.01 fixed, momentum 0.9, weight decay 0.0005, biases at 2x the rate
    (lr_mult 2), batch 64, two threads.
Reads Debian's dataset-fashion-mnist IDX files directly."""
import gzip, json, math, sys, time
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

D = '/usr/share/datasets/fashion-mnist'


def idx(name, images):
    with gzip.open(f'{D}/{name}', 'rb') as f:
        b = f.read()
    return np.frombuffer(b, np.uint8, offset=16 if images else 8)


def main():
    epochs, out = int(sys.argv[1]), sys.argv[2]
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    torch.manual_seed(seed)
    torch.set_num_threads(2)
    xtr = idx('train-images-idx3-ubyte.gz', True).reshape(-1, 1, 28, 28).astype(np.float32)
    ytr = idx('train-labels-idx1-ubyte.gz', False).astype(np.int64)
    xte = idx('t10k-images-idx3-ubyte.gz', True).reshape(-1, 1, 28, 28).astype(np.float32)
    yte = idx('t10k-labels-idx1-ubyte.gz', False).astype(np.int64)
    mean = np.round(xtr.mean(axis=0, keepdims=True))
    xtr = torch.from_numpy((xtr - mean) * 0.0125)
    xte = torch.from_numpy((xte - mean) * 0.0125)
    ytr, yte = torch.from_numpy(ytr), torch.from_numpy(yte)

    conv1, conv2 = nn.Conv2d(1, 20, 5), nn.Conv2d(20, 50, 5)
    ip1, ip2 = nn.Linear(800, 500), nn.Linear(500, 10)
    layers = [conv1, conv2, ip1, ip2]
    for m in layers:
        fan_in = m.weight[0].numel()
        a = math.sqrt(3.0 / fan_in)
        nn.init.uniform_(m.weight, -a, a)
        nn.init.zeros_(m.bias)

    def net(x):
        x = F.max_pool2d(conv1(x), 2, 2)
        x = F.max_pool2d(conv2(x), 2, 2)
        return ip2(F.relu(ip1(x.flatten(1))))

    lr = 0.01
    opt = torch.optim.SGD([{'params': [m.weight for m in layers], 'lr': lr},
                           {'params': [m.bias for m in layers], 'lr': 2 * lr}],
                          lr=lr, momentum=0.9, weight_decay=0.0005)
    res = {'peer': f'PyTorch {torch.__version__}', 'epochs': [], 'accuracy': [], 'seconds': []}
    t0 = time.time()
    for ep in range(1, epochs + 1):
        perm = torch.randperm(len(xtr))
        for i in range(0, len(perm), 64):
            b = perm[i:i + 64]
            opt.zero_grad()
            F.cross_entropy(net(xtr[b]), ytr[b]).backward()
            opt.step()
        with torch.no_grad():
            correct = sum(int((net(xte[i:i + 1000]).argmax(1) == yte[i:i + 1000]).sum())
                          for i in range(0, len(xte), 1000))
        res['epochs'].append(ep)
        res['accuracy'].append(correct / len(xte))
        res['seconds'].append(round(time.time() - t0, 1))
        print(f'torch epoch {ep}: test accuracy {correct / len(xte):.4f} ({time.time() - t0:.0f} s)', flush=True)
    with open(out, 'w') as f:
        json.dump(res, f)


if __name__ == '__main__':
    main()
