#!/usr/bin/env python3
"""The training step's losses against PyTorch (Inputs/make_loss_reference.py):
the model's own loss (transformers' CausalLM exported with its labels),
Megatron's aux loss per layer, its sinkhorn routing in training, with the z-loss, per sequence (`balanced`),
and the cross-entropy without the causal shift, on the tiny Mixtral's first
batch. Each variant is compiled with moe-compile --train and run once with
moe-run; its loss, aux loss and every gradient must be PyTorch's (rtol
1e-5, atol 1e-7).

    check_losses.py --bin DIR --work DIR
"""
import argparse
import os
import subprocess
import sys

import numpy as np

INPUTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "Inputs")
VARIANTS = {
    "model": ["--loss=model"],
    "megatron": ["--loss=causal-lm", "--moe-load-balancing=aux_loss",
                 "--moe-aux-loss-coeff=0.01"],
    "megatron_z": ["--loss=causal-lm", "--moe-load-balancing=aux_loss",
                   "--moe-aux-loss-coeff=0.01", "--moe-z-loss-coeff=0.001"],
    "balanced": ["--loss=causal-lm", "--moe-load-balancing=balanced",
                 "--moe-aux-loss-coeff=0.01"],
    "sinkhorn": ["--loss=causal-lm", "--moe-load-balancing=sinkhorn"],
    "cross_entropy": ["--loss=cross-entropy"],
}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", required=True)
    parser.add_argument("--work", required=True)
    args = parser.parse_args()
    batch = {}
    for name in ("input_ids", "attention_mask", "labels"):
        path = os.path.join(args.work, name + ".npy")
        np.save(path, np.load(os.path.join(INPUTS, name + ".npy"))[:4])
        batch[name] = path
    for variant, flags in VARIANTS.items():
        bundle = os.path.join(args.work, variant)
        out = bundle + ".out"
        for command in ([os.path.join(args.bin, "moe-compile"),
                         os.path.join(INPUTS, "mixtral.with_loss.onnx"
                                      if variant == "model" else "mixtral.onnx"),
                         "--train",
                         "--optimizer=sgd", *flags, "-o", bundle],
                        [os.path.join(args.bin, "moe-run"), bundle,
                         *[a for n, p in batch.items() for a in ("--input", f"{n}={p}")],
                         "--output-dir", out]):
            result = subprocess.run(command, capture_output=True, text=True)
            if result.returncode:
                print(f"FAIL {variant}: {' '.join(command)}\n{result.stderr}")
                sys.exit(1)
        ref = np.load(os.path.join(INPUTS, f"mixtral.losses.{variant}.npz"))
        bad = []
        for key in ref.files:
            name = {"loss": "loss", "aux": "aux_loss"}.get(key, key)
            ours = np.load(os.path.join(out, name.replace(":", "_") + ".npy"))
            if not np.allclose(ours, ref[key], rtol=1e-5, atol=1e-7):
                bad.append(f"{name} (max error {np.max(np.abs(ours - ref[key])):.2e})")
        print(("FAIL " if bad else "ok ") + f"{variant}: loss {float(ref['loss']):.6f}, "
              f"aux {float(ref['aux']):.6f}, {len(ref.files) - 2} gradients"
              + (": " + ", ".join(bad) if bad else ""))


if __name__ == "__main__":
    main()
