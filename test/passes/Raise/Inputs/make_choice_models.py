"""Writes GShard-style top-k blocks with capacity into the directory given,
with their input and eager output (x.npy, <name>.out.npy), exported by
torch.onnx.export (opset 17, its defaults):
  top3.onnx        three choices, each placed after the pairs of every
                   choice before it (the choice policy, k 3);
  counted_twice    the third choice counts the first choice's pairs twice
                   and the second's not at all: no drop policy says that;
  own_count        the second choice counts its own pairs, not the first's."""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

T, H, F_, E, C = 12, 8, 16, 4, 5


class Block(torch.nn.Module):
    def __init__(self, counts):
        super().__init__()
        # counts[j]: the choices whose pairs choice j's places come after.
        self.counts = counts
        g = torch.Generator().manual_seed(7)
        self.wg = torch.nn.Parameter(torch.randn(H, E, generator=g))
        self.wi = torch.nn.Parameter(0.5 * torch.randn(E, F_, H, generator=g))
        self.wo = torch.nn.Parameter(0.5 * torch.randn(E, H, F_, generator=g))

    def forward(self, x):
        logits = x @ self.wg
        gates = F.softmax(logits, dim=1)
        masks, masked = [], logits
        for _ in self.counts:
            mask = F.one_hot(torch.argmax(masked, dim=1), num_classes=E)
            masked = masked.masked_fill(mask.bool(), float("-inf"))
            masks.append(mask)
        combine = 0
        for j, mask in enumerate(masks):
            places = torch.cumsum(mask, dim=0) - 1
            for i in self.counts[j]:
                places = places + torch.sum(masks[i], dim=0, keepdim=True)
            kept = mask * torch.lt(places, C)
            slots = F.one_hot(torch.sum(places * kept, dim=1), num_classes=C).float()
            gate = torch.einsum("se,se->s", gates, kept.float())
            combine = combine + torch.einsum("se,sc->sec", torch.einsum("s,se->se", gate, kept.float()), slots)
        rows = torch.einsum("sec,sm->ecm", combine.bool().type_as(x), x)
        h = torch.relu(torch.einsum("ecm,efm->ecf", rows, self.wi))
        return torch.einsum("sec,ecm->sm", combine, torch.einsum("ecf,emf->ecm", h, self.wo))


def main(out):
    torch.manual_seed(0)
    x = torch.randn(T, H)
    np.save(os.path.join(out, "x.npy"), x.numpy())
    for name, counts in [("top3", [[], [0], [0, 1]]), ("counted_twice", [[], [0], [0, 0]]),
                         ("own_count", [[], [1]])]:
        block = Block(counts).eval()
        with torch.no_grad():
            np.save(os.path.join(out, name + ".out.npy"), block(x).numpy())
            torch.onnx.export(block, (x,), os.path.join(out, name + ".onnx"), opset_version=17,
                              input_names=["x"], output_names=["y"])


if __name__ == "__main__":
    main(sys.argv[1])
