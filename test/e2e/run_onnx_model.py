#!/usr/bin/python3
"""Compile ONNX models of a corpus directory with moe-compile, run each on
one rank with moe-run and compare every output that has a reference
(<model>.out.<name>.npy) with max |out - ref| <= 1e-4 * max(1, max |ref|).
Unlike run_corpus.py it asks nothing of the MoE layers, so it also checks
models whose MoE blocks stay onnx ops, lowered as they are.

    run_onnx_model.py --bin BUILD/bin --corpus DIR --work DIR MODEL...

Prints PASS or FAIL per model and a summary; exits 1 on any failure.
"""

import argparse
import glob
import os
import subprocess
import sys

import numpy as np


def check(args, model):
    onnx_file = os.path.join(args.corpus, model + ".onnx")
    bundle = os.path.join(args.work, model)
    out_dir = bundle + ".out"
    compiled = subprocess.run([os.path.join(args.bin, "moe-compile"), onnx_file, "-o", bundle],
                              capture_output=True, text=True)
    if compiled.returncode:
        return "moe-compile failed: " + compiled.stderr.strip().splitlines()[0]
    cmd = [os.path.join(args.bin, "moe-run"), bundle, "--output-dir", out_dir]
    for path in sorted(glob.glob(os.path.join(args.corpus, model + ".in.*.npy"))):
        name = path[len(os.path.join(args.corpus, model + ".in.")):-len(".npy")]
        cmd += ["--input", "%s=%s" % (name, path)]
    ran = subprocess.run(cmd, capture_output=True, text=True)
    if ran.returncode:
        return "moe-run failed: " + (ran.stderr.strip().splitlines() or ["?"])[-1]
    notes = []
    references = sorted(glob.glob(os.path.join(args.corpus, model + ".out.*.npy")))
    if not references:
        return "no reference outputs"
    for path in references:
        name = path[len(os.path.join(args.corpus, model + ".out.")):-len(".npy")]
        ref = np.load(path)
        got = np.load(os.path.join(out_dir, name + ".npy"))
        if got.shape != ref.shape:
            return "%s has shape %s, expected %s" % (name, got.shape, ref.shape)
        err = float(np.abs(got.astype(np.float64) - ref).max())
        scale = float(np.abs(ref).max())
        if not err <= 1e-4 * max(1.0, scale):
            return "%s err %.2e (scale %.2f)" % (name, err, scale)
        notes.append("%s err %.2e (scale %.2f)" % (name, err, scale))
    return None, ", ".join(notes)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", required=True)
    parser.add_argument("--corpus", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("models", nargs="+")
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    passed = 0
    for model in args.models:
        result = check(args, model)
        if isinstance(result, tuple):
            passed += 1
            print("PASS %s: %s" % (model, result[1]))
        else:
            print("FAIL %s: %s" % (model, result))
    print("%d of %d models passed" % (passed, len(args.models)))
    return 0 if passed == len(args.models) else 1


if __name__ == "__main__":
    sys.exit(main())
