#!/bin/bash
# On a machine with an NVIDIA GPU, runs what scripts/gpu-pack.sh packed: the
# CUDA runtime's kernel test, every packed corpus bundle and whole
# transformers CausalLM (each checked against its reference as test/e2e
# does), 20 training steps of each model of test/e2e/train against
# PyTorch's curve (rtol 1e-3, as test/e2e/train/cuda.test), bf16 training
# with fp32 masters against its f32 twin (as bf16.test), the kernel
# benchmark, then the Mixtral block against PyTorch eager
# (bench/gpu_bench.py). Needs python3
# with numpy and PyTorch for CUDA, and the CUDA libraries cuBLAS and NCCL
# (those of PyTorch's nvidia wheels first, as PyTorch loads them; else
# wherever the CUDA toolkit put them). PYTHON names the python.
# ONNX Runtime's CUDA MoE is timed where onnxruntime has the CUDA provider:
# the one scripts/gpu-ort-unpack.sh unpacked (MOE_ORT_SITE, default
# /tmp/moe-ort/site) comes first. --bench-only runs only gpu_bench.py (the
# call after the ORT parts have arrived).
#
# The device tool returns at most 8 files from $OUT and the last 12,000
# characters of output, and kills a command at its limit. So everything
# goes to one log, $OUT/gpu-run.log, written as it goes (a killed run
# still returns what it did), plus $OUT/summary.txt, one line per step;
# each step's own log stays in DIR/logs. Each step has a time limit, and
# all of them together MOE_GPU_RUN_BUDGET_S (default 560 s), so that the
# script ends, summary and all, inside a 10-minute call.
#
#   ./scripts/gpu-run.sh [--bench-only] [DIR]       (default: .gpu)
set -uo pipefail
# Python's lines reach the log as they are printed, not at exit.
export PYTHONUNBUFFERED=1
ROOT=$(cd "$(dirname "$0")/.." && pwd)
bench_only=0
if [ "${1:-}" = --bench-only ]; then
  bench_only=1
  shift
fi
PACK=${1:-$ROOT/.gpu}
PY=${PYTHON:-python3}
BUDGET=${MOE_GPU_RUN_BUDGET_S:-560}
LOGS=$PACK/logs
RESULTS=${OUT:-$LOGS}
mkdir -p "$LOGS" "$RESULTS"
: > "$RESULTS/summary.txt"
exec > >(tee "$RESULTS/gpu-run.log") 2>&1
tee_pid=$!

status=0
note() { echo "$*" | tee -a "$RESULTS/summary.txt"; }
finish() {
  echo "== summary"
  cat "$RESULTS/summary.txt"
  echo "gpu-run: exit $status after ${SECONDS} s; step logs in $LOGS"
  # Let tee write the last lines before the call returns.
  exec >&- 2>&-
  wait "$tee_pid" 2>/dev/null
  exit $status
}
die() { note "setup: FAIL: $*"; status=1; finish; }

# Line-buffered C++ output, so that a step killed at its limit leaves its
# lines in the log.
unbuffered=()
command -v stdbuf >/dev/null && unbuffered=(stdbuf -oL -eL)

# step NAME LIMIT_S COMMAND...: runs COMMAND under `timeout`, its output in
# DIR/logs/NAME.txt and the combined log; a line in the summary.
step() {
  local name=$1 limit=$2 left=$((BUDGET - SECONDS)) begin=$SECONDS rc
  shift 2
  if [ "$left" -lt 15 ]; then
    note "$name: SKIPPED (the ${BUDGET} s budget is spent)"
    status=1
    return
  fi
  [ "$limit" -le "$left" ] || limit=$left
  echo "== $name (limit $limit s): $*"
  timeout -k 5 "$limit" "$@" 2>&1 | tee "$LOGS/$name.txt"
  rc=${PIPESTATUS[0]}
  case $rc in
    0) note "$name: ok ($((SECONDS - begin)) s)" ;;
    124|137) note "$name: TIMEOUT after $limit s"; status=1 ;;
    *) note "$name: FAIL exit $rc ($((SECONDS - begin)) s)"; status=1 ;;
  esac
}

# What the machine is, and whether the packed binaries can start on it.
echo "== machine"
os=$(sed -n 's/^PRETTY_NAME="\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' /etc/os-release 2>/dev/null)
glibc=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
[ -n "$glibc" ] || glibc=$(ldd --version 2>/dev/null | awk 'NR == 1 {print $NF}')
gpu=$(timeout -k 5 30 nvidia-smi -L 2>&1) || gpu="nvidia-smi -L failed: $gpu"
note "machine: ${os:-unknown OS}; glibc ${glibc:-unknown}; $("$PY" --version 2>&1) at $(command -v "$PY"); $gpu"
[ -x "$PACK/bin/real/moe-run" ] || die "$PACK/bin/real/moe-run is missing; pack with ./scripts/gpu-pack.sh and carry .gpu"
# moe-run's statically linked LLVMSupport needs arc4random@GLIBC_2.36, and
# the packed libevent_core needs 2.36 too.
if [ -z "$glibc" ]; then
  echo "gpu-run: cannot tell the glibc version; moe-run needs 2.36 or newer"
elif ! printf '%s\n' 2.36 "$glibc" | sort -V -C; then
  die "glibc $glibc is older than 2.36, which moe-run and the packed libraries need (an Ubuntu 24.04 base has 2.39)"
fi

# cuBLAS and NCCL: those of PyTorch's nvidia wheels first, so that moe-run
# loads the same ones as PyTorch; then wherever the CUDA toolkit put them.
mapfile -t wheel_dirs < <("$PY" -c 'import nvidia; print("\n".join(nvidia.__path__))' 2>/dev/null)
cuda_libs=""
for name in libcublas.so.13 libcublasLt.so.13 libnccl.so.2; do
  found=""
  [ "${#wheel_dirs[@]}" = 0 ] || found=$(find "${wheel_dirs[@]}" -name "$name" 2>/dev/null | head -1)
  [ -n "$found" ] || found=$(find /usr/local/cuda* /usr/lib /opt /usr/local/lib -name "$name" 2>/dev/null | head -1)
  [ -n "$found" ] || die "$name not found (neither in PyTorch's nvidia wheels nor under /usr/local/cuda*, /usr/lib, /opt)"
  echo "$name: $found"
  dir=$(dirname "$found")
  case ":$cuda_libs:" in *":$dir:"*) ;; *) cuda_libs="${cuda_libs:+$cuda_libs:}$dir" ;; esac
done
# Read by the wrappers in DIR/bin (scripts/gpu-pack.sh) alone: python and
# PyTorch keep their own library search.
export MOE_GPU_CUDA_LIBS=$cuda_libs
unresolved=$(LD_LIBRARY_PATH="$PACK/lib:$cuda_libs" ldd "$PACK/bin/real/moe-run" 2>&1 | grep -v '=> /' | grep -v -e linux-vdso -e ld-linux)
if [ -n "$unresolved" ]; then
  echo "ldd $PACK/bin/real/moe-run, unresolved:"
  echo "$unresolved"
  missing=$(echo "$unresolved" | grep 'not found' | tr -s ' \t' ' ' | paste -sd ';' -)
  [ -z "$missing" ] || die "moe-run cannot start, ldd says:$missing"
else
  echo "ldd $PACK/bin/real/moe-run: every library found"
fi

# onnxruntime-gpu as scripts/gpu-ort-unpack.sh left it, ahead of any other.
ORT_SITE=${MOE_ORT_SITE:-/tmp/moe-ort/site}
[ -d "$ORT_SITE/onnxruntime" ] && export PYTHONPATH="$ORT_SITE${PYTHONPATH:+:$PYTHONPATH}"

if [ "$bench_only" = 0 ]; then
  step moert-cuda-test 120 "${unbuffered[@]}" "$PACK/bin/moert-cuda-test"
  # Kept order: the kernel test, then the bundles, so that a run cut short
  # still has the first results.
  for bundle in "$PACK"/bundles/*; do
    entry=$(basename "$bundle") # MODEL or MODEL.DTYPE
    model=${entry%%.*}; dtype=${entry#"$model"}; dtype=${dtype#.}
    # One moe-run of a small model: 60 s is far past a healthy run.
    step "corpus-$entry" 120 "$PY" "$ROOT/test/e2e/run_corpus.py" --bin "$PACK/bin" \
      --corpus "$ROOT/test/corpus" --work "$bundle" --target cuda --run-only --plans one \
      --dtype "${dtype:-f32}" --timeout "${MOE_GPU_BUNDLE_TIMEOUT_S:-60}" "$model"
  done
  for bundle in "$PACK"/models/*; do
    [ -d "$bundle" ] || continue
    step "model-$(basename "$bundle")" 120 "$PY" "$ROOT/test/e2e/run_corpus.py" --bin "$PACK/bin" \
      --corpus "$ROOT/test/corpus/hf" --work "$bundle" --target cuda --run-only --plans one \
      --timeout "${MOE_GPU_BUNDLE_TIMEOUT_S:-60}" "$(basename "$bundle")"
  done
  if [ -d "$PACK/train" ]; then
    for model in $(ls "$PACK/train" | sed -n 's/\.sgd\.step$//p'); do
      step "train-$model" 180 "$PY" "$ROOT/test/e2e/train/run_training.py" --bin "$PACK/bin" \
        --work "$PACK/train" --target cuda --run-only --rtol 1e-3 "$model"
    done
  fi
  if [ -d "$PACK/train-bf16/bf16" ]; then
    step train-bf16-masters 120 bash -c 'set -e
      "$3" -c "import numpy as np, sys; x = np.load(sys.argv[1]); np.save(sys.argv[2] + \"/x.npy\", np.stack([x, 0.5 * x])); np.save(sys.argv[2] + \"/t.npy\", np.zeros((2,) + x.shape, np.float32))" "$2/mixtral_bf16.in.hidden_states.npy" "$1/train-bf16"
      for d in bf16 f32; do
        "$1/bin/moe-train" "$1/train-bf16/$d" --input hidden_states="$1/train-bf16/x.npy" \
          --input target="$1/train-bf16/t.npy" --steps 6 --batch-size 1 --lr 0.01 --log "$1/train-bf16/$d.csv"
      done
      "$3" -c "import numpy as np, sys
a, b = (np.loadtxt(sys.argv[1] + \"/\" + n + \".csv\", delimiter=\",\", skiprows=1)[:, 1] for n in (\"bf16\", \"f32\"))
d = float(np.max(np.abs(a - b) / b)); print(\"bf16 against f32 loss curve: max relative difference %.3g\" % d)
sys.exit(0 if d < 2e-2 else 1)" "$1/train-bf16"' _ "$PACK" "$ROOT/test/corpus" "$PY"
  fi
  if [ -d "$PACK/placement/qwen2_moe" ]; then
    step placement-qwen2_moe 120 bash -c '"$1/bin/moe-run" "$1/placement/qwen2_moe" \
        --input hidden_states="$2/qwen2_moe.in.hidden_states.npy" --output-dir "$1/placement/out" \
        --repeat 3 --replan-every 1 --placement-algorithm eplb --stats &&
      "$3" -c "import numpy as np, sys
y = np.load(sys.argv[1]); r = np.load(sys.argv[2]); e = float(np.abs(y - r).max())
print(\"max abs error %.3g, scale %.3g\" % (e, np.abs(r).max()))
sys.exit(1 if e > 1e-4 * np.abs(r).max() else 0)" "$1/placement/out/output.npy" "$2/qwen2_moe.out.output.npy"' \
      _ "$PACK" "$ROOT/test/corpus" "$PY"
  fi
  step moert-cuda-bench 120 "${unbuffered[@]}" "$PACK/bin/moert-cuda-bench"
fi
for block in "$PACK"/bench/*; do
  [ -d "$block" ] || continue
  step "gpu_bench-$(basename "$block")" 300 "$PY" "$ROOT/bench/gpu_bench.py" run "$block" \
    --bin "$PACK/bin" --timeout 180
done
finish
