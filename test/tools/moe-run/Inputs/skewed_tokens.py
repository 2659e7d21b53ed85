"""Tokens for the Mixtral block of test/corpus/hf that mostly pick expert 0
first, so that a re-placement from their loads moves expert weights.

    skewed_tokens.py MODEL.onnx OUT.npy   (8 x 32 x 16 tokens)
"""
import sys
import numpy as np
import onnx
from onnx import numpy_helper
model, out = sys.argv[1], sys.argv[2]
router = [numpy_helper.to_array(t) for t in onnx.load(model).graph.initializer
          if list(t.dims) == [16, 4]][0]
pool = np.random.default_rng(0).standard_normal((20000, 16)).astype(np.float32)
first = np.argmax(pool @ router, axis=1)
tokens = np.concatenate([pool[first == 0][:192], pool[first != 0][:64]])
np.save(out, tokens.reshape(8, 32, 16))
