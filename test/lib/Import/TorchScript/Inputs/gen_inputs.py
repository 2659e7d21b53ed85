#!/usr/bin/python3
"""Regenerate the small TorchScript archives that the importer's error and
output-naming tests read.

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
    """Mutates its input: the mutation cannot be made functional."""

    def forward(self, x):
        x.add_(1.0)
        return x * 2.0


class TupleOutput(nn.Module):
    """Two inputs and a tuple of two outputs (output_0, output_1)."""

    def forward(self, x, y):
        return x + y, (x * y).sum(dim=-1)


def save(name, module, *example):
    traced = torch.jit.trace(module.eval(), example)
    torch.jit.save(traced, os.path.join(HERE, name + ".pt"))


def main():
    save("unknown_op", UnknownOp(), torch.randn(2, 8))
    save("inplace_input", InPlaceInput(), torch.randn(2, 8))
    save("tuple_output", TupleOutput(), torch.randn(2, 8), torch.randn(2, 8))


if __name__ == "__main__":
    main()
