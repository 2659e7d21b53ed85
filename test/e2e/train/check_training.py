#!/usr/bin/env python3
"""Compares a moe-train run with the PyTorch reference of Inputs/.

    check_training.py MODEL OPT LOG.csv [WEIGHTS_DIR] [--rtol R]

MODEL.OPT.curve.npz holds PyTorch's per-step loss, aux loss (coefficient
included), gradient norm before clipping and lr; MODEL.OPT.final.npz the
parameters after the last step, by ONNX initializer name. The run must give
the same curve (rtol 1e-5 in fp32, moe-training.md 10.3) and, where
WEIGHTS_DIR is given, the same final weights: SGD to rtol 1e-5 atol 1e-6;
AdamW elementwise to atol 2 lr per step whose update noise could flip
(moe-training.md 10.4, pitfall 6), checked as a relative Frobenius error.
Prints one line per check; exits 1 on the first failure. `--rtol` loosens
the curve's tolerance (a GPU's GEMMs sum in another order).
"""
import csv
import os
import sys

import numpy as np

INPUTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "Inputs")


def fail(message):
    print("FAIL " + message)
    sys.exit(1)


def tie_diagnosis(ref, step):
    """Why a curve may part at `step` (moe-training.md 10.4, pitfall 1):
    a router whose k-th and (k+1)-th probabilities were within 1e-6 of each
    other at or before that step may have chosen another expert on a
    last-ulp difference, which is not a numerics failure."""
    gaps = [(key, float(np.min(ref[key][:step + 1]))) for key in ref.files
            if key == "gap" or key.startswith("gap.")]
    ties = [f"{key} {gap:.2e}" for key, gap in gaps if gap < 1e-6]
    if ties:
        return " (a routing tie, not numerics: k-th/(k+1)-th gap " + \
            ", ".join(ties) + ")"
    if gaps:
        return f" (no routing tie: smallest gap {min(g for _, g in gaps):.2e})"
    return ""


def main():
    args = sys.argv[1:]
    rtol = 1e-5
    if "--rtol" in args:
        at = args.index("--rtol")
        rtol = float(args[at + 1])
        del args[at:at + 2]
    model, opt, log = args[:3]
    weights = args[3] if len(args) > 3 else None
    ref = np.load(os.path.join(INPUTS, f"{model}.{opt}.curve.npz"))
    rows = list(csv.DictReader(open(log)))
    if len(rows) != len(ref["loss"]):
        fail(f"{log} has {len(rows)} steps, the reference {len(ref['loss'])}")
    for column, key in [("loss", "loss"), ("aux_loss", "aux"),
                        ("grad_norm", "grad_norm"), ("lr", "lr")]:
        if key not in ref.files:
            continue
        ours = np.array([float(r[column]) for r in rows])
        theirs = np.asarray(ref[key], dtype=np.float64)
        if not np.allclose(ours, theirs, rtol=rtol, atol=1e-7):
            step = int(np.argmax(~np.isclose(ours, theirs, rtol=rtol, atol=1e-7)))
            fail(f"{model} {opt} {column}: step {step + 1} gives {ours[step]!r}, "
                 f"PyTorch {theirs[step]!r}" + tie_diagnosis(ref, step))
        print(f"ok {model} {opt} {column}: {len(rows)} steps within rtol {rtol:g}")
    if not weights:
        return
    final = np.load(os.path.join(INPUTS, f"{model}.{opt}.final.npz"))
    checked = 0
    for name in final.files:
        path = os.path.join(weights, name + ".npy")
        if not os.path.exists(path):
            continue
        ours, theirs = np.load(path), final[name]
        if opt == "sgd":
            good = np.allclose(ours, theirs, rtol=1e-5, atol=1e-6)
            error = np.max(np.abs(ours - theirs))
        else:
            error = np.linalg.norm(ours - theirs) / max(np.linalg.norm(theirs), 1e-30)
            good = error <= 1e-5
        if not good:
            fail(f"{model} {opt} final '{name}': error {error:.3e}")
        checked += 1
    print(f"ok {model} {opt} final weights: {checked} of {len(final.files)} "
          f"parameters compared")


if __name__ == "__main__":
    main()
