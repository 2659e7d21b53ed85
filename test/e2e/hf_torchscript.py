#!/usr/bin/python3
"""Compile traced and scripted Hugging Face MoE blocks (TorchScript archives
saved by torch 2.x, test/corpus/hf) with moe-compile, run them with moe-run
on one rank, and check the output against the PyTorch reference: max abs
error <= 1e-4 x max(1, max abs of the reference).

    hf_torchscript.py --bin BUILD/bin --corpus test/corpus/hf --work DIR FILE...

FILE is a corpus file name without .pt (mixtral.block.trace);
`FILE@NAME` names the archive's input NAME when it differs from the
reference's one input (GraniteMoE's forward takes `layer_input`). A file
given as `!FILE` must instead fail to compile or run, with an error (not a
wrong answer). Prints one line per file; exits 1 on any failure.
"""

import argparse
import glob
import os
import subprocess
import sys

import numpy as np

TOLERANCE = 1e-4


def run(cmd):
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=600)
    return proc.returncode, proc.stdout


def check(args, name, rename):
    stem = os.path.join(args.corpus, name)
    inputs = sorted(glob.glob(stem + ".in.*.npy"))
    if not inputs:
        return "no reference inputs"
    shapes, feeds = [], []
    for path in inputs:
        input_name = rename or path[len(stem + ".in."):-len(".npy")]
        dims = np.load(path).shape
        shapes += ["--input-shape", "%s=%s" % (input_name, "x".join(map(str, dims)))]
        feeds += ["--input", "%s=%s" % (input_name, path)]
    bundle = os.path.join(args.work, name)
    out_dir = bundle + ".out"
    code, log = run([os.path.join(args.bin, "moe-compile"), stem + ".pt", *shapes,
                     "-o", bundle])
    if code != 0:
        return "moe-compile: " + log.strip().splitlines()[-1] if log.strip() else "moe-compile failed"
    code, log = run([os.path.join(args.bin, "moe-run"), bundle, *feeds,
                     "--output-dir", out_dir])
    if code != 0:
        return "moe-run: " + (log.strip().splitlines()[-1] if log.strip() else "failed")
    problems = []
    for ref_path in sorted(glob.glob(stem + ".out.*.npy")):
        output = ref_path[len(stem + ".out."):-len(".npy")]
        got_path = os.path.join(out_dir, output + ".npy")
        if not os.path.exists(got_path):
            problems.append("no output " + output)
            continue
        ref, got = np.load(ref_path), np.load(got_path)
        if ref.shape != got.shape:
            problems.append("%s shape %s, want %s" % (output, got.shape, ref.shape))
            continue
        err = float(np.max(np.abs(got.astype(np.float64) - ref))) if ref.size else 0.0
        scale = max(1.0, float(np.max(np.abs(ref))) if ref.size else 0.0)
        if not err <= TOLERANCE * scale:
            problems.append("%s max abs error %.3g > %.3g" % (output, err, TOLERANCE * scale))
    return "; ".join(problems) or None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", required=True)
    parser.add_argument("--corpus", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("files", nargs="+")
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    failed = 0
    for spec in args.files:
        must_fail = spec.startswith("!")
        name, _, rename = spec.lstrip("!").partition("@")
        problem = check(args, name, rename)
        if must_fail:
            if problem and ("moe-compile:" in problem or "moe-run:" in problem):
                print("%s: ok (rejected: %s)" % (name, problem))
            else:
                failed += 1
                print("%s: FAIL (expected an error, got %s)" % (name, problem or "a result"))
        elif problem:
            failed += 1
            print("%s: FAIL %s" % (name, problem))
        else:
            print("%s: ok" % name)
    print("%d of %d files passed" % (len(args.files) - failed, len(args.files)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
