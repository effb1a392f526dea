#!/bin/sh
# tests/gpu/pack.sh — the GPU check's programs, built here, for a GPU machine that
# cannot build them: the device machines this project is lent have the CUDA
# toolkit, cuDNN and NCCL (PyTorch's), but none of the Debian -dev packages the
# program builds against (oneDNN, CivetWeb, LMDB, SQLite, ...), and no network.
#
# Writes .gpu/bundle.tar.xz (.gpu/ is ignored by git; about 20 MB):
#   build/deepdesk, build/tests/test_cuda, build/libdeepdesk-cuda.so
#   lib/   every shared library they need from this machine, except the C
#          library's own (libc, libm, ld-linux, ...), the C++ runtime (the GPU
#          machine's is as new or newer) and CUDA's (cudart, cuBLAS, cuDNN,
#          NCCL: the GPU machine's, which match its driver)
# tests/gpu/run.sh uses the bundle when it finds one: carry .gpu to the GPU
# machine (the device tool's `carry: [".gpu"]`) and run it there.
set -eu
cd "$(dirname "$0")/../.." || exit 1
make -j"$(nproc 2>/dev/null || echo 2)" all build/tests/test_cuda >/dev/null
[ -f build/libdeepdesk-cuda.so ] || { echo "pack: no build/libdeepdesk-cuda.so (nvcc and cuDNN are needed here)"; exit 1; }
stage=$(mktemp -d /tmp/deepdesk-gpu-pack.XXXXXX)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/build/tests" "$stage/lib" .gpu
cp build/deepdesk build/libdeepdesk-cuda.so "$stage/build/"
cp build/tests/test_cuda "$stage/build/tests/"
echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo ?)$(git diff --quiet 2>/dev/null || echo ' (with changes)'), packed $(date -u '+%Y-%m-%d %H:%M UTC') on $(. /etc/os-release 2>/dev/null; echo "${PRETTY_NAME:-?}")" >"$stage/build/PACKED"
skip='^(libc|libm|libdl|librt|libpthread|libresolv|libutil|ld-linux-x86-64|linux-vdso|libstdc\+\+|libgcc_s|libcuda|libcudart|libcudnn[a-z_]*|libcublas|libcublasLt|libnccl|libnvidia[-a-z]*)\.so'
for bin in build/deepdesk build/tests/test_cuda build/libdeepdesk-cuda.so; do
	ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }'
done | sort -u | while read -r lib; do
	name=$(basename "$lib")
	echo "$name" | grep -Eq "$skip" && continue
	cp -L "$lib" "$stage/lib/$name"
done
tar -C "$stage" -cJf .gpu/bundle.tar.xz build lib
echo "pack: .gpu/bundle.tar.xz, $(du -h .gpu/bundle.tar.xz | cut -f1): $(ls "$stage/lib" | wc -l) libraries"
