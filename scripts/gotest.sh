#!/usr/bin/env bash
# scripts/gotest.sh ARGS...: go test ARGS, whose output is also kept in a file; when it fails,
# what matters is printed again at the end, where a reader of the last lines looks: the failed
# tests and their messages and, after a timeout, the tests that were running and the stacks of
# their goroutines, which the timeout's dump of every goroutine otherwise buries.
set -uo pipefail
log=$(mktemp "${TMPDIR:-/tmp}/sluice-gotest.XXXXXX")
trap 'rm -f "$log"' EXIT
"${GO:-go}" test "$@" 2>&1 | tee "$log"
rc=$?
[ "$rc" -eq 0 ] && exit 0

echo
echo "=== go test failed (exit $rc); in short:"
grep -E '^\s*--- FAIL|^(FAIL|panic:)|^\s+[a-z_]+_test\.go:[0-9]+:' "$log" | head -n 60
awk '
	/^panic: test timed out/ { timed = 1 }
	timed && /^\trunning tests:/ { print; running = 1; next }
	running && /^\t\t/ { print; next }
	running { running = 0 }
' "$log"
if grep -q '^panic: test timed out' "$log"; then
	echo "=== the goroutines that run test code (at most 8):"
	awk -v RS= '/_test\.go:[0-9]+/ && n < 8 { print; print ""; n++ }' "$log"
fi
exit "$rc"
