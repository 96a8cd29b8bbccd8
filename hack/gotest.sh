#!/usr/bin/env bash
# go test with its arguments, output as usual; when it fails, a summary of
# what failed is printed again at the very end. CI keeps only the tail of a
# run's output, and a hung test's timeout panic names the test at the top of
# a goroutine dump thousands of lines long: without this the name is lost.
set -uo pipefail
log="$(mktemp "${TMPDIR:-/tmp}/wo-gotest.XXXXXX")"
trap 'rm -f "$log"' EXIT
"${GO:-go}" test "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
if [ "$rc" -ne 0 ]; then
	echo
	echo "=== hack/gotest.sh: go test $* failed (exit $rc); what failed:"
	# A timeout panic and the tests it found running.
	awk '/^panic: test timed out/ { on = 1 } on && /^$/ { on = 0 } on' "$log" | head -n 40
	# Each failed test with the first lines of its messages, then the
	# failed packages.
	awk '/^[ \t]*--- FAIL/ { print; n = 8; next }
		n > 0 && /^[ \t]+[^ \t-]/ { print; n--; next }
		{ n = 0 }' "$log" | cut -c1-300 | head -n 200
	grep -E '^FAIL\s' "$log"
fi
exit "$rc"
