#!/usr/bin/env python3
"""Whether two moe-train logs have the same loss, aux loss, gradient norm
and lr at every step, within a relative tolerance.

    curves_equal.py A.csv B.csv [--rtol 1e-5] [--weights DIR_A DIR_B]
                    [--columns loss,aux_loss,grad_norm,lr]

With --weights, also every parameter of DIR_A (moe-train --output-dir)
against DIR_B's. --rtol 0 asks for the same bits: the logs' printed values
and the weights' bytes.
"""
import argparse
import csv
import sys


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("a")
    parser.add_argument("b")
    parser.add_argument("--rtol", type=float, default=1e-5)
    parser.add_argument("--weights", nargs=2)
    parser.add_argument("--columns", default="loss,aux_loss,grad_norm,lr")
    args = parser.parse_args()
    exact = args.rtol == 0
    a, b = (list(csv.DictReader(open(path))) for path in (args.a, args.b))
    if len(a) != len(b) or not a:
        print(f"FAIL {len(a)} and {len(b)} steps")
        return 1
    for column in args.columns.split(","):
        if exact:
            worst = sum(x[column] != y[column] for x, y in zip(a, b))
        else:
            worst = max(abs(float(x[column]) - float(y[column])) / max(abs(float(y[column])), 1e-30)
                        for x, y in zip(a, b))
        print(("ok" if worst <= args.rtol else "FAIL") +
              f" {column}: {len(a)} steps within rtol {args.rtol:g}" +
              ("" if worst <= args.rtol else
               f" ({worst} steps differ)" if exact else f" (worst {worst:.2e})"))
    if args.weights:
        import os
        import numpy as np
        first, second = args.weights
        names = sorted(os.listdir(first))
        def same(x, y):
            if exact:
                return x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()
            return np.allclose(x, y, rtol=args.rtol, atol=1e-7)
        bad = [n for n in names
               if not os.path.exists(os.path.join(second, n)) or not same(
                   np.load(os.path.join(first, n)), np.load(os.path.join(second, n)))]
        print(("ok" if names and not bad else "FAIL") +
              f" final weights: {len(names) - len(bad)} of {len(names)} within rtol {args.rtol:g}" +
              (f" ({', '.join(bad[:3])} differ)" if bad else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
