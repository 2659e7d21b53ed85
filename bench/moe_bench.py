"""Time moe-compile'd MoE models against ONNX Runtime and PyTorch on the CPU.

    bench/.venv/bin/python bench/moe_bench.py [--threads 2] [--repeat 10]

For each workload it exports the PyTorch module to ONNX (opset 17), compiles
it with moe-compile for one rank and for two expert-parallel ranks, runs it
with moe-run, runs the same .onnx in ONNX Runtime and the module in PyTorch
eager, checks that the outputs agree, and prints the medians. It then times
OpenBLAS sgemm on the expert GEMM shapes of the run and compares its rate with
the expert GEMM rate that moe-run reports. See bench/README.md.
"""

import argparse
import ctypes
import ctypes.util
import os
import re
import statistics
import subprocess
import sys
import time
import warnings

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "test", "corpus"))
import models  # noqa: E402

WEIGHT_STD = 0.02


# --------------------------------------------------------------------------
# Workloads
# --------------------------------------------------------------------------


def init_weights(module, seed):
    """Seeded N(0, 0.02) for every parameter; RMSNorm weights N(1, 0.02)."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            p.normal_(1.0 if "layernorm" in name else 0.0, WEIGHT_STD)
    return module.eval()


def mixtral_block(args):
    module = models.MixtralSparseMoeBlock(args.hidden, args.ffn, args.experts, args.top_k)
    return init_weights(module, seed=1), torch.randn(1, args.tokens, args.hidden,
                                                     generator=torch.Generator().manual_seed(101))


def decoder_layer(args):
    module = models.MixtralDecoderLayer(args.hidden, num_heads=args.hidden // 64, head_dim=64, ffn_dim=args.ffn,
                                        num_experts=args.experts, top_k=args.top_k)
    return init_weights(module, seed=2), torch.randn(1, args.seq, args.hidden,
                                                     generator=torch.Generator().manual_seed(102))


WORKLOADS = {"mixtral_block": mixtral_block, "decoder_layer": decoder_layer}


def describe(name, args):
    if name == "mixtral_block":
        return "Mixtral MoE block: T=%d H=%d F=%d E=%d k=%d" % (args.tokens, args.hidden, args.ffn, args.experts,
                                                                   args.top_k)
    return "Mixtral decoder layer: seq=%d H=%d heads=%d head_dim=64 F=%d E=%d k=%d" % (
        args.seq, args.hidden, args.hidden // 64, args.ffn, args.experts, args.top_k)


def export(module, x, path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (x,), path, opset_version=17, input_names=["hidden_states"],
                          output_names=["output"])


# --------------------------------------------------------------------------
# Runners: each returns (median ms, output array, extra info)
# --------------------------------------------------------------------------


def run_checked(cmd, env=None, timeout=None):
    """stdout of `cmd`; an error with its output if it fails or takes more
    than `timeout` seconds (None: no limit)."""
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        # What it printed so far (bytes, whatever text=True asked for).
        out = "".join(o.decode(errors="replace") if isinstance(o, bytes) else o
                      for o in (e.stdout, e.stderr) if o)
        raise RuntimeError("%s timed out after %g s:\n%s" % (" ".join(cmd), timeout, out)) from None
    if done.returncode != 0:
        raise RuntimeError("%s failed (%d):\n%s%s" % (" ".join(cmd), done.returncode, done.stdout, done.stderr))
    return done.stdout


def parse_stats(text):
    """The entry median, the tokens per expert of each layer and the expert
    GEMM rate and totals from `moe-run --stats`."""
    entry = float(re.search(r"^entry: .* median ([\d.]+) ms", text, re.M).group(1))
    layers = [(list(map(int, m.group(1).split(","))), float(m.group(2)))
              for m in re.finditer(r"^layer \d+: tokens per expert \[([\d, ]*)\].* median ([\d.]+) ms", text, re.M)]
    gemm = re.search(r"^expert GEMM: ([\d.]+) GFLOP/s per rank \(.* GFLOP in ([\d.]+) ms", text, re.M)
    return {"entry_ms": entry, "layers": layers, "gemm_gflops": float(gemm.group(1)),
            "gemm_ms_total": float(gemm.group(2))}


# --ep N balanced: one redundant slot per rank, re-placed after every call by
# that call's load (the input repeats, so the placement settles at once).
BALANCED_COMPILE = ["--redundant-per-rank", "1"]
BALANCED_RUN = ["--replan-every", "1"]


def form_label(ranks, threads, balanced):
    if ranks == 1:
        return "moe-run, 1 rank x %d thread(s)" % threads
    return "moe-run --ep %d%s, %d ranks x %d thread(s)" % (ranks, " balanced" if balanced else "", ranks, threads)


def run_ours(onnx_path, shape, x_path, work, ranks, threads, repeat, warmup, balanced=False):
    """Compile for `ranks` expert-parallel ranks and run with moe-run --stats;
    `balanced`: one redundant expert slot per rank, re-placed by the load of
    every call (DeepSeek's EPLB remedy for uneven routing)."""
    tag = "ep%d" % ranks + ("-balanced" if balanced else "")
    bundle, outdir = os.path.join(work, tag), os.path.join(work, tag + ".out")
    compile_cmd = [os.path.join(ROOT, "build", "bin", "moe-compile"), onnx_path,
                   "--input-shape", "hidden_states=" + "x".join(map(str, shape)), "-o", bundle]
    if ranks > 1:
        compile_cmd[2:2] = ["--ep", str(ranks)] + (BALANCED_COMPILE if balanced else [])
    start = time.time()
    run_checked(compile_cmd)
    compile_s = time.time() - start
    run_cmd = [os.path.join(ROOT, "build", "bin", "moe-run"), bundle, "--input", "hidden_states=" + x_path,
               "--output-dir", outdir, "--stats", "--warmup", str(warmup), "--repeat", str(repeat),
               "--threads", str(threads)] + (BALANCED_RUN if balanced else [])
    env = None
    if ranks > 1:
        run_cmd = ["mpirun", "-np", str(ranks), "--oversubscribe"] + run_cmd
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    stats = parse_stats(run_checked(run_cmd, env))
    stats.update(compile_s=compile_s, compile_cmd=compile_cmd, run_cmd=run_cmd)
    return stats["entry_ms"], np.load(os.path.join(outdir, "output.npy")), stats


def median_ms(fn, repeat, warmup):
    time.sleep(1)  # let threads left spinning by the previous runner go to sleep
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def run_ort(onnx_path, x, threads, repeat, warmup):
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    session = ort.InferenceSession(onnx_path, opts, providers=["CPUExecutionProvider"])
    feed = {"hidden_states": x}
    out = session.run(None, feed)[0]
    return median_ms(lambda: session.run(None, feed), repeat, warmup), out, {}


def run_torch(module, x, threads, repeat, warmup):
    torch.set_num_threads(threads)
    xt = torch.from_numpy(x)
    with torch.no_grad():
        out = module(xt).numpy()
        ms = median_ms(lambda: module(xt), repeat, warmup)
    return ms, out, {}


# --------------------------------------------------------------------------
# OpenBLAS sgemm on the expert shapes
# --------------------------------------------------------------------------


def openblas():
    path = ctypes.util.find_library("openblas") or "/usr/lib/x86_64-linux-gnu/libopenblas.so.0"
    lib = ctypes.CDLL(path)
    lib.cblas_sgemm.restype = None
    lib.cblas_sgemm.argtypes = [ctypes.c_int] * 6 + [ctypes.c_float, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p,
                                                     ctypes.c_int, ctypes.c_float, ctypes.c_void_p, ctypes.c_int]
    return path, lib


def aligned(shape, fill=None, alignment=64):
    """A float32 array whose data starts on a 64-byte boundary, as moe-run's
    buffers do (NumPy's own are 16-byte aligned)."""
    count = int(np.prod(shape))
    raw = np.empty(count + alignment // 4, np.float32)
    start = (-raw.ctypes.data % alignment) // 4
    out = raw[start:start + count].reshape(shape)
    out[...] = 0 if fill is None else fill
    return out


def blas_expert_gflops(tokens_per_expert, hidden, ffn, threads, repeat, warmup):
    """GFLOP/s of cblas_sgemm on every expert's FFN GEMMs at the given token
    counts, each expert with its own rows and weights (as in the model):
    x[n,H] w1[F,H]^T and x[n,H] w3[F,H]^T into [n,F], h[n,F] w2[H,F]^T into [n,H]."""
    row_major, no_trans, trans = 101, 111, 112
    path, lib = openblas()
    lib.openblas_set_num_threads(threads)
    rng = np.random.default_rng(0)
    experts, rows = len(tokens_per_expert), sum(tokens_per_expert)
    random = lambda *shape: aligned(shape, rng.standard_normal(shape, dtype=np.float32))  # noqa: E731
    x, h = random(rows, hidden), random(rows, ffn)
    w13, w2 = random(experts, 2, ffn, hidden) * WEIGHT_STD, random(experts, hidden, ffn) * WEIGHT_STD
    out13, out2 = aligned((2, rows, ffn)), aligned((rows, hidden))
    sgemm = lib.cblas_sgemm

    def all_experts():
        start = 0
        for e, n in enumerate(tokens_per_expert):
            if n == 0:
                continue
            for j in range(2):  # w1 and w3
                sgemm(row_major, no_trans, trans, n, ffn, hidden, 1.0, x[start:].ctypes.data, hidden,
                      w13[e, j].ctypes.data, hidden, 1.0, out13[j, start:].ctypes.data, ffn)
            sgemm(row_major, no_trans, trans, n, hidden, ffn, 1.0, h[start:].ctypes.data, ffn,
                  w2[e].ctypes.data, ffn, 1.0, out2[start:].ctypes.data, hidden)
            start += n

    flops = sum(3 * 2.0 * n * hidden * ffn for n in tokens_per_expert)
    ms = median_ms(all_experts, repeat, warmup)
    return flops / (ms * 1e-3) / 1e9, ms, path


# --------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------


def rel_err(out, ref):
    return float(np.max(np.abs(out.reshape(ref.shape) - ref)) / np.max(np.abs(ref)))


TOLERANCE = 1e-4


def print_table(results, ref, base, tolerance=TOLERANCE):
    print("%-40s %10s %10s %10s" % ("", "median ms", "vs ours", "max err"))
    for label, (ms, out, _) in results.items():
        ratio = "%9.2fx" % (ms / base) if base else "-"
        err = rel_err(out, ref)
        print("%-40s %10.1f %10s %10.1e%s" % (label, ms, ratio, err, "  MISMATCH" if err > tolerance else ""))
    print("(vs ours = that time / moe-run 1-rank time: > 1 means moe-run is faster; "
          "max err = max |out - PyTorch| / max |PyTorch|)")


def print_ours(ours, args):
    runs = args.repeat
    for (ranks, balanced), (ms, _, stats) in sorted(ours.items()):
        gemm_ms = stats["gemm_ms_total"] / runs / ranks
        layer_ms = sum(t for _, t in stats["layers"])
        print("moe-run %d rank(s)%s: compile %.1f s; entry %.1f ms, MoE layer %.1f ms, expert GEMM %.1f ms per rank "
              "per run (%.0f%% of entry) at %.1f GFLOP/s" % (
                  ranks, " balanced" if balanced else "", stats["compile_s"], ms, layer_ms, gemm_ms,
                  100 * gemm_ms / ms, stats["gemm_gflops"]))
    print("commands:")
    for _, (_, _, stats) in sorted(ours.items()):
        print("  %s\n  %s" % (" ".join(stats["compile_cmd"]), " ".join(stats["run_cmd"])))


def forms_of(args):
    """(ranks, threads per rank, balanced) of each moe-run form."""
    forms = [(1, args.threads, False)]
    if args.ep > 1:
        per_rank = max(1, args.threads // args.ep)
        forms += [(args.ep, per_rank, False), (args.ep, per_rank, True)]
    return forms


def bench(name, args):
    work = os.path.join(args.work, name)
    os.makedirs(work, exist_ok=True)
    module, x = WORKLOADS[name](args)
    x_np = x.numpy()
    x_path, onnx_path = os.path.join(work, "input.npy"), os.path.join(work, name + ".onnx")
    np.save(x_path, x_np)
    print("\n== %s (threads %d, median of %d runs)" % (describe(name, args), args.threads, args.repeat), flush=True)
    start = time.time()
    export(module, x, onnx_path)
    print("exported %s in %.1f s" % (onnx_path, time.time() - start), flush=True)

    # Ours first and ONNX Runtime last: PyTorch's OpenMP threads and ONNX
    # Runtime's spinning threads stay in this process after they run.
    results, ours = {}, {}
    for ranks, threads, balanced in forms_of(args):
        label = form_label(ranks, threads, balanced)
        try:
            results[label] = ours[(ranks, balanced)] = run_ours(onnx_path, x_np.shape, x_path, work, ranks,
                                                                threads, args.repeat, args.warmup, balanced)
        except RuntimeError as e:
            print("FAILED: %s" % e, flush=True)
    blas = None
    one = ours.get((1, False))
    if one:
        tokens = one[2]["layers"][0][0]
        blas = blas_expert_gflops(tokens, args.hidden, args.ffn, args.threads, args.repeat, args.warmup)
    results["PyTorch eager"] = run_torch(module, x_np, args.threads, args.repeat, args.warmup)
    results["ONNX Runtime"] = run_ort(onnx_path, x_np, args.threads, args.repeat, args.warmup)

    print_table(results, results["PyTorch eager"][1], one[0] if one else None)
    summary = {"ms": {label: ms for label, (ms, _, _) in results.items()},
               "ours": {"%d balanced" % ranks if balanced else ranks: {"ms": ms, "gemm_gflops": stats["gemm_gflops"]}
                        for (ranks, balanced), (ms, _, stats) in ours.items()},
               "blas_gflops": blas[0] if blas else None}
    if not ours:
        return summary
    print_ours(ours, args)
    if blas:
        rate, ms, path = blas
        ours_rate = one[2]["gemm_gflops"]
        print("expert GEMM, 1 rank: moe-run %.1f GFLOP/s, OpenBLAS sgemm %.1f GFLOP/s (%.1f ms on the same shapes, "
              "%s, %d threads): ours / BLAS = %.0f%%" % (ours_rate, rate, ms, path, args.threads,
                                                          100 * ours_rate / rate))
        print("tokens per expert %s" % one[2]["layers"][0][0])
    sys.stdout.flush()
    return summary


def busy_cores(seconds=1.0):
    """Cores busy with other work, sampled from /proc/stat."""
    def sample():
        fields = list(map(int, open("/proc/stat").readline().split()[1:]))
        return sum(fields), fields[3] + fields[4]  # total, idle + iowait
    total0, idle0 = sample()
    time.sleep(seconds)
    total1, idle1 = sample()
    return os.cpu_count() * (1 - (idle1 - idle0) / max(1, total1 - total0))


def source():
    """The commit, whether the tree outside bench/ differs from it, and when moe-run was built."""
    def git(*args):
        return subprocess.run(["git", "-C", ROOT] + list(args), capture_output=True, text=True).stdout.strip()
    changed = git("status", "--porcelain", "--", ".", ":!bench")
    built = os.path.getmtime(os.path.join(ROOT, "build", "bin", "moe-run"))
    return "%s%s; build/bin/moe-run built %s" % (git("rev-parse", "--short", "HEAD"),
                                                  " with local changes" if changed else "",
                                                  time.strftime("%Y-%m-%d %H:%M", time.localtime(built)))


def machine():
    import onnxruntime
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    model = re.search(r"^Model name:\s*(.*)$", lscpu, re.M)
    mem_kb = int(re.search(r"MemTotal:\s*(\d+)", open("/proc/meminfo").read()).group(1))
    busy = busy_cores()
    lines = ["machine: %s, %d cores, %.1f GiB; busy cores before the run %.2f" % (
                 model.group(1) if model else "?", os.cpu_count(), mem_kb / 2**20, busy),
             "onnxruntime %s, torch %s, numpy %s" % (onnxruntime.__version__, torch.__version__, np.__version__),
             "source: " + source()]
    if busy > 0.2:
        lines.append("warning: other work is running; the timings will be noisy")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2, help="threads for every runner (default 2)")
    parser.add_argument("--repeat", type=int, default=10, help="timed runs (default 10)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed runs first (default 2)")
    parser.add_argument("--ep", type=int, default=2, help="ranks of the expert-parallel run (default 2; 1: none)")
    parser.add_argument("--work", default="/tmp/moe-bench", help="models, bundles and outputs (default /tmp/moe-bench)")
    parser.add_argument("--tokens", type=int, default=4096, help="tokens of the MoE block (default 4096)")
    parser.add_argument("--seq", type=int, default=1024, help="sequence length of the decoder layer (default 1024)")
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--ffn", type=int, default=3584)
    parser.add_argument("--experts", type=int, default=8)
    parser.add_argument("--top-k", type=int, default=2)
    parser.add_argument("workloads", nargs="*", help="any of %s (default: all)" % ", ".join(WORKLOADS))
    args = parser.parse_args()
    unknown = set(args.workloads) - set(WORKLOADS)
    if unknown:
        parser.error("unknown workload %s; choose from %s" % (", ".join(sorted(unknown)), ", ".join(WORKLOADS)))
    print(machine())
    for name in args.workloads or WORKLOADS:
        bench(name, args)


if __name__ == "__main__":
    main()
