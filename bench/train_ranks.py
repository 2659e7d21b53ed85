"""The training step on several ranks: moe-train under mpirun against PyTorch DDP (torch.distributed, gloo).

Called by train_bench.py --ranks N after its one-process figures, on the same
model, data and AdamW settings, every rank on one thread (N ranks share N
cores). moe-train runs the step compiled for each plan (--ep N, --dp N):
every rank computes the layers outside the MoE blocks on its 1/N of the
batch's tokens (moe-sequence-parallel) and its share of the experts' work,
and the dense gradients are summed over the ranks. PyTorch runs DistributedDataParallel:
each rank the whole model on its 1/N of the batch, gradients averaged by
gloo's all-reduce.
"""

import os
import socket
import statistics
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import make_train_reference as reference
import moe_bench


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def adamw_kind(variant):
    """torch.optim.AdamW's implementation for one of train_bench.py's eager variants."""
    return {"for-loop": dict(foreach=False), "foreach": dict(foreach=True)}.get(variant, dict(fused=True))


def _ddp_worker(rank, ranks, port, args, build_model, data, result_path, variant):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=ranks)
    ids, mask, labels = data
    model = torch.nn.parallel.DistributedDataParallel(build_model(args).train())
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=args.lr, betas=(args.beta1, args.beta2), eps=args.eps,
                            weight_decay=args.weight_decay, **adamw_kind(variant))
    times = []
    for step in range(args.warmup + args.steps):
        rows = reference.batch_rows(step, args.batch, ids.shape[0])[rank::ranks]
        dist.barrier()
        start = time.perf_counter()
        opt.zero_grad()
        loss = model(input_ids=ids[rows], attention_mask=mask[rows], labels=labels[rows], use_cache=False).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, args.clip, foreach=variant != "for-loop")
        opt.step()
        if step >= args.warmup:
            times.append((time.perf_counter() - start) * 1e3)
    if rank == 0:
        with open(result_path, "w") as f:
            f.write("%r\n" % statistics.median(times))
    dist.destroy_process_group()


def torch_ddp_ms(args, build_model, ids, mask, labels, ranks, variant):
    """PyTorch DDP's median step in ms over `ranks` processes of one thread, with AdamW `variant`."""
    with tempfile.NamedTemporaryFile("r", suffix=".txt") as result:
        mp.spawn(_ddp_worker, args=(ranks, _free_port(), args, build_model, (ids, mask, labels), result.name,
                                    variant),
                 nprocs=ranks, join=True)
        return float(open(result.name).read())


def moe_train_ranks(args, compile_cmd, plan, ranks, data_paths, parse_summary):
    """moe-train's median step in ms for the step compiled with `plan` (e.g. ["--ep", "2"])."""
    bundle = os.path.join(args.work, "step" + "".join(plan).replace("-", ""))
    cmd = compile_cmd[:-2] + plan + ["-o", bundle]  # compile_cmd ends with "-o BUNDLE"
    if not (args.reuse and os.path.isdir(bundle)):
        moe_bench.run_checked(cmd)
    train = ["mpirun", "-np", str(ranks), os.path.join(args.bin, "moe-train"), bundle]
    for name, path in data_paths.items():
        train += ["--input", "%s=%s" % (name, path)]
    train += ["--steps", str(args.steps), "--batch-size", str(args.batch), "--threads", "1",
              "--lr", repr(args.lr), "--betas", "%r,%r" % (args.beta1, args.beta2), "--eps", repr(args.eps),
              "--weight-decay", repr(args.weight_decay), "--clip-grad-norm", repr(args.clip)]
    env = dict(os.environ, OMPI_MCA_rmaps_base_oversubscribe="1")
    ms, _ = parse_summary(moe_bench.run_checked(train, env=env))
    return ms, " ".join(train)


def report(args, build_model, ids, mask, labels, data_paths, compile_cmd, parse_summary, ours_ms, torch_ms,
           variant):
    """Prints the N-rank figures beside the one-process ones (ours_ms, torch_ms on --threads threads, PyTorch
    eager with AdamW `variant`, its fastest, which DDP uses too)."""
    ranks = args.ranks
    tokens = args.batch * args.seq
    rows = [("moe-train, 1 rank x %d threads" % args.threads, ours_ms),
            ("PyTorch eager (%s AdamW), 1 process x %d threads" % (variant, args.threads), torch_ms)]
    commands = []
    for plan in (["--ep", str(ranks)], ["--dp", str(ranks)]):
        ms, cmd = moe_train_ranks(args, compile_cmd, plan, ranks, data_paths, parse_summary)
        rows.append(("moe-train %s, %d ranks x 1 thread" % (" ".join(plan), ranks), ms))
        commands.append(cmd)
    ddp_ms = torch_ddp_ms(args, build_model, ids, mask, labels, ranks, variant)
    rows.append(("PyTorch DDP (gloo, %s AdamW), %d ranks x 1 thread" % (variant, ranks), ddp_ms))
    print("\n%-56s %10s %10s %15s" % ("", "median ms", "tokens/s", "vs PyTorch DDP"))
    for name, ms in rows:
        print("%-56s %10.1f %10.0f %14.2fx" % (name, ms, tokens / ms * 1e3, ddp_ms / ms))
    best = min(ms for name, ms in rows if name.startswith("moe-train ") and "ranks" in name)
    print("moe-train's best plan on %d ranks / PyTorch DDP: %.2fx (target 1.5x)" % (ranks, ddp_ms / best))
    print("commands:\n  " + "\n  ".join(commands))
