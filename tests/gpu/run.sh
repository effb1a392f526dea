#!/bin/sh
# tests/gpu/run.sh — the GPU check, once, on a machine with an NVIDIA GPU (issue 7):
# builds the programs and the CUDA plugin, runs tests/unit/test_cuda (every layer,
# the solvers, LeNet and AlexNet steps, determinism, out of memory: cuda against
# cpu; BF16 layers, LeNet in FP16/BF16 against FP32, FP16 loss scaling; where
# there are two GPUs, a step and a training on both against one), then the
# benchmark bench/gpu/run.sh (FP32, TF32, FP16, BF16), and writes a short report:
# $OUT/report.md where OUT is set (the device runner's folder), else
# tests/gpu/report.md.  Made to finish in under five minutes on one H200; each
# step has its own time limit.
#
# A test that says SKIP is a failure here, with one exception: on a machine with one
# GPU, test_two_gpus and test_train_replicas (which need two) are reported "not run
# (one GPU)".  Without a GPU (nvidia-smi lists none) test_cuda runs its dry run, the
# comparisons with the ref backend in cuda's place, and nothing is tested on a GPU.
# Exit status: 0 when every test ran on a GPU and passed (but those two, with one
# GPU); 1 when something failed or skipped; 2 without a GPU, when the dry run passed.
# The report's last section, "Verdict", says which, and why.
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
# What was not run, and whether that is allowed here.  test_cuda prints each skip's
# reason ("SKIP: why") and, for one inside a test, "skip NAME" after it; a reason
# with no name is the program's own (no CUDA backend: the GPU tests as a whole).
# GPUs: nvidia-smi's, or test_cuda's own count where it found more ("  GPU 0: …").
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
seen=$(grep -cE '^  GPU [0-9]+: ' "$dir/test_cuda.log")
[ "$seen" -gt "$ngpu" ] && ngpu=$seen
dry=""
grep -q 'a dry run of the harness' "$dir/test_cuda.log" && [ "$ngpu" -eq 0 ] && dry=dry
verdict="" not_run="" bad_skips=""
grep -E '^(SKIP: |skip |ok |FAIL )' "$dir/test_cuda.log" | awk '
	/^SKIP: / { if (r != "") print "(test_cuda as a whole)\t" r; r = substr($0, 7); next }
	/^skip /  { print $2 "\t" r; r = ""; next }
	          { if (r != "") print "(test_cuda as a whole)\t" r; r = "" }
	END       { if (r != "") print "(test_cuda as a whole)\t" r }' >"$dir/test_cuda.skips"
while IFS="$(printf '\t')" read -r name why; do
	case "${dry:-$ngpu}:$name:$why" in
	1:test_two_gpus:"fewer than two GPUs"* | 1:test_train_replicas:"fewer than two GPUs"*)
		not_run="$not_run $name" ;;
	dry:*:*) ;; # the dry run: no GPU, every GPU test is one not run
	*) bad_skips="$bad_skips
- $name: $why" ;;
	esac
done <"$dir/test_cuda.skips"
summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$dir/test_cuda.log" | tail -1)
tests_rc=0
if [ "$rc" -ne 0 ] || [ -z "$summary" ]; then
	tests_rc=1
	verdict="**failed**: test_cuda exited $rc (${summary:-no summary line}); see test_cuda.log"
elif [ -n "$bad_skips" ]; then
	tests_rc=1
	verdict="**failed**: with $ngpu GPU(s) listed by nvidia-smi, test_cuda skipped what it must run here (the plugin, the driver, NCCL or the libraries are the problem):$bad_skips"
elif [ -n "$dry" ]; then
	tests_rc=2
	verdict="**no GPU here** (nvidia-smi lists none): a dry run, the comparisons with the ref backend in cuda's place; nothing was tested on a GPU ($summary)"
else
	verdict="**passed** on $ngpu GPU(s): $summary"
	[ -n "$not_run" ] && verdict="$verdict; not run (one GPU):$(echo "$not_run" | sed 's/ /, /g; s/^,//')"
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
	[ -n "$not_run" ] && echo "not run (one GPU):$(echo "$not_run" | sed 's/ /, /g; s/^,//')"
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
	echo
	echo "## Verdict"
	echo
	echo "$verdict"
	echo
	echo "exit $tests_rc"
} | tee -a "$report"
exit $tests_rc
