#!/usr/bin/env bash
# tests/fuzz/run.sh - runs every libFuzzer target in FUZZ_BUILD (argument;
# default build/fuzz) for FUZZ_SECONDS each (default 60), from its seed
# corpus tests/fuzz/corpus/<target> plus what earlier runs found
# (FUZZ_BUILD/corpus/<target>), and prints one line per target: executions,
# coverage (edges), features, corpus size, and the verdict. Exit 1 when any
# target crashed, leaked or tripped a sanitizer (its output is kept in
# FUZZ_BUILD/<target>.log, the input in FUZZ_BUILD/crash-*).
set -u
FB=${1:-build/fuzz}
SECS=${FUZZ_SECONDS:-60}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
fail=0 n=0
printf '%-18s %10s %8s %8s %7s %6s  %s\n' target execs cov ft corpus secs verdict
for bin in "$FB"/fuzz_*; do
	[ -x "$bin" ] || continue
	t=$(basename "$bin")
	seeds=tests/fuzz/corpus/$t
	work=$FB/corpus/$t
	mkdir -p "$work"
	n=$((n + 1))
	# -close_fd_mask=2: the parsers print their refusals to stderr
	"$bin" -max_total_time="$SECS" -timeout=25 -rss_limit_mb=2048 \
		-close_fd_mask=2 -print_final_stats=1 \
		-artifact_prefix="$FB/" "$work" "$seeds" >"$FB/$t.log" 2>&1
	rc=$?
	execs=$(awk '/stat::number_of_executed_units/ {print $NF}' "$FB/$t.log")
	last=$(grep -E '^#[0-9]+' "$FB/$t.log" | grep -E 'cov: ' | tail -1)
	cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
	ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
	corp=$(ls "$work" | wc -l)
	if [ $rc -eq 0 ]; then v=ok; else v="FAILED (exit $rc, see $FB/$t.log)"; fail=1; fi
	printf '%-18s %10s %8s %8s %7s %6s  %s\n' "$t" "${execs:-?}" "${cov:-?}" \
		"${ft:-?}" "$corp" "$SECS" "$v"
done
if [ $n -eq 0 ]; then
	echo "fuzz: no targets in $FB (make fuzz-build)" >&2
	exit 1
fi
exit $fail
