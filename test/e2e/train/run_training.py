#!/usr/bin/env python3
"""Compiles and trains the models of Inputs/ as a user would, then checks
each run against PyTorch with check_training.py.

    run_training.py --bin DIR --work DIR [--plan ep=2,dp=2 ...] MODEL...

One line per check ("ok ..." or "FAIL ..."). For mixtral on one rank it
also stops the AdamW run at step 10 and resumes it from the checkpoint: the
log and the final weights must equal the uninterrupted run's byte for byte.
With --plan (repeatable), each model is also compiled for that plan and
trained under mpirun on its ranks, and checked against the same one-rank
PyTorch reference. With --reshard FROM:TO (plans; empty is one rank), the
AdamW run stops at step 10 under FROM with a checkpoint and resumes under
TO; the whole curve and the final weights are checked the same way.
--target cuda compiles for the GPU; --build-only compiles the steps and
stops, --run-only trains steps compiled before (the GPU procedure packs
them here and trains them there), and --rtol loosens the curve's tolerance
(check_training.py's; the final weights are then not compared).
"""
import argparse
import filecmp
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
INPUTS = os.path.join(HERE, "Inputs")
OPTIMIZERS = {
    "sgd": ["--lr", "0.05", "--momentum", "0.9"],
    "adamw": ["--lr", "1e-3", "--betas", "0.9,0.95", "--eps", "1e-8",
              "--weight-decay", "0.1", "--clip-grad-norm", "1.0",
              "--warmup-steps", "2", "--schedule", "cosine"],
}


def run(command):
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        print("FAIL " + " ".join(command) + "\n" + result.stderr)
        sys.exit(1)


def compile_args(model, optimizer):
    args = ["--train", "--optimizer=" + optimizer]
    if model == "switch":
        return args + ["--loss=mse"]
    args.append("--loss=causal-lm")
    if model != "deepseek_v3":
        args += ["--moe-load-balancing=aux_loss", "--moe-aux-loss-form=transformers",
                 "--moe-aux-loss-coeff=0.02"]
    return args


def data_args(model):
    if model == "switch":
        return ["--input", "hidden_states=" + os.path.join(INPUTS, "block_x.npy"),
                "--input", "target=" + os.path.join(INPUTS, "block_target.npy"),
                "--batch-size", "1"]
    return [arg for name in ["input_ids", "attention_mask", "labels"]
            for arg in ["--input", f"{name}={os.path.join(INPUTS, name)}.npy"]] + \
        ["--batch-size", "4"]


def plan_args(plan):
    """--ep 2 --dp 2 and the number of ranks for "ep=2,dp=2" (also
    dp_shard=N, which divides dp, dispatcher=all-gather, token_shuffle=1,
    given_routing=1: every router raised as its own ops),
    and moe-train's flags (zero=1: --zero-stage 1)."""
    flags, ranks, train_flags = [], 1, []
    for item in filter(None, plan.split(",")):
        key, value = item.split("=")
        if key == "token_shuffle":
            flags.append("--token-shuffle")
            continue
        if key == "given_routing":
            flags.append("--given-routing")
            continue
        if key == "zero":
            train_flags += ["--zero-stage", value]
            continue
        if key == "redundant":
            flags += ["--redundant-per-rank", value]
            continue
        if key in ("replan", "algorithm"):
            train_flags += ["--replan-every" if key == "replan" else "--placement-algorithm", value]
            continue
        flags += ["--" + key.replace("_", "-"), value]
        if key in ("dp", "ep", "tp", "pp"):
            ranks *= int(value)
    return flags, ranks, train_flags


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--plan", action="append", default=[])
    parser.add_argument("--reshard", action="append", default=[])
    parser.add_argument("--export", default="",
                        help="train Inputs/MODEL.EXPORT.onnx (another export of the same model)")
    parser.add_argument("--target", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--build-only", action="store_true")
    parser.add_argument("--run-only", action="store_true")
    parser.add_argument("--rtol", default="", help="the curve's tolerance (check_training.py --rtol)")
    parser.add_argument("models", nargs="+")
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    if args.reshard:
        for pair in args.reshard:
            source, target = pair.split(":")
            print(f"== resume from {source or 'one rank'} on {target or 'one rank'}")
            for model in args.models:
                reshard(args, model, source, target)
        return
    for plan in args.plan or [""]:
        if plan:
            print(f"== plan {plan}")
        for model in args.models:
            train_model(args, model, plan)


def trainer(args, model, plan, optimizer):
    """The compiled step for `plan` and the command that trains it."""
    tool = lambda name: os.path.join(args.bin, name)
    flags_of_plan, ranks, train_flags = plan_args(plan)
    launch = ["mpirun", "-np", str(ranks)] if ranks > 1 else []
    # The step depends on the compile flags only; the logs on the whole plan.
    export = "." + args.export if args.export else ""
    bundle = os.path.join(args.work, f"{model}{export}.{optimizer}.step{''.join(flags_of_plan)}")
    if not os.path.exists(bundle):
        if args.run_only:
            print(f"FAIL {bundle} was not compiled (--run-only)")
            sys.exit(1)
        run([tool("moe-compile"), os.path.join(INPUTS, model + export + ".onnx"),
             *compile_args(model, optimizer), *flags_of_plan, "--target=" + args.target, "-o", bundle])
    base = os.path.join(args.work, f"{model}{export}.{optimizer}{plan}")
    # One thread per rank: ranks share this machine's cores.
    return base, [*launch, tool("moe-train"), bundle, *data_args(model),
                  "--steps", "20", *OPTIMIZERS[optimizer], *train_flags] + \
        (["--threads", "1"] if launch else [])


def reshard(args, model, source, target):
    _, first = trainer(args, model, source, "adamw")
    _, second = trainer(args, model, target, "adamw")
    out = os.path.join(args.work, f"{model}.resume.{source}.{target}")
    run(first + ["--log", out + ".csv", "--checkpoint-dir", out + ".ckpt",
                 "--stop-after", "10"])
    run(second + ["--log", out + ".csv", "--resume", out + ".ckpt",
                  "--output-dir", out + ".weights"])
    sys.stdout.flush()
    subprocess.run([sys.executable, os.path.join(HERE, "check_training.py"),
                    model, "adamw", out + ".csv", out + ".weights"], check=False)
    sys.stdout.flush()


def train_model(args, model, plan):
    for optimizer in OPTIMIZERS:
        base, train = trainer(args, model, plan, optimizer)
        if args.build_only:
            continue
        run(train + ["--log", base + ".csv", "--output-dir", base + ".weights"])
        sys.stdout.flush()
        check = [model, optimizer, base + ".csv"]
        check += ["--rtol", args.rtol] if args.rtol else [base + ".weights"]
        done = subprocess.run([sys.executable, os.path.join(HERE, "check_training.py"), *check],
                              check=False)
        sys.stdout.flush()
        if done.returncode != 0 and args.run_only:
            sys.exit(1)
        if model == "mixtral" and optimizer == "adamw" and not plan and args.target == "cpu":
            resumed = base + ".resumed"
            run(train + ["--log", resumed + ".csv", "--checkpoint-dir",
                         resumed + ".ckpt", "--stop-after", "10"])
            run(train + ["--log", resumed + ".csv", "--resume", resumed + ".ckpt",
                         "--output-dir", resumed + ".weights"])
            same = filecmp.cmp(base + ".csv", resumed + ".csv", shallow=False)
            names = sorted(os.listdir(base + ".weights"))
            same = same and names == sorted(os.listdir(resumed + ".weights")) and all(
                filecmp.cmp(os.path.join(base + ".weights", n),
                            os.path.join(resumed + ".weights", n), shallow=False)
                for n in names)
            print(("ok" if same else "FAIL") + f" {model} {optimizer} resumed at "
                  "step 10: the same 20 steps and weights, bit for bit")


if __name__ == "__main__":
    main()
