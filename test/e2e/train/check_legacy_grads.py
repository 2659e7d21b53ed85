#!/usr/bin/env python3
"""The gradients of one training step of the legacy exporter's MoE blocks
(test/corpus/hf/<family>.block.legacy.onnx) against PyTorch's.

    check_legacy_grads.py --bin DIR --work DIR [--ep N] FAMILY...

The exporter folds nn.Linear weights into unnamed initializers, which the
block trains only where they are named parameters (--params '.*'); the
step is compiled under the mean squared error (SGD), run once by moe-run
(under mpirun with --ep) on the committed input and
Inputs/legacy/<family>.target.npy, and every gradient must be
Inputs/legacy/<family>.grads.npz's (make_legacy_grads.py) within rtol 1e-4,
atol 1e-6 (with --ep, rank 0 writes its experts' slice of the experts'
gradients). One line per family: `ok <family>: N gradients` or FAIL lines.
"""
import argparse
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
INPUTS = os.path.join(HERE, "Inputs", "legacy")
CORPUS = os.path.join(HERE, "..", "..", "corpus", "hf")
RTOL, ATOL = 1e-4, 1e-6


def run(command):
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode == 0:
        return None
    lines = (result.stderr or result.stdout).strip().splitlines()
    return "\n  ".join(lines[-4:]) or "exit status %d" % result.returncode


def check(family, tool, work, ep):
    block = os.path.join(CORPUS, family + ".block.legacy")
    step = os.path.join(work, "%s.ep%d.step" % (family, ep))
    out = os.path.join(work, "%s.ep%d.out" % (family, ep))
    compile_cmd = [tool("moe-compile"), block + ".onnx", "--train", "--loss=mse",
                   "--optimizer=sgd", "--params", ".*", "-o", step]
    if ep > 1:
        compile_cmd += ["--ep", str(ep)]
    error = run(compile_cmd)
    if error:
        return ["FAIL %s moe-compile: %s" % (family, error)]
    run_cmd = [tool("moe-run"), step, "--input", "hidden_states=" + block + ".in.hidden_states.npy",
               "--input", "target=" + os.path.join(INPUTS, family + ".target.npy"), "--output-dir", out]
    if ep > 1:
        run_cmd = ["mpirun", "-np", str(ep)] + run_cmd
    error = run(run_cmd)
    if error:
        return ["FAIL %s moe-run: %s" % (family, error)]
    failures = []
    with np.load(os.path.join(INPUTS, family + ".grads.npz")) as reference:
        for name in sorted(reference.files):
            path = os.path.join(out, "grad_" + name.replace(":", "_") + ".npy")
            if not os.path.exists(path):
                failures.append("FAIL %s %s: no gradient" % (family, name))
                continue
            got, want = np.load(path), reference[name]
            # Rank 0 writes its own experts' slice of an expert weight's.
            if ep > 1 and got.shape[1:] == want.shape[1:] and got.shape[0] * ep == want.shape[0]:
                want = want[:got.shape[0]]
            if got.shape != want.shape or not np.allclose(got, want, rtol=RTOL, atol=ATOL):
                err = np.max(np.abs(got - want)) if got.shape == want.shape else float("nan")
                failures.append("FAIL %s %s: max |diff| %.3g (shape %s, want %s)"
                                % (family, name, err, got.shape, want.shape))
        count = len(reference.files)
    return failures or ["ok %s: %d gradients" % (family, count)]


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bin", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--ep", type=int, default=1)
    parser.add_argument("families", nargs="+")
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    env_root = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    os.environ.update({k: v for k, v in env_root.items() if os.geteuid() == 0})
    failed = False
    for family in args.families:
        for line in check(family, lambda t: os.path.join(args.bin, t), args.work, args.ep):
            print(line, flush=True)
            failed |= line.startswith("FAIL")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
