#!/bin/sh
# asan.sh UNIT_BIN... — `make asan`'s run: the C unit tests built with ASan and
# UBSan (build-asan/tests/), then a few API suites against build-asan/deepdesk-test
# and build-asan/deepdesk (DEEPDESK_BIN, DEEPDESK_SHIPPED_BIN), whose workers and
# inference service are the same instrumented program.  It fails on a failed test
# or on any sanitizer report from any process, and prints every report.
#
# Where reports go: ASan and LeakSanitizer write theirs to build-asan/reports/asan.PID
# (log_path), so a worker's or the service's cannot be lost in a log nobody reads.
# GCC's UBSan ignores log_path and prints "runtime error:" on stderr; with
# -fno-sanitize-recover the process then exits.  That stderr is the unit test's
# output or the server's (DEEPDESK_TEST_LOG), both kept here, or a worker.log or
# infer-service.log, which tests/lib/server.mjs copies out (DEEPDESK_SANITIZER_LOG)
# before a test removes its data folder.  Everything is searched at the end.
#
# Leaks are looked for (detect_leaks=1) in every process that exits normally: the
# unit tests, the CLI, workers that finish and servers stopped with SIGTERM.
# tests/lsan.supp names what is not ours, one reason each.
cd "$(dirname "$0")/.." || exit 1
B=build-asan
R=$PWD/$B/reports
rm -rf "$R"
mkdir -p "$R"
export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:log_path=$R/asan"
export LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
export DEEPDESK_BIN="$PWD/$B/deepdesk-test" DEEPDESK_SHIPPED_BIN="$PWD/$B/deepdesk"
export DEEPDESK_TEST_LOG=1 DEEPDESK_SANITIZER_LOG="$R/children.log"
# The API suites: every door of the server (jobs and the scheduler, restarts,
# datasets, networks, models, inference and its service, evaluations, the
# WebSocket, accounts, sessions, HTTPS and classes, errors), about three minutes.
# Left to `make test`: bundle (it bounds the CLI's peak RSS, which ASan's shadow
# memory and quarantine inflate), gpu and precision (the CUDA plugin is not in this
# build), slurm (its daemons, and minutes of waiting) and the browser suites.
# ASAN_SUITES="info jobs" runs those instead.
SUITES=${ASAN_SUITES:-"info errors openapi networks datasets jobs lifecycle restart queue sweeps ws infer infer_service
	evals models digits digits_auth auth tls classes roles testhooks"}
fail=0
t0=$(date +%s)

# test_eval's flat-memory check compares a worker's heap over 1,000 and 20,000
# images; ASan's quarantine holds freed memory back, so under it the heap grows
# whatever the code does.  Here both runs are 1,000 images (the counts and files are
# still checked) and LeakSanitizer, at each worker's exit, looks for the leaks that
# check is there to catch.
export DD_EVAL_IMAGES=1000
for t in "$@"; do
	s0=$(date +%s)
	"$t" >"$R/out" 2>&1
	rc=$?
	echo "== $t: $(grep -E '^[0-9]+ passed' "$R/out" | tail -1), $(($(date +%s) - s0)) s"
	grep -E '^(FAIL|!!)' "$R/out"
	[ "$rc" -ne 0 ] && { fail=1; echo "!! $t exited $rc"; cat "$R/out"; }
	grep -q 'runtime error:\|Sanitizer' "$R/out" && { cat "$R/out" >>"$R/unit.log"; fail=1; }
done

files=""
for s in $SUITES; do files="$files tests/api/$s.test.mjs"; done
echo "== node --test$files (against $DEEPDESK_BIN)"
# shellcheck disable=SC2086
node --test --test-concurrency=1 --test-reporter=spec $files >"$R/node.log" 2>&1 || fail=1
grep -E '^(✔|✖) |^ℹ (pass|fail)' "$R/node.log"

reports=$(ls "$R"/asan.* 2>/dev/null)
ub=$(grep -l 'runtime error:' "$R/node.log" "$R/children.log" "$R/unit.log" 2>/dev/null)
ch=$(grep -l 'Sanitizer' "$R/children.log" "$R/unit.log" 2>/dev/null)
for f in $reports $ub $ch; do echo "==== sanitizer report: $f"; cat "$f"; fail=1; done
[ "$fail" -ne 0 ] && grep -E '^✖|not ok|FAIL' "$R/node.log" | head -20
echo "make asan: $(($(date +%s) - t0)) s, $( [ "$fail" -eq 0 ] && echo 'clean' || echo 'FAILED')"
[ "$fail" -eq 0 ]
