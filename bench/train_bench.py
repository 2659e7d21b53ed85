"""Time one training step of a whole transformers Mixtral CausalLM: moe-train against PyTorch on the CPU.

    V=${XDG_CACHE_HOME:-$HOME/.cache}/moe-mlir/corpus-venv
    "$V/bin/python" bench/train_bench.py [--threads 2] [--steps 12] [--warmup 2] [--ranks 2] [--torch fused,compile]

The model comes from transformers' own classes (`MixtralConfig`,
`AutoModelForCausalLM.from_config` under a fixed seed, the library's own
initialisation, float32, eager attention; nothing is downloaded; the norm
weights, all ones at init, set around one as the training references set
them, since the export would merge identical initializers). It is
exported as the training references of test/e2e/train are
(test/e2e/train/Inputs/make_train_reference.py, whose `export_onnx` this
script calls): `torch.onnx.export(dynamo=True, optimize=False)` of a
logits-only wrapper with the `batched_mm` experts, then onnxscript's
optimizer without folding any node that reads a parameter, so that every
parameter stays an initializer under its torch name (the ones
`moe-compile --train` trains). moe-compile compiles the training step once
(`--train --loss=causal-lm --optimizer=adamw`, transformers' aux loss with
the config's `router_aux_loss_coef`), and moe-train trains it `--steps`
steps; the same model trains the same steps on the same batches in PyTorch
(its default experts implementation), with AdamW of the same
hyper-parameters and the same gradient clipping, on the same number of
threads, each way in a process of its own: AdamW's for-loop (the CPU
default, which moe-train matches bit for bit), foreach and fused
implementations (clipping with foreach=True for the last two), and the
model under torch.compile (inductor) with the fused AdamW, its graph breaks
counted by torch._dynamo.explain. Before anything is timed, the loss of
step 1 must agree (rtol 1e-4). The figures are tokens per second of the
median step (forward, backward, gradient clipping and the optimizer step),
the ratios against PyTorch's fastest eager way and torch.compile, and each
process's peak resident memory. With --ranks N, the same step on N ranks of
one thread each follows (train_ranks.py): moe-train compiled for --ep N and
--dp N under mpirun, against PyTorch DDP with gloo and the fastest AdamW.
"""

import argparse
import csv
import os
import re
import statistics
import sys
import time

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, os.path.join(ROOT, "test", "e2e", "train", "Inputs"))
import make_train_reference as reference  # noqa: E402
import moe_bench  # noqa: E402

SEED = 20261126
DATA_SEED = SEED + 1
IGNORE_FRACTION = 0.10  # labels set to -100, as in the training references
# Step 1's loss agrees if |moe-train - PyTorch| <= LOSS_RTOL x |PyTorch|.
LOSS_RTOL = 1e-4


def build_model(args):
    import transformers
    config = transformers.MixtralConfig(
        vocab_size=args.vocab, hidden_size=args.hidden, intermediate_size=args.ffn, num_hidden_layers=args.layers,
        num_attention_heads=args.heads, num_key_value_heads=args.kv_heads, num_local_experts=args.experts,
        num_experts_per_tok=args.top_k, max_position_embeddings=max(4096, args.seq), output_router_logits=True,
        router_jitter_noise=0.0, attention_dropout=0.0, tie_word_embeddings=False)
    torch.manual_seed(SEED)
    with reference.quiet():
        model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32,
                                                              attn_implementation="eager")
    # The norm weights the library sets to all ones, around their init as the training references do
    # (ones + N(0, 0.1)): identical initializers would be merged into one by the export's optimizer, and
    # the merged norms would train as one parameter.
    reference.perturb(list(model.named_parameters()) + list(model.named_buffers()),
                      torch.Generator().manual_seed(SEED + 2))
    return model


def describe(args, model, impl):
    params = sum(p.numel() for p in model.parameters())
    return ("transformers MixtralForCausalLM: %d layers, hidden %d, intermediate %d, %d experts top-%d, "
            "%d heads of %d (%d KV heads), vocab %d, %.1fM parameters; batch %d x seq %d = %d tokens a step; "
            "float32, eager attention; PyTorch's experts implementation %s; aux loss coefficient %g" % (
                args.layers, args.hidden, args.ffn, args.experts, args.top_k, args.heads, args.hidden // args.heads,
                args.kv_heads, args.vocab, params / 1e6, args.batch, args.seq, args.batch * args.seq, impl,
                model.config.router_aux_loss_coef))


def make_data(args, samples):
    """`samples` sequences of random ids, the mask all ones, labels = ids with IGNORE_FRACTION set to -100."""
    gen = torch.Generator().manual_seed(DATA_SEED)
    ids = torch.randint(0, args.vocab, (samples, args.seq), generator=gen)
    mask = torch.ones_like(ids)
    labels = ids.clone()
    labels[torch.rand(samples, args.seq, generator=gen) < IGNORE_FRACTION] = -100
    return ids, mask, labels


def check_parameters(model, onnx_path):
    """Every parameter must be an initializer of the same name and values (what moe-compile --train trains)."""
    import onnx
    proto = onnx.load(onnx_path)
    inits = {i.name: i for i in proto.graph.initializer}
    for name, p in model.named_parameters():
        if name not in inits or not np.array_equal(onnx.numpy_helper.to_array(inits[name]), p.detach().numpy()):
            raise SystemExit("parameter %s is not an identical initializer of %s" % (name, onnx_path))
    return len(list(model.named_parameters()))


def optimizer_flags(args):
    return ["--lr", repr(args.lr), "--betas", "%r,%r" % (args.beta1, args.beta2), "--eps", repr(args.eps),
            "--weight-decay", repr(args.weight_decay), "--clip-grad-norm", repr(args.clip)]


def moe_train(args, bundle, data_paths, steps, log):
    cmd = [os.path.join(args.bin, "moe-train"), bundle]
    for name, path in data_paths.items():
        cmd += ["--input", "%s=%s" % (name, path)]
    cmd += ["--steps", str(steps), "--batch-size", str(args.batch), "--threads", str(args.threads),
            "--log", log] + optimizer_flags(args)
    out = moe_bench.run_checked(cmd)
    losses = [float(row["loss"]) for row in csv.DictReader(open(log))]
    return cmd, out, losses


def parse_summary(out):
    m = re.search(r"trained steps (\d+) to (\d+): loss ([\d.eE+-]+); median step ([\d.]+) ms, ([\d.]+) tokens/s", out)
    if not m:
        raise SystemExit("no summary line in moe-train's output:\n" + out)
    return float(m.group(4)), float(m.group(5))


# PyTorch's ways of running the same step on the CPU. "for-loop" is torch.optim's CPU default, whose
# arithmetic moe-train reproduces bit for bit; "foreach" and "fused" are its faster AdamW and clipping
# (a different order of roundings); "compile" is the model under torch.compile (inductor) with the fused
# AdamW.
TORCH_VARIANTS = ("for-loop", "foreach", "fused", "compile")


def make_optimizer(args, params, variant):
    kind = {"for-loop": dict(foreach=False), "foreach": dict(foreach=True)}.get(variant, dict(fused=True))
    return torch.optim.AdamW(params, lr=args.lr, betas=(args.beta1, args.beta2), eps=args.eps,
                             weight_decay=args.weight_decay, **kind)


class TorchTrainer:
    """The model in PyTorch: AdamW, clip_grad_norm_, one batch of rows [step*B, (step+1)*B) a step."""

    def __init__(self, args, model, ids, mask, labels, variant="for-loop"):
        self.args, self.model = args, model.train()
        self.ids, self.mask, self.labels = ids, mask, labels
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.opt = make_optimizer(args, self.params, variant)
        self.foreach = variant != "for-loop"
        self.forward = torch.compile(self.model) if variant == "compile" else self.model
        self.step_index = 0

    def batch(self, step):
        rows = reference.batch_rows(step, self.args.batch, self.ids.shape[0])
        return dict(input_ids=self.ids[rows], attention_mask=self.mask[rows], labels=self.labels[rows],
                    use_cache=False)

    def step(self):
        batch = self.batch(self.step_index)
        self.step_index += 1
        self.opt.zero_grad()
        loss = self.forward(**batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.params, self.args.clip, foreach=self.foreach)
        self.opt.step()
        return loss.item()


def resident_mib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _torch_child(_index, variant, args, result_path):
    """One PyTorch variant in a process of its own, so that its peak resident memory is its own."""
    import json
    import resource
    torch.set_num_threads(args.threads)
    samples = args.batch * max(4, args.steps + args.warmup)
    ids, mask, labels = make_data(args, samples)
    trainer = TorchTrainer(args, build_model(args), ids, mask, labels, variant)
    result = dict(variant=variant, rss_before=resident_mib(), losses=[], times=[])
    if variant == "compile":
        # Graph breaks, and why, before anything runs compiled.
        explained = torch._dynamo.explain(trainer.model)(**trainer.batch(0))
        result["graph_breaks"] = explained.graph_break_count
        result["break_reasons"] = sorted({str(r.reason).splitlines()[0][:160] for r in explained.break_reasons})
        torch._dynamo.reset()
        start = time.perf_counter()
        result["losses"].append(trainer.step())  # compiles
        result["compile_s"] = time.perf_counter() - start
    for i in range(len(result["losses"]), args.warmup + args.steps):
        start = time.perf_counter()
        result["losses"].append(trainer.step())
        if i >= args.warmup:
            result["times"].append((time.perf_counter() - start) * 1e3)
    result["rss_peak"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    with open(result_path, "w") as f:
        json.dump(result, f)


def torch_variant(args, variant):
    """Runs `variant` in a child process; its times (ms), losses and memory (MiB)."""
    import json
    import tempfile
    import torch.multiprocessing as mp
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "result.json")
        mp.start_processes(_torch_child, args=(variant, args, path), nprocs=1, start_method="spawn")
        with open(path) as f:
            return json.load(f)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2, help="threads for both (default 2)")
    parser.add_argument("--steps", type=int, default=12, help="timed steps of each (default 12)")
    parser.add_argument("--warmup", type=int, default=2,
                        help="untimed PyTorch steps before its timed ones (default 2; moe-train's median is over "
                             "all its --steps steps, the first included)")
    parser.add_argument("--work", default="/tmp/moe-bench-train", help="the export, bundle and data")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--ffn", type=int, default=896, help="intermediate size of each expert (default 896)")
    parser.add_argument("--experts", type=int, default=8)
    parser.add_argument("--top-k", type=int, default=2)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--kv-heads", type=int, default=2)
    parser.add_argument("--vocab", type=int, default=1024)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--beta1", type=float, default=0.9)
    parser.add_argument("--beta2", type=float, default=0.95)
    parser.add_argument("--eps", type=float, default=1e-8)
    parser.add_argument("--weight-decay", type=float, default=0.1)
    parser.add_argument("--clip", type=float, default=1.0, help="clip_grad_norm_ max norm (default 1.0)")
    parser.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"),
                        help="where moe-compile and moe-train are (default build/bin)")
    parser.add_argument("--ranks", type=int, default=0,
                        help="also time N ranks of one thread each: moe-train --ep N and --dp N, PyTorch DDP")
    parser.add_argument("--torch", default=",".join(TORCH_VARIANTS),
                        help="PyTorch's ways to time, comma-separated (default all: %s)" % ",".join(TORCH_VARIANTS))
    parser.add_argument("--reuse", action="store_true",
                        help="reuse the export and the bundle of an earlier run in --work (same sizes)")
    args = parser.parse_args()

    print(moe_bench.machine(), flush=True)
    import transformers
    print("transformers %s; moe-compile and moe-train from %s (moe-compile built %s)" % (
        transformers.__version__, args.bin,
        time.strftime("%Y-%m-%d %H:%M", time.localtime(os.path.getmtime(os.path.join(args.bin, "moe-compile"))))))
    model = build_model(args)
    impl = model.get_experts_implementation().get("")
    print("\n== %s\n== %d threads; AdamW lr %g betas (%g, %g) eps %g weight decay %g, clip_grad_norm_ %g; "
          "%d timed steps (PyTorch after %d warm-up steps)" % (
              describe(args, model, impl), args.threads, args.lr, args.beta1, args.beta2, args.eps,
              args.weight_decay, args.clip, args.steps, args.warmup), flush=True)

    os.makedirs(args.work, exist_ok=True)
    samples = args.batch * max(4, args.steps + args.warmup)
    ids, mask, labels = make_data(args, samples)
    data_paths = {}
    for name, value in (("input_ids", ids), ("attention_mask", mask), ("labels", labels)):
        data_paths[name] = os.path.join(args.work, name + ".npy")
        np.save(data_paths[name], value.numpy())

    onnx_path = os.path.join(args.work, "mixtral.train.onnx")
    bundle = os.path.join(args.work, "step")
    if not (args.reuse and os.path.exists(onnx_path)):
        start = time.time()
        first = reference.batch_rows(0, args.batch, samples)
        proto, export_impl = reference.export_onnx("mixtral", model, ids[first], mask[first], "dynamo")
        import onnx
        onnx.save(proto, onnx_path)
        print("exported %s (%.0f MB, experts %s) in %.1f s as make_train_reference.py does" % (
            onnx_path, os.path.getsize(onnx_path) / 1e6, export_impl, time.time() - start), flush=True)
    print("%d parameters, each an identical initializer of the export" % check_parameters(model, onnx_path))
    compile_cmd = [os.path.join(args.bin, "moe-compile"), onnx_path, "--train", "--loss=causal-lm",
                   "--optimizer=adamw", "--moe-load-balancing=aux_loss", "--moe-aux-loss-form=transformers",
                   "--moe-aux-loss-coeff=%r" % model.config.router_aux_loss_coef, "-o", bundle]
    if not (args.reuse and os.path.isdir(bundle)):
        start = time.time()
        moe_bench.run_checked(compile_cmd)
        print("compiled the training step in %.1f s" % (time.time() - start), flush=True)

    # The check: step 1's loss of both, before anything is timed.
    _, _, ours1 = moe_train(args, bundle, data_paths, 1, os.path.join(args.work, "check.csv"))
    torch.set_num_threads(args.threads)
    with torch.no_grad():
        rows = reference.batch_rows(0, args.batch, samples)
        out = model.train()(input_ids=ids[rows], attention_mask=mask[rows], labels=labels[rows], use_cache=False)
    theirs1 = out.loss.item()
    # The smallest gap between a token's k-th and (k+1)-th router probability: below ~1e-7 the two
    # sides may pick different experts for that token, and the losses differ by more than rounding.
    gap = min(reference.kth_gap(torch.softmax(logits.float(), dim=-1), args.top_k) for logits in out.router_logits)
    err = abs(ours1[0] - theirs1) / abs(theirs1)
    print("step 1 loss: moe-train %.7f, PyTorch %.7f, rel err %.1e%s (smallest top-%d router gap %.1e)" % (
        ours1[0], theirs1, err, "" if err <= LOSS_RTOL else "  MISMATCH", args.top_k, gap), flush=True)
    if err > LOSS_RTOL:
        raise SystemExit("the losses of step 1 differ by more than rtol %g: not timed" % LOSS_RTOL)

    # moe-train: its median step over --steps steps.
    time.sleep(1)  # let threads left spinning in this process go to sleep
    busy = {"moe-train": moe_bench.busy_cores()}
    train_cmd, out, ours = moe_train(args, bundle, data_paths, args.steps, os.path.join(args.work, "moe-train.csv"))
    ours_ms, ours_tps = parse_summary(out)

    m = re.search(r"peak resident memory ([\d.]+) MiB \(([\d.]+) MiB when", out)
    ours_rss = (float(m.group(1)), float(m.group(2))) if m else (float("nan"), float("nan"))
    m = re.search(r"medians: compiled step ([\d.]+) ms, gradient norm ([\d.]+) ms, optimizer ([\d.]+) ms", out)
    phases = "compiled step %s ms, gradient norm %s ms, optimizer %s ms" % m.groups() if m else "?"

    # PyTorch: the same model from the same seed, --warmup untimed steps, then --steps timed, each way
    # in a process of its own.
    del model
    tokens = args.batch * args.seq
    results = {}
    for variant in [v for v in args.torch.split(",") if v]:
        if variant not in TORCH_VARIANTS:
            raise SystemExit("--torch: unknown variant %r (known: %s)" % (variant, ", ".join(TORCH_VARIANTS)))
        time.sleep(1)
        busy["PyTorch " + variant] = moe_bench.busy_cores()
        results[variant] = r = torch_variant(args, variant)
        r["median"] = statistics.median(r["times"])
        n = min(len(ours), len(r["losses"]))
        r["curve_err"] = max(abs(a - b) / abs(b) for a, b in zip(ours[:n], r["losses"][:n]))
        print("PyTorch %s: median step %.1f ms; loss %.5f -> %.5f (max rel difference to moe-train %.1e)%s" % (
            variant, r["median"], r["losses"][0], r["losses"][n - 1], r["curve_err"],
            "; compiled in %.1f s, %d graph breaks%s" % (
                r["compile_s"], r["graph_breaks"],
                (": " + "; ".join(r["break_reasons"])) if r["break_reasons"] else "")
            if variant == "compile" else ""), flush=True)

    print("\n%-40s %10s %10s %8s %11s %11s" % ("", "median ms", "tokens/s", "ours is", "peak MiB",
                                               "before step"))
    print("%-40s %10.1f %10.0f %8s %11.0f %11.0f" % ("moe-train, %d threads" % args.threads, ours_ms, ours_tps, "-",
                                                     ours_rss[0], ours_rss[1]))
    for variant, r in results.items():
        print("%-40s %10.1f %10.0f %7.2fx %11.0f %11.0f" % (
            "PyTorch %s, %d threads" % (variant if variant != "compile" else "torch.compile + fused", args.threads),
            r["median"], tokens / r["median"] * 1e3, r["median"] / ours_ms, r["rss_peak"], r["rss_before"]))
    print("moe-train's step: %s" % phases)
    eager = [v for v in ("for-loop", "foreach", "fused") if v in results]
    if eager:
        best = min(eager, key=lambda v: results[v]["median"])
        print("moe-train / PyTorch eager's fastest (%s) tokens/s: %.2fx (target 2.0x)" % (
            best, results[best]["median"] / ours_ms))
        print("peak resident memory, moe-train / PyTorch eager %s: %.2f (target <= 1)" % (
            best, ours_rss[0] / results[best]["rss_peak"]))
    if "compile" in results:
        print("moe-train / torch.compile tokens/s: %.2fx (target 1.2x)" % (results["compile"]["median"] / ours_ms))
    print("busy cores in the second before each timed run: %s%s" % (
        ", ".join("%s %.2f" % kv for kv in busy.items()),
        "  (other work was running: the timings are noisy)" if max(busy.values()) > 0.2 else ""))
    print("commands:\n  %s\n  %s" % (" ".join(compile_cmd), " ".join(train_cmd)))
    if args.ranks > 1:
        import train_ranks
        fastest = min([v for v in ("for-loop", "foreach", "fused") if v in results] or ["for-loop"],
                      key=lambda v: results[v]["median"] if v in results else 0)
        train_ranks.report(args, build_model, ids, mask, labels, data_paths, compile_cmd, parse_summary,
                           ours_ms, results[fastest]["median"] if fastest in results else float("nan"), fastest)


if __name__ == "__main__":
    main()
