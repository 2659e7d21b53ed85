#!/usr/bin/python3
"""Feeds every tool its classes of bad input and checks each refusal.

    probe_bad_input.py --bin BUILD/bin --work DIR [--only SUBSTRING]

The classes: an empty file, a truncated one, /dev/zero, sizes past every
bound, NaN and Inf in data, wrong dtypes and shapes, out-of-range ids,
deep nesting (MLIR, JSON) and a corrupted checkpoint, against moe-translate,
moe-opt, moe-compile, moe-run, moe-train and moe-plan. A case passes when
the tool exits with status 1 to 127 (not a signal) within its time limit,
prints at least one line with "error" (or LLVM's "for the --X option"
refusal of a malformed option value), and none of the marks of a crash
(an assertion, "LLVM ERROR", a stack dump, an uncaught exception, a
sanitizer report). Prints `ok <case>` or `FAIL <case>: why` per case and a
summary; exits 1 on any failure.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(ROOT, "test", "corpus")
TRAIN = os.path.join(ROOT, "test", "e2e", "train", "Inputs")
CRASH_MARKS = ["PLEASE submit a bug report", "Stack dump", "Assertion",
               "LLVM ERROR", "terminate called", "Segmentation fault",
               "AddressSanitizer", "UndefinedBehaviorSanitizer", "core dumped"]
TIMEOUT_S = 120


class Probe:
    def __init__(self, args):
        self.bin, self.work, self.only = args.bin, args.work, args.only
        self.failures, self.count = [], 0
        self.env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1",
                        OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")

    def tool(self, name):
        return os.path.join(self.bin, name)

    def path(self, name):
        return os.path.join(self.work, name)

    def write(self, name, data):
        with open(self.path(name), "wb" if isinstance(data, bytes) else "w") as f:
            f.write(data)
        return self.path(name)

    def refuses(self, case, argv):
        """`argv` must end in one clear refusal."""
        if self.only and self.only not in case:
            return
        self.count += 1
        try:
            result = subprocess.run(argv, capture_output=True, text=True,
                                    errors="replace", timeout=TIMEOUT_S, env=self.env)
        except subprocess.TimeoutExpired:
            return self.fail(case, "no answer within %d s (a hang)" % TIMEOUT_S)
        out = result.stdout + result.stderr
        if result.returncode == 0:
            return self.fail(case, "exit 0 (accepted)")
        if result.returncode < 0 or result.returncode >= 128:
            return self.fail(case, "killed by a signal (status %d): %s"
                             % (result.returncode, out.strip()[-300:]))
        marks = [m for m in CRASH_MARKS if m in out]
        if marks:
            return self.fail(case, "crash marks %s: %s" % (marks, out.strip()[-300:]))
        # LLVM's option parser words its refusals "for the --X option: ...".
        lines = [l for l in out.splitlines()
                 if "error" in l.lower() or re.search(r"for the -+[\w-]+ option", l)]
        if not lines:
            return self.fail(case, "no error message: %s" % out.strip()[-300:])
        first = lines[0]
        print("ok %s: %s" % (case, first.strip()[:160]))

    def fail(self, case, why):
        self.failures.append(case)
        print("FAIL %s: %s" % (case, why))

    def compile(self, name, argv):
        """A bundle the runtime cases need; None (and a failure) if it does
        not compile."""
        out = self.path(name)
        result = subprocess.run([self.tool("moe-compile")] + argv + ["-o", out],
                                capture_output=True, text=True)
        if result.returncode != 0:
            self.fail("setup " + name, result.stderr.strip()[-300:])
            return None
        return out


def probe_files(p):
    """The classes of bad files, for the tools that read models and IR."""
    model = open(os.path.join(CORPUS, "mixtral.onnx"), "rb").read()
    pt = open(os.path.join(CORPUS, "mixtral.pt"), "rb").read()
    empty = p.write("empty.onnx", b"")
    half = p.write("half.onnx", model[:len(model) // 2])
    half_pt = p.write("half.pt", pt[:len(pt) // 2])
    noise = p.write("noise.onnx", bytes((i * 7919) % 251 for i in range(4096)))
    deep_mlir = p.write("deep.mlir", "func.func @f() {\n" + "scf.execute_region {\n" * 5000
                        + "scf.yield\n}\n" * 5000 + "return\n}\n")
    half_mlir = p.write("half.mlir", "func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
                        "  %y = onnx.Relu %x : (tensor<4xf32>) -> ten")
    translate = p.tool("moe-translate")
    for case, f in [("empty", empty), ("truncated", half), ("noise", noise),
                    ("device", "/dev/zero"), ("directory", p.work)]:
        p.refuses("moe-translate onnx " + case, [translate, "--import-onnx", f])
        p.refuses("moe-compile onnx " + case, [p.tool("moe-compile"), f if f != "/dev/zero"
                                               else f, "-o", p.path("bundle.x")])
    p.refuses("moe-translate torchscript truncated",
              [translate, "--import-torchscript", half_pt, "--input-shape", "hidden_states=2x4x16"])
    p.refuses("moe-opt nesting", [p.tool("moe-opt"), deep_mlir])
    p.refuses("moe-opt truncated", [p.tool("moe-opt"), half_mlir])
    p.refuses("moe-opt device", [p.tool("moe-opt"), "/dev/zero"])
    p.refuses("moe-compile mlir nesting", [p.tool("moe-compile"), deep_mlir, "-o", p.path("b")])


def probe_compile_options(p):
    """Sizes past their bounds and malformed option values."""
    compile_ = [p.tool("moe-compile"), os.path.join(CORPUS, "mixtral.onnx"), "-o", p.path("b")]
    dynamic = [p.tool("moe-compile"), os.path.join(CORPUS, "hf", "mixtral.block.legacy_dynamic.onnx"),
               "-o", p.path("b")]
    for case, extra in [("ep 0", ["--ep", "0"]), ("ep huge", ["--ep", "1000000"]),
                        ("ep overflow", ["--ep", str(2 ** 62)]),
                        ("tp not a number", ["--tp", "two"]),
                        ("microbatches 0", ["--pp", "2", "--microbatches", "0"]),
                        ("microbatches huge", ["--pp", "2", "--microbatches", str(2 ** 40)]),
                        ("redundant huge", ["--ep", "2", "--redundant-per-rank", "1000000"]),
                        ("target unknown", ["--target=tpu"])]:
        p.refuses("moe-compile " + case, compile_ + extra)
    for case, shape in [("input-shape 0", "hidden_states=0x4x16"),
                        ("input-shape huge", "hidden_states=%dx%dx16" % (2 ** 31, 2 ** 31)),
                        ("input-shape negative", "hidden_states=-3x4x16"),
                        ("input-shape malformed", "hidden_states=2xx16")]:
        p.refuses("moe-compile " + case, dynamic + ["--input-shape", shape])
    deep = p.write("deep.json", "[" * 200000 + "]" * 200000)
    p.refuses("moe-compile smp-config nesting", compile_ + ["--smp-config", deep])
    p.refuses("moe-compile smp-config device", compile_ + ["--smp-config", "/dev/zero"])
    p.refuses("moe-compile smp-config empty", compile_ + ["--smp-config", p.write("e.json", "")])


def probe_run(p):
    """moe-run on a bundle with bad inputs and options."""
    bundle = p.compile("mixtral.bundle", [os.path.join(CORPUS, "mixtral.onnx")])
    if not bundle:
        return
    good = np.load(os.path.join(CORPUS, "mixtral.in.hidden_states.npy"))
    run = [p.tool("moe-run"), bundle, "--output-dir", p.path("run.out")]
    np.save(p.path("wrong_dtype.npy"), good.astype(np.int8))
    np.save(p.path("wrong_shape.npy"), good[:1])
    raw = open(p.path("wrong_shape.npy"), "rb").read()
    p.write("truncated.npy", raw[:len(raw) - 7])
    p.write("empty.npy", b"")
    for case, f in [("device", "/dev/zero"), ("empty", p.path("empty.npy")),
                    ("truncated", p.path("truncated.npy")),
                    ("wrong dtype", p.path("wrong_dtype.npy")),
                    ("wrong shape", p.path("wrong_shape.npy"))]:
        p.refuses("moe-run input " + case, run + ["--input", "hidden_states=" + f])
    p.refuses("moe-run threads huge", run + ["--input", "hidden_states=" + os.path.join(
        CORPUS, "mixtral.in.hidden_states.npy"), "--threads", "100000"])
    broken = p.path("broken.bundle")
    shutil.rmtree(broken, ignore_errors=True)
    shutil.copytree(bundle, broken)
    p.write(os.path.join(broken, "model.json"), "[" * 200000 + "]" * 200000)
    given = ["--input", "hidden_states=" + os.path.join(CORPUS, "mixtral.in.hidden_states.npy"),
             "--output-dir", p.path("run.out")]
    p.refuses("moe-run manifest nesting", [p.tool("moe-run"), broken] + given)
    p.refuses("moe-run no bundle", [p.tool("moe-run"), p.path("missing.bundle")] + given)


def probe_train(p):
    """moe-train on a training step with bad data, options and checkpoints."""
    step = p.compile("step.bundle", [os.path.join(TRAIN, "switch.onnx"), "--train",
                                     "--optimizer=adamw", "--loss=mse"])
    lm = p.compile("lm.bundle", [os.path.join(TRAIN, "mixtral.onnx"), "--train",
                                 "--optimizer=sgd", "--loss=causal-lm"])
    x = np.load(os.path.join(TRAIN, "block_x.npy"))
    target = os.path.join(TRAIN, "block_target.npy")
    if step:
        train = [p.tool("moe-train"), step, "--batch-size", "1", "--steps", "2",
                 "--input", "target=" + target]
        for case, value in [("nan", np.nan), ("inf", np.inf)]:
            bad = x.copy()
            bad[1, 2, 3] = value
            np.save(p.path("x_%s.npy" % case), bad)
            p.refuses("moe-train data " + case,
                      train + ["--input", "hidden_states=" + p.path("x_%s.npy" % case)])
        np.save(p.path("x_empty.npy"), x[:0])
        np.save(p.path("x_int.npy"), x.astype(np.int32))
        np.save(p.path("x_shape.npy"), x[:, :3])
        for case, f in [("device", "/dev/zero"), ("empty", p.path("x_empty.npy")),
                        ("wrong shape", p.path("x_shape.npy"))]:
            p.refuses("moe-train data " + case, train + ["--input", "hidden_states=" + f])
        ok = train + ["--input", "hidden_states=" + os.path.join(TRAIN, "block_x.npy")]
        p.refuses("moe-train threads huge", ok + ["--threads", "100000"])
        p.refuses("moe-train batch-size 0", ok[:2] + ["--batch-size", "0"] + ok[4:])
        # A checkpoint, then each of its files damaged.
        ckpt = p.path("ckpt")
        shutil.rmtree(ckpt, ignore_errors=True)
        result = subprocess.run(ok + ["--checkpoint-dir", ckpt, "--checkpoint-every", "1"],
                                capture_output=True, text=True, env=p.env)
        if result.returncode != 0:
            p.fail("setup checkpoint", result.stderr.strip()[-300:])
        else:
            for name, damage in [("params.bin", lambda b: b[:len(b) // 2]),
                                 ("optimizer.bin", lambda b: b[:-1] + bytes([b[-1] ^ 1])),
                                 ("checkpoint.json", lambda b: b[:len(b) // 3])]:
                broken = p.path("ckpt_" + name)
                shutil.rmtree(broken, ignore_errors=True)
                shutil.copytree(ckpt, broken)
                f = os.path.join(broken, name)
                data = open(f, "rb").read()
                open(f, "wb").write(damage(data))
                p.refuses("moe-train resume damaged " + name, ok + ["--resume", broken])
    if lm:
        labels = np.load(os.path.join(TRAIN, "labels.npy"))
        labels[0, 1] = -5
        np.save(p.path("labels_neg.npy"), labels)
        p.refuses("moe-train label out of range",
                  [p.tool("moe-train"), lm, "--batch-size", "4", "--steps", "1",
                   "--input", "input_ids=" + os.path.join(TRAIN, "input_ids.npy"),
                   "--input", "attention_mask=" + os.path.join(TRAIN, "attention_mask.npy"),
                   "--input", "labels=" + p.path("labels_neg.npy")])


def probe_plan(p):
    """moe-plan's trace reader and size options."""
    plan = [p.tool("moe-plan"), "placement", "--ep", "2", "--redundant-per-rank", "1"]
    good = p.write("trace.json", json.dumps({"moe_expert_load": 1, "records": [
        {"tokens": [[5, 3, 0, 8], [4, 4, 4, 4]]}, {"tokens": [[1, 9, 2, 4], [0, 16, 0, 0]]}]}))
    for case, f in [("device", "/dev/zero"), ("empty", p.write("t_empty.json", "")),
                    ("nesting", p.write("t_deep.json", "[" * 200000 + "]" * 200000)),
                    ("truncated", p.write("t_half.json", open(good).read()[:40])),
                    ("negative count", p.write("t_neg.json", json.dumps(
                        {"moe_expert_load": 1, "records": [{"tokens": [[5, -3, 0, 8]]}]}))),
                    ("nan count", p.write("t_nan.json", '{"moe_expert_load": 1, "records": '
                                          '[{"tokens": [[5, NaN, 0, 8]]}]}'))]:
        p.refuses("moe-plan trace " + case, plan + ["--trace", f])
    p.refuses("moe-plan ep overflow", [p.tool("moe-plan"), "placement", "--ep", str(2 ** 62),
                                      "--redundant-per-rank", "1", "--trace", good])
    p.refuses("moe-plan redundant overflow", [p.tool("moe-plan"), "placement", "--ep", "2",
                                             "--redundant-per-rank", str(2 ** 62), "--trace", good])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--only", help="run the cases whose name holds this")
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    p = Probe(args)
    for probe in [probe_files, probe_compile_options, probe_run, probe_train, probe_plan]:
        probe(p)
    print("%d of %d bad inputs refused cleanly" % (p.count - len(p.failures), p.count))
    return 1 if p.failures else 0


if __name__ == "__main__":
    sys.exit(main())
