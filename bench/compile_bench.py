#!/usr/bin/env python3
"""Compile time and peak memory of moe-compile on a large synthetic model.

Issue 23's compile target: a model of 64 MoE layers with 256 experts each
(small hidden size) compiles in at most 10 s plus the time to write its
weights at disk speed, with peak compiler memory at most 1.2 x the model's
weights. The model is ONNX Runtime's form (a router MatMul and one
com.microsoft.MoE node per layer, each layer's output the next one's
input), built here with the onnx package and written to a scratch folder,
never committed.

Prints the weights' size, moe-compile's wall time and peak resident memory
(from /usr/bin/time -v), the time to write that many bytes to the same
folder (the disk's speed, taken in the same run), and the ratios against
the targets.

    /usr/bin/python3 bench/compile_bench.py [--layers 64] [--experts 256]
        [--hidden 64] [--ffn 128] [--tokens 16] [--work DIR] [--keep]
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def build_model(path, layers, experts, hidden, ffn, tokens, seed=0):
    """L router + com.microsoft.MoE blocks in a chain; returns weight bytes."""
    rng = np.random.default_rng(seed)
    nodes, inits = [], []
    x = "input"
    total = 0
    for layer in range(layers):
        p = f"layer{layer}"
        arrays = {
            f"{p}.router": rng.standard_normal((hidden, experts), dtype=np.float32),
            f"{p}.fc1": rng.standard_normal((experts, ffn, hidden), dtype=np.float32) * 0.05,
            f"{p}.fc2": rng.standard_normal((experts, hidden, ffn), dtype=np.float32) * 0.05,
        }
        for name, a in arrays.items():
            inits.append(numpy_helper.from_array(a, name))
            total += a.nbytes
        nodes.append(helper.make_node("MatMul", [x, f"{p}.router"], [f"{p}.logits"]))
        out = f"{p}.out"
        nodes.append(helper.make_node(
            "MoE", [x, f"{p}.logits", f"{p}.fc1", "", f"{p}.fc2"], [out],
            name=f"{p}/MoE", domain="com.microsoft", activation_type="relu", k=2,
            normalize_routing_weights=1))
        x = out
    graph = helper.make_graph(
        nodes, "synthetic_moe",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [tokens, hidden])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [tokens, hidden])],
        initializer=inits)
    model = helper.make_model(graph, opset_imports=[
        helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 8
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    return total


def disk_write_seconds(folder, nbytes):
    """Seconds to write and fsync `nbytes` into `folder`, 64 MiB at a time."""
    block = np.random.default_rng(1).bytes(64 << 20)
    path = os.path.join(folder, "disk-speed.bin")
    begin = time.perf_counter()
    with open(path, "wb") as f:
        left = nbytes
        while left > 0:
            n = min(left, len(block))
            f.write(block[:n])
            left -= n
        f.flush()
        os.fsync(f.fileno())
    seconds = time.perf_counter() - begin
    os.remove(path)
    return seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=64)
    parser.add_argument("--experts", type=int, default=256)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--ffn", type=int, default=128)
    parser.add_argument("--tokens", type=int, default=16)
    parser.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    parser.add_argument("--work", help="scratch folder (default: a new one under /tmp)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder")
    args = parser.parse_args()

    work = args.work or tempfile.mkdtemp(prefix="moe-compile-bench.")
    os.makedirs(work, exist_ok=True)
    try:
        model = os.path.join(work, "model.onnx")
        begin = time.perf_counter()
        weights = build_model(model, args.layers, args.experts, args.hidden, args.ffn,
                              args.tokens)
        print(f"model: {args.layers} layers x {args.experts} experts, H={args.hidden} "
              f"F={args.ffn}, {weights / 1e9:.3f} GB of f32 weights "
              f"(built in {time.perf_counter() - begin:.1f} s)")
        def compile_model(path, out):
            command = ["/usr/bin/time", "-v", os.path.join(args.bin, "moe-compile"), path,
                       "-o", out]
            begin = time.perf_counter()
            run = subprocess.run(command, capture_output=True, text=True)
            wall = time.perf_counter() - begin
            if run.returncode != 0:
                sys.stderr.write(run.stderr[-3000:])
                raise SystemExit(f"FAIL moe-compile exited {run.returncode}")
            kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)",
                               run.stderr).group(1))
            return wall, kb * 1024

        # The compiler's own memory (its libraries, the IR): a one-layer,
        # 8-expert model of the same form.
        small = os.path.join(work, "small.onnx")
        small_weights = build_model(small, 1, 8, args.hidden, args.ffn, args.tokens)
        small_wall, small_peak = compile_model(small, os.path.join(work, "small"))
        out = os.path.join(work, "bundle")
        wall, peak = compile_model(model, out)
        written = os.path.getsize(os.path.join(out, "weights.bin"))
        disk = disk_write_seconds(work, written)
        print(f"moe-compile: {wall:.2f} s wall, peak resident {peak / 1e9:.3f} GB; "
              f"weights.bin {written / 1e9:.3f} GB")
        print(f"disk: writing {written / 1e9:.3f} GB and fsync took {disk:.2f} s "
              f"({written / disk / 1e9:.2f} GB/s)")
        budget = 10.0 + disk
        print(f"time:   {wall:.2f} s against 10 s + {disk:.2f} s = {budget:.2f} s "
              f"({'met' if wall <= budget else 'NOT met'}; {wall - disk:.2f} s "
              f"beyond the write)")
        print(f"memory: {peak / weights:.2f} x the weights against 1.2 x "
              f"({'met' if peak <= 1.2 * weights else 'NOT met'}); a 1-layer, 8-expert "
              f"model peaks at {small_peak / 1e9:.3f} GB ({small_wall:.2f} s), so "
              f"beyond the compiler's own memory the weights take "
              f"{(peak - small_peak) / (weights - small_weights):.2f} x their size")
        return 0
    finally:
        if not args.keep and not args.work:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
