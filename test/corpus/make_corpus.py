#!/usr/bin/python3
"""Regenerate the importer test corpus in this directory.

    /usr/bin/python3 test/corpus/make_corpus.py

Needs torch (1.13), onnx (1.12, opset <= 17) and numpy: Debian's
/usr/bin/python3 has them.  Every model is seeded; re-running gives
byte-identical .npy and .onnx files (see README.md for the .pt files).

For each PyTorch model <name> it writes
    <name>.onnx                 torch.onnx.export(opset_version=17), other options default
    <name>.pt                   torch.jit.save(torch.jit.trace(module, example))
    <name>.in.<input>.npy       the example input (float32)
    <name>.out.<output>.npy     PyTorch eager output for it (float32)
and prints one line per model with the ONNX node counts by op type.
check_corpus.py verifies the result.
"""

import collections
import os
import sys
import warnings

import numpy as np
import onnx
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import models  # noqa: E402
import ort_graphs  # noqa: E402

WEIGHT_STD = 0.2


def init_weights(module, seed):
    """Seeded N(0, 0.2) for every parameter; RMSNorm weights N(1, 0.2)."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            mean = 1.0 if "layernorm" in name else 0.0
            p.normal_(mean, WEIGHT_STD)
    module.eval()
    return module


def path(name):
    return os.path.join(HERE, name)


def save_npy(name, array):
    np.save(path(name), np.ascontiguousarray(array, dtype=np.float32))


def op_counts(model):
    counts = collections.Counter(
        (n.op_type if n.domain in ("", "ai.onnx") else n.domain + "." + n.op_type) for n in model.graph.node)
    return " ".join("%s:%d" % kv for kv in sorted(counts.items()))


def short_warnings(caught):
    seen = collections.OrderedDict()
    for w in caught:
        text = str(w.message).strip().splitlines()[0]
        key = (w.category.__name__, text[:90])
        seen[key] = seen.get(key, 0) + 1
    return ["%s x%d: %s" % (cat, n, text) for (cat, text), n in seen.items()]


def export_torch(name, module, example, input_name="hidden_states", output_name="output", dynamic_axes=None,
                 note=""):
    """Export `module` on `example` to <name>.onnx and <name>.pt and save the
    input and the eager reference output."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torch.no_grad():
            reference = module(example)
        # float32 files, also for bf16 models (NumPy has no bfloat16).
        save_npy("%s.in.%s.npy" % (name, input_name), example.float().numpy())
        save_npy("%s.out.%s.npy" % (name, output_name), reference.float().numpy())
        torch.onnx.export(module, (example,), path(name + ".onnx"), opset_version=17,
                          input_names=[input_name], output_names=[output_name], dynamic_axes=dynamic_axes)
        traced = torch.jit.trace(module, (example,))
    torch.jit.save(traced, path(name + ".pt"))

    model = onnx.load(path(name + ".onnx"))
    print("%-22s %4d nodes  %s" % (name, len(model.graph.node), op_counts(model)))
    if note:
        print("%-22s %s" % ("", note))
    for line in short_warnings(caught):
        print("%-22s warning %s" % ("", line))
    return reference


# --------------------------------------------------------------------------
# The PyTorch models
# --------------------------------------------------------------------------


def make_mixtral():
    module = init_weights(models.MixtralSparseMoeBlock(16, 32, num_experts=4, top_k=2), seed=1)
    torch.manual_seed(101)
    x = torch.randn(2, 4, 16)
    return module, x


def make_mixtral_bf16():
    """mixtral's module and input in bfloat16, as a bf16 checkpoint runs:
    the exporter keeps HF's softmax(dtype=float) as a Cast to float32 after
    the bf16 Softmax, and the weights go back to bf16 before they scale the
    expert outputs."""
    module, x = make_mixtral()
    return module.to(torch.bfloat16), x.to(torch.bfloat16)


def make_qwen2_moe():
    module = init_weights(models.Qwen2MoeSparseMoeBlock(16, 32, 48, num_experts=8, num_experts_per_tok=4,
                                                        norm_topk_prob=False), seed=2)
    torch.manual_seed(102)
    return module, torch.randn(2, 8, 16)


def make_switch():
    module = init_weights(models.SwitchCapacityMoE(16, 32, num_experts=4, capacity_factor=1.0), seed=3)
    torch.manual_seed(103)
    x = torch.randn(16, 16)
    # Count the dropped tokens of the reference (capacity ceil(16 / 4 * 1.0) = 4).
    with torch.no_grad():
        chosen = torch.argmax(module.classifier(x), dim=-1)
    counts = torch.bincount(chosen, minlength=4)
    capacity = int(models.expert_capacity(x, 4, 1.0))
    dropped = int((counts - capacity).clamp(min=0).sum())
    assert dropped >= 1, "the seed must make the reference drop tokens"
    note = "capacity %d, tokens per expert %s, dropped %d" % (capacity, counts.tolist(), dropped)
    return module, x, note


def make_gshard_top2():
    module = init_weights(models.GShardTop2MoE(16, 32, num_experts=4, capacity_factor=0.5), seed=9)
    torch.manual_seed(109)
    x = torch.randn(16, 16)
    # The reference drops first and second choices (capacity ceil(2 * 16 / 4 * 0.5) = 4),
    # and renormalises the gates of tokens that lose their second choice.
    with torch.no_grad():
        logits = module.wg(x)
        first = torch.argmax(logits, dim=1)
        second = torch.argmax(logits.masked_fill(F.one_hot(first, 4).bool(), float("-inf")), dim=1)
    capacity = int(models.top2_capacity(torch.softmax(logits, 1), 1.0, 4))
    placed = [0] * 4
    dropped = [0, 0]
    for j, ids in enumerate((first, second)):
        for e in ids.tolist():
            placed[e] += 1
            dropped[j] += placed[e] > capacity
    assert dropped[1] >= 1, "the seed must make the reference drop second choices"
    note = "capacity %d, first choices %s, second %s, dropped %d first and %d second" % (
        capacity, torch.bincount(first, minlength=4).tolist(), torch.bincount(second, minlength=4).tolist(),
        dropped[0], dropped[1])
    return module, x, note


def make_deepseek_v3():
    module = init_weights(models.DeepseekV3MoE(16, 32, n_routed_experts=8, n_shared_experts=1, num_experts_per_tok=2,
                                               n_group=4, topk_group=2, routed_scaling_factor=2.5,
                                               norm_topk_prob=True), seed=4)
    torch.manual_seed(104)
    x = torch.randn(8, 16)
    gate = module.gate
    with torch.no_grad():
        scores = torch.sigmoid(x @ gate.weight.t())
        unbiased = torch.sort(gate.get_topk_indices(scores), dim=-1).values
        gate.e_score_correction_bias.copy_(torch.randn(8, generator=torch.Generator().manual_seed(204)) * 0.05)
        biased_scores = scores + gate.e_score_correction_bias
        biased = torch.sort(gate.get_topk_indices(scores), dim=-1).values
        ungrouped = torch.sort(torch.topk(biased_scores, 2, dim=-1).indices, dim=-1).values
    changed = int((unbiased != biased).any(dim=-1).sum())
    grouped = int((ungrouped != biased).any(dim=-1).sum())
    assert changed >= 1, "e_score_correction_bias must change at least one selection"
    assert grouped >= 1, "the group limit must change at least one selection"
    note = ("e_score_correction_bias %s changes the selection of %d of 8 tokens; "
            "the group limit changes %d of 8" % (
                [round(float(b), 4) for b in gate.e_score_correction_bias], changed, grouped))
    return module, x, note


def make_deepseek_reference():
    module = init_weights(models.DeepseekReferenceMoE(), seed=7)
    torch.manual_seed(107)
    return module, torch.randn(2, 8, 16)


def make_decoder_layer():
    module = init_weights(models.MixtralDecoderLayer(16, num_heads=4, head_dim=4, ffn_dim=32, num_experts=4, top_k=2),
                          seed=5)
    torch.manual_seed(105)
    return module, torch.randn(1, 8, 16)


def make_mixtral_lost_experts():
    """The original HF loop over `expert_hit`, traced on a sample that hits
    only experts 1 and 3 of 4.

    The sample's channel 0 is the constant 3.0 and the router's column 0 is
    [-2, 2, -2, 2], so every token's top-2 is {1, 3} (the other logit terms
    are ~N(0, 0.8)).  Tracing unrolls the loop twice: the traced and exported
    graphs contain the weights of experts 1 and 3 only (experts 0 and 2 are
    lost), and each unrolled iteration takes its expert-mask row from
    `expert_hit[i]` (NonZero output) while its weights are fixed to expert
    1 or 3.  The reference output (eager, on the sample) equals what the
    graphs compute on the sample only."""
    module = init_weights(models.MixtralSparseMoeBlock(16, 32, num_experts=4, top_k=2, static_loop=False), seed=6)
    with torch.no_grad():
        module.gate.weight[:, 0] = torch.tensor([-2.0, 2.0, -2.0, 2.0])
    torch.manual_seed(106)
    x = torch.randn(2, 4, 16)
    x[..., 0] = 3.0
    with torch.no_grad():
        logits = module.gate(x.view(-1, 16))
    hit = sorted(set(torch.topk(logits, 2, dim=-1).indices.flatten().tolist()))
    assert hit == [1, 3], hit
    return module, x, "experts hit by the sample (kept in the graphs): %s; lost: [0, 2]" % hit


# --------------------------------------------------------------------------
# Hand-built ONNX graphs and malformed files
# --------------------------------------------------------------------------


def save_onnx(name, model, check=True):
    if check:
        onnx.checker.check_model(model)
    onnx.save_model(model, path(name + ".onnx"))
    print("%-22s %4d nodes  %s" % (name, len(model.graph.node), op_counts(model)))


def make_bad_files():
    with open(path("mixtral.onnx"), "rb") as f:
        mixtral = f.read()
    with open(path("bad_truncated.onnx"), "wb") as f:
        f.write(mixtral[: len(mixtral) // 2])
    print("%-22s first %d of %d bytes of mixtral.onnx" % ("bad_truncated", len(mixtral) // 2, len(mixtral)))

    # 64 bytes of 0xFF in the middle of the serialized nodes (GraphProto field 1
    # comes before the initializers), where they break the protobuf framing
    # (an over-long varint or a length running past the end).  The offset is
    # the first one at or before the middle of the node section, stepping back
    # 16 bytes at a time, for which onnx.load fails.
    model = onnx.load_from_string(mixtral)
    node_bytes = sum(len(n.SerializeToString()) for n in model.graph.node)
    start = mixtral.find(model.graph.node[0].SerializeToString())
    offset = start + node_bytes // 2
    while True:
        corrupted = mixtral[:offset] + b"\xff" * 64 + mixtral[offset + 64:]
        try:
            onnx.load_from_string(corrupted)
        except Exception:  # noqa: BLE001 - any parse failure is what we want
            break
        offset -= 16
    with open(path("bad_corrupted.onnx"), "wb") as f:
        f.write(corrupted)
    print("%-22s mixtral.onnx with bytes [%d, %d) set to 0xFF" % ("bad_corrupted", offset, offset + 64))

    with open(path("mixtral.pt"), "rb") as f:
        pt = f.read()
    with open(path("bad_truncated.pt"), "wb") as f:
        f.write(pt[: len(pt) // 2])
    print("%-22s first %d of %d bytes of mixtral.pt" % ("bad_truncated.pt", len(pt) // 2, len(pt)))

    save_onnx("bad_unknown_op", ort_graphs.make_bad_unknown_op(), check=False)
    save_onnx("bad_unsupported_attr", ort_graphs.make_bad_unsupported_attr(), check=False)
    save_onnx("bad_opset9", ort_graphs.make_bad_opset9())
    save_onnx("bad_inconsistent_shapes", ort_graphs.make_bad_inconsistent_shapes())

    external = onnx.load(path("mixtral.onnx"))
    data = "mixtral_external.onnx.data"
    if os.path.exists(path(data)):
        os.remove(path(data))  # onnx appends to an existing data file
    onnx.save_model(external, path("mixtral_external.onnx"), save_as_external_data=True,
                    all_tensors_to_one_file=True, location=data, size_threshold=0)
    print("%-22s mixtral.onnx with its %d initializers in %s (%d bytes)" % (
        "mixtral_external", len(external.graph.initializer), data, os.path.getsize(path(data))))


def main():
    torch.set_num_threads(1)  # deterministic reductions for the reference outputs
    module, x = make_mixtral()
    export_torch("mixtral", module, x)
    module, x = make_mixtral_bf16()
    export_torch("mixtral_bf16", module, x)
    module, x = make_qwen2_moe()
    export_torch("qwen2_moe", module, x)
    module, x, note = make_switch()
    # The token dimension is dynamic so that the capacity formula survives: with
    # a static input shape the exporter folds Shape -> Div -> Mul into a constant.
    export_torch("switch", module, x, dynamic_axes={"hidden_states": {0: "num_tokens"}, "output": {0: "num_tokens"}},
                 note=note)
    module, x, note = make_gshard_top2()
    export_torch("gshard_top2", module, x,
                 dynamic_axes={"hidden_states": {0: "num_tokens"}, "output": {0: "num_tokens"}}, note=note)
    module, x, note = make_deepseek_v3()
    export_torch("deepseek_v3", module, x, note=note)
    module, x = make_deepseek_reference()
    export_torch("deepseek_reference", module, x)
    module, x = make_decoder_layer()
    export_torch("decoder_layer", module, x)
    module, x, note = make_mixtral_lost_experts()
    export_torch("mixtral_lost_experts", module, x, note=note)

    model, inputs, outputs, info = ort_graphs.make_ort_moe()
    save_onnx("ort_moe", model)
    print("%-22s %s" % ("", info))
    for k, v in inputs.items():
        save_npy("ort_moe.in.%s.npy" % k, v)
    for k, v in outputs.items():
        save_npy("ort_moe.out.%s.npy" % k, v)
    model, inputs, outputs = ort_graphs.make_ort_moe_legacy()
    save_onnx("ort_moe_legacy", model)
    for k, v in inputs.items():
        save_npy("ort_moe_legacy.in.%s.npy" % k, v)
    for k, v in outputs.items():
        save_npy("ort_moe_legacy.out.%s.npy" % k, v)
    save_onnx("ort_moe_ambiguous", ort_graphs.make_ort_moe_ambiguous())
    save_onnx("ort_qmoe", ort_graphs.make_ort_qmoe())

    make_bad_files()

    total = sum(os.path.getsize(path(f)) for f in os.listdir(HERE)
                if f.endswith((".onnx", ".pt", ".npy", ".data")))
    print("corpus data files: %d bytes" % total)


if __name__ == "__main__":
    main()
