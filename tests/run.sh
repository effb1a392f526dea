#!/bin/sh
# run.sh UNIT_BIN... — the whole suite: C unit tests, then the API and browser tests
# under node's test runner against real servers.  Ends with one line the CI reads:
# "N passed, N failed", alone; when some were skipped, a line "N skipped" comes
# just before it, and before that a "skipped:" list of each skip's reason (a C
# test's "SKIP: why" lines, node's "﹣ name … # why").  A skip is never a pass;
# where CI is set, a dependency `make test` installs that is missing is a failure
# (check_need in tests/unit/check.h, need() in tests/lib/need.mjs).
cd "$(dirname "$0")/.." || exit 1
pass=0 fail=0 skip=0
reasons=$(mktemp)
trap 'rm -f "$reasons"' EXIT
add() { pass=$((pass + $1)); fail=$((fail + $2)); skip=$((skip + ${3:-0})); }

for t in "$@"; do
	echo "== $t"
	out=$("$t" 2>&1); rc=$?
	echo "$out"
	line=$(echo "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed' | tail -1)
	p=$(echo "$line" | sed -E 's/^([0-9]+) passed.*/\1/'); f=$(echo "$line" | sed -E 's/^[0-9]+ passed, ([0-9]+) failed.*/\1/')
	s=$(echo "$line" | sed -nE 's/.* ([0-9]+) skipped.*/\1/p')
	[ -z "$line" ] && { p=0; f=1; echo "!! $t printed no summary (exit $rc)"; }
	[ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && { f=1; echo "!! $t exited $rc"; }
	echo "$out" | sed -n "s|^SKIP: |  $(basename "$t"): |p" >>"$reasons"
	add "$p" "$f" "${s:-0}"
done

node_suites=$(ls tests/api/*.test.mjs tests/browser/*.test.mjs 2>/dev/null)
if [ -n "$node_suites" ]; then
	echo "== node --test"
	out=$(mktemp)
	{ node --test --test-concurrency=1 --test-reporter=spec $node_suites 2>&1; echo $? >"$out.rc"; } | tee "$out"
	rc=$(cat "$out.rc")
	p=$(grep -E '^ℹ pass [0-9]+' "$out" | tail -1 | awk '{print $3}')
	f=$(grep -E '^ℹ fail [0-9]+' "$out" | tail -1 | awk '{print $3}')
	s=$(grep -E '^ℹ skipped [0-9]+' "$out" | tail -1 | awk '{print $3}')
	# a test cancelled (its suite's before hook failed, its file timed out) did not pass
	c=$(grep -E '^ℹ cancelled [0-9]+' "$out" | tail -1 | awk '{print $3}')
	[ -z "$p" ] && { p=0; f=1; echo "!! node's test runner printed no summary"; }
	[ "$rc" -ne 0 ] && [ "$((${f:-0} + ${c:-0}))" -eq 0 ] && { f=1; echo "!! node's test runner exited $rc"; }
	sed -nE 's/^[[:space:]]*﹣ (.*) \([0-9.]+m?s\) # (.*)$/  \1: \2/p' "$out" >>"$reasons"
	add "${p:-0}" "$((${f:-0} + ${c:-0}))" "${s:-0}"
	rm -f "$out" "$out.rc"
fi

echo
if [ "$skip" -gt 0 ] || [ -s "$reasons" ]; then
	echo "skipped:"
	cat "$reasons"
	echo "$skip skipped"
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
