"""Time a whole transformers Mixtral CausalLM: moe-run against ONNX Runtime and PyTorch eager on the CPU.

    V=${XDG_CACHE_HOME:-$HOME/.cache}/moe-mlir/corpus-venv
    "$V/bin/python" bench/hf_model_bench.py [--threads 2] [--repeat 10] [--warmup 2]

The model comes from transformers' own classes (`MixtralConfig`,
`AutoModelForCausalLM.from_config` under a fixed seed, the library's own
initialisation, float32, eval mode; nothing is downloaded) and is exported
by transformers' own `OnnxExporter` with `OnnxConfig()`, as
test/corpus/hf/make_hf_corpus.py does for its `model.exporter` route. The
one .onnx file is then compiled with moe-compile (1 rank, and `--ep N`
under mpirun) and run with moe-run, run by ONNX Runtime's CPU execution
provider, and the model itself runs in PyTorch eager, all on the same
`input_ids` and `attention_mask` and the same number of threads. Each
runner's logits are checked against PyTorch's before it is timed.
`--fold-rotary` folds the rotary Cos/Sin tables that the exporter leaves at
long sequences (moe-compile has no Cos or Sin). Needs the venv of
test/corpus/hf/requirements.txt (see bench/README.md).
"""

import argparse
import os
import re
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, os.path.join(ROOT, "test", "corpus", "hf"))
import make_hf_corpus as corpus  # noqa: E402
import moe_bench  # noqa: E402

SEED = 20261125
# Logits agree if max |out - PyTorch| <= TOLERANCE x max |PyTorch|.
TOLERANCE = 1e-4


def build_model(args):
    import transformers
    config = transformers.MixtralConfig(
        vocab_size=args.vocab, hidden_size=args.hidden, intermediate_size=args.ffn, num_hidden_layers=args.layers,
        num_attention_heads=args.heads, num_key_value_heads=args.kv_heads, num_local_experts=args.experts,
        num_experts_per_tok=args.top_k, max_position_embeddings=max(4096, args.seq))
    torch.manual_seed(SEED)
    with corpus.quiet():
        model = transformers.AutoModelForCausalLM.from_config(config, torch_dtype=torch.float32)
    return model.eval()


def describe(args, impl):
    return ("transformers MixtralForCausalLM: %d layers, hidden %d, intermediate %d, %d experts top-%d, "
            "%d heads of %d (%d KV heads), vocab %d; batch 1, seq %d; float32; experts implementation %s" % (
                args.layers, args.hidden, args.ffn, args.experts, args.top_k, args.heads, args.hidden // args.heads,
                args.kv_heads, args.vocab, args.seq, impl))


def export(model, sample, onnx_path):
    """transformers' OnnxExporter with its default OnnxConfig, the weights folded into one file."""
    from transformers.exporters import OnnxConfig, OnnxExporter
    tmpdir = tempfile.mkdtemp(dir=os.path.dirname(onnx_path))
    try:
        with corpus.quiet():
            exported = OnnxExporter().export(model, sample, OnnxConfig())
            exported.save_pretrained(tmpdir)
        proto = corpus.finish_onnx(os.path.join(tmpdir, "model.onnx"), onnx_path)
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
    return [i.name for i in proto.graph.input]


def fold_rotary(src, dst):
    """`src` with its rotary tables (Cos and Sin of constant angles) folded into
    initializers by onnxscript's constant folder, the one the exporter itself
    runs: at short sequences the exporter folds them, at 1024 positions its
    input size limit (8192 elements) leaves the Cos and Sin nodes in the graph.
    Only those nodes and the ones feeding them are folded; the rest of the
    graph is the exporter's."""
    import onnx_ir as ir
    import onnxscript.optimizer
    model = ir.load(src)
    trig = ("Cos", "Sin")

    def should_fold(node):
        return node.op_type in trig or any(use.node.op_type in trig for out in node.outputs for use in out.uses())

    onnxscript.optimizer.fold_constants(model, should_fold=should_fold)
    left = [n.name for n in model.graph if n.op_type in trig]
    if left:
        raise SystemExit("the rotary tables did not fold: %s" % ", ".join(left))
    ir.save(model, dst)


def feeds_for(names, ids):
    """The graph inputs for token ids `ids` [1, seq]: the mask all ones, positions 0..seq-1."""
    known = {"input_ids": ids, "attention_mask": np.ones_like(ids),
             "position_ids": np.arange(ids.shape[1], dtype=np.int64)[None, :]}
    missing = [n for n in names if n not in known]
    if missing:
        raise SystemExit("the exported graph has inputs this script does not feed: %s" % ", ".join(missing))
    return {n: known[n] for n in names}


def run_ours(onnx_path, feeds, work, ranks, threads, args, check, balanced=False):
    """moe-compile for `ranks` expert-parallel ranks (`balanced`: as
    moe_bench's), one moe-run whose logits go to `check`, then the timed
    moe-run --stats."""
    tag = "ep%d" % ranks + ("-balanced" if balanced else "")
    bundle, outdir = os.path.join(work, tag), os.path.join(work, tag + ".out")
    compile_cmd = [os.path.join(args.bin, "moe-compile"), onnx_path, "-o", bundle]
    if ranks > 1:
        compile_cmd += ["--ep", str(ranks)] + (moe_bench.BALANCED_COMPILE if balanced else [])
    run_cmd = [os.path.join(args.bin, "moe-run"), bundle, "--output-dir", outdir, "--stats",
               "--warmup", str(args.warmup), "--repeat", str(args.repeat), "--threads", str(threads)]
    run_cmd += moe_bench.BALANCED_RUN if balanced else []
    for name, value in feeds.items():
        compile_cmd += ["--input-shape", "%s=%s" % (name, "x".join(map(str, value.shape)))]
        path = os.path.join(work, "in.%s.npy" % name)
        np.save(path, value)
        run_cmd += ["--input", "%s=%s" % (name, path)]
    start = time.time()
    moe_bench.run_checked(compile_cmd)
    compile_s = time.time() - start
    env = None
    if ranks > 1:
        run_cmd = ["mpirun", "-np", str(ranks), "--oversubscribe"] + run_cmd
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    check_cmd = [a for a in run_cmd if a != "--stats"]
    check_cmd[check_cmd.index("--repeat") + 1] = "1"
    check_cmd[check_cmd.index("--warmup") + 1] = "0"
    check_cmd[check_cmd.index("--output-dir") + 1] = outdir + ".check"
    moe_bench.run_checked(check_cmd, env)
    logits = np.load(os.path.join(outdir + ".check", "logits.npy"))
    check(logits)
    time.sleep(1)  # let threads left spinning in this process go to sleep
    log = moe_bench.run_checked(run_cmd, env)
    stats = moe_bench.parse_stats(log)
    stats["min_ms"] = float(re.search(r"^entry: .* min ([\d.]+) ms", log, re.M).group(1))
    stats.update(compile_s=compile_s, compile_cmd=compile_cmd, run_cmd=run_cmd, log=log)
    return stats["entry_ms"], logits, stats


def timed(fn, args):
    """(median, min) ms of `args.repeat` calls of `fn` after `args.warmup` untimed ones."""
    time.sleep(1)  # let threads left spinning by the previous runner go to sleep
    for _ in range(args.warmup):
        fn()
    times = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times), min(times)


def run_ort(onnx_path, feeds, threads, args, check):
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.log_severity_level = 3
    session = ort.InferenceSession(onnx_path, opts, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    logits = session.run(["logits"], feeds)[0] if "logits" in names else session.run(None, feeds)[0]
    check(logits)
    # Every output is computed, as moe-run and PyTorch compute the KV cache too.
    median, fastest = timed(lambda: session.run(None, feeds), args)
    return median, logits, {"min_ms": fastest}


def torch_logits(model, feeds, threads):
    torch.set_num_threads(threads)
    kwargs = {n: torch.from_numpy(v) for n, v in feeds.items()}
    with torch.no_grad():
        return model(**kwargs).logits.float().numpy()


def run_torch(model, feeds, threads, args, logits):
    torch.set_num_threads(threads)
    kwargs = {n: torch.from_numpy(v) for n, v in feeds.items()}
    with torch.no_grad():
        median, fastest = timed(lambda: model(**kwargs), args)
    return median, logits, {"min_ms": fastest}


def checker(label, ref):
    """Prints how far a runner's logits are from PyTorch's `ref`, before it is timed."""
    scale = float(np.max(np.abs(ref)))

    def check(logits):
        err = float(np.max(np.abs(logits.reshape(ref.shape).astype(np.float64) - ref)))
        print("logits of %s: max abs err %.2e against PyTorch eager (max |logits| %.3g)%s" % (
            label, err, scale, "" if err <= TOLERANCE * scale else "  MISMATCH"), flush=True)
    return check


def print_table(results, ref, base):
    print("%-40s %10s %10s %8s %12s %10s" % ("", "median ms", "vs ours", "min ms", "max abs err", "rel err"))
    scale = float(np.max(np.abs(ref)))
    for label, (ms, out, extra) in results.items():
        err = float(np.max(np.abs(out.reshape(ref.shape).astype(np.float64) - ref)))
        ratio = "%9.2fx" % (ms / base) if base else "-"
        print("%-40s %10.1f %10s %8.1f %12.2e %10.1e%s" % (label, ms, ratio, extra["min_ms"], err, err / scale,
                                                            "  MISMATCH" if err > TOLERANCE * scale else ""))
    print("(vs ours = that time / moe-run 1-rank time: > 1 means moe-run is faster; min ms = the fastest "
          "run; max abs err = max |logits - PyTorch logits|, rel err = that / max |PyTorch logits| = %.3g)" % scale)


def print_ours(ours, args):
    for (ranks, balanced), (ms, _, stats) in sorted(ours.items()):
        gemm_ms = stats["gemm_ms_total"] / args.repeat / ranks
        layer_ms = [t for _, t in stats["layers"]]
        print("moe-run %d rank(s)%s: compile %.1f s; entry %.1f ms; MoE layers %s = %.1f ms (%.0f%% of entry), "
              "the rest %.1f ms; expert GEMM %.1f ms per rank per run at %.1f GFLOP/s" % (
                  ranks, " balanced" if balanced else "", stats["compile_s"], ms, " + ".join("%.1f" % t for t in layer_ms), sum(layer_ms),
                  100 * sum(layer_ms) / ms, ms - sum(layer_ms), gemm_ms, stats["gemm_gflops"]))
        for n, (tokens, t) in enumerate(stats["layers"]):
            print("  layer %d: tokens per expert %s, %.1f ms" % (n, tokens, t))
    print("commands:")
    for _, (_, _, stats) in sorted(ours.items()):
        print("  %s\n  %s" % (" ".join(stats["compile_cmd"]), " ".join(stats["run_cmd"])))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2, help="threads for every runner (default 2)")
    parser.add_argument("--repeat", type=int, default=10, help="timed runs (default 10)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed runs first (default 2)")
    parser.add_argument("--ep", type=int, default=2, help="ranks of the expert-parallel run (default 2; 1: none)")
    parser.add_argument("--work", default="/tmp/moe-bench-hf",
                        help="the exported model, bundles and outputs (default /tmp/moe-bench-hf, about 3 GB)")
    parser.add_argument("--seq", type=int, default=1024, help="tokens of the one sequence (default 1024)")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--ffn", type=int, default=3584, help="intermediate size of each expert (default 3584)")
    parser.add_argument("--experts", type=int, default=8)
    parser.add_argument("--top-k", type=int, default=2)
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--kv-heads", type=int, default=8)
    parser.add_argument("--vocab", type=int, default=1024, help="vocabulary size (default 1024; Mixtral's is 32000)")
    parser.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"),
                        help="where moe-compile and moe-run are (default build/bin)")
    parser.add_argument("--reuse", action="store_true", help="reuse the exported .onnx of an earlier run in --work")
    parser.add_argument("--fold-rotary", action="store_true",
                        help="fold the rotary Cos/Sin tables into initializers (moe-compile has no Cos or Sin); "
                             "moe-run and ONNX Runtime then run that file, ONNX Runtime the exporter's file too")
    args = parser.parse_args()

    print(moe_bench.machine(), flush=True)
    import transformers
    print("transformers %s; moe-compile and moe-run from %s (moe-compile built %s)" % (
        transformers.__version__, args.bin,
        time.strftime("%Y-%m-%d %H:%M", time.localtime(os.path.getmtime(os.path.join(args.bin, "moe-compile"))))))
    model = build_model(args)
    impl = corpus.get_impl(model)
    print("\n== %s (threads %d, median of %d runs after %d warm-ups)" % (
        describe(args, impl), args.threads, args.repeat, args.warmup), flush=True)

    os.makedirs(args.work, exist_ok=True)
    onnx_path = os.path.join(args.work, "mixtral.model.exporter.onnx")
    # Traced on one set of ids and run on another, so that nothing of the trace input is baked in.
    gen = torch.Generator().manual_seed(SEED + 1)
    trace_ids = torch.randint(0, args.vocab, (1, args.seq), generator=gen)
    ids = torch.randint(0, args.vocab, (1, args.seq), generator=gen).numpy()
    if args.reuse and os.path.exists(onnx_path):
        import onnx
        names = [i.name for i in onnx.load(onnx_path, load_external_data=False).graph.input]
        print("reusing %s" % onnx_path)
    else:
        start = time.time()
        names = export(model, {"input_ids": trace_ids, "attention_mask": torch.ones_like(trace_ids)}, onnx_path)
        print("exported %s (%.0f MB) in %.1f s with OnnxExporter, OnnxConfig()" % (
            onnx_path, os.path.getsize(onnx_path) / 1e6, time.time() - start), flush=True)
    feeds = feeds_for(names, ids)
    exported_path = onnx_path
    if args.fold_rotary:
        onnx_path = os.path.join(args.work, "mixtral.model.exporter.folded.onnx")
        start = time.time()
        fold_rotary(exported_path, onnx_path)
        print("folded the rotary tables into %s in %.1f s" % (onnx_path, time.time() - start), flush=True)

    # The reference: the model's logits in PyTorch eager, one untimed call.
    ref = torch_logits(model, feeds, args.threads).astype(np.float64)

    # Ours first and ONNX Runtime last: PyTorch's OpenMP threads and ONNX
    # Runtime's spinning threads stay in this process after they run.
    results, ours = {}, {}
    for ranks, threads, balanced in moe_bench.forms_of(args):
        label = moe_bench.form_label(ranks, threads, balanced)
        try:
            results[label] = ours[(ranks, balanced)] = run_ours(onnx_path, feeds, args.work, ranks, threads, args,
                                                                checker(label, ref), balanced)
        except RuntimeError as e:
            print("FAILED: %s" % e, flush=True)
    label = "PyTorch eager (%s experts)" % impl
    results[label] = torch_result = run_torch(model, feeds, args.threads, args, ref)
    results["ONNX Runtime"] = run_ort(onnx_path, feeds, args.threads, args, checker("ONNX Runtime", ref))
    if args.fold_rotary:
        label = "ONNX Runtime, the exporter's file"
        results[label] = run_ort(exported_path, feeds, args.threads, args, checker(label, ref))

    one = ours.get((1, False))
    print_table(results, ref, one[0] if one else None)
    if ours:
        print_ours(ours, args)
    if one:
        ort_ms = results["ONNX Runtime"][0]
        print("ours vs ONNX Runtime: %.2fx (ORT / ours); ours vs PyTorch eager: %.2fx (PyTorch / ours)" % (
            ort_ms / one[0], torch_result[0] / one[0]))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
