#!/usr/bin/env bash
# Sets up, builds, compiles the bundled Mixtral-style MoE block (an ONNX file
# exported from PyTorch) for two expert-parallel ranks, runs it under mpirun,
# and checks the result against the PyTorch reference.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${MOE_BUILD_DIR:-$root/build}
model=$root/test/corpus/mixtral.onnx
input=$root/test/corpus/mixtral.in.hidden_states.npy
reference=$root/test/corpus/mixtral.out.output.npy
work=$build/demo

"$root/scripts/setup.sh"
"$root/scripts/build.sh"
bin=$build/bin
rm -rf "$work"

echo "== The exported block, raised: one moe.layer =="
"$bin/moe-compile" "$model" --emit=moe -o - | grep -oE 'moe\.layer[^:]*'
echo
echo "== What each of 2 expert-parallel ranks runs: the exchanges =="
"$bin/moe-compile" "$model" --ep 2 --emit=spmd -o - |
  grep -oE '(shard\.[a-z_]+|moe\.(all_to_all|router|dispatch|experts|combine))[^:]*' |
  sed 's/^/  /'
echo
echo "== Compiled for 2 ranks: code, per-rank weights, manifest =="
"$bin/moe-compile" "$model" --ep 2 -o "$work/mixtral-ep2"
ls -l "$work/mixtral-ep2" | tail -n +2
echo
echo "== Run on 2 ranks =="
# mpirun refuses root (as in containers) unless told; two ranks fit any machine.
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
  mpirun --oversubscribe -np 2 "$bin/moe-run" "$work/mixtral-ep2" \
  --input hidden_states="$input" --output-dir "$work/out" --stats
echo
echo "== Checked against the PyTorch reference =="
/usr/bin/python3 - "$work/out/output.npy" "$reference" <<'PY'
import sys
import numpy as np
got, ref = np.load(sys.argv[1]), np.load(sys.argv[2])
err, scale = float(np.abs(got - ref).max()), float(np.abs(ref).max())
ok = err <= 1e-4 * scale
print("output %s: max abs error %.2e, %.1e of the output's scale %.3f: %s"
      % (got.shape, err, err / scale, scale, "PASS" if ok else "FAIL"))
sys.exit(0 if ok else 1)
PY
