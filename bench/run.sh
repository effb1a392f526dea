#!/bin/sh
# run.sh — every benchmark in bench/, one after the other, then one table of medians.
#
# A benchmark is a folder bench/NAME/ with run.mjs (run by node) or run.sh; it writes
# bench/results/NAME-latest.json ({"bench","ok","rows":[{"metric","value","unit","note"}],
# plus whatever raw figures it keeps).  `make bench` builds first and then runs this.
# BENCH_ONLY_SUITES="serve other" runs only those; other BENCH_* knobs are read by
# the benchmarks themselves (see each one's header).
cd "$(dirname "$0")/.." || exit 1
mkdir -p bench/results
command -v node >/dev/null 2>&1 || { echo "bench: node is not installed (make deps-test)"; exit 1; }

ran="" failed=""
start=$(date +%s)
for dir in bench/*/; do
	name=$(basename "$dir")
	case "$name" in lib | results) continue ;; esac
	if [ -n "$BENCH_ONLY_SUITES" ]; then
		case " $BENCH_ONLY_SUITES " in *" $name "*) ;; *) continue ;; esac
	fi
	if [ -f "$dir/run.mjs" ]; then
		set -- node "$dir/run.mjs"
	elif [ -f "$dir/run.sh" ]; then
		set -- sh "$dir/run.sh"
	else
		continue
	fi
	echo "== bench $name"
	rm -f "bench/results/$name-latest.json"
	t0=$(date +%s)
	if "$@"; then :; else
		echo "!! bench $name exited $?"
		failed="$failed $name"
	fi
	echo "   ($name took $(($(date +%s) - t0)) s)"
	[ -f "bench/results/$name-latest.json" ] && ran="$ran bench/results/$name-latest.json"
	[ -f "bench/results/$name-latest.json" ] || { case " $failed " in *" $name "*) ;; *) failed="$failed $name" ;; esac; }
	[ "$name" = infer ] && [ -f bench/infer/many.mjs ] && { echo "== bench infer-many"; rm -f bench/results/infer-many-latest.json; node bench/infer/many.mjs || failed="$failed infer-many"; [ -f bench/results/infer-many-latest.json ] && ran="$ran bench/results/infer-many-latest.json"; }
	[ "$name" = infer ] && [ -f bench/infer/eval.mjs ] && { echo "== bench infer-eval"; rm -f bench/results/infer-eval-latest.json; node bench/infer/eval.mjs || failed="$failed infer-eval"; [ -f bench/results/infer-eval-latest.json ] && ran="$ran bench/results/infer-eval-latest.json"; }
done

echo
echo "== results ($(nproc 2>/dev/null || echo ?) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null), $(($(date +%s) - start)) s in all; raw figures in bench/results/)"
if [ -n "$ran" ]; then
	# shellcheck disable=SC2086
	node bench/lib/table.mjs $ran
else
	echo "no benchmark wrote a result"
fi
if [ -n "$failed" ]; then
	echo
	echo "FAILED:$failed"
	exit 1
fi
