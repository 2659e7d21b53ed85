#!/usr/bin/env bash
# Sets up, builds and runs every test. Prints "N passed, N failed" last.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${MOE_BUILD_DIR:-$root/build}

"$root/scripts/setup.sh"
"$root/scripts/build.sh"

log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
/usr/lib/llvm-22/bin/lit -sv "$build/test" 2>&1 | tee "$log" || status=$?

# lit's summary ("  Passed: N", "  Failed: N", ...) as one plain line.
awk -F: '/^ *Passed *:/ {p += $2}
         /^ *(Failed|Unresolved|Timed Out|Unexpectedly Passed) *:/ {f += $2}
         END {printf "%d passed, %d failed\n", p, f}' "$log"
exit $status
