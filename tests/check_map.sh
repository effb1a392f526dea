#!/bin/sh
# check_map.sh — docs/ARCHITECTURE.md names every source file: each tracked file of
# the program, its UI, its tools, benchmarks and test machinery appears there by its
# name (or, for a page of ui/js/, its name without .js).  A file added without a
# line on the map fails `make test`, naming it.
cd "$(dirname "$0")/.." || exit 1
map=docs/ARCHITECTURE.md
missing=""
for f in $(git ls-files app store common datasets jobs networks tools bench ui tests/lib tests/fuzz tests/campaign tests/gpu tests/parity tests/interop \
		tests/asan.sh tests/run.sh tests/check_map.sh tests/lsan.supp docs/bundle_torch.py 2>/dev/null |
		grep -E '\.(c|h|cu|sh|mjs|js|py|json|supp)$' | grep -v -E '^(bench/.*\.json|tests/.*package.*\.json)$'); do
	base=${f##*/}
	stem=${base%.*}
	grep -qF "$base" "$map" && continue
	case $f in ui/js/*) grep -qE "\`$stem\`" "$map" && continue ;; esac
	missing="$missing $f"
done
if [ -n "$missing" ]; then
	for f in $missing; do echo "  $f: not named in $map"; done
	echo "0 passed, 1 failed"
	exit 1
fi
echo "ok   every source file is on the map"
echo "1 passed, 0 failed"
