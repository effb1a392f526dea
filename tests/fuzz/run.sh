#!/bin/sh
# run.sh SECONDS [HARNESS...] — build each libFuzzer target in tests/fuzz/ with clang
# (AddressSanitizer, UBSan, libFuzzer) into build/fuzz/ and run it for SECONDS from
# its seed corpus (kept in build/fuzz/corpus-NAME/, so a later run goes on from
# there).  Prints one line a harness (executions, seconds, findings) and fails when
# any harness found a crash, a leak, a timeout or a sanitizer report; the input that
# did it is left in build/fuzz/ (crash-*, leak-*, timeout-*) to make a regression
# test of.  `make fuzz` runs minutes a harness; `make fuzz-smoke` (CI) seconds.
# Needs `make all` first (the standard networks' generated C, the objects fuzz_roster
# links).
cd "$(dirname "$0")/../.." || exit 1
secs=${1:-120}
shift
all="datum image json prototxt roster safetensors"
harnesses=${*:-$all}
command -v clang >/dev/null || { echo "fuzz: clang is missing (apt-get install clang)"; exit 1; }
out=build/fuzz
mkdir -p "$out"
CFLAGS="-std=c11 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined"
NETS="build/gen/net_lenet.c build/gen/net_alexnet.c build/gen/net_googlenet.c build/gen/net_resnet_small.c"
LIBS_ALL="-lcivetweb -lsqlite3 -lcjson -llmdb -lpng -lturbojpeg -larchive -lz -ldnnl -lgvc -lcgraph -lsodium -lgomp -lpthread -lm -lstdc++"

build() {
	case $1 in
	datum) set -- tests/fuzz/fuzz_datum.c datasets/datum.c common/err.c ;;
	image) set -- tests/fuzz/fuzz_image.c datasets/image.c common/err.c -lpng -lturbojpeg -lz -lm ;;
	json) set -- tests/fuzz/fuzz_json.c common/json.c common/fsutil.c common/err.c common/log.c -lcjson ;;
	prototxt) set -- tests/fuzz/fuzz_prototxt.c networks/prototxt.c networks/net.c networks/layers.c common/err.c $NETS -lcjson -lm ;;
	roster) set -- tests/fuzz/fuzz_roster.c app/accounts/roster.c $(find build/obj -name '*.o' ! -name roster.o ! -name main.o ! -name 'cli*') $LIBS_ALL ;;
	safetensors) set -- tests/fuzz/fuzz_safetensors.c networks/snapshot.c \
		$(find build/obj -name '*.o' ! -name snapshot.o ! -name main.o ! -name 'cli*') $LIBS_ALL ;;
	*) echo "fuzz: no harness $1 (have: $all)"; return 1 ;;
	esac
	clang $CFLAGS -o "$out/fuzz_$name" "$@" 2>"$out/build-$name.log" || { cat "$out/build-$name.log"; return 1; }
}

# A few real inputs to start from, per harness (the fuzzer mutates them).
seed() {
	c=$out/corpus-$1
	mkdir -p "$c"
	[ -n "$(ls -A "$c")" ] && return 0
	case $1 in
	prototxt) cp networks/standard/*.prototxt "$c/" ;;
	json) printf '{"kind":"test","params":{"steps":1},"name":"caf\303\251"}' >"$c/job.json"
	      printf '[[[[1,2,{"a":"\\u00e9\\n"}]]]]' >"$c/deep.json" ;;
	roster) printf 'name,role\nann\nben,learner\ntom,instructor\n' >"$c/roster.csv" ;;
	*) printf 'x' >"$c/x" ;;
	esac
}

fail=0 passed=0 failed=0
for name in $harnesses; do
	if ! build "$name"; then
		echo "fuzz_$name: does not build"
		fail=1 failed=$((failed + 1))
		continue
	fi
	seed "$name"
	log=$out/run-$name.log
	(cd "$out" && ASAN_OPTIONS=detect_leaks=1 ./fuzz_"$name" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
		-max_len=65536 -print_final_stats=1 corpus-"$name") >"$log" 2>&1
	rc=$?
	runs=$(sed -nE 's/^Done ([0-9]+) runs in ([0-9]+) second.*/\1 \2/p' "$log" | tail -1)
	if [ "$rc" -ne 0 ]; then
		echo "fuzz_$name: FOUND something (exit $rc); the input is in $out; the report:"
		grep -E "ERROR|SUMMARY|runtime error|Test unit written" "$log" | head -20
		fail=1 failed=$((failed + 1))
	else
		set -- $runs
		echo "fuzz_$name: ${1:-?} executions in ${2:-?} s, no finding"
		passed=$((passed + 1))
	fi
done
echo "$passed passed, $failed failed"
exit $fail
