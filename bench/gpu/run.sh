#!/bin/sh
# bench/gpu/run.sh — training speed on the GPU: images/s for LeNet (batch 64,
# 1x28x28) and AlexNet (batch 128, 227x227 crops of 256x256), through
# `deepdesk net time --backend cuda` (forward + backward + SGD update on the
# device, the input filled once: the network's speed without the data pipeline),
# in FP32, with TF32 tensor cores (DEEPDESK_CUDA_TF32=1), and in mixed precision
# (--precision fp16 and bf16: half-precision tensor-core convolutions and inner
# products, FP32 master weights), and the fraction of the GPU's peak that the
# convolutions and inner products reach (bench/gpu/flops.py: 3 x the forward
# multiply-adds): FP32 rows against the FP32 peak, FP16/BF16 rows against the
# dense FP16/BF16 tensor peak, TF32 rows against half that (bench/gpu/gpuinfo.cu; on an H200, as NVIDIA's
# datasheet states: 989 TFLOP/s FP16/BF16 dense, 67 TFLOP/s FP32), and each row's
# speed against FP32's.
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
[ -x "$PY" ] || PY=python3 # (the GPU machines: another python3; flops.py needs only the standard library)
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
	for mode in fp32 tf32 fp16 bf16; do
		tf=0 prec=fp32
		[ "$mode" = tf32 ] && tf=1
		[ "$mode" = fp16 ] || [ "$mode" = bf16 ] && prec=$mode
		DEEPDESK_CUDA_TF32=$tf "$BIN" net time "$net" --backend cuda --precision "$prec" --batch "$batch" --input "$input" \
			--iters "$iters" --warmup 5 --max-seconds "$SECS" --json >"$work/$name-$mode.json" 2>"$work/$name-$mode.err" ||
			{ echo "gpu: $name $mode failed: $(tail -3 "$work/$name-$mode.err")"; echo '{}' >"$work/$name-$mode.json"; }
	done
done

$PY - "$work" "$out" <<'PYEOF'
import json, os, sys
work, out = sys.argv[1], sys.argv[2]
gpu = json.load(open(os.path.join(work, "gpu.json")))
peak = gpu["fp32_peak_tflops"] * 1e12
# the tensor peak: NVIDIA's datasheet figure for an H100/H200 SXM (989.4 TFLOP/s
# dense FP16/BF16, at the clock it is quoted for), else gpuinfo's estimate
half = gpu.get("half_peak_tflops", 0)
if "H200" in gpu["name"] or ("H100" in gpu["name"] and "PCIe" not in gpu["name"]):
    half = 989.4
half_peak = half * 1e12
rows, md = [], []
md.append(f"GPU: {gpu['name']} (compute {gpu['cc']}, {gpu['sms']} SMs at {gpu['clock_mhz']} MHz, "
          f"{gpu['memory_gib']} GiB; FP32 peak {gpu['fp32_peak_tflops']} TFLOP/s, FP16/BF16 dense tensor peak "
          f"{half:.0f} TFLOP/s; driver {gpu['driver']}, runtime {gpu['runtime']})")
md.append("")
md.append("| network | batch | math | images/s | vs fp32 | ms/iter (fwd + bwd + update) | TFLOP/s | of peak |")
md.append("| --- | --- | --- | --- | --- | --- | --- | --- |")
ok = True
for name, batch in (("lenet", 64), ("alexnet", 128)):
    flops = int(open(os.path.join(work, f"{name}-flops")).read())
    base = None
    for mode in ("fp32", "tf32", "fp16", "bf16"):
        r = json.load(open(os.path.join(work, f"{name}-{mode}.json")))
        ips = r.get("images_per_s")
        if not ips:
            ok = False
            md.append(f"| {name} | {batch} | {mode} | failed | | | | |")
            continue
        if mode == "fp32":
            base = ips
        tflops = ips * flops / 1e12
        ref, what = ((peak, "FP32") if mode == "fp32" or not half_peak else
                     (half_peak / 2, "TF32 tensor") if mode == "tf32" else (half_peak, "FP16/BF16 tensor"))
        frac = ips * flops / ref
        vs = f"{ips / base:.2f}x" if base else ""
        rows.append({"metric": f"{name} b{batch} training, {mode}", "value": round(ips, 1), "unit": "images/s",
                     "note": f"{gpu['name']}: {tflops:.1f} TFLOP/s, {100 * frac:.1f}% of the {what} peak"
                             + (f", {vs} fp32" if vs and mode != "fp32" else "")})
        md.append(f"| {name} | {batch} | {mode} | {ips:.0f} | {vs} | {r['forward_ms']:.2f} + {r['backward_ms']:.2f} + "
                  f"{r['update_ms']:.2f} | {tflops:.2f} | {100 * frac:.1f}% of {what} |")
json.dump({"bench": "gpu", "ok": ok, "gpu": gpu, "rows": rows}, open(out, "w"), indent=1)
print("\n".join(md))
PYEOF
