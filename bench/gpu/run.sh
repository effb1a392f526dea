#!/bin/sh
# bench/gpu/run.sh — training speed on the GPU: images/s for LeNet (batch 64,
# 1x28x28) and AlexNet (batch 128, 227x227 crops of 256x256), through
# `deepdesk net time --backend cuda` (forward + backward + SGD update on the
# device, the input filled once: the network's speed without the data pipeline),
# in FP32 and with TF32 tensor cores (DEEPDESK_CUDA_TF32=1), and the fraction of
# the GPU's FP32 peak (bench/gpu/gpuinfo.cu) that the convolutions and inner
# products reach (bench/gpu/flops.py: 3 x the forward multiply-adds).
#
# Where no GPU answers it writes a result with no rows and says why (exit 0: a
# CPU machine has nothing to measure here).
# Knobs: DEEPDESK_BIN (build/deepdesk), CUDA_HOME (/usr/local/cuda),
# BENCH_GPU_SECONDS (20: the most each timing may take), BENCH_GPU_OUT (the result
# file, bench/results/gpu-latest.json).  Also prints a Markdown table on stdout.
set -u
cd "$(dirname "$0")/../.." || exit 1
BIN=${DEEPDESK_BIN:-build/deepdesk}
NVCC=${CUDA_HOME:-/usr/local/cuda}/bin/nvcc
SECS=${BENCH_GPU_SECONDS:-20}
out=${BENCH_GPU_OUT:-bench/results/gpu-latest.json}
PY=/usr/bin/python3
mkdir -p "$(dirname "$out")"
work=$(mktemp -d /tmp/deepdesk-gpu.XXXXXX)
trap 'rm -rf "$work"' EXIT

skip() {
	echo "gpu: $1"
	printf '{"bench":"gpu","ok":true,"skipped":"%s","rows":[]}\n' "$1" >"$out"
	exit 0
}
[ -x "$NVCC" ] || skip "no nvcc under ${CUDA_HOME:-/usr/local/cuda}"
"$NVCC" -O2 -o "$work/gpuinfo" bench/gpu/gpuinfo.cu 2>"$work/nvcc.log" || skip "gpuinfo does not build: $(tail -1 "$work/nvcc.log")"
"$work/gpuinfo" >"$work/gpu.json" 2>"$work/gpuinfo.log" || skip "$(cat "$work/gpuinfo.log")"
echo "GPU: $(cat "$work/gpu.json")"

# name  net  batch  input  iters
cases="lenet lenet 64 1x28x28 400
alexnet alexnet 128 3x256x256 40"
echo "$cases" | while read -r name net batch input iters; do
	"$BIN" net check "$net" --batch "$batch" --input "$input" --json >"$work/$name-check.json" || exit 1
	$PY bench/gpu/flops.py "$work/$name-check.json" >"$work/$name-flops" || exit 1
	for mode in fp32 tf32; do
		tf=0
		[ "$mode" = tf32 ] && tf=1
		DEEPDESK_CUDA_TF32=$tf "$BIN" net time "$net" --backend cuda --batch "$batch" --input "$input" \
			--iters "$iters" --warmup 5 --max-seconds "$SECS" --json >"$work/$name-$mode.json" 2>"$work/$name-$mode.err" ||
			{ echo "gpu: $name $mode failed: $(tail -3 "$work/$name-$mode.err")"; echo '{}' >"$work/$name-$mode.json"; }
	done
done

$PY - "$work" "$out" <<'PYEOF'
import json, os, sys
work, out = sys.argv[1], sys.argv[2]
gpu = json.load(open(os.path.join(work, "gpu.json")))
peak = gpu["fp32_peak_tflops"] * 1e12
rows, md = [], []
md.append(f"GPU: {gpu['name']} (compute {gpu['cc']}, {gpu['sms']} SMs at {gpu['clock_mhz']} MHz, "
          f"{gpu['memory_gib']} GiB; FP32 peak {gpu['fp32_peak_tflops']} TFLOP/s; driver {gpu['driver']}, runtime {gpu['runtime']})")
md.append("")
md.append("| network | batch | math | images/s | ms/iter (fwd + bwd + update) | TFLOP/s | of FP32 peak |")
md.append("| --- | --- | --- | --- | --- | --- | --- |")
ok = True
for name, batch in (("lenet", 64), ("alexnet", 128)):
    flops = int(open(os.path.join(work, f"{name}-flops")).read())
    for mode in ("fp32", "tf32"):
        r = json.load(open(os.path.join(work, f"{name}-{mode}.json")))
        ips = r.get("images_per_s")
        if not ips:
            ok = False
            md.append(f"| {name} | {batch} | {mode} | failed | | | |")
            continue
        tflops = ips * flops / 1e12
        frac = ips * flops / peak
        rows.append({"metric": f"{name} b{batch} training, {mode}", "value": round(ips, 1), "unit": "images/s",
                     "note": f"{gpu['name']}: {tflops:.1f} TFLOP/s, {100 * frac:.0f}% of FP32 peak"})
        md.append(f"| {name} | {batch} | {mode} | {ips:.0f} | {r['forward_ms']:.2f} + {r['backward_ms']:.2f} + "
                  f"{r['update_ms']:.2f} | {tflops:.2f} | {100 * frac:.1f}% |")
json.dump({"bench": "gpu", "ok": ok, "gpu": gpu, "rows": rows}, open(out, "w"), indent=1)
print("\n".join(md))
PYEOF
