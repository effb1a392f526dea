#!/bin/sh
# check_map.sh — the map and the layers hold:
#  - docs/ARCHITECTURE.md names every source file: each tracked file of the
#    program, its UI, its tools, benchmarks and test machinery appears there by
#    its name (or, for a page of ui/js/, its name without .js);
#  - only store/ speaks SQL: no C source outside store/ and tests/ mentions
#    sqlite3 (its header, its calls, its types);
#  - calls go downwards: nothing in jobs/, store/, datasets/, networks/ or common/
#    includes a header of app/, and nothing below app/ knows HTTP (CivetWeb);
#  - the scheduler and the worker name no job kind and no executor: what differs
#    between kinds is in their rows (jobs/job.h), between executors in their flags.
# A file that breaks one fails `make test`, named.
cd "$(dirname "$0")/.." || exit 1
pass=0 fail=0
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
# check NAME WHY FILE...: "ok   NAME" when no file is named, else each file with
# WHY and "FAIL NAME".
check() {
	name=$1 why=$2
	shift 2
	if [ $# -eq 0 ]; then
		echo "ok   $name"
		pass=$((pass + 1))
		return
	fi
	for f in "$@"; do echo "  $f: $why"; done
	echo "FAIL $name"
	fail=$((fail + 1))
}
# the lists are split into file names on purpose (tracked names have no spaces)
check "every source file is on the map" "not named in $map" $missing
check "only store/ speaks SQL" "speaks SQLite (sqlite3), which only store/ may" \
	$(git grep -l -F sqlite3 -- '*.c' '*.h' '*.cu' ':!store/' ':!tests/' 2>/dev/null)
check "calls go downwards" "includes app/ or CivetWeb, which only app/ may" \
	$(git grep -l -E '#include "(\.\./)+app/|civetweb|mg_connection' -- jobs store datasets networks common 2>/dev/null)
check "the scheduler and the worker name no kind or executor" "compares a kind's or an executor's name" \
	$(git grep -l -E '"(dataset|model|evaluation|test|local|slurm)"' -- jobs/sched.c jobs/worker.c 2>/dev/null)
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
