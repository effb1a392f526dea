#!/bin/sh
# bench/accuracy/run.sh — does deepdesk's LeNet learn Fashion-MNIST as well as PyTorch's?
#
# The same network (DIGITS' LeNet), solver (SGD, lr 0.01 fixed, momentum 0.9, weight
# decay 0.0005, biases at 2x), batch (64), epochs and thread count (2) on both sides:
# the 60,000 training images, accuracy on the 10,000 test images after every epoch.
# deepdesk reads a dataset built with `deepdesk dataset create` from train/ (the
# training images) and val/ (the test images); the peer, torch_lenet.py, reads the
# same IDX files from Debian's dataset-fashion-mnist.  Both print per-epoch test
# accuracy; the table shows them side by side (accuracy is not a speed: no ratio).
#
# Knobs: BENCH_ACC_EPOCHS (3; the issue quotes 1, 3 and 10), BENCH_DATA_DIR
# (/tmp/deepdesk-bench-data), DEEPDESK_BIN (build/deepdesk).
# Results: bench/results/accuracy-latest.json.
set -u
cd "$(dirname "$0")/../.." || exit 1
EPOCHS=${BENCH_ACC_EPOCHS:-3}
DATA=${BENCH_DATA_DIR:-/tmp/deepdesk-bench-data}
BIN=${DEEPDESK_BIN:-build/deepdesk}
PY=/usr/bin/python3
out=bench/results/accuracy-latest.json
work=$(mktemp -d /tmp/deepdesk-acc.XXXXXX)
trap 'rm -rf "$work"' EXIT

[ -d /usr/share/datasets/fashion-mnist ] || { echo "accuracy: dataset-fashion-mnist is not installed"; exit 1; }
$PY -c 'import torch' 2>/dev/null || { echo "accuracy: $PY has no torch (python3-torch)"; exit 1; }

# the dataset: training images for train, test images for val (built once, kept)
ds=$DATA/fmnist-trainval-ds
if [ ! -f "$ds/dataset.json" ]; then
	mkdir -p "$DATA"
	[ -d "$DATA/fmnist-example/train" ] || "$BIN" example fashion-mnist "$DATA/fmnist-example" >/dev/null || exit 1
	mkdir -p "$work/src" # hard links: the dataset builder does not follow symbolic links
	cp -al "$DATA/fmnist-example/train" "$work/src/train" || exit 1
	cp -al "$DATA/fmnist-example/test" "$work/src/val" || exit 1
	rm -rf "$ds"
	"$BIN" dataset create "$work/src" "$ds" --size 28x28 --channels 1 || exit 1
fi

echo "deepdesk: LeNet, $EPOCHS epochs"
"$BIN" train --dataset "$ds" --network lenet --out "$work/model" --epochs "$EPOCHS" --batch 64 \
	--lr 0.01 --lr-policy fixed --momentum 0.9 --weight-decay 0.0005 --threads 2 2>"$work/dd.log"
rc=$?
grep -E 'val loss' "$work/dd.log"
[ $rc -eq 0 ] || { tail -5 "$work/dd.log"; exit 1; }
echo "PyTorch: LeNet, $EPOCHS epochs"
OPENBLAS_NUM_THREADS=1 $PY bench/accuracy/torch_lenet.py "$EPOCHS" "$work/torch.json" || exit 1

$PY - "$work/dd.log" "$work/torch.json" "$out" "$EPOCHS" <<'PYEOF'
import json, re, sys
log, tj, out, epochs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
dd = {}
for line in open(log):
    m = re.match(r'epoch\s+([\d.]+)\s+val loss\s+([\d.]+)\s+accuracy\s+([\d.]+)', line)
    if m and float(m.group(1)).is_integer():
        dd[int(float(m.group(1)))] = float(m.group(3))
t = json.load(open(tj))
rows = []
for e, acc in zip(t['epochs'], t['accuracy']):
    rows.append({'metric': f'LeNet Fashion-MNIST test accuracy after {e} epoch{"s" if e > 1 else ""}',
                 'value': dd.get(e), 'unit': 'deepdesk', 'note': f'PyTorch {acc:.4f}'})
json.dump({'bench': 'accuracy', 'ok': len(dd) >= epochs, 'rows': rows,
           'deepdesk': dd, 'torch': t}, open(out, 'w'), indent=1)
for r in rows:
    print(f"{r['metric']}: deepdesk {r['value']}  {r['note']}")
PYEOF
