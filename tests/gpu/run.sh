#!/bin/sh
# tests/gpu/run.sh — the GPU check, once, on a machine with an NVIDIA GPU (issue 7):
# builds the programs and the CUDA plugin, runs tests/unit/test_cuda (every layer,
# the solvers, LeNet and AlexNet steps, determinism, out of memory: cuda against
# cpu; BF16 layers, LeNet in FP16/BF16 against FP32, FP16 loss scaling; where
# there are two GPUs, a step and a training on both against one), then the
# benchmark bench/gpu/run.sh (FP32, TF32, FP16, BF16), and writes a short report:
# $OUT/report.md where OUT is set (the device runner's folder), else
# tests/gpu/report.md.  Made to finish in under five minutes on one H200; each
# step has its own time limit.  Exit status: 0 when the tests passed.
#
# On a machine that cannot build the program (the device machines: CUDA but no
# Debian -dev packages), run `sh tests/gpu/pack.sh` here first and carry .gpu:
#   device run, carry [".gpu"]:  OUT=$OUT sh tests/gpu/run.sh
set -u
cd "$(dirname "$0")/../.." || exit 1
dir=${OUT:-tests/gpu}
mkdir -p "$dir"
report=$dir/report.md
log=$dir/gpu-run.log
: >"$log"
jobs=$(nproc 2>/dev/null || echo 4)
t0=$(date +%s)
say() { echo "$*" | tee -a "$report"; }

{
	echo "# GPU check ($(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo ?))"
	echo
	echo '```'
	nvidia-smi -L 2>&1 || echo "nvidia-smi: not there"
	nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -4
	"${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" --version 2>&1 | tail -2
	echo '```'
	echo
} >"$report"
cat "$report"

# 1. build: the programs, the plugin, the test — or, where tests/gpu/pack.sh made a
# bundle (.gpu/bundle.tar.xz, carried here), its programs, run with its libraries
# and this machine's CUDA, cuDNN and NCCL (PyTorch's wheels hold them on the
# device machines, which have no Debian -dev packages to build against)
say "## Build"
if [ -f .gpu/bundle.tar.xz ]; then
	rm -rf .gpu/unpacked && mkdir -p .gpu/unpacked build/tests
	tar -xJf .gpu/bundle.tar.xz -C .gpu/unpacked
	cp .gpu/unpacked/build/deepdesk .gpu/unpacked/build/libdeepdesk-cuda.so build/
	cp .gpu/unpacked/build/tests/test_cuda build/tests/
	cudalibs=$(find /usr/local /opt /usr/lib /usr/lib64 /root -xdev \( -name 'libcudnn.so.9' -o -name 'libnccl.so.2' \
		-o -name 'libcublas.so.13' -o -name 'libcublasLt.so.13' -o -name 'libcudart.so.13' \) 2>/dev/null |
		xargs -r -n1 dirname | awk '!seen[$0]++' | tr '\n' ':')
	export LD_LIBRARY_PATH="$PWD/.gpu/unpacked/lib:${cudalibs}${LD_LIBRARY_PATH:-}"
	say "from the bundle: $(cat .gpu/unpacked/build/PACKED 2>/dev/null || echo '?')"
	say "CUDA libraries from: ${cudalibs:-(none found: the plugin will not load)}"
	if ldd build/tests/test_cuda build/libdeepdesk-cuda.so | grep -q 'not found'; then
		say "**libraries not found:**"
		{ echo '```'; ldd build/tests/test_cuda build/libdeepdesk-cuda.so | grep 'not found' | sort -u; echo '```'; } | tee -a "$report"
	fi
elif timeout 300 make -j"$jobs" all build/tests/test_cuda >>"$log" 2>&1; then
	say "make all: ok ($(($(date +%s) - t0)) s); $(grep -E '^(✓|✗)' "$log" | head -1)"
	[ -f build/libdeepdesk-cuda.so ] || say "**the plugin was not built** (see gpu-run.log)"
else
	say "**make failed** — last lines:"
	{ echo '```'; tail -25 "$log"; echo '```'; } | tee -a "$report"
	exit 1
fi
say ""

# 2. the parity tests
say "## tests/unit/test_cuda"
t1=$(date +%s)
NCCL_DEBUG=${NCCL_DEBUG:-WARN} timeout 240 build/tests/test_cuda >"$dir/test_cuda.log" 2>&1
rc=$?
{
	echo '```'
	grep -vE '^\s*$' "$dir/test_cuda.log" | tail -60
	echo '```'
	echo "exit $rc, $(($(date +%s) - t1)) s"
	echo
} | tee -a "$report"
tests_rc=$rc
if grep -q '^SKIP' "$dir/test_cuda.log" && nvidia-smi -L >/dev/null 2>&1; then
	say "**test_cuda skipped although nvidia-smi lists a GPU**: the plugin or the driver is the problem"
	tests_rc=1
fi

# mixed precision against FP32, from the test's own lines
say "## Mixed precision (test_cuda)"
{
	echo '```'
	grep -E '^  (lenet (fp32|fp16|bf16):|injected inf|after the skip)' "$dir/test_cuda.log" || echo "(no mixed-precision lines: see test_cuda.log)"
	echo '```'
	echo
} | tee -a "$report"

# several GPUs (data parallelism with NCCL), from the test's own lines
say "## Several GPUs (test_cuda)"
{
	echo '```'
	grep -E '^  (loss: one GPU|cuda: 2 copies of batch|NCCL group of one)|fewer than two GPUs|NCCL is not usable|train_run, 2 copies|GPU [0-9]+: ' "$dir/test_cuda.log" ||
		echo "(no several-GPU lines: see test_cuda.log)"
	echo '```'
	echo
} | tee -a "$report"

# 3. the benchmark
say "## bench/gpu"
t2=$(date +%s)
BENCH_GPU_SECONDS=${BENCH_GPU_SECONDS:-10} BENCH_GPU_OUT="$dir/gpu-bench.json" \
	timeout 200 sh bench/gpu/run.sh >"$dir/bench.log" 2>&1
brc=$?
{
	cat "$dir/bench.log"
	echo
	echo "exit $brc, $(($(date +%s) - t2)) s; raw figures in gpu-bench.json"
	echo
	echo "Total $(($(date +%s) - t0)) s."
} | tee -a "$report"
exit $tests_rc
