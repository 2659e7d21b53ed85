#!/usr/bin/env python3
"""Whether two moe-train logs have the same loss, aux loss, gradient norm
and lr at every step, within a relative tolerance.

    curves_equal.py A.csv B.csv [--rtol 1e-5]
"""
import argparse
import csv
import sys


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("a")
    parser.add_argument("b")
    parser.add_argument("--rtol", type=float, default=1e-5)
    args = parser.parse_args()
    a, b = (list(csv.DictReader(open(path))) for path in (args.a, args.b))
    if len(a) != len(b) or not a:
        print(f"FAIL {len(a)} and {len(b)} steps")
        return 1
    for column in ("loss", "aux_loss", "grad_norm", "lr"):
        worst = max(abs(float(x[column]) - float(y[column])) / max(abs(float(y[column])), 1e-30)
                    for x, y in zip(a, b))
        print(("ok" if worst <= args.rtol else "FAIL") +
              f" {column}: {len(a)} steps within rtol {args.rtol:g}" +
              ("" if worst <= args.rtol else f" (worst {worst:.2e})"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
