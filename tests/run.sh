#!/bin/sh
# run.sh UNIT_BIN... — the whole suite: C unit tests, then the API and browser tests
# under node's test runner against real servers.  Ends with one line the CI reads:
# "N passed, N failed", alone; when some were skipped, a line "N skipped" comes
# just before it (each skip printed its reason above).
cd "$(dirname "$0")/.." || exit 1
pass=0 fail=0 skip=0
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
	add "$p" "$f" "${s:-0}"
done

node_suites=$(ls tests/api/*.test.mjs tests/browser/*.test.mjs 2>/dev/null)
if [ -n "$node_suites" ]; then
	echo "== node --test"
	out=$(mktemp)
	node --test --test-concurrency=1 --test-reporter=spec $node_suites 2>&1 | tee "$out"
	p=$(grep -E '^ℹ pass [0-9]+' "$out" | tail -1 | awk '{print $3}')
	f=$(grep -E '^ℹ fail [0-9]+' "$out" | tail -1 | awk '{print $3}')
	s=$(grep -E '^ℹ skipped [0-9]+' "$out" | tail -1 | awk '{print $3}')
	[ -z "$p" ] && { p=0; f=1; echo "!! node's test runner printed no summary"; }
	add "${p:-0}" "${f:-0}" "${s:-0}"
	rm -f "$out"
fi

echo
[ "$skip" -gt 0 ] && echo "$skip skipped"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
