#!/usr/bin/python3
"""Regenerate the small TorchScript archives that the importer's error,
output-naming, functionalization and control-flow tests read, and the
reference inputs and outputs (name.in.x.npy, name.out.output*.npy) of those
that test/e2e/hf_torchscript.py runs.

    /usr/bin/python3 test/lib/Import/TorchScript/Inputs/gen_inputs.py

Needs torch (Debian's /usr/bin/python3 has 1.13).  Each module is traced
with torch.jit.trace and saved with torch.jit.save next to this script.
"""

import os

import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))


class UnknownOp(nn.Module):
    """aten::fft_fft has no ONNX translation."""

    def forward(self, x):
        return torch.fft.fft(x).abs()


class InPlaceInput(nn.Module):
    """Mutates its input; the output sees the mutation."""

    def forward(self, x):
        x.add_(1.0)
        return x * 2.0


class TupleOutput(nn.Module):
    """Two inputs and a tuple of two outputs (output_0, output_1)."""

    def forward(self, x, y):
        return x + y, (x * y).sum(dim=-1)


class InPlaceViews(nn.Module):
    """Writes through select, slice and transposed views; `v`, a view taken
    before the writes, must see them."""

    def forward(self, x):
        y = x * 1.0
        v = y[:, 2:5]
        y[0].mul_(2.0)
        y[:, 1:3].add_(1.0)
        y.t()[3].sub_(0.5)
        y.view(4, 4)[1].div_(4.0)
        return y, v * 1.0


class InPlaceExpand(nn.Module):
    """Writes through expand, which has no inverse."""

    def forward(self, x):
        y = x * 1.0
        y.expand(3, 2, 8)[0].add_(1.0)
        return y


class InPlaceAfterChunk(nn.Module):
    """Writes a tensor whose chunk, taken before, is used after."""

    def forward(self, x):
        y = x * 1.0
        a, b = y.chunk(2, dim=1)
        y.add_(1.0)
        return a * b


class StaticControlFlow(nn.Module):
    """Branches on a static shape and a module attribute, and loops a
    constant number of times, mutating a tensor from outside the loop."""

    def __init__(self):
        super().__init__()
        self.scale = True

    def forward(self, x):
        if x.size(1) == 8:
            y = x * 2.0
        else:
            y = x - 1.0
        if self.scale:
            y = y * 0.5
        out = torch.zeros_like(x)
        acc = x
        for i in range(3):
            out.add_(x * float(i))
            acc = acc + out
        return acc + y


class DataDependentLoop(nn.Module):
    """Loops over the rows that nonzero finds: no static trip count."""

    def forward(self, x):
        hit = torch.nonzero(x > 0)
        out = torch.zeros_like(x)
        for i in range(hit.size(0)):
            out = out + 1.0
        return out


def save(name, module, *example, script=False, reference=None):
    module = module.eval()
    saved = torch.jit.script(module) if script else torch.jit.trace(module, example)
    torch.jit.save(saved, os.path.join(HERE, name + ".pt"))
    if reference is None:
        return
    # Another input than the example, so that nothing traced is baked in.
    import numpy as np

    np.save(os.path.join(HERE, name + ".in.x.npy"), reference.numpy())
    with torch.no_grad():
        outputs = module(reference.clone())
    if isinstance(outputs, torch.Tensor):
        np.save(os.path.join(HERE, name + ".out.output.npy"), outputs.numpy())
    else:
        for i, output in enumerate(outputs):
            np.save(os.path.join(HERE, "%s.out.output_%d.npy" % (name, i)),
                    output.numpy())


def main():
    save("unknown_op", UnknownOp(), torch.randn(2, 8))
    save("inplace_input", InPlaceInput(), torch.randn(2, 8))
    save("tuple_output", TupleOutput(), torch.randn(2, 8), torch.randn(2, 8))
    torch.manual_seed(0)
    save("inplace_views", InPlaceViews(), torch.randn(2, 8),
         reference=torch.randn(2, 8))
    save("inplace_expand", InPlaceExpand(), torch.randn(2, 8))
    save("inplace_after_chunk", InPlaceAfterChunk(), torch.randn(2, 8))
    save("static_control_flow", StaticControlFlow(), script=True,
         reference=torch.randn(2, 8))
    save("data_dependent_loop", DataDependentLoop(), script=True)


if __name__ == "__main__":
    main()
