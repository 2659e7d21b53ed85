#!/usr/bin/env python3
"""Issue 23's CPU targets, taken side by side by one command.

Runs, on the machine at hand and with the same threads for every runner:
moert-cpu-bench (the STREAM-style read bandwidth and one decode call's
expert GEMMs against it; the bandwidth again after the decode regime, the
better of the two being the bound), then bench/moe_bench.py's Mixtral block in the
three regimes (prefill T=4096 H=1024 F=3584 E=8 k=2, small T=256 H=512
F=1024 E=8 k=2, decode T=64 H=1024 F=3584 E=64 k=4) for moe-run on one
rank, moe-run --ep 2 with one thread per rank (as compiled, and balanced:
one redundant expert slot per rank, re-placed by the measured load after
every call), PyTorch and ONNX Runtime,
and prints each target with its measured ratio:

  decode  >= 1.2 x ONNX Runtime, >= 80% of the read bandwidth
  small   >= 1.5 x ONNX Runtime
  prefill >= 1.1 x ONNX Runtime, expert GEMMs >= 90% of OpenBLAS sgemm on
          the same shapes (this machine's sgemm on those shapes stands for
          its peak)
  every regime: --ep 2 (2 ranks x 1 thread) no slower than 1 rank x 2
          threads; expert GEMMs >= 100% of OpenBLAS sgemm
  whole   a whole transformers Mixtral (bench/hf_model_bench.py, run in the
          corpus venv of test/corpus/hf, which has transformers; skipped
          without it) >= 1.1 x ONNX Runtime on the exporter's .onnx

    bench/.venv/bin/python bench/cpu_targets.py [--threads 2] [--repeat 10]
        [--regimes prefill,small,decode,whole]
"""
import argparse
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import moe_bench  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REGIMES = {
    "prefill": dict(tokens=4096, hidden=1024, ffn=3584, experts=8, top_k=2),
    "small": dict(tokens=256, hidden=512, ffn=1024, experts=8, top_k=2),
    "decode": dict(tokens=64, hidden=1024, ffn=3584, experts=64, top_k=4),
}


def read_bandwidth(threads):
    """The read bandwidth moert-cpu-bench measures, in GB/s, and its output."""
    out = subprocess.run([os.path.join(ROOT, "build", "bin", "moert-cpu-bench"),
                          "--threads", str(threads)], capture_output=True, text=True,
                         check=True).stdout
    return float(re.search(r"read bandwidth[^:]*: ([\d.]+) GB/s", out).group(1)), out


CORPUS_PYTHON = os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")),
                             "moe-mlir", "corpus-venv", "bin", "python")


def whole_model(args):
    """bench/hf_model_bench.py's ratios: ORT / moe-run and --ep 2 / 1 rank."""
    if not os.path.exists(CORPUS_PYTHON):
        return None, "skipped: no corpus venv at %s (test/corpus/hf/README.md makes it)" % CORPUS_PYTHON
    work = os.path.join(args.work, "whole")
    cmd = [CORPUS_PYTHON, os.path.join(ROOT, "bench", "hf_model_bench.py"), "--threads", str(args.threads),
           "--repeat", str(args.repeat), "--warmup", str(args.warmup), "--work", work]
    if os.path.exists(os.path.join(work, "mixtral.model.exporter.onnx")):
        cmd.append("--reuse")
    out = subprocess.run(cmd, capture_output=True, text=True).stdout
    print(out.strip(), flush=True)
    speedup = re.search(r"ours vs ONNX Runtime: ([\d.]+)x", out)
    if not speedup:
        return None, "FAILED: bench/hf_model_bench.py gave no ratio"
    ours = re.search(r"^moe-run, 1 rank x \d+ thread\(s\)\s+([\d.]+)", out, re.M)
    ep2 = [re.search(r"^moe-run --ep 2%s, 2 ranks x 1 thread\(s\)\s+([\d.]+)" % form, out, re.M)
           for form in ("", " balanced")]
    return (float(speedup.group(1)),
            [float(m.group(1)) / float(ours.group(1)) if ours and m else None for m in ep2]), ""


EP2_FORMS = ("--ep 2", "--ep 2 balanced")


def ep2_row(regime, form, ratio, threads):
    return (regime, "%s (2 x 1 thread) / 1 rank x %d threads = %.2f" % (form, threads, ratio),
            "%s (<= 1)" % ("met" if ratio <= 1.0 else "NOT met"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--work", default="/tmp/moe-cpu-targets")
    parser.add_argument("--regimes", default=",".join(list(REGIMES) + ["whole"]))
    args = parser.parse_args()
    print(moe_bench.machine())
    bandwidth, kernel = read_bandwidth(args.threads)
    print(kernel.strip())

    rows = []
    for regime in args.regimes.split(","):
        if regime == "whole":
            ratios, why = whole_model(args)
            if not ratios:
                rows.append((regime, why, ""))
                continue
            rows.append((regime, "ONNX Runtime / moe-run = %.2fx" % ratios[0],
                         "%s (>= 1.1x)" % ("met" if ratios[0] >= 1.1 else "NOT met")))
            for form, ratio in zip(EP2_FORMS, ratios[1]):
                if ratio:
                    rows.append(ep2_row(regime, form, ratio, args.threads))
            continue
        shape = REGIMES[regime]
        bench_args = argparse.Namespace(threads=args.threads, repeat=args.repeat,
                                        warmup=args.warmup, ep=2, work=os.path.join(args.work, regime),
                                        seq=1024, **shape)
        summary = moe_bench.bench("mixtral_block", bench_args)
        ours = summary["ours"].get(1)
        ep2 = [summary["ours"].get(2), summary["ours"].get("2 balanced")]
        ort = summary["ms"].get("ONNX Runtime")
        if not ours or not ort:
            rows.append((regime, "FAILED: a runner did not finish", ""))
            continue
        speedup = ort / ours["ms"]
        target = {"prefill": 1.1, "small": 1.5, "decode": 1.2}[regime]
        rows.append((regime, "ONNX Runtime / moe-run = %.2fx" % speedup,
                     "%s (>= %.1fx)" % ("met" if speedup >= target else "NOT met", target)))
        for form, run in zip(EP2_FORMS, ep2):
            if run:
                rows.append(ep2_row(regime, form, run["ms"] / ours["ms"], args.threads))
        if summary["blas_gflops"]:
            share = ours["gemm_gflops"] / summary["blas_gflops"]
            need = 0.9 if regime == "prefill" else 1.0
            rows.append((regime, "expert GEMMs %.1f GFLOP/s = %.0f%% of OpenBLAS sgemm %.1f" % (
                ours["gemm_gflops"], 100 * share, summary["blas_gflops"]),
                "%s (>= %.0f%%)" % ("met" if share >= need else "NOT met", 100 * need)))
        if regime == "decode":
            weight_bytes = 3 * shape["experts"] * shape["hidden"] * shape["ffn"] * 4
            rate = weight_bytes / (ours["ms"] / 1e3) / 1e9
            # A shared guest's bandwidth moves from minute to minute: the
            # bound is the better of the figures before and after decode.
            after, _ = read_bandwidth(args.threads)
            print("read bandwidth after decode: %.1f GB/s (before: %.1f)" % (after, bandwidth))
            bound = max(bandwidth, after)
            rows.append((regime, "weights read at %.1f GB/s = %.0f%% of the read bandwidth %.1f GB/s" % (
                rate, 100 * rate / bound, bound),
                "%s (>= 80%%)" % ("met" if rate >= 0.8 * bound else "NOT met")))

    print("\n| regime | measured | target |\n| --- | --- | --- |")
    for regime, measured, verdict in rows:
        print("| %s | %s | %s |" % (regime, measured, verdict))


if __name__ == "__main__":
    main()
