"""Re-placement on real ranks: SmartMoE's skewed loads replayed through moe-run.

    /usr/bin/python3 bench/placement_replay.py [--ranks 2,4] [--layer 12] [--records 100,200,300,400,500]

A synthetic MoE block with SmartMoE's trace shape (32 experts, top-2) whose
router logits are inputs, so that each call routes exactly the tokens per
expert of one trace record (one layer, summed over the trace's ranks and
microbatches, scaled to the block's T x k choices). For each number of
ranks it compiles the block for expert parallelism twice: as compiled
(experts 0..E/ep-1 on rank 0, ...) and with one redundant slot per rank
(moe-compile --redundant-per-rank 1), which moe-run re-places after its
warm-up calls (--replan-every = --warmup, ours). Both run with one thread
per rank; the figure is each expert GEMM's thread CPU time, summed per rank
and call: the busiest rank's is what an MoE layer waits for on a real
cluster, where each rank owns its cores (here the ranks share 2 cores, so
wall times would mix them). Printed per record: the busiest rank's time as
compiled and re-placed, their ratio, and the ratio the load model predicts
(max rank load as compiled / as re-placed, from the final slot table).
About a minute on 2 cores.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import moe_bench  # noqa: E402

TRACE = os.path.join(ROOT, "..", "shared", "data", "smartmoe-trace", "smartmoe_trace.npz")


def block_mlir(tokens, hidden, ffn, experts, seed):
    """The block: inputs x [T, H] and logits [T, E], SwiGLU experts whose
    weights are constants (so that moe-compile externalizes them)."""
    rng = np.random.default_rng(seed)

    def weight(*shape):
        w = (rng.standard_normal(shape) * 0.02).astype("<f4")
        return 'dense<"0x%s"> : tensor<%sxf32>' % (w.tobytes().hex().upper(),
                                                    "x".join(map(str, shape)))
    t = "tensor<%dx%dxf32>"
    return f"""func.func @block(%x: {t % (tokens, hidden)}, %logits: {t % (tokens, experts)}) -> {t % (tokens, hidden)} {{
  %w1 = arith.constant {weight(experts, ffn, hidden)}
  %w3 = arith.constant {weight(experts, ffn, hidden)}
  %w2 = arith.constant {weight(experts, hidden, ffn)}
  %y = moe.layer softmax topk k 2 %x, %logits fc1(%w1) fc3(%w3) fc2(%w2) activation <swiglu>
      : ({t % (tokens, hidden)}, {t % (tokens, experts)}, tensor<{experts}x{ffn}x{hidden}xf32>,
         tensor<{experts}x{ffn}x{hidden}xf32>, tensor<{experts}x{hidden}x{ffn}xf32>) -> {t % (tokens, hidden)}
  return %y : {t % (tokens, hidden)}
}}
"""


def forced_logits(load, tokens, seed):
    """Logits [T, E] whose top-2 choices give each expert its share of
    `load` (largest remainder; at most one choice of an expert per token)."""
    experts = len(load)
    share = np.minimum(load / load.sum() * 2 * tokens, tokens)
    counts = np.floor(share).astype(int)
    for e in np.argsort(-(share - counts))[:2 * tokens - counts.sum()]:
        counts[e] += 1
    # Deal the choices round-robin over the tokens, hottest expert first:
    # an expert's (at most T) choices land on distinct tokens.
    order = np.repeat(np.argsort(-counts, kind="stable"), counts[np.argsort(-counts, kind="stable")])
    picks = order.reshape(2, tokens).T  # token t: choices order[t], order[T + t]
    rng = np.random.default_rng(seed)
    picks = picks[rng.permutation(tokens)]
    logits = np.zeros((tokens, experts), np.float32)
    logits[np.arange(tokens), picks[:, 0]] = 10
    logits[np.arange(tokens), picks[:, 1]] = 9
    assert (picks[:, 0] != picks[:, 1]).all()
    return logits, np.bincount(picks.ravel(), minlength=experts)


def rank_loads(slots, load, ranks):
    """Tokens each rank computes: each slot takes its expert's load over the
    expert's replica count."""
    slots = np.asarray(slots)
    replicas = np.bincount(slots, minlength=len(load))
    per_slot = load[slots] / replicas[slots]
    return per_slot.reshape(ranks, -1).sum(1)


def run(bin_dir, bundle, ranks, x, logits, out, extra):
    cmd = ["mpirun", "-np", str(ranks), "--oversubscribe", os.path.join(bin_dir, "moe-run"), bundle,
           "--input", "input0=" + x, "--input", "input1=" + logits, "--output-dir", out,
           "--threads", "1", "--stats"] + extra
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               MOERT_SERIAL_EXPERT_GEMMS="1")
    text = moe_bench.run_checked(cmd, env, timeout=600)
    if os.environ.get("MOE_REPLAY_VERBOSE"):
        print(text)
    busiest = float(re.search(r"thread CPU time per run: ([\d.]+) ms on the busiest", text).group(1))
    slots = re.search(r"slots \[([\d, ]*)\]", text)
    return busiest, (list(map(int, slots.group(1).split(","))) if slots else None)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trace", default=TRACE)
    parser.add_argument("--ranks", default="2,4", help="expert-parallel ranks to try (default 2,4)")
    parser.add_argument("--layer", type=int, default=12, help="the trace's layer to replay (default 12)")
    parser.add_argument("--records", default="100,200,300,400,500",
                        help="trace records to replay (default every 100th: iterations 1001 to 5001)")
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--ffn", type=int, default=256)
    parser.add_argument("--warmup", type=int, default=3, help="calls before re-placing (default 3)")
    parser.add_argument("--repeat", type=int, default=5, help="calls measured (default 5)")
    parser.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    args = parser.parse_args()

    counts = np.load(args.trace)["counts"]
    experts = counts.shape[-1]
    records = [int(r) for r in args.records.split(",")]
    print("machine: %d cores; busy cores before the run %.2f; source: %s"
          % (os.cpu_count(), moe_bench.busy_cores(), moe_bench.source()))
    print("trace layer %d, %d experts, top-2; block T=%d H=%d F=%d (SwiGLU); one thread per rank; "
          "re-placed by moe-run (ours) after %d of %d warm-up calls, then %d calls measured\n"
          % (args.layer, experts, args.tokens, args.hidden, args.ffn, args.warmup, 2 * args.warmup,
             args.repeat))
    print("| ranks | record (iteration) | balancedness as compiled | re-placed | busiest rank's "
          "expert GEMM CPU ms/call, as compiled | re-placed | measured speedup | predicted |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as work:
        model = os.path.join(work, "block.mlir")
        with open(model, "w") as f:
            f.write(block_mlir(args.tokens, args.hidden, args.ffn, experts, seed=0))
        x = os.path.join(work, "x.npy")
        np.save(x, np.random.default_rng(1).standard_normal((args.tokens, args.hidden)).astype(np.float32))
        for ranks in [int(r) for r in args.ranks.split(",")]:
            static, placed = os.path.join(work, "ep%d" % ranks), os.path.join(work, "ep%dr1" % ranks)
            compile_cmd = [os.path.join(args.bin, "moe-compile"), model, "--ep", str(ranks)]
            moe_bench.run_checked(compile_cmd + ["-o", static])
            moe_bench.run_checked(compile_cmd + ["--redundant-per-rank", "1", "-o", placed])
            for record in records:
                load = counts[record, :, args.layer].sum(axis=(0, 1)).astype(np.float64)
                logits, routed = forced_logits(load, args.tokens, seed=record)
                lpath = os.path.join(work, "logits.npy")
                np.save(lpath, logits)
                base, _ = run(args.bin, static, ranks, x, lpath, os.path.join(work, "o1"),
                              ["--warmup", str(2 * args.warmup), "--repeat", str(args.repeat)])
                # Re-placed halfway through the warm-up, so that the GEMMs of
                # the new shapes are warm too when the timing starts.
                moved, slots = run(args.bin, placed, ranks, x, lpath, os.path.join(work, "o2"),
                                   ["--warmup", str(2 * args.warmup), "--repeat", str(args.repeat),
                                    "--replan-every", str(args.warmup)])
                same = np.array_equal(np.load(os.path.join(work, "o1", "output0.npy")),
                                      np.load(os.path.join(work, "o2", "output0.npy")))
                compiled = rank_loads(np.arange(experts), routed.astype(float), ranks)
                replaced = rank_loads(slots, routed.astype(float), ranks)
                print("| %d | %d (%d) | %.3f | %.3f | %.2f | %.2f | %.2fx | %.2fx%s |" % (
                    ranks, record, 1 + 10 * record, compiled.mean() / compiled.max(),
                    replaced.mean() / replaced.max(), base, moved, base / moved,
                    compiled.max() / replaced.max(), "" if same else " (outputs differ!)"))
                sys.stdout.flush()


if __name__ == "__main__":
    main()
