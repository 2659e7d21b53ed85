#!/usr/bin/env python3
"""PyTorch's gradients for the legacy exporter's MoE blocks of test/corpus/hf.

    PY=/root/.cache/moe-mlir/corpus-venv/bin/python
    $PY test/e2e/train/Inputs/make_legacy_grads.py

`torch.onnx.export(dynamo=False)` folds the router's and the shared
expert's nn.Linear weights, transposed, into unnamed initializers
(`onnx::MatMul_337`): no file records whose they were, so moe-compile
--train refuses them unless the user names them parameters (--params). For
each family, the block is rebuilt as make_hf_corpus.py builds it (its
output must be the committed reference's), and the gradients of
mse(block(x), target) are written keyed by the ONNX initializer each
parameter became (found by value, transposed where the exporter did):
legacy/<family>.grads.npz, legacy/<family>.target.npy.
"""
import io
import os
import sys
import zipfile

import numpy as np
import onnx
import torch
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "..", "..", "..", "corpus", "hf")
sys.path.insert(0, CORPUS)
import make_hf_corpus as hf  # noqa: E402

FAMILIES = ["mixtral", "qwen2_moe"]


def save_npz(path, arrays):
    """np.savez with fixed timestamps, so that two runs give one file."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for key in sorted(arrays):
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.ascontiguousarray(arrays[key]), allow_pickle=False)
            info = zipfile.ZipInfo(key + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, buf.getvalue())


def main():
    torch.set_num_threads(1)
    for name in FAMILIES:
        fam = next(f for f in hf.FAMILIES if f["name"] == name)
        model, _ = hf.build_model(fam)
        block = fam["block"](model, fam["layer"])
        base = os.path.join(CORPUS, name + ".block.legacy")
        x = torch.from_numpy(np.load(base + ".in.hidden_states.npy"))
        want = np.load(base + ".out.output.npy")
        hf.set_impl(model, "eager")
        out = block(x)
        out = out[0] if isinstance(out, tuple) else out
        assert np.allclose(out.detach().numpy(), want, atol=1e-6), name + ": not the committed block"
        target = torch.randn(out.shape, generator=torch.Generator().manual_seed(hf.seed_of(name) + 5))
        loss = torch.nn.functional.mse_loss(out, target)
        params = [(n, p) for n, p in block.named_parameters() if p.requires_grad]
        grads = torch.autograd.grad(loss, [p for _, p in params])
        initializers = {t.name: numpy_helper.to_array(t)
                        for t in onnx.load(base + ".onnx").graph.initializer}
        named = {}
        for (pname, p), g in zip(params, grads):
            value, grad = p.detach().numpy(), g.numpy()
            found = [k for k, v in initializers.items() if k == pname and v.shape == value.shape]
            if found:
                named[found[0]] = grad
                continue
            found = [k for k, v in initializers.items()
                     if value.ndim == 2 and v.shape == value.T.shape and np.array_equal(v, value.T)]
            assert len(found) == 1, "%s: %s is no initializer" % (name, pname)
            named[found[0]] = np.ascontiguousarray(grad.T)
        assert set(named) == set(initializers), (name, set(initializers) - set(named))
        os.makedirs(os.path.join(HERE, "legacy"), exist_ok=True)
        np.save(os.path.join(HERE, "legacy", name + ".target.npy"), target.numpy())
        save_npz(os.path.join(HERE, "legacy", name + ".grads.npz"), named)
        print(name, sorted(named))


if __name__ == "__main__":
    main()
