#!/usr/bin/env python3
"""A rank killed mid-run, then the job resumed from its last checkpoint.

    fault_resume.py --bin DIR --work DIR --plan ep=2

Trains Mixtral (Inputs/) under mpirun with a checkpoint every 20 steps and
kills rank 1 a second after the first checkpoint: the job must end,
non-zero, within a bound. It then resumes from the checkpoint for 20 more steps, and runs
the same number of steps uninterrupted: the 20 steps after the checkpoint
must be the same in both logs, byte for byte, and so must the final weights.
"""
import argparse
import filecmp
import json
import os
import subprocess
import sys
import time

from run_training import INPUTS, data_args, plan_args


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--plan", required=True)
    args = parser.parse_args()
    tool = lambda name: os.path.join(args.bin, name)
    flags, ranks, _ = plan_args(args.plan)
    step = os.path.join(args.work, "fault.step")
    subprocess.run([tool("moe-compile"), os.path.join(INPUTS, "mixtral.onnx"),
                    "--train", "--optimizer=adamw", "--loss=causal-lm", *flags,
                    "-o", step], check=True)
    ckpt = os.path.join(args.work, "fault.ckpt")
    train = [tool("moe-train"), step, *data_args("mixtral"), "--lr", "1e-3",
             "--threads", "1", "--checkpoint-dir", ckpt]
    killed = ["mpirun", "-np", str(ranks), "sh", "-c",
              'if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then '
              '(until [ -e %s/plan.json ]; do sleep 0.1; done; sleep 1; kill -KILL $$) & fi; '
              'exec "$@"' % ckpt, "sh", *train, "--steps", "100000000",
              "--checkpoint-every", "20"]
    start = time.monotonic()
    result = subprocess.run(killed, capture_output=True, text=True, timeout=300)
    seconds = time.monotonic() - start
    print(("ok" if result.returncode != 0 else "FAIL") +
          f" the job with a killed rank exits non-zero ({result.returncode})")
    print(("ok" if result.returncode != 0 and seconds < 60 else "FAIL") +
          " and ends within 60 s")
    # Each rank's part of the checkpoint records the step.
    with open(os.path.join(ckpt, "rank-0", "checkpoint.json")) as f:
        saved = json.load(f)["step"]
    print(("ok" if saved >= 20 else "FAIL") + " a checkpoint was written")
    total = str(saved + 20)
    launch = ["mpirun", "-np", str(ranks)]
    resumed, whole = (os.path.join(args.work, name) for name in ("resumed", "whole"))
    subprocess.run(launch + [*train, "--steps", total, "--resume", ckpt, "--log",
                             resumed + ".csv", "--output-dir", resumed + ".w"],
                   check=True, capture_output=True)
    subprocess.run(launch + [tool("moe-train"), step, *data_args("mixtral"),
                             "--lr", "1e-3", "--threads", "1", "--steps", total,
                             "--log", whole + ".csv", "--output-dir", whole + ".w"],
                   check=True, capture_output=True)
    # A resumed run appends to its log: no header.
    with open(resumed + ".csv") as f:
        after = f.read().splitlines()
    with open(whole + ".csv") as f:
        rows = f.read().splitlines()[1:]
    same = len(after) == 20 and after == rows[saved:]
    print(("ok" if same else "FAIL") +
          " the 20 steps resumed at the checkpoint equal the uninterrupted run's")
    names = sorted(os.listdir(whole + ".w"))
    same = names == sorted(os.listdir(resumed + ".w")) and all(
        filecmp.cmp(os.path.join(whole + ".w", n), os.path.join(resumed + ".w", n),
                    shallow=False) for n in names)
    print(("ok" if same else "FAIL") + " and so do the final weights, bit for bit")


if __name__ == "__main__":
    sys.exit(main())
