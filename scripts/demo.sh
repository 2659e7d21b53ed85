#!/usr/bin/env bash
# Sets up, builds, and takes the bundled Mixtral-style block through
# decomposition and the CPU lowering, then runs it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${MOE_BUILD_DIR:-$root/build}
example=$root/examples/mixtral-block.mlir

"$root/scripts/setup.sh"
"$root/scripts/build.sh"
opt=$build/bin/moe-opt

echo "== A Mixtral block exported by torch.onnx.export, imported and raised =="
"$build/bin/moe-translate" --import-onnx "$root/test/corpus/mixtral.onnx" |
  "$opt" --moe-raise --canonicalize | grep -oE 'moe\.layer[^:]*'
echo
echo "== The fused block, as an importer produces it =="
grep -A3 '= moe.layer' "$example"
echo
echo "== After moe-decompose: router, dispatch, experts, combine =="
"$opt" "$example" --moe-decompose | grep -E 'moe\.' 
echo
echo "== After convert-moe-to-linalg (op counts) =="
"$opt" "$example" --moe-decompose --convert-moe-to-linalg |
  grep -oE '(linalg|scf|tensor|math)\.[a-z_]+' | sort | uniq -c | sort -rn
echo
echo "== Lowered to LLVM and run on the CPU =="
"$opt" "$example" --moe-lower-to-llvm |
  /usr/lib/llvm-22/bin/mlir-runner -e main -entry-point-result=void \
    -shared-libs=/usr/lib/llvm-22/lib/libmlir_runner_utils.so,/usr/lib/llvm-22/lib/libmlir_c_runner_utils.so
