#!/usr/bin/env bash
# Long fuzzing runs: each target (all of them by default, one after the
# other) for --runs executions (default 1,000,000) or --time seconds,
# whichever comes first. A run stops at its first crash, timeout or
# out-of-memory input (the figure of "N executions, no crash" is one run's);
# with --keep-going it continues past them in libFuzzer's fork mode, which
# restarts a child every few seconds and runs 3 to 4 times fewer inputs.
# --workers N runs N processes of a target on its one corpus (each picks up
# the others' new inputs), each for its share of --runs: a million
# executions of a slow target on every core. Prints executions, coverage and
# findings per target.
#
#   scripts/fuzz.sh [TARGET...] [--runs N] [--time SECONDS] [--workers N]
#                   [--keep-going]
#
# TARGET: onnx onnx-proto torchscript mlir npy smp-config manifest train-data
#         load-trace checkpoint.
# The corpus of each target is kept between runs in
# ~/.cache/moe-mlir/fuzz/<target>/corpus, its findings (crash-*, leak-*,
# timeout-*, oom-*) in .../findings and its log in .../fuzz.log. The
# targets are built in the sanitized tree (build-sanitize/, as
# scripts/test.sh builds it). A finding is made a regression test by
# copying it (minimized: moe-fuzz-<target> -minimize_crash=1 FILE) to
# test/fuzz/Inputs/<target>/, which test/fuzz/regressions.test runs.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${MOE_SANITIZE_BUILD_DIR:-${MOE_BUILD_DIR:-$root/build}-sanitize}
cache=${MOE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/moe-mlir}/fuzz
all=(onnx onnx-proto torchscript mlir npy smp-config manifest train-data load-trace
     checkpoint)

runs=1000000
time_limit=0
keep_going=0
workers=1
targets=()
while [ $# -gt 0 ]; do
  case $1 in
    --runs) runs=$2; shift 2 ;;
    --time) time_limit=$2; shift 2 ;;
    --keep-going) keep_going=1; shift ;;
    --workers) workers=$2; shift 2 ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
    *)
      if [[ " ${all[*]} " != *" $1 "* ]]; then
        echo "fuzz.sh: unknown target $1 (${all[*]})" >&2
        exit 2
      fi
      targets+=("$1"); shift ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=("${all[@]}")
for n in "$runs" "$time_limit" "$workers"; do
  [[ $n =~ ^[0-9]+$ ]] || { echo "fuzz.sh: not a count: $n" >&2; exit 2; }
done
[ "$workers" -ge 1 ] || { echo "fuzz.sh: --workers must be at least 1" >&2; exit 2; }

mkdir -p "$cache"
MOE_BUILD_DIR=$build \
MOE_CMAKE_ARGS="-DMOE_SANITIZE=address;undefined -DMOE_ENABLE_FUZZERS=ON -DMOE_ENABLE_CUDA=OFF" \
  "$root/scripts/build.sh" moe-fuzzers >"$cache/build.log" 2>&1 || {
  tail -n 30 "$cache/build.log" >&2
  echo "fuzz.sh: building the fuzz targets failed" >&2
  exit 1
}

# Manifests compiled by whichever moe-compile there is.
moe_compile=
for tool in "$build/bin/moe-compile" "${MOE_BUILD_DIR:-$root/build}/bin/moe-compile"; do
  if [ -x "$tool" ]; then moe_compile=$tool; break; fi
done

declare -A dict=([onnx]=onnx [onnx-proto]=onnx [torchscript]=onnx [mlir]=mlir
                 [npy]=npy [smp-config]=json [manifest]=json [train-data]=npy
                 [load-trace]=json [checkpoint]=json)
declare -A seeds=([onnx-proto]=onnx)
summary=()
for target in "${targets[@]}"; do
  dir=$cache/$target
  mkdir -p "$dir/corpus" "$dir/findings"
  rm -rf "$dir/seeds"
  /usr/bin/python3 "$root/fuzz/gather-seeds.py" "${seeds[$target]:-$target}" \
    "$dir/seeds" ${moe_compile:+--moe-compile "$moe_compile"} >/dev/null
  echo "fuzz.sh: $target: $runs runs$( [ "$time_limit" -gt 0 ] && echo " or $time_limit s"), corpus $dir/corpus"
  start=$(date +%s)
  # Fork mode with one job: a crash ends a child, not the run (with --workers
  # N, one process with N jobs).
  mode=() procs=$workers
  [ "$keep_going" = 1 ] && mode=(-fork="$workers" -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1) procs=1
  # No allocation stacks and a smaller quarantine in long runs: recording
  # the stacks was a quarter of an importer's time under ASan, and the two
  # together ran 30% more inputs (a finding's report with every stack comes
  # from running the target on its file). An input that takes 60 s is a hang: a
  # shorter bound stops a run on inputs that are only slow while the
  # machine is busy with other work (an importer's input takes at most a
  # second or two alone).
  # The torchscript target's time goes to libtorch's many small
  # allocations, each a cache miss on a chunk that came back from a 32 MB
  # quarantine; 2 MB (a use after free still caught within 2 MB of later
  # frees) ran 30% more inputs.
  # And libtorch's allocations for a broken archive, each under the bound
  # on one allocation, may pass 2 GB together for a moment (a run ended at
  # 157,414 inputs with 2.1 GB resident and 82 MB of live heap; that input
  # alone peaked at 0.56 GB): twice the resident bound, the same bound on
  # one allocation.
  quarantine=32 rss=2048
  [ "$target" = torchscript ] && quarantine=2 rss=4096
  # Worker w logs to fuzz.log (w = 1) or fuzz-w.log; the first takes the
  # remainder of the runs.
  logs=()
  for ((w = 1; w <= procs; w++)); do
    log=$dir/fuzz.log
    [ "$w" -gt 1 ] && log=$dir/fuzz-$w.log
    logs+=("$log")
    share=$(( runs / procs + (w == 1 ? runs % procs : 0) ))
    (cd "$dir" && ASAN_OPTIONS=${ASAN_OPTIONS:-malloc_context_size=0:quarantine_size_mb=$quarantine} \
        "$build/bin/moe-fuzz-$target" "$dir/corpus" "$dir/seeds" "${mode[@]}" \
        -runs="$share" -max_total_time="$time_limit" \
        -rss_limit_mb=$rss -malloc_limit_mb=2048 -timeout=60 -dict="$root/fuzz/dicts/${dict[$target]}.dict" \
        -artifact_prefix="$dir/findings/" >"$log" 2>&1) &
  done
  wait || true
  seconds=$(( $(date +%s) - start ))
  # Fork mode's progress lines, "#N: cov: C ft: F corp: K exec/s: E
  # oom/timeout/crash: O/T/X time: S job: J ...", lag a job behind; a plain
  # run's are "#N <event> cov: C ...". The executions and findings come
  # from the last, the coverage from one pass over the corpus as it is now.
  # A run that reached its count ends with "Done N runs in S second(s)";
  # otherwise its last progress line (which lags) is the count.
  execs=0 last=
  for log in "${logs[@]}"; do
    last=$(grep -E '^#[0-9]+:?[[:space:]]' "$log" | tail -n 1 || true)
    n=$(sed -nE 's/^Done ([0-9]+) runs.*/\1/p' "$log" | tail -n 1)
    [ -n "$n" ] || n=$(sed -E 's/^#([0-9]+).*/\1/' <<<"$last")
    execs=$(( execs + ${n:-0} ))
  done
  otc=$(sed -nE 's|.* oom/timeout/crash: ([0-9/]+) .*|\1|p' <<<"$last")
  if [ "$keep_going" = 0 ]; then
    otc=$(printf '%s/%s/%s' \
      "$(find "$dir/findings" -name 'oom-*' -newermt "@$start" | wc -l)" \
      "$(find "$dir/findings" -name 'timeout-*' -newermt "@$start" | wc -l)" \
      "$(find "$dir/findings" \( -name 'crash-*' -o -name 'leak-*' \) -newermt "@$start" | wc -l)")
  fi
  (cd "$dir" && "$build/bin/moe-fuzz-$target" "$dir/corpus" -runs=0 \
      -rss_limit_mb=2048 -timeout=10 >"$dir/coverage.log" 2>&1) || true
  inited=$(grep -E 'INITED|DONE' "$dir/coverage.log" | tail -n 1 || true)
  cov=$(sed -nE 's/.* cov: ([0-9]+) .*/\1/p' <<<"$inited")
  ft=$(sed -nE 's/.* ft: ([0-9]+) .*/\1/p' <<<"$inited")
  corp=$(sed -nE 's|.* corp: ([0-9]+)/.*|\1|p' <<<"$inited")
  found=$(find "$dir/findings" -type f -newermt "@$start" | wc -l)
  line=$(printf '%-12s %10s execs %6ss  cov %6s  ft %6s  corpus %5s  oom/timeout/crash %s  new files in findings/: %s' \
    "$target" "${execs:-?}" "$seconds" "${cov:-?}" "${ft:-?}" "${corp:-?}" "${otc:-?}" "$found")
  echo "$line"
  summary+=("$line")
done

echo
echo "fuzz.sh: summary (findings and logs under $cache/<target>/)"
printf '%s\n' "${summary[@]}"
