#!/usr/bin/python3
"""Gathers the seed inputs of one fuzz target into a directory.

    gather-seeds.py TARGET OUT [--max-bytes N] [--moe-compile PATH]

Seeds come from the test corpus and tests (nothing large is committed for
the fuzzers) and from fuzz/seeds/TARGET, small hand-written ones:

  onnx, onnx-proto  test/corpus/*.onnx and test/corpus/hf/*.onnx
  torchscript       test/corpus/**/*.pt, each with the --input-shape its
                    tests give it as a first line (see torchscript-import.cpp)
  mlir              test/**/*.mlir, split at "// -----"
  npy, train-data   test/corpus/**/*.npy
  load-trace        test/**/Inputs/*.json that are expert-load stats
  checkpoint        only fuzz/seeds/checkpoint (the layout is checkpoint.cpp's)
  smp-config        test/**/Inputs/*.json that are SageMaker configs
  manifest          model.json of bundles that --moe-compile compiles from
                    corpus models (where that tool exists)

Files over --max-bytes (default 256 KiB) are left out. Prints how many
seeds it wrote.
"""

import argparse
import collections
import glob
import hashlib
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGETS = ["onnx", "onnx-proto", "torchscript", "mlir", "npy", "smp-config",
           "manifest", "train-data", "load-trace", "checkpoint"]


def corpus(pattern):
    return sorted(glob.glob(os.path.join(ROOT, "test", pattern),
                            recursive=True))


def torchscript_shapes():
    """The --input-shape values that the tests give each .pt of the corpus."""
    counts = collections.defaultdict(collections.Counter)
    run = re.compile(r"--import-torchscript +%corpus/(\S+\.pt)((?: +--input-shape[ =]\S+)+)")
    for test in corpus("**/*.mlir") + corpus("**/*.test"):
        with open(test, errors="replace") as f:
            for match in run.finditer(f.read()):
                specs = re.findall(r"--input-shape[ =](\S+)", match.group(2))
                counts[match.group(1)][",".join(specs)] += 1
    # The most common: some tests give a wrong shape on purpose.
    return {pt: c.most_common(1)[0][0] for pt, c in counts.items()}


def seeds(target, moe_compile):
    """(name, bytes) of each seed."""
    if target in ("onnx", "onnx-proto"):
        for path in corpus("corpus/*.onnx") + corpus("corpus/hf/*.onnx"):
            yield os.path.basename(path), open(path, "rb").read()
    elif target == "torchscript":
        shapes = torchscript_shapes()
        for path in corpus("corpus/**/*.pt"):
            rel = os.path.relpath(path, os.path.join(ROOT, "test", "corpus"))
            spec = shapes.get(rel, "hidden_states=2x8x16")
            yield (os.path.basename(path),
                   spec.encode() + b"\n" + open(path, "rb").read())
    elif target == "mlir":
        for path in corpus("**/*.mlir"):
            text = open(path, "rb").read()
            for i, chunk in enumerate(re.split(rb"\n// -----[^\n]*\n", text)):
                # Chunks with nothing but comments teach the fuzzer nothing.
                code = [l for l in chunk.splitlines()
                        if l.strip() and not l.lstrip().startswith(b"//")]
                if code:
                    yield "%s.%d.mlir" % (os.path.basename(path), i), chunk
    elif target in ("npy", "train-data"):
        for path in corpus("corpus/**/*.npy"):
            yield os.path.basename(path), open(path, "rb").read()
    elif target == "load-trace":
        for path in corpus("**/Inputs/*.json"):
            data = open(path, "rb").read()
            if b"moe_expert_load" in data:
                yield os.path.basename(path), data
    elif target == "smp-config":
        for path in corpus("**/Inputs/*.json"):
            data = open(path, "rb").read()
            if b"parallel" in data or b"smdistributed" in data or b"moe_" in data:
                yield os.path.basename(path), data
    elif target == "manifest" and moe_compile and os.path.exists(moe_compile):
        with tempfile.TemporaryDirectory() as tmp:
            for model, options in [
                    ("mixtral.onnx", []), ("mixtral.onnx", ["--ep=2"]),
                    ("ort_moe.onnx", ["--tp=2"]),
                    ("mixtral_bf16.onnx", ["--dp=2", "--ep=2"])]:
                out = os.path.join(tmp, "b%d" % len(os.listdir(tmp)))
                result = subprocess.run(
                    [moe_compile, os.path.join(ROOT, "test", "corpus", model),
                     "--emit=lib", "-o", out] + options,
                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                if result.returncode == 0:
                    yield ("%s%s.json" % (model, "".join(options)),
                           open(os.path.join(out, "model.json"), "rb").read())
                else:
                    sys.stderr.write("gather-seeds: moe-compile %s failed: %s\n"
                                     % (model, result.stderr.decode()[-500:]))
    # train-data reads .npy files as the npy target does.
    own = "npy" if target == "train-data" else target
    for path in sorted(glob.glob(os.path.join(ROOT, "fuzz", "seeds", own, "*"))):
        yield "seed-" + os.path.basename(path), open(path, "rb").read()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("target", choices=TARGETS)
    parser.add_argument("out")
    parser.add_argument("--max-bytes", type=int, default=256 * 1024)
    parser.add_argument("--moe-compile")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    written, seen = 0, set()
    for name, data in seeds(args.target, args.moe_compile):
        digest = hashlib.sha1(data).hexdigest()
        if len(data) > args.max_bytes or digest in seen:
            continue
        seen.add(digest)
        with open(os.path.join(args.out, name), "wb") as f:
            f.write(data)
        written += 1
    print("gather-seeds: %d %s seeds in %s" % (written, args.target, args.out))


if __name__ == "__main__":
    main()
