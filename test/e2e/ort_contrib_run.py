#!/usr/bin/python3
"""Compile each tiny ONNX Runtime contrib-op graph (made by
test/lib/Import/Onnx/Inputs/make_ort_contrib.py) with moe-compile, run it
with moe-run on one rank, and compare every output with ONNX Runtime's CPU
output: max abs error <= 1e-4 x max(1, max abs reference).

    ort_contrib_run.py --bin BUILD/bin --inputs DIR --work DIR CASE...

Prints one line per case; exits 1 on any failure.
"""

import argparse
import glob
import os
import subprocess
import sys

import numpy as np


def check(args, case):
    base = os.path.join(args.inputs, "ort_contrib_" + case)
    bundle = os.path.join(args.work, case)
    inputs = sorted(glob.glob(base + ".in.*.npy"))
    names = [os.path.basename(p)[len("ort_contrib_" + case + ".in."):-4] for p in inputs]
    cmd = [os.path.join(args.bin, "moe-compile"), base + ".onnx", "-o", bundle]
    for name, path in zip(names, inputs):
        cmd += ["--input-shape", "%s=%s" % (name, "x".join(map(str, np.load(path).shape)))]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode:
        return "moe-compile: " + done.stderr.strip()
    out_dir = bundle + ".out"
    cmd = [os.path.join(args.bin, "moe-run"), bundle, "--output-dir", out_dir]
    for name, path in zip(names, inputs):
        cmd += ["--input", "%s=%s" % (name, path)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode:
        return "moe-run: " + done.stderr.strip()
    worst = []
    for ref_path in sorted(glob.glob(base + ".out.*.npy")):
        name = os.path.basename(ref_path)[len("ort_contrib_" + case + ".out."):-4]
        ref = np.load(ref_path)
        out_path = os.path.join(out_dir, name + ".npy")
        if not os.path.exists(out_path):
            return "no output %s" % name
        got = np.load(out_path)
        if got.shape != ref.shape:
            return "%s: shape %s, expected %s" % (name, got.shape, ref.shape)
        err = float(np.abs(got.astype(np.float64) - ref).max()) if ref.size else 0.0
        if err > 1e-4 * max(1.0, float(np.abs(ref).max())):
            return "%s: max abs error %g" % (name, err)
        worst.append("%s %.1e" % (name, err))
    return None if worst else "no reference outputs", worst


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", required=True)
    parser.add_argument("--inputs", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("cases", nargs="+")
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    failed = 0
    for case in args.cases:
        result = check(args, case)
        if isinstance(result, tuple) and result[0] is None:
            print("PASS %s: %s" % (case, ", ".join(result[1])))
        else:
            failed += 1
            print("FAIL %s: %s" % (case, result[0] if isinstance(result, tuple) else result))
    print("ort_contrib: %d of %d cases passed" % (len(args.cases) - failed, len(args.cases)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
