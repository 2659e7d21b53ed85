#!/usr/bin/env bash
# Builds MoE-MLIR with AddressSanitizer and UndefinedBehaviorSanitizer (and
# the fuzz targets) in build-sanitize/ and runs every lit test there: the
# tools, the runtime under mpirun and the Python drivers all instrumented,
# with the options test/lit.cfg.py sets. Prints "N passed, N failed" last.
# Not part of scripts/test.sh, which builds only the fuzz targets of this
# tree (see README.md, "Sanitizers and fuzzing").
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${MOE_SANITIZE_BUILD_DIR:-${MOE_BUILD_DIR:-$root/build}-sanitize}

"$root/scripts/setup.sh"
MOE_BUILD_DIR=$build \
MOE_CMAKE_ARGS="-DMOE_SANITIZE=address;undefined -DMOE_ENABLE_FUZZERS=ON -DMOE_ENABLE_CUDA=OFF" \
  "$root/scripts/build.sh"

log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
/usr/lib/llvm-22/bin/lit -sv "$build/test" "$@" 2>&1 | tee "$log" || status=$?

awk -F: '/^ *Passed *:/ {p += $2}
         /^ *(Failed|Unresolved|Timed Out|Unexpectedly Passed) *:/ {f += $2}
         END {printf "%d passed, %d failed\n", p, f}' "$log"
exit $status
