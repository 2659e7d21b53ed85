#!/bin/bash
# On a GPU machine: runs COMMAND and, if it is still running after WAIT_S
# seconds, prints where it is (the host threads' stacks and the kernels on
# the GPU, through cuda-gdb, which also debugs host code), whether the host
# spins (its CPU time) and how busy the GPU is, then kills it. For a run
# that hangs on the GPU, where there is no gdb.
#
#   ./scripts/gpu-stacks.sh WAIT_S COMMAND [ARGS...]
set -uo pipefail
wait_s=$1
shift
"$@" &
pid=$!
for _ in $(seq "$wait_s"); do
  sleep 1
  kill -0 "$pid" 2>/dev/null || { wait "$pid"; echo "gpu-stacks: ended by itself, exit $?"; exit 0; }
done
echo "gpu-stacks: still running after $wait_s s; pid $pid"
# The program may be a wrapper's exec'd child: the pid is the program's.
ps -o pid,stat,time,wchan:32,cmd -p "$pid" -L | head -20
nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv
gdb=$(command -v cuda-gdb || ls /usr/local/cuda*/bin/cuda-gdb 2>/dev/null | head -1)
if [ -n "$gdb" ]; then
  timeout -k 5 90 "$gdb" -q -batch -p "$pid" -ex "info cuda kernels" \
    -ex "thread apply all bt 25" 2>&1 | grep -v '^\[New Thread\|^warning: ' | head -150
else
  echo "gpu-stacks: no cuda-gdb; /proc/$pid/task/*/stack:"
  cat /proc/"$pid"/task/*/stack 2>/dev/null | head -60
fi
kill -9 "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
exit 1
