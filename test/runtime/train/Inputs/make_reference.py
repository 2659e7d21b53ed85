"""PyTorch's results that moert-train-test must reproduce bit for bit.

Regenerate (it rewrites the folders beside this file) with a Python that has
torch 2.x, transformers and numpy, on an Intel CPU with AVX-512 (PyTorch's CPU
sqrt then takes MKL's AVX-512 path, see SqrtKind in runtime/include/moert/
Train.h; the script refuses to run elsewhere):

    ~/.cache/moe-mlir/corpus-venv/bin/python test/runtime/train/Inputs/make_reference.py

Each optimizer case is a folder of .npy files:
  config  f64[14]: kind (0 sgd, 1 adamw), lr, momentum, dampening, nesterov,
          beta1, beta2, eps, weight_decay, schedule (0 constant, 1 cosine,
          2 linear), warmup, total, max_norm (inf: none), sqrt (0 mkl-avx512,
          1 exact)
  sizes   i64[P]     elements of each parameter (flattened)
  init    f32[N]     the parameters, concatenated
  grads   f32[S,N]   each step's gradients (NaN where a parameter has none)
  mask    bool[S,P]  whether a parameter has a gradient in that step
  lr      f64[S]     the lr of each step (before scheduler.step())
  norms   f32[S]     clip_grad_norm_'s total norm
  expect  f32[S,N]   the parameters after each step
  state   f32[K,N]   final exp_avg, exp_avg_sq (AdamW) or momentum_buffer
                     (SGD); NaN where a parameter has none
  steps   i64[P]     final AdamW step per parameter (0 for SGD)
"""

import os
import subprocess
import sys

import numpy as np
import torch
from transformers import (get_constant_schedule_with_warmup,
                          get_cosine_schedule_with_warmup,
                          get_linear_schedule_with_warmup)

HERE = os.path.dirname(os.path.abspath(__file__))
SIZES = [1, 7, 33, 65, 131]  # (5, 13) is 65; odd sizes end in scalar tails
SCHEDULES = {"constant": 0, "cosine": 1, "linear": 2}


def save(folder, **arrays):
    path = os.path.join(HERE, folder)
    os.makedirs(path, exist_ok=True)
    for name, a in arrays.items():
        np.save(os.path.join(path, name + ".npy"), a)


def make_schedule(opt, kind, warmup, total):
    if kind == "constant":
        return get_constant_schedule_with_warmup(opt, warmup)
    if kind == "cosine":
        return get_cosine_schedule_with_warmup(opt, warmup, total)
    return get_linear_schedule_with_warmup(opt, warmup, total)


def gradients(gen, steps, n):
    """Magnitudes from 1e-12 to 1e6 within a tensor, some exact zeros, and
    whole steps much larger or smaller, so that clipping does and does not
    act."""
    g = torch.randn(steps, n, generator=gen)
    g *= torch.exp(torch.randn(steps, n, generator=gen) * 3)
    g *= torch.exp(torch.randn(steps, 1, generator=gen) * 2)
    g[torch.rand(steps, n, generator=gen) < 0.05] = 0
    return g


def optimizer_case(name, kind, steps=10, lr=1e-3, momentum=0.0,
                   dampening=0.0, nesterov=False, betas=(0.9, 0.999),
                   eps=1e-8, weight_decay=0.0, schedule=("constant", 0, 0),
                   max_norm=float("inf"), absent=0.0, seed=0, sqrt=0):
    gen = torch.Generator().manual_seed(seed)
    n = sum(SIZES)
    # Parameters as small as the updates, so that the updates' last bits
    # (the sqrt's, for one) show in them.
    init = torch.randn(n, generator=gen) * 10 ** (
        -4 * torch.rand(n, generator=gen))
    grads = gradients(gen, steps, n)
    mask = torch.rand(steps, len(SIZES), generator=gen) >= absent
    if absent:
        mask[:3, 0] = False  # a parameter whose first step comes late
    params = [torch.nn.Parameter(t.clone()) for t in init.split(SIZES)]
    if kind == "adamw":
        opt = torch.optim.AdamW(params, lr=lr, betas=betas, eps=eps,
                                weight_decay=weight_decay, foreach=False)
    else:
        opt = torch.optim.SGD(params, lr=lr, momentum=momentum,
                              dampening=dampening, nesterov=nesterov,
                              weight_decay=weight_decay, foreach=False)
    sched = make_schedule(opt, *schedule)
    lrs, norms, expect = [], [], []
    for t in range(steps):
        lrs.append(opt.param_groups[0]["lr"])
        for p, g, m in zip(params, grads[t].split(SIZES), mask[t]):
            p.grad = g.clone() if m else None
        norms.append(torch.nn.utils.clip_grad_norm_(params, max_norm).item())
        opt.step()
        sched.step()
        expect.append(torch.cat([p.detach().clone() for p in params]))

    state = torch.full((2 if kind == "adamw" else 1, n), float("nan"))
    final_steps = []
    for p, chunk in zip(params, state.split(SIZES, dim=1)):
        s = opt.state.get(p, {})
        keys = (["exp_avg", "exp_avg_sq"] if kind == "adamw"
                else ["momentum_buffer"])
        for row, key in zip(chunk, keys):
            if s.get(key) is not None:
                row.copy_(s[key])
        final_steps.append(int(s["step"].item()) if "step" in s else 0)
    grads[~mask.repeat_interleave(torch.tensor(SIZES), dim=1)] = float("nan")
    config = [kind == "adamw", lr, momentum, dampening, nesterov, betas[0],
              betas[1], eps, weight_decay, SCHEDULES[schedule[0]],
              schedule[1], schedule[2], max_norm, sqrt]
    save(name, config=np.array(config, np.float64),
         sizes=np.array(SIZES, np.int64), init=init.numpy(),
         grads=grads.numpy(), mask=mask.numpy(), lr=np.array(lrs, np.float64),
         norms=np.array(norms, np.float32), expect=torch.stack(expect).numpy(),
         state=state.numpy(), steps=np.array(final_steps, np.int64))


CLIPPED_ADAMW = dict(kind="adamw", steps=12, lr=3e-3, betas=(0.8, 0.95),
                     eps=1e-6, weight_decay=0.1, schedule=("cosine", 3, 12),
                     max_norm=1.0, absent=0.25, seed=2)


def clip_case():
    """clip_grad_norm_ on tensors of 0 to 67 elements (each length mod 8
    takes its own path through ATen's norm kernel): a few special trials,
    then trials that clip. A max_norm of 0 means no clipping in moert (torch
    would zero the gradients): its reference is torch's with an infinite
    max_norm."""
    sizes = [0, 1, 3, 4, 5, 7, 12, 15, 33, 67]
    gen = torch.Generator().manual_seed(3)
    trials = [(1e6, 1), (float("inf"), 1), (0.0, 1), (5.0, 1e19),
              (5.0, 1e-25)]
    trials += [(float(10 ** (4 * torch.rand((), generator=gen) - 2)), 1)
               for _ in range(35)]
    grads, expect, norms = [], [], []
    for max_norm, scale in trials:
        g = gradients(gen, 1, sum(sizes))[0] * scale
        grads.append(g.clone())
        tensors = [torch.nn.Parameter(torch.zeros(s)) for s in sizes]
        for p, chunk in zip(tensors, g.split(sizes)):
            p.grad = chunk.clone()
        norms.append(torch.nn.utils.clip_grad_norm_(
            tensors, max_norm if max_norm > 0 else float("inf")).item())
        expect.append(torch.cat([p.grad for p in tensors]))
    save("clip", sizes=np.array(sizes, np.int64),
         max_norms=np.array([m for m, _ in trials], np.float64),
         grads=torch.stack(grads).numpy(), expect=torch.stack(expect).numpy(),
         norms=np.array(norms, np.float32))


def schedule_case(steps=30):
    cases = [("constant", 0, 0, 1e-3), ("constant", 5, 0, 3e-4),
             ("cosine", 0, 20, 1e-3), ("cosine", 5, 20, 0.1),
             ("cosine", 3, 7, 6e-4), ("cosine", 0, 0, 1e-3),
             ("linear", 0, 20, 1e-3), ("linear", 5, 20, 2e-5),
             ("linear", 10, 10, 1e-3), ("linear", 7, 3, 1e-3)]
    lrs = []
    for kind, warmup, total, base in cases:
        opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=base)
        sched = make_schedule(opt, kind, warmup, total)
        row = []
        for _ in range(steps):
            row.append(opt.param_groups[0]["lr"])
            opt.step()
            sched.step()
        lrs.append(row)
    config = [[SCHEDULES[k], w, t, b] for k, w, t, b in cases]
    save("schedules", config=np.array(config, np.float64),
         lr=np.array(lrs, np.float64))


def sqrt_case():
    """Positive values over a wide range (not squares: the root of a rounded
    square is never near a rounding boundary), the ones where MKL's root is
    not the exact one, subnormals and special values."""
    gen = torch.Generator().manual_seed(4)
    pool = (torch.randn(200000, generator=gen).abs()
            * torch.exp(torch.randn(200000, generator=gen) * 6))
    root = pool.sqrt()
    inexact = pool[root.numpy() != np.sqrt(pool.numpy())]
    subnormal = torch.randint(1, 1 << 23, (256,), generator=gen,
                              dtype=torch.int32).view(torch.float32)
    special = torch.tensor([0.0, -0.0, float("inf"), -float("inf"),
                            float("nan"), -1.0, 1.0, 4.0, 0.25, 2.0**-126,
                            2.0**-149, 2.0**-64, 2.0**-70, 3.4028235e38])
    x = torch.cat([pool[:3000], inexact[:1500], pool[:500] * 1e-30,
                   subnormal, special]).float()
    save("sqrt", x=x.numpy(), sqrt=x.sqrt().numpy())
    return len(inexact)


def torch_sqrt_is_exact():
    x = torch.rand(100000) * 10
    return bool((x.sqrt().numpy() == np.sqrt(x.numpy())).all())


def main():
    torch.set_num_threads(1)
    if len(sys.argv) == 2 and sys.argv[1] == "--exact-sqrt-case":
        # Run with MKL_ENABLE_INSTRUCTIONS=AVX2: MKL's sqrt rounds exactly.
        assert torch_sqrt_is_exact(), "MKL's AVX2 sqrt is not exact here"
        optimizer_case("adamw_exact_sqrt", sqrt=1, **CLIPPED_ADAMW)
        return
    if torch_sqrt_is_exact():
        sys.exit("torch's CPU sqrt rounds exactly here: run this on an Intel "
                 "CPU with AVX-512, where MKL's AVX-512 sqrt is used")
    optimizer_case("adamw_default", "adamw", weight_decay=0.01, seed=1)
    optimizer_case("adamw_clip_absent", **CLIPPED_ADAMW)
    optimizer_case("adamw_beta1_low", "adamw", lr=2e-2, betas=(0.3, 0.9),
                   eps=1e-10, schedule=("linear", 2, 10), max_norm=0.5,
                   absent=0.2, seed=5)
    optimizer_case("sgd_plain", "sgd", steps=6, lr=0.1, seed=6)
    optimizer_case("sgd_momentum", "sgd", lr=0.05, momentum=0.9,
                   dampening=0.1, weight_decay=1e-2,
                   schedule=("linear", 2, 8), max_norm=2.0, absent=0.25,
                   seed=7)
    optimizer_case("sgd_nesterov", "sgd", lr=0.02, momentum=0.8,
                   nesterov=True, weight_decay=5e-4,
                   schedule=("cosine", 1, 10), absent=0.2, seed=8)
    clip_case()
    schedule_case()
    inexact = sqrt_case()
    env = dict(os.environ, MKL_ENABLE_INSTRUCTIONS="AVX2")
    subprocess.run([sys.executable, __file__, "--exact-sqrt-case"], env=env,
                   check=True)
    print("torch %s, transformers: written to %s (%d of 200000 sqrt inputs "
          "not exactly rounded)" % (torch.__version__, HERE, inexact))


if __name__ == "__main__":
    main()
