#!/usr/bin/python3
"""Feed moe-translate seeded mutations of corpus files (bytes overwritten,
the file cut short, a span scrambled) and check that every one ends in a
clean exit: 0, or non-zero with a message. A signal, a silent failure or a
hang fails the run.

    mutate_corpus.py --bin BUILD/bin [--count N] FILE[@INPUT=SHAPE] ...

`.pt` files import as TorchScript with the `--input-shape` given after @.
Prints one line per failure and "N mutations, N failures" last.
"""

import argparse
import os
import random
import subprocess
import sys
import tempfile


def mutate(data, rng, kind):
    b = bytearray(data)
    if kind == 0:
        for _ in range(rng.randint(1, 8)):
            b[rng.randrange(len(b))] = rng.randrange(256)
    elif kind == 1:
        b = b[: rng.randrange(len(b))]
    else:
        i = rng.randrange(len(b))
        j = min(len(b), i + rng.randint(1, 64))
        b[i:j] = bytes(rng.randrange(256) for _ in range(j - i))
    return bytes(b)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", required=True)
    parser.add_argument("--count", type=int, default=8,
                        help="mutations per file")
    parser.add_argument("--timeout", type=float, default=60)
    parser.add_argument("files", nargs="+")
    args = parser.parse_args()
    tool = os.path.join(args.bin, "moe-translate")
    runs = failures = 0
    with tempfile.TemporaryDirectory() as work:
        for spec in args.files:
            path, _, shape = spec.partition("@")
            data = open(path, "rb").read()
            ext = os.path.splitext(path)[1]
            command = ["--import-torchscript"] if ext == ".pt" else ["--import-onnx"]
            if shape:
                command += ["--input-shape", shape]
            for seed in range(args.count):
                rng = random.Random("%s:%d" % (os.path.basename(path), seed))
                mutated = os.path.join(work, "mutated" + ext)
                with open(mutated, "wb") as f:
                    f.write(mutate(data, rng, seed % 3))
                runs += 1
                try:
                    r = subprocess.run([tool, mutated, "-o", os.devnull] + command,
                                       capture_output=True, timeout=args.timeout)
                except subprocess.TimeoutExpired:
                    failures += 1
                    print("HANG %s seed %d" % (spec, seed))
                    continue
                if r.returncode < 0 or (r.returncode != 0 and not r.stderr.strip()):
                    failures += 1
                    print("FAIL %s seed %d: exit %d: %s" % (
                        spec, seed, r.returncode, r.stderr.decode(errors="replace")[-300:]))
    print("%d mutations, %d failures" % (runs, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
