#!/usr/bin/python3
"""Compare the .npy outputs of two moe-run --output-dir directories: every
file of the first must be in the second with the same shape and
max |a - b| <= rtol * max(1, max |b|).

    compare_outputs.py DIR_A DIR_B [--rtol R]

Prints each output's difference and "N of M outputs agree"; exits 1 on any
difference over the bound or a missing output.
"""
import argparse
import os
import sys

import numpy as np


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("a")
    parser.add_argument("b")
    parser.add_argument("--rtol", type=float, default=1e-5)
    args = parser.parse_args()
    names = sorted(n for n in os.listdir(args.a) if n.endswith(".npy"))
    agree = 0
    for name in names:
        other = os.path.join(args.b, name)
        if not os.path.exists(other):
            print("%s: missing from %s" % (name, args.b))
            continue
        a, b = np.load(os.path.join(args.a, name)), np.load(other)
        if a.shape != b.shape:
            print("%s: shape %s against %s" % (name, a.shape, b.shape))
            continue
        diff = float(np.max(np.abs(a.astype(np.float64) - b))) if a.size else 0.0
        bound = args.rtol * max(1.0, float(np.max(np.abs(b))) if b.size else 0.0)
        ok = diff <= bound
        agree += ok
        print("%s: max |a - b| %.3g (bound %.3g)%s" % (name, diff, bound, "" if ok else "  DIFFERENT"))
    print("%d of %d outputs agree" % (agree, len(names)))
    return 0 if names and agree == len(names) else 1


if __name__ == "__main__":
    sys.exit(main())
