#!/usr/bin/env python3
"""The MoE losses and the plain cross-entropy, written out in PyTorch, on
the tiny Mixtral of make_train_reference.py and its first batch.

    V=${XDG_CACHE_HOME:-$HOME/.cache}/moe-mlir/corpus-venv
    "$V/bin/python" test/e2e/train/Inputs/make_loss_reference.py

transformers computes only its own aux loss, so the forms moe-compile
offers besides it are written here after their sources
(moe-training.md 4.2, 4.3): Megatron's switch load-balancing loss per layer
(`c E / (k T^2) sum_e n_e sum_t P[t, e]`, counts from the top-k of the
softmax), the same per sequence of S tokens averaged over the sequences
(`balanced`), and ST-MoE's z-loss (`c_z mean_t logsumexp(l_t)^2`), all
added to transformers' causal LM cross-entropy; Megatron's sinkhorn
routing in training (`sinkhorn`, the routers replaced); and the
cross-entropy without the causal shift. Writes `mixtral.losses.<variant>.npz`: `loss`,
`aux` (the MoE part the compiler adds), and the gradient of every
parameter by name.

It also exports the model with its labels, `mixtral.with_loss.onnx`, whose
only output is transformers' own loss (cross-entropy through
SoftmaxCrossEntropyLoss plus its aux loss with router_aux_loss_coef),
exported as make_train_reference.py exports the logits; variant `model`
is that loss, which moe-compile --loss=model differentiates as it is.
"""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_train_reference as ref  # noqa: E402

AUX_COEFF = 0.01
Z_COEFF = 0.001
TOP_K = 2


def megatron_aux(logits, seq_len=None):
    """Switch/Megatron load balancing of one layer's router logits [T, E]."""
    t, e = logits.shape
    length = seq_len or t
    probs = torch.softmax(logits.float(), dim=-1)
    ids = torch.topk(probs, TOP_K, dim=-1).indices
    counts = F.one_hot(ids, e).sum(dim=1).float()  # [T, E]
    sequences = t // length
    counts = counts.reshape(sequences, length, e).sum(dim=1)
    probs = probs.reshape(sequences, length, e).sum(dim=1)
    per_sequence = AUX_COEFF * e / (TOP_K * length * length) * (counts * probs).sum(dim=-1)
    return per_sequence.mean()


def z_loss(logits):
    return Z_COEFF * torch.logsumexp(logits.float(), dim=-1).square().mean()


def sinkhorn(cost, tol=1e-4):
    """Megatron-Core's sinkhorn (moe_utils.py), as moe.router's doc restates it."""
    cost = torch.exp(cost)
    d0 = torch.ones(cost.size(0), dtype=cost.dtype)
    d1 = torch.ones(cost.size(1), dtype=cost.dtype)
    eps = 1e-8
    error = 1e9
    d1_old = d1
    while error > tol:
        d0 = (1 / d0.size(0)) * 1 / (torch.sum(d1 * cost, 1) + eps)
        d1 = (1 / d1.size(0)) * 1 / (torch.sum(d0.unsqueeze(1) * cost, 0) + eps)
        error = torch.mean(torch.abs(d1_old - d1))
        d1_old = d1
    return d1 * cost * d0.unsqueeze(1)


def sinkhorn_router(self, hidden_states):
    """Megatron's sinkhorn load balancing in training (router.py): experts
    from the top-k of sinkhorn(logits) without gradient, weighted by the
    softmax of the logits (sigmoid for top-1), not renormalised."""
    hidden_states = hidden_states.reshape(-1, self.hidden_dim)
    logits = F.linear(hidden_states, self.weight)
    with torch.no_grad():
        _, indices = torch.topk(sinkhorn(logits.float()), self.top_k, dim=1)
    scores = torch.sigmoid(logits.float()) if self.top_k == 1 else torch.softmax(logits.float(), dim=-1)
    return logits, torch.gather(scores, 1, indices), indices


class WithLoss(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask, labels):
        return self.model(input_ids=input_ids, attention_mask=attention_mask, labels=labels,
                          use_cache=False, output_router_logits=True).loss


def export_with_loss(model, ids, mask, labels):
    """transformers' loss as the model's one output, parameters kept as torch-named initializers."""
    import onnx
    import onnx_ir
    model.set_experts_implementation("batched_mm")
    with ref.quiet():
        program = torch.onnx.export(WithLoss(model), (ids, mask, labels), dynamo=True, optimize=False,
                                    input_names=["input_ids", "attention_mask", "labels"],
                                    output_names=["loss"])
    ir_model = program.model
    ref.strip_wrapper_prefix(ir_model)
    ref.protected_optimize(ir_model, {n for n, _ in model.named_parameters()})
    path = ref.path("mixtral.with_loss.onnx")
    onnx_ir.save(ir_model, path)
    proto = onnx.load(path)
    ref.drop_node_metadata(proto)
    onnx.checker.check_model(proto)
    onnx.save(proto, path)


def variant_loss(variant, model, ids, mask, labels):
    if variant == "model":
        return WithLoss(model)(ids, mask, labels), torch.zeros(())
    out = model(input_ids=ids, attention_mask=mask, output_router_logits=True)
    logits = out.logits.float()
    vocab = logits.shape[-1]
    if variant == "sinkhorn":
        router = type(model.model.layers[0].mlp.gate)
        original = router.forward
        router.forward = sinkhorn_router
        try:
            out = model(input_ids=ids, attention_mask=mask)
        finally:
            router.forward = original
        logits = out.logits.float()
        vocab = logits.shape[-1]
        main = F.cross_entropy(logits[:, :-1].reshape(-1, vocab), labels[:, 1:].reshape(-1),
                               ignore_index=-100)
        return main, torch.zeros(())
    if variant == "cross_entropy":
        main = F.cross_entropy(logits.reshape(-1, vocab), labels.reshape(-1), ignore_index=-100)
        return main, torch.zeros(())
    main = F.cross_entropy(logits[:, :-1].reshape(-1, vocab), labels[:, 1:].reshape(-1),
                           ignore_index=-100)
    aux = torch.zeros(())
    for layer_logits in out.router_logits:
        if variant in ("megatron", "megatron_z"):
            aux = aux + megatron_aux(layer_logits)
        if variant == "balanced":
            aux = aux + megatron_aux(layer_logits, seq_len=ids.shape[1])
        if variant == "megatron_z":
            aux = aux + z_loss(layer_logits)
    return main + aux, aux


def main():
    ref.load_data  # the data of make_train_reference.py
    ids, mask, labels = ref.load_data()
    rows = ref.batch_rows(0, ref.BATCH, ref.NUM_SAMPLES)
    ids, mask, labels = ids[rows], mask[rows], labels[rows]
    model, _ = ref.build_model("mixtral")
    export_with_loss(model, ids, mask, labels)
    for variant in ("model", "megatron", "megatron_z", "balanced", "sinkhorn", "cross_entropy"):
        model, _ = ref.build_model("mixtral")
        model.zero_grad()
        loss, aux = variant_loss(variant, model, ids, mask, labels)
        loss.backward()
        arrays = {"loss": loss.detach().numpy(), "aux": aux.detach().numpy()}
        for name, param in model.named_parameters():
            arrays["grad:" + name] = param.grad.detach().numpy().astype(np.float32)
        np.savez(ref.path(f"mixtral.losses.{variant}.npz"), **arrays)
        print(variant, float(loss.detach()), float(aux.detach()))


if __name__ == "__main__":
    main()
