#!/usr/bin/env python3
"""Exports make_corpus's GShard top-2 block with PyTorch 2.x's dynamo
exporter (torch.onnx.export(..., dynamo=True), its defaults otherwise):
gshard_top2_dynamo.onnx and its input and reference output. torch's
decompositions write each one-hot as Equal(Unsqueeze(ids, -1), [0..D-1]),
the router as a Gemm, and fold the scripted capacity (the If) into a
constant. ONNX Runtime checks the file against eager. Needs torch 2.x,
onnxscript and onnxruntime (the corpus venv of hf/README.md):

    ~/.cache/moe-mlir/corpus-venv/bin/python test/corpus/export_dynamo.py
"""
import os
import warnings

import torch

import make_corpus

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    torch.set_num_threads(1)
    module, x, note = make_corpus.make_gshard_top2()
    with torch.no_grad():
        reference = module(x)
    make_corpus.save_npy("gshard_top2_dynamo.in.hidden_states.npy", x.numpy())
    make_corpus.save_npy("gshard_top2_dynamo.out.output.npy", reference.numpy())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(module, (x,), input_names=["hidden_states"],
                                    output_names=["output"], dynamo=True)
    path = os.path.join(HERE, "gshard_top2_dynamo.onnx")
    program.save(path)
    # check_corpus.py's onnx cannot read this file: ONNX Runtime checks it.
    import onnxruntime
    got = onnxruntime.InferenceSession(path).run(None, {"hidden_states": x.numpy()})[0]
    error = float(abs(got - reference.numpy()).max())
    assert error <= 1e-5, "ONNX Runtime differs from eager by %g" % error
    print("gshard_top2_dynamo %s; ONNX Runtime vs eager %.2e" % (note, error))


if __name__ == "__main__":
    main()
