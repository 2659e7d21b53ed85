#!/usr/bin/env bash
# Sets up, builds and runs every test. Prints "N passed, N failed" last.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${MOE_BUILD_DIR:-$root/build}

# The fuzz targets, in a tree built with ASan and UBSan that holds only what
# they need (scripts/test-sanitized.sh builds and tests the rest of it).
fuzz_build=${MOE_SANITIZE_BUILD_DIR:-$build-sanitize}

"$root/scripts/setup.sh"
"$root/scripts/build.sh"
MOE_BUILD_DIR=$fuzz_build \
MOE_CMAKE_ARGS="-DMOE_SANITIZE=address;undefined -DMOE_ENABLE_FUZZERS=ON -DMOE_ENABLE_CUDA=OFF" \
  "$root/scripts/build.sh" moe-fuzzers

log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
/usr/lib/llvm-22/bin/lit -sv "$build/test" 2>&1 | tee "$log" || status=$?
# Short runs of every fuzz target (test/fuzz) and their regression inputs.
/usr/lib/llvm-22/bin/lit -sv "$fuzz_build/test" --filter '^MOE :: fuzz/' 2>&1 |
  tee -a "$log" || status=$?

# lit's summary ("  Passed: N", "  Failed: N", ...) as one plain line.
awk -F: '/^ *Passed *:/ {p += $2}
         /^ *(Failed|Unresolved|Timed Out|Unexpectedly Passed) *:/ {f += $2}
         END {printf "%d passed, %d failed\n", p, f}' "$log"
exit $status
