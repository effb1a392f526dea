#!/usr/bin/python3
"""flops.py CHECK.json — multiply-adds of one training image through a network, from
`deepdesk net check --json`: 2 FLOPs per multiply-add of every Convolution and
InnerProduct forward (weights count x output positions), x3 for a training step
(forward, backward data, backward weights).  Prints the FLOPs per image."""
import json
import sys

net = json.load(open(sys.argv[1]))
fwd = 0
batch = 1
for layer in net["layers"]:
    if layer["type"] not in ("Convolution", "InnerProduct"):
        continue
    w = next((p for p in layer["params"] if p["role"] == "weights"), None)
    if not w:
        continue
    top = layer["tops"][0]["shape"]
    batch = top[0]
    positions = 1
    for d in top[2:]:
        positions *= d
    fwd += 2 * w["count"] * positions
print(3 * fwd)
