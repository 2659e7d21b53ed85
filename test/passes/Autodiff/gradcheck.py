#!/usr/bin/python3
"""Checks each VJP rule of moe-autodiff on its own against PyTorch's autograd.

    gradcheck.py --bin DIR --work DIR [CASE...]

For each case of Inputs/make_gradcheck.py (all by default): compiles
Inputs/<case>.onnx into its training step under the mean squared error
(moe-compile --train --loss=mse), runs the step once on the case's input
and target (moe-run), and compares every gradient it returns with
torch's (Inputs/<case>.grads.npz) within rtol 1e-4, atol 1e-6. Prints
`ok <case>: N gradients` or one `FAIL <case> ...` line per problem: a tool
that fails, a gradient missing or extra, or one that differs.
"""
import argparse
import concurrent.futures
import glob
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
INPUTS = os.path.join(HERE, "Inputs")
RTOL, ATOL = 1e-4, 1e-6


def run(command):
    """The tool's error output, or None when it succeeded."""
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode == 0:
        return None
    lines = (result.stderr or result.stdout).strip().splitlines()
    return "\n  ".join(lines[-6:]) or f"exit status {result.returncode}"


def check(case, tool, work):
    step = os.path.join(work, case + ".step")
    out = os.path.join(work, case + ".out")
    onnx = os.path.join(INPUTS, case + ".onnx")
    error = run([tool("moe-compile"), onnx, "--train", "--loss=mse",
                 "--optimizer=sgd", "-o", step])
    if error:
        return [f"FAIL {case} moe-compile: {error}"]
    error = run([tool("moe-run"), step,
                 "--input", "x=" + os.path.join(INPUTS, case + ".x.npy"),
                 "--input", "target=" + os.path.join(INPUTS, case + ".target.npy"),
                 "--output-dir", out])
    if error:
        return [f"FAIL {case} moe-run: {error}"]

    failures = []
    with np.load(os.path.join(INPUTS, case + ".grads.npz")) as reference:
        expected = {name: reference[name] for name in reference.files}
    returned = {os.path.basename(path)[len("grad_"):-len(".npy")]
                for path in glob.glob(os.path.join(out, "grad_*.npy"))}
    for name in sorted(returned - set(expected)):
        failures.append(f"FAIL {case} {name}: a gradient torch does not have")
    for name, want in sorted(expected.items()):
        path = os.path.join(out, "grad_" + name + ".npy")
        if not os.path.exists(path):
            failures.append(f"FAIL {case} {name}: no gradient returned")
            continue
        got = np.load(path)
        if got.shape != want.shape or got.dtype != want.dtype:
            failures.append(f"FAIL {case} {name}: {got.dtype}{list(got.shape)}"
                            f", expected {want.dtype}{list(want.shape)}")
            continue
        if not np.allclose(got, want, rtol=RTOL, atol=ATOL):
            err = np.abs(got.astype(np.float64) - want)
            worst = np.unravel_index(np.argmax(err - RTOL * np.abs(want)),
                                     want.shape)
            failures.append(
                f"FAIL {case} {name}: max abs error {err.max():.3g}; at "
                f"{tuple(int(i) for i in worst)} got {got[worst]:.7g}, "
                f"expected {want[worst]:.7g}\n  got {got.ravel()[:8]}\n"
                f"  expected {want.ravel()[:8]}")
    n = len(expected)
    return failures or [f"ok {case}: {n} gradient{'' if n == 1 else 's'}"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("cases", nargs="*")
    args = parser.parse_args()
    tool = lambda name: os.path.join(args.bin, name)
    cases = args.cases or sorted(
        os.path.basename(p)[:-len(".onnx")]
        for p in glob.glob(os.path.join(INPUTS, "*.onnx")))
    os.makedirs(args.work, exist_ok=True)
    failed = False
    # The cases compile and run side by side; their lines come in order.
    workers = min(4, os.cpu_count() or 1)
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        results = pool.map(lambda case: check(case, tool, args.work), cases)
        for lines in results:
            for line in lines:
                failed |= line.startswith("FAIL")
                print(line)
            sys.stdout.flush()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
