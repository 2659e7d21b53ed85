"""Writes a small synthetic expert-load trace in both formats moe-plan reads.

make_trace.py DIR: DIR/trace.npz as SmartMoE's repacked trace (counts
[records, ranks, layers, microbatches, experts] uint16, iterations [records]
every 10 steps) and DIR/trace.json, the same loads summed over ranks and
microbatches in the stats format (one record per 10 steps). 40 records, 4
ranks, 2 layers, 2 microbatches, 8 experts, top-2 over 64 tokens: layer 0
drifts from uniform to expert 3 taking half the choices, layer 1 keeps
expert 6 hot.
"""

import json
import sys

import numpy as np

records, ranks, layers, microbatches, experts = 40, 4, 2, 2, 8
rng = np.random.default_rng(19981118)
counts = np.zeros((records, ranks, layers, microbatches, experts), np.uint16)
for t in range(records):
    drift = t / (records - 1)
    for layer, hot in ((0, 3), (1, 6)):
        p = np.full(experts, 1.0)
        p[hot] += (7.0 * drift if layer == 0 else 5.0)
        p /= p.sum()
        for r in range(ranks):
            for m in range(microbatches):
                counts[t, r, layer, m] = rng.multinomial(128, p)

np.savez_compressed(sys.argv[1] + "/trace.npz", counts=counts,
                    iterations=np.arange(1, 10 * records, 10, dtype=np.int32))
tokens = counts.sum(axis=(1, 3))
with open(sys.argv[1] + "/trace.json", "w") as f:
    json.dump({"moe_expert_load": 1, "steps_per_record": 10,
               "records": [{"step": 10 * t, "tokens": tokens[t].tolist()}
                           for t in range(records)]}, f)
