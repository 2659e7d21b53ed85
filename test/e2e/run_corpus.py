#!/usr/bin/python3
"""Compile a corpus model with moe-compile for every plan form, run it with
moe-run on 1, 2 and 4 ranks, and check it:

  * every output equals the reference (max abs error <= 1e-4 x the output's
    scale, its max abs value);
  * every sharded output equals the one-rank output (same tolerance);
  * the dropped tokens that `moe-run --stats` counts equal the reference's;
  * the tokens per expert it counts agree with the one-rank run's (within
    1% of a layer's pairs, for routing ties that rounding may flip), and in
    a --run-only check of another target, with those of the CPU build that
    --build-only ran beside it.

With --dtype f16 or bf16 the ONNX model's float initializers, inputs and
outputs are converted to that type first (moe-run rounds the float32 inputs
to it). Outputs in f16 or bf16 (converted, or exported so) are held to 1e-2
or 5e-2 x the scale of the float32 reference instead.

Token shuffle permutes tokens before the capacity check, so with capacity
it keeps other tokens than the reference (as SageMaker's shuffle does); the
same number are dropped (zero rows), and the rows kept by both must agree.

    run_corpus.py --bin BUILD/bin --corpus test/corpus --work DIR MODEL [--format onnx|pt]

Prints one line per plan and a summary; exits 1 on any failure.
"""

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np

# (ranks, moe-compile plan options): every plan form of moe-partition.
PLANS = [
    (1, []),
    (2, ["--ep", "2"]),
    (2, ["--dp", "2"]),
    (2, ["--tp", "2"]),
    (2, ["--pp", "2"]),
    (2, ["--ep", "2", "--dispatcher", "all-gather"]),
    (2, ["--ep", "2", "--token-shuffle"]),
    (2, ["--dp", "2", "--dp-shard", "2"]),
    (4, ["--ep", "4"]),
    (4, ["--dp", "2", "--ep", "2"]),
    (4, ["--ep", "2", "--tp", "2"]),
    (4, ["--pp", "2", "--ep", "2"]),
    (4, ["--dp", "4", "--dp-shard", "2"]),
    (4, ["--dp", "2", "--ep", "2", "--dispatcher", "all-gather"]),
    (4, ["--ep", "2", "--tp", "2", "--token-shuffle"]),
]
TOLERANCES = {"f32": 1e-4, "f16": 1e-2, "bf16": 5e-2}
# Plans a model must be refused, by the option and the words of the error:
# token shuffle keeps other pairs than the model's capacity rule, and
# gshard_top2's weights are computed from the model's own drops.
REFUSED = {model: ("--token-shuffle", "token shuffle changes which pairs")
           for model in ("gshard_top2", "gshard_top2_dynamo")}
# What a --build-only bundle for another target keeps of its CPU twin's
# `moe-run --stats`: {layer: tokens per expert}.
EXPECTED_TOKENS = "cpu_tokens.json"
TIMEOUT_S = 300


# The models with a capacity, and the make_corpus function whose note
# counts the (token, choice) pairs the PyTorch reference drops.
DROPPING = {"switch": "make_switch", "gshard_top2": "make_gshard_top2",
            "gshard_top2_dynamo": "make_gshard_top2"}


def reference_dropped(corpus, model):
    """Pairs the PyTorch reference drops, as its own capacity rule counts
    them (make_corpus); the models not in DROPPING are dropless."""
    if model not in DROPPING:
        return 0
    sys.path.insert(0, corpus)
    import make_corpus  # noqa: E402  (torch, seeded)
    note = getattr(make_corpus, DROPPING[model])()[2]
    return sum(int(n) for n in re.findall(r"dropped (\d+)(?: first and (\d+) second)?", note)[0] if n)


def layer_tokens(log):
    """{layer: [tokens per expert]} from `moe-run --stats`."""
    return {int(layer): [float(t) for t in tokens.split(",") if t.strip()]
            for layer, tokens in re.findall(r"^layer (\d+): tokens per expert \[(.*?)\]", log, re.M)}


def tokens_problem(got, want, what):
    """Why per-expert token counts disagree with `want`, or None."""
    if sorted(got) != sorted(want):
        return "stats list layers %s, %s lists %s" % (sorted(got), what, sorted(want))
    for layer, counts in sorted(want.items()):
        mine = got[layer]
        slack = max(2.0, 0.01 * sum(counts))
        if len(mine) != len(counts) or any(abs(a - b) > slack for a, b in zip(mine, counts)):
            return "layer %d tokens per expert %s, %s has %s" % (layer, mine, what, counts)
    return None


def run(cmd, env=None):
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S, env=env)
    except subprocess.TimeoutExpired:
        return 124, "timed out after %g s: %s" % (TIMEOUT_S, " ".join(cmd))
    return done.returncode, done.stdout + done.stderr


def record_cpu_tokens(compile_cmd, bundle, in_names, inputs, bin_dir):
    """Builds the bundle's plan for the CPU, runs it once and keeps its tokens
    per expert in the bundle (EXPECTED_TOKENS); returns a problem or None."""
    twin = bundle + ".cpu"
    status, log = run(compile_cmd[:3] + [twin] +
                      ["--target=cpu" if a.startswith("--target=") else a for a in compile_cmd[4:]])
    if status == 0:
        cmd = [os.path.join(bin_dir, "moe-run"), twin, "--output-dir", twin + ".out", "--stats"]
        for name, path in zip(in_names, inputs):
            cmd += ["--input", "%s=%s" % (name, path)]
        status, log = run(cmd)
    shutil.rmtree(twin, ignore_errors=True)
    shutil.rmtree(twin + ".out", ignore_errors=True)
    if status != 0:
        return log.strip()
    with open(os.path.join(bundle, EXPECTED_TOKENS), "w") as f:
        json.dump(layer_tokens(log), f)
    return None


def dynamic_symbols(path, defined):
    """The dynamic symbols `path` defines, or those it needs (strong only)."""
    flag = "--defined-only" if defined else "--undefined-only"
    out = subprocess.run(["nm", "-D", flag, path], capture_output=True, text=True).stdout
    names = set()
    for line in out.splitlines():
        fields = line.split()
        if len(fields) >= 2 and (defined or fields[-2] == "U"):
            names.add(fields[-1].split("@")[0])
    return names


def loader_symbols(moe_run, model_so):
    """What the dynamic loader resolves model.so against under moe-run: the
    executable's exports and every library that it and model.so load."""
    libraries = set()
    for path in (moe_run, model_so):
        out = subprocess.run(["ldd", path], capture_output=True, text=True).stdout
        libraries.update(re.findall(r"=> (/\S+)", out))
    names = dynamic_symbols(moe_run, True)
    for library in libraries:
        names |= dynamic_symbols(library, True)
    return names


def unresolved(moe_run, model_so):
    """Symbols that model.so needs and nothing under moe-run provides."""
    return sorted(dynamic_symbols(model_so, False) - loader_symbols(moe_run, model_so))


def half_model(source, dtype, path):
    """`source` with its float32 initializers, inputs and outputs in `dtype`
    (f16 or bf16, rounded to nearest even), saved at `path`."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    model = onnx.load(source)
    graph = model.graph
    code = TensorProto.FLOAT16 if dtype == "f16" else TensorProto.BFLOAT16
    for init in graph.initializer:
        if init.data_type != TensorProto.FLOAT:
            continue
        values = numpy_helper.to_array(init)
        if dtype == "f16":
            bits = values.astype(np.float16).view(np.uint16)
        else:
            u = np.ascontiguousarray(values, np.float32).view(np.uint32).astype(np.uint64)
            bits = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
        init.CopyFrom(helper.make_tensor(init.name, code, values.shape, bits.tobytes(), raw=True))
    for value in list(graph.input) + list(graph.output):
        if value.type.tensor_type.elem_type == TensorProto.FLOAT:
            value.type.tensor_type.elem_type = code
    del graph.value_info[:]
    onnx.save(model, path)


def main():
    global TIMEOUT_S  # run()'s limit, from --timeout
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", required=True)
    parser.add_argument("--corpus", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--format", default="onnx", choices=["onnx", "pt"])
    parser.add_argument("--plans", default="all",
                        choices=["all", "basic", "ep", "ep2", "one", "causal"],
                        help="every plan, 'basic' (one rank, --ep 2, --dp 2), 'ep' (one "
                             "rank, --ep 2, --ep 4, --dp 2 --ep 2), 'ep2' (one "
                             "rank, --ep 2), 'one' (one rank) or 'causal' (one rank, "
                             "attention in blocks of 4 query rows)")
    parser.add_argument("--target", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--build-only", action="store_true",
                        help="compile and link each plan, check the bundle's target and that "
                             "moe-run resolves every symbol of model.so, run nothing")
    parser.add_argument("--run-only", action="store_true",
                        help="run and check the bundles that an earlier --build-only left in "
                             "--work (on a machine without the compiler)")
    parser.add_argument("--dtype", default="f32", choices=sorted(TOLERANCES),
                        help="compile the model with its floats in this type (ONNX models only)")
    parser.add_argument("--timeout", type=float, default=TIMEOUT_S,
                        help="seconds each moe-compile or moe-run may take (default %d)" % TIMEOUT_S)
    parser.add_argument("model")
    args = parser.parse_args()
    if args.timeout <= 0:
        parser.error("--timeout must be positive")
    TIMEOUT_S = args.timeout
    if args.dtype != "f32" and args.format != "onnx":
        parser.error("--dtype %s converts ONNX models only" % args.dtype)

    model_file = os.path.join(args.corpus, "%s.%s" % (args.model, args.format))
    inputs = sorted(glob.glob(os.path.join(args.corpus, args.model + ".in.*.npy")))
    outputs = sorted(glob.glob(os.path.join(args.corpus, args.model + ".out.*.npy")))
    in_names = [os.path.basename(p)[len(args.model) + 4:-4] for p in inputs]
    references = {os.path.basename(p)[len(args.model) + 5:-4]: np.load(p) for p in outputs}
    expected_dropped = reference_dropped(args.corpus, args.model)

    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    mpirun = shutil.which("mpirun")
    if not args.run_only:
        shutil.rmtree(args.work, ignore_errors=True)
        if args.dtype != "f32":
            os.makedirs(args.work)
            converted = os.path.join(args.work, "%s.%s.onnx" % (args.model, args.dtype))
            half_model(model_file, args.dtype, converted)
            model_file = converted
    # ep: expert parallelism on 2 and 4 ranks and with data parallelism.
    expert_parallel = [PLANS[0], PLANS[1], PLANS[8], PLANS[9]]
    plans = {"all": PLANS, "basic": PLANS[:3], "ep": expert_parallel,
             "ep2": PLANS[:2], "one": PLANS[:1],
             # attention in blocks of 4 query rows over the keys each sees
             "causal": [(1, ["--causal-block-rows", "4"])]}[args.plans]
    failures, baseline, baseline_tokens = [], None, None
    for ranks, options in plans:
        label = "%s.%s%s np=%d [%s]" % (args.model, args.format,
                                        "" if args.dtype == "f32" else " " + args.dtype, ranks, " ".join(options))
        tag = "np%d%s" % (ranks, "".join(o.strip("-") for o in options))
        bundle = os.path.join(args.work, tag)
        out_dir = bundle + ".out"
        compile_cmd = [os.path.join(args.bin, "moe-compile"), model_file, "-o", bundle,
                       "--target=" + args.target] + options
        for name, path in zip(in_names, inputs):
            compile_cmd += ["--input-shape", "%s=%s" % (name, "x".join(map(str, np.load(path).shape)))]
        status, log = (0, "") if args.run_only else run(compile_cmd)
        option, words = REFUSED.get(args.model, (None, None))
        if option in options:
            if status != 0 and words in log and log.count("error:") == 1:
                print("PASS %s: refused: %s" % (label, next(l for l in log.splitlines() if "error:" in l)))
            else:
                failures.append(label)
                print("FAIL %s: not refused with one error saying '%s': exit %d, %s"
                      % (label, words, status, log.strip()))
            continue
        if status != 0:
            failures.append(label)
            print("FAIL %s: moe-compile: %s" % (label, log.strip()))
            continue
        if args.build_only:
            with open(os.path.join(bundle, "model.json")) as f:
                target = json.load(f).get("target")
            missing = unresolved(os.path.join(args.bin, "moe-run"), os.path.join(bundle, "model.so"))
            if target != args.target:
                failures.append(label)
                print("FAIL %s: bundle target %s, expected %s" % (label, target, args.target))
            elif missing:
                failures.append(label)
                print("FAIL %s: moe-run cannot load model.so, it provides none of %s"
                      % (label, " ".join(missing)))
            else:
                print("BUILT %s --target=%s" % (label, args.target))
                if args.target != "cpu" and ranks == 1:
                    problem = record_cpu_tokens(compile_cmd, bundle, in_names, inputs, args.bin)
                    if problem:
                        failures.append(label)
                        print("FAIL %s: the CPU build for the token check: %s" % (label, problem))
            continue
        run_cmd = [os.path.join(args.bin, "moe-run"), bundle, "--output-dir", out_dir, "--stats"]
        for name, path in zip(in_names, inputs):
            run_cmd += ["--input", "%s=%s" % (name, path)]
        if ranks > 1:
            run_cmd = [mpirun, "-np", str(ranks)] + run_cmd
        status, log = run(run_cmd, env)
        if status != 0:
            failures.append(label)
            print("FAIL %s: moe-run exit %d: %s" % (label, status, log.strip()))
            continue

        problems, notes = [], []
        # Half-precision outputs (converted or exported so) are held to their
        # precision against the float32 reference.
        with open(os.path.join(bundle, "model.json")) as f:
            dtypes = [o["dtype"] for o in json.load(f)["outputs"]]
        tolerance = max(TOLERANCES.get(d, TOLERANCES["f32"]) for d in dtypes)
        got = {name: np.load(os.path.join(out_dir, name + ".npy")) for name in references}
        reordered = "--token-shuffle" in options and expected_dropped > 0
        for name, ref in references.items():
            # An empty output (a cache of no tokens yet) has nothing to compare.
            scale = max(float(np.abs(ref).max()) if ref.size else 0.0, 1e-30)
            out = got[name].astype(np.float64)
            if reordered:
                rows_got = out.reshape(-1, out.shape[-1])
                rows_ref = ref.reshape(-1, ref.shape[-1])
                zero_got = ~rows_got.any(axis=1)
                zero_ref = ~rows_ref.any(axis=1)
                if zero_got.sum() != zero_ref.sum():
                    problems.append("%s has %d zero (dropped) rows, the reference %d" %
                                    (name, zero_got.sum(), zero_ref.sum()))
                both = ~zero_got & ~zero_ref
                notes.append("%d rows kept by both" % both.sum())
                err = float(np.abs(rows_got[both] - rows_ref[both]).max())
                notes.append("%s err %.2e (scale %.3g)" % (name, err, scale))
                if not err <= tolerance * scale:
                    problems.append("%s differs from the reference by %.3e" % (name, err))
                continue
            err = float(np.abs(out - ref).max()) if ref.size else 0.0
            notes.append("%s err %.2e (scale %.3g)" % (name, err, scale))
            if not err <= tolerance * scale:
                problems.append("%s differs from the reference by %.3e > %.1e x %.3g" % (name, err, tolerance, scale))
            if baseline is not None:
                diff = float(np.abs(got[name].astype(np.float64) - baseline[name]).max()) \
                    if ref.size else 0.0
                notes.append("vs 1 rank %.2e" % diff)
                if not diff <= tolerance * scale:
                    problems.append("%s differs from the one-rank output by %.3e" % (name, diff))
        dropped = sum(int(d) for d in re.findall(r"dropped (\d+)", log))
        notes.append("dropped %d (reference %d)" % (dropped, expected_dropped))
        if dropped != expected_dropped:
            problems.append("dropped %d tokens, the reference drops %d" % (dropped, expected_dropped))
        tokens = layer_tokens(log)
        if 0 not in tokens:
            problems.append("--stats printed no layer")
        expected_file = os.path.join(bundle, EXPECTED_TOKENS)
        if baseline_tokens is not None:
            problems.append(tokens_problem(tokens, baseline_tokens, "the one-rank run"))
        elif os.path.exists(expected_file):
            with open(expected_file) as f:
                want = {int(k): v for k, v in json.load(f).items()}
            problems.append(tokens_problem(tokens, want, "the CPU build"))
        problems = [p for p in problems if p]
        if ranks == 1 and not options:
            baseline, baseline_tokens = got, tokens
        if problems:
            failures.append(label)
            print("FAIL %s: %s" % (label, "; ".join(problems)))
        else:
            print("PASS %s: %s" % (label, ", ".join(notes)))
    print("%s: %d of %d plans passed" % (args.model, len(plans) - len(failures), len(plans)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
