#!/usr/bin/env python3
"""PyTorch training references for `moe-compile --train` / `moe-train`.

    PY=/root/.cache/moe-mlir/corpus-venv/bin/python
    $PY test/e2e/train/Inputs/make_train_reference.py            # everything
    $PY test/e2e/train/Inputs/make_train_reference.py mixtral     # some models only ("switch" is the block)
    $PY test/e2e/train/Inputs/make_train_reference.py --check build/bin [model ...]   # compiler checks only

Every model is a tiny CausalLM built by the transformers library's own code
(`AutoModelForCausalLM.from_config`, eager attention, float32), initialised by
the library under a fixed seed; the parameters and buffers that the library
initialises to all zeros or all ones (norm weights, biases,
`e_score_correction_bias`, ...) are then set to seeded values around that init
(ones + N(0, 0.1), zeros + N(0, 0.1)), so that a compiler that ignores or
mistrains them fails.  See README.md for the files written, the export route of
each model, the training loop and the results of the compiler checks.
"""

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import torch
import transformers

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                "corpus", "hf"))
import make_hf_corpus as hf_corpus  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))

# ── Shared settings ────────────────────────────────────────────────────────────
VOCAB = 64
SEQ = 16
NUM_SAMPLES = 16
BATCH = 4
STEPS = 20
TRAIN_SEED = 1234
DATA_SEED = 20240
IGNORE_FRACTION = 0.10
# config.initializer_range.  The library's default, 0.02, gives near-uniform routers whose smallest top-k
# gaps over these runs are 1e-6 to 1e-5; with 0.1 they are 6e-5 and more.
INIT_RANGE = 0.1
PERTURB_STD = 0.1  # all-zeros -> N(0, 0.1), all-ones -> 1 + N(0, 0.1)
OPTIMIZERS = ("sgd", "adamw")
SGD = dict(lr=0.05, momentum=0.9)
ADAMW = dict(lr=1e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
CLIP = 1.0
WARMUP = 2
LOGITS_RTOL = 1e-4

COMMON = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
              max_position_embeddings=64, router_aux_loss_coef=0.02, output_router_logits=True,
              tie_word_embeddings=False, attention_dropout=0.0, initializer_range=INIT_RANGE)

# name: config class; config kwargs; seed offset (model seed = crc32(name) + offset: among offsets 0..39,
# the one whose smallest top-k gap over both 20-step runs is largest, see --search-seeds); export route
# ("dynamo": torch.onnx.export(dynamo=True) of a logits-only wrapper, see export_onnx).
FAMILIES = {
    "mixtral": dict(config="MixtralConfig", route="dynamo", seed_offset=39, kwargs=dict(
        COMMON, intermediate_size=32, num_local_experts=4, num_experts_per_tok=2, router_jitter_noise=0.0)),
    "qwen2_moe": dict(config="Qwen2MoeConfig", route="dynamo", seed_offset=0, kwargs=dict(
        COMMON, intermediate_size=32, moe_intermediate_size=32, shared_expert_intermediate_size=32,
        num_experts=4, num_experts_per_tok=2, norm_topk_prob=False)),
    "deepseek_v3": dict(config="DeepseekV3Config", route="dynamo", seed_offset=14, kwargs=dict(
        COMMON, num_key_value_heads=4,  # MLA: as many key/value heads as query heads
        intermediate_size=32, moe_intermediate_size=32, n_routed_experts=8, n_shared_experts=1,
        num_experts_per_tok=2, n_group=4, topk_group=2, first_k_dense_replace=1, routed_scaling_factor=2.5,
        norm_topk_prob=True, q_lora_rank=16, kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=8,
        v_head_dim=8)),
    # GPT-OSS keeps its default max_position_embeddings: its YaRN rope (factor 32 over 4096
    # original positions) is inconsistent with 64.
    "gpt_oss": dict(config="GptOssConfig", route="dynamo", seed_offset=14, kwargs=dict(
        {k: v for k, v in COMMON.items() if k != "max_position_embeddings"},
        intermediate_size=32, num_local_experts=4, num_experts_per_tok=2, head_dim=8)),
}

# The Switch block: top-1, capacity ceil(T / E * CAPACITY_FACTOR), position drops.
SWITCH = dict(tokens=16, hidden=16, ffn=32, experts=4, capacity_factor=1.0, samples=4)


def path(name):
    return os.path.join(HERE, name)


# The corpus generator's helpers: seeds by name, and quiet exporters.
seed_of = hf_corpus.seed_of
quiet = hf_corpus.quiet


def log(*args):
    print(*args, flush=True)


# ── Data ───────────────────────────────────────────────────────────────────────


def make_data():
    gen = torch.Generator().manual_seed(DATA_SEED)
    ids = torch.randint(0, VOCAB, (NUM_SAMPLES, SEQ), generator=gen)
    mask = torch.ones_like(ids)
    labels = ids.clone()
    ignored = torch.rand(NUM_SAMPLES, SEQ, generator=gen) < IGNORE_FRACTION
    labels[ignored] = -100
    np.save(path("input_ids.npy"), ids.numpy())
    np.save(path("attention_mask.npy"), mask.numpy())
    np.save(path("labels.npy"), labels.numpy())
    return ids, mask, labels


def load_data():
    return tuple(torch.from_numpy(np.load(path(n))) for n in ("input_ids.npy", "attention_mask.npy", "labels.npy"))


def batch_rows(step, batch, num_samples):
    """Samples of a step: [step*B, (step+1)*B) modulo the number of samples."""
    return [(step * batch + i) % num_samples for i in range(batch)]


# ── Models ─────────────────────────────────────────────────────────────────────


def perturb(named, gen):
    """Seeded values around the init for the float tensors initialised to all zeros or all ones."""
    changed = []
    with torch.no_grad():
        for name, tensor in named:
            if not tensor.is_floating_point() or tensor.numel() == 0:
                continue
            if not tensor.any():
                base = "zeros"
            elif bool((tensor == 1).all()):
                base = "ones"
            else:
                continue
            noise = torch.randn(tensor.shape, generator=gen) * PERTURB_STD
            tensor.copy_((1.0 if base == "ones" else 0.0) + noise)
            changed.append({"name": name, "init": base})
    return changed


def model_seed(name):
    return seed_of(name) + FAMILIES[name].get("seed_offset", 0)


def build_model(name):
    fam = FAMILIES[name]
    config = getattr(transformers, fam["config"])(**fam["kwargs"])
    torch.manual_seed(model_seed(name))
    with quiet():
        model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32,
                                                              attn_implementation="eager")
    gen = torch.Generator().manual_seed(model_seed(name) + 1)
    changed = perturb(list(model.named_parameters()) + list(model.named_buffers()), gen)
    model.eval()
    return model, changed


def moe_layers(model):
    """Indices of the decoder layers whose MLP is routed (the order of outputs.router_logits)."""
    out = []
    for i, layer in enumerate(model.model.layers):
        mlp = layer.mlp
        if hasattr(mlp, "experts"):
            out.append(i)
    return out


def router_of(model, layer):
    mlp = model.model.layers[layer].mlp
    return mlp.router if hasattr(mlp, "router") else mlp.gate


def selection_scores(model, name, layer, logits):
    """The scores that the layer's top-k selects from, and (DeepSeek) the group scores.

    Softmax families: softmax(logits) (GPT-OSS selects on the logits, the same order).
    DeepSeek-V3: sigmoid(logits) + e_score_correction_bias, outside the chosen groups -inf."""
    k = model.config.num_experts_per_tok
    logits = logits.detach().float()
    if name != "deepseek_v3":
        return torch.softmax(logits, dim=-1), None, k
    gate = router_of(model, layer)
    scores = logits.sigmoid() + gate.e_score_correction_bias
    groups = scores.view(-1, gate.num_group, gate.num_experts // gate.num_group).topk(2, dim=-1)[0].sum(dim=-1)
    chosen = torch.topk(groups, k=gate.topk_group, dim=-1, sorted=False)[1]
    mask = torch.zeros_like(groups).scatter_(1, chosen, 1).bool()
    mask = mask.unsqueeze(-1).expand(-1, gate.num_group, gate.num_experts // gate.num_group).reshape(scores.shape)
    return scores.masked_fill(~mask, float("-inf")), groups, k


def kth_gap(scores, k):
    """Per token: score of the k-th choice minus the (k+1)-th; the minimum over tokens."""
    top = torch.sort(scores, dim=-1, descending=True).values
    return float((top[:, k - 1] - top[:, k]).min())


# ── ONNX export ────────────────────────────────────────────────────────────────


class LogitsOnly(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        return self.model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits


def protected_optimize(ir_model, protected):
    """onnxscript's optimizer (what `optimize=True` runs), except that no node reading a parameter is
    folded: the parameters stay initializers named and laid out as in torch, not folded copies."""
    import onnxscript.optimizer

    def should_fold(node):
        if any(v is not None and v.name in protected and v.is_initializer() for v in node.inputs):
            return False
        return None

    onnxscript.optimizer.optimize_ir(ir_model, should_fold=should_fold)


def strip_wrapper_prefix(ir_model):
    """A wrapper's attribute (`self.model`) prefixes every initializer's name: back to the model's own."""
    for value in list(ir_model.graph.initializers.values()):
        if value.name.startswith("model."):
            ir_model.graph.initializers.pop(value.name)
            value.name = value.name[len("model."):]
            ir_model.graph.register_initializer(value)


def drop_node_metadata(proto):
    """The exporters' per-node metadata (stack traces, FX node and class names: most of the file)."""
    for node in proto.graph.node:
        del node.metadata_props[:]


def export_onnx(name, model, ids, mask, route):
    """route: "dynamo" (the committed files), or, for --export-to only, "exporter" (OnnxExporter, parameters
    protected as in dynamo) or "exporter_folded" (OnnxExporter, its default optimize=True folding)."""
    """Export logits-only, static [B, S] inputs; returns (ONNX proto, experts implementation)."""
    import onnx_ir
    protected = {n for n, _ in model.named_parameters()} | {
        n for n, _ in model.named_buffers() if n.endswith("e_score_correction_bias")}
    saved_flag = model.config.output_router_logits
    model.config.output_router_logits = False  # logits only: no aux_loss / router_logits outputs
    tmpdir = tempfile.mkdtemp()
    try:
        if route in ("exporter", "exporter_folded"):
            from transformers.exporters import OnnxConfig, OnnxExporter
            folded = route == "exporter_folded"
            impl = model.get_experts_implementation().get("")
            with quiet():
                exported = OnnxExporter().export(
                    model, {"input_ids": ids, "attention_mask": mask, "use_cache": False},
                    OnnxConfig(optimize=folded))
            ir_model = exported.program
            if not folded:
                protected_optimize(ir_model, protected)
            names = [v.name for v in ir_model.graph.outputs]
            if names != ["logits"]:
                raise RuntimeError("%s: exporter outputs %s, not [logits]" % (name, names))
        elif route == "dynamo":
            impl = "batched_mm"  # grouped_mm has no ONNX lowering in torch.onnx; eager is data-dependent
            default = model.get_experts_implementation().get("")
            model.set_experts_implementation(impl)
            try:
                with quiet():
                    program = torch.onnx.export(LogitsOnly(model), (ids, mask), dynamo=True, optimize=False,
                                                input_names=["input_ids", "attention_mask"],
                                                output_names=["logits"])
            finally:
                model.set_experts_implementation(default)
            ir_model = program.model
            strip_wrapper_prefix(ir_model)
            protected_optimize(ir_model, protected)
        else:
            raise ValueError(route)
        tmp = os.path.join(tmpdir, "m.onnx")
        onnx_ir.save(ir_model, tmp)
        proto = onnx.load(tmp, load_external_data=True)
    finally:
        model.config.output_router_logits = saved_flag
        shutil.rmtree(tmpdir, ignore_errors=True)
    # OnnxExporter's default export is kept as it writes it: its metadata is how the compiler maps the
    # folded parameters back to torch's names and layouts.
    if route != "exporter_folded":
        drop_node_metadata(proto)
    onnx.checker.check_model(proto)
    return proto, impl


def describe_params(name, model, proto, route, impl, changed):
    """params.json: every trained parameter -> its ONNX initializer(s); raise on anything undescribable."""
    inits = {i.name: onnx.numpy_helper.to_array(i) for i in proto.graph.initializer}
    params = dict(model.named_parameters())
    buffers = dict(model.named_buffers())
    entries, problems = [], []
    for pname, p in params.items():
        if not p.requires_grad:
            continue
        value = p.detach().numpy()
        if pname not in inits:
            problems.append("parameter %s has no initializer" % pname)
            continue
        if inits[pname].shape != value.shape or not np.array_equal(inits[pname], value):
            problems.append("initializer %s differs from the parameter" % pname)
            continue
        entries.append({"parameter": pname, "shape": list(value.shape),
                        "initializers": [{"name": pname, "relation": "identical"}]})
    # No other initializer may hold (a transposed, reshaped or sliced copy of) a parameter's values.
    known = set(params) | set(buffers)
    for iname, arr in inits.items():
        if iname in known or not np.issubdtype(arr.dtype, np.floating) or arr.size < 2:
            continue
        for pname, p in params.items():
            pv = p.detach().numpy()
            if np.isin(arr.ravel(), pv.ravel()).all():
                problems.append("initializer %s %s holds values of parameter %s %s (a transformed copy)" % (
                    iname, list(arr.shape), pname, list(pv.shape)))
    if problems:
        raise RuntimeError("%s: %s" % (name, "; ".join(problems)))
    buffer_entries = []
    for bname, b in buffers.items():
        entry = {"buffer": bname, "shape": list(b.shape), "dtype": str(b.dtype).replace("torch.", "")}
        if bname in inits:
            same = np.array_equal(inits[bname], b.numpy())
            entry["initializer"] = bname
            entry["relation"] = "identical" if same else "differs"
        else:
            entry["initializer"] = None
            entry["relation"] = "not in the graph (folded into constants or unused)"
        buffer_entries.append(entry)
    other = sorted(n for n in inits if n not in known)
    return {
        "model": name,
        "model_class": type(model).__name__,
        "config_class": FAMILIES[name]["config"],
        "export_route": route,
        "experts_implementation": impl,
        "parameters": entries,
        "buffers": buffer_entries,
        "other_initializers": {"count": len(other),
                               "note": "constants of the graph (shapes, masks, folded rotary tables); "
                                       "none holds parameter values"},
        "perturbed_init": changed,
        "moe_layers": moe_layers(model),
        "num_parameters": int(sum(p.numel() for p in params.values())),
    }


# ── Training ───────────────────────────────────────────────────────────────────


def make_optimizer(opt_name, params):
    if opt_name == "sgd":
        return torch.optim.SGD(params, **SGD), None
    opt = torch.optim.AdamW(params, **ADAMW)
    return opt, transformers.get_cosine_schedule_with_warmup(opt, num_warmup_steps=WARMUP, num_training_steps=STEPS)


def grad_norm(params):
    grads = [p.grad for p in params if p.grad is not None]
    return float(torch.nn.utils.get_total_norm(grads, 2.0))


def train_model(name, opt_name, ids, mask, labels, impl):
    torch.manual_seed(TRAIN_SEED)
    model, _ = build_model(name)
    model.set_experts_implementation(impl)
    model.train()
    layers = moe_layers(model)
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    params = [p for _, p in named]
    opt, sched = make_optimizer(opt_name, params)
    coef = model.config.router_aux_loss_coef
    rec = {k: [] for k in ("loss", "ce", "aux", "grad_norm", "lr")}
    for i in layers:
        rec["gap.%d" % i] = []
        rec["topk.%d" % i] = []
        if name == "deepseek_v3":
            rec["group_gap.%d" % i] = []
    no_grad, zero_experts = {}, {}
    grads1 = None
    for step in range(STEPS):
        rows = batch_rows(step, BATCH, NUM_SAMPLES)
        opt.zero_grad()
        out = model(input_ids=ids[rows], attention_mask=mask[rows], labels=labels[rows], use_cache=False,
                    output_router_logits=True)
        with torch.no_grad():
            ce = model.loss_function(logits=out.logits, labels=labels[rows], vocab_size=model.config.vocab_size)
        aux = out.aux_loss
        aux_part = float(coef * aux.detach()) if aux is not None else 0.0
        out.loss.backward()
        for n, p in named:
            if p.grad is None:
                no_grad.setdefault(n, []).append(step)
            elif ".experts." in n and p.dim() == 3:
                # Fused expert tensors: experts that no token reached get an all-zero slice.
                for e in range(p.shape[0]):
                    if not p.grad[e].any():
                        zero_experts.setdefault(n, []).append([step, e])
        if step == 0:  # before clipping
            grads1 = {n: p.grad.detach().clone().numpy() for n, p in named if p.grad is not None}
        if opt_name == "adamw":
            norm = float(torch.nn.utils.clip_grad_norm_(params, CLIP))
        else:
            norm = grad_norm(params)
        lr = opt.param_groups[0]["lr"]
        opt.step()
        if sched is not None:
            sched.step()
        rec["loss"].append(out.loss.item())
        rec["ce"].append(float(ce))
        rec["aux"].append(aux_part)
        rec["grad_norm"].append(norm)
        rec["lr"].append(lr)
        if len(out.router_logits) != len(layers):
            raise RuntimeError("%s: %d router logits for MoE layers %s" % (name, len(out.router_logits), layers))
        for i, logits in zip(layers, out.router_logits):
            scores, groups, k = selection_scores(model, name, i, logits)
            rec["gap.%d" % i].append(kth_gap(scores, k))
            rec["topk.%d" % i].append(torch.sort(torch.topk(scores, k, dim=-1).indices, dim=-1).values.numpy())
            if groups is not None:
                rec["group_gap.%d" % i].append(kth_gap(groups, model.config.topk_group))
    final = {n: p.detach().numpy().copy() for n, p in named}
    curve = {}
    for key, values in rec.items():
        if key.startswith("topk."):
            curve[key] = np.stack(values).astype(np.int8)
        elif key == "lr":
            curve[key] = np.array(values, dtype=np.float64)
        else:
            curve[key] = np.array(values, dtype=np.float32 if key in ("loss", "ce", "aux") else np.float64)
    return curve, grads1, final, no_grad, zero_experts


def save_npz(name, arrays):
    np.savez(path(name), **{k: np.ascontiguousarray(v) for k, v in arrays.items()})


def make_model(name, ids, mask, labels):
    fam = FAMILIES[name]
    torch.manual_seed(TRAIN_SEED)
    model, changed = build_model(name)
    first = batch_rows(0, BATCH, NUM_SAMPLES)
    proto, impl = export_onnx(name, model, ids[first], mask[first], fam["route"])
    info = describe_params(name, model, proto, fam["route"], impl, changed)
    onnx.save(proto, path("%s.onnx" % name))
    model.set_experts_implementation(impl)
    with torch.no_grad():
        logits0 = model(input_ids=ids[first], attention_mask=mask[first], use_cache=False).logits
    np.save(path("%s.logits0.npy" % name), logits0.numpy())
    info["training"] = {}
    for opt_name in OPTIMIZERS:
        curve, grads1, final, no_grad, zero_experts = train_model(name, opt_name, ids, mask, labels, impl)
        save_npz("%s.%s.curve.npz" % (name, opt_name), curve)
        save_npz("%s.%s.grads1.npz" % (name, opt_name), grads1)
        save_npz("%s.%s.final.npz" % (name, opt_name), final)
        gaps = [float(curve[k].min()) for k in curve if k.startswith("gap.")]
        info["training"][opt_name] = {
            "loss_first_last": [float(curve["loss"][0]), float(curve["loss"][-1])],
            "ce_first_last": [float(curve["ce"][0]), float(curve["ce"][-1])],
            "aux_first_last": [float(curve["aux"][0]), float(curve["aux"][-1])],
            "grad_norm_first_last": [float(curve["grad_norm"][0]), float(curve["grad_norm"][-1])],
            "min_topk_gap": min(gaps),
            "min_group_gap": min([float(curve[k].min()) for k in curve if k.startswith("group_gap.")] or [None]
                                 ) if name == "deepseek_v3" else None,
            "params_without_grad": {n: s for n, s in no_grad.items()},
            "expert_slices_with_zero_grad": zero_experts,
        }
        log("%-12s %-5s loss %.6f -> %.6f  ce %.6f -> %.6f  aux %.3g  |g| %.4g -> %.4g  min gap %.3g  no grad: %s" % (
            name, opt_name, curve["loss"][0], curve["loss"][-1], curve["ce"][0], curve["ce"][-1], curve["aux"][0],
            curve["grad_norm"][0], curve["grad_norm"][-1], min(gaps), sorted(no_grad) or "none"))
    with open(path("%s.params.json" % name), "w") as f:
        json.dump(info, f, indent=1)
        f.write("\n")
    return info


# ── The Switch block ───────────────────────────────────────────────────────────


class SwitchExperts(torch.nn.Module):
    """The experts of transformers' SwitchTransformersSparseMLP (T5 DenseActDense: wo(relu(wi x)), no
    bias) with their weights stacked: wi [E, F, H], wo [E, H, F] (nn.Linear layout per expert)."""

    def __init__(self, hidden, ffn, experts):
        super().__init__()
        self.wi = torch.nn.Parameter(torch.empty(experts, ffn, hidden))
        self.wo = torch.nn.Parameter(torch.empty(experts, hidden, ffn))


class SwitchBlock(torch.nn.Module):
    """Switch Transformer top-1 MoE with expert capacity, in the GShard/Switch einsum form of
    test/corpus/models.py SwitchCapacityMoE: the router is SwitchTransformersTop1Router (Linear without
    bias, softmax, argmax, one_hot, cumsum priority, `priority <= capacity`), dispatch [T, E, C], the
    experts on [E, C, H], combine [T, E, C] weighted by the top-1 probability; dropped tokens give 0.
    Input [T, H] (one group); capacity = ceil(T / E * capacity_factor), a constant for the static T."""

    def __init__(self, hidden, ffn, experts, capacity_factor):
        super().__init__()
        self.num_experts = experts
        self.capacity_factor = capacity_factor
        self.classifier = torch.nn.Linear(hidden, experts, bias=False)
        self.experts = SwitchExperts(hidden, ffn, experts)

    def capacity(self, tokens):
        return int(math.ceil(tokens / self.num_experts * self.capacity_factor))

    def route(self, hidden_states):
        router_probs = torch.softmax(self.classifier(hidden_states), dim=-1, dtype=torch.float32)
        expert_index = torch.nn.functional.one_hot(torch.argmax(router_probs, dim=-1), num_classes=self.num_experts)
        token_priority = torch.cumsum(expert_index, dim=-2)
        expert_index = expert_index * (token_priority <= self.capacity(hidden_states.shape[0]))
        return router_probs, expert_index, token_priority

    def forward(self, hidden_states):
        router_probs, expert_index, token_priority = self.route(hidden_states)
        capacity = self.capacity(hidden_states.shape[0])
        top_prob = torch.max(router_probs, dim=-1).values.unsqueeze(-1)  # [T, 1]
        position_in_expert = (token_priority - 1) * expert_index
        dispatch_mask = torch.nn.functional.one_hot(position_in_expert, num_classes=capacity)  # [T, E, C]
        dispatch_mask = (dispatch_mask * expert_index.unsqueeze(-1)).to(hidden_states.dtype)
        combine_weights = top_prob.unsqueeze(-1) * dispatch_mask
        expert_inputs = torch.einsum("tec,th->ech", dispatch_mask, hidden_states)
        h = torch.relu(torch.einsum("ech,efh->ecf", expert_inputs, self.experts.wi))
        expert_outputs = torch.einsum("ecf,ehf->ech", h, self.experts.wo)
        return torch.einsum("tec,ech->th", combine_weights, expert_outputs)


def build_switch():
    c = SWITCH
    torch.manual_seed(seed_of("switch"))
    block = SwitchBlock(c["hidden"], c["ffn"], c["experts"], c["capacity_factor"])
    with torch.no_grad():
        # SwitchTransformersPreTrainedModel._init_weights with initializer_factor 1.0.
        block.classifier.weight.normal_(0.0, 1.0)
        block.experts.wi.normal_(0.0, c["hidden"] ** -0.5)
        block.experts.wo.normal_(0.0, c["ffn"] ** -0.5)
    return block.eval()


def make_switch_data():
    c = SWITCH
    gen = torch.Generator().manual_seed(DATA_SEED + 1)
    x = torch.randn(c["samples"], c["tokens"], c["hidden"], generator=gen)
    target = torch.randn(c["samples"], c["tokens"], c["hidden"], generator=gen)
    np.save(path("block_x.npy"), x.numpy())
    np.save(path("block_target.npy"), target.numpy())
    return x, target


def train_switch(opt_name, xs, targets):
    torch.manual_seed(TRAIN_SEED)
    block = build_switch().train()
    named = list(block.named_parameters())
    params = [p for _, p in named]
    opt, sched = make_optimizer(opt_name, params)
    rec = {k: [] for k in ("loss", "grad_norm", "lr", "gap", "dropped", "tokens_per_expert", "expert")}
    no_grad, grads1 = {}, None
    for step in range(STEPS):
        x, target = xs[step % len(xs)], targets[step % len(xs)]
        opt.zero_grad()
        out = block(x)
        loss = torch.nn.functional.mse_loss(out, target)
        loss.backward()
        for n, p in named:
            if p.grad is None:
                no_grad.setdefault(n, []).append(step)
        if step == 0:
            grads1 = {n: p.grad.detach().clone().numpy() for n, p in named}
        norm = float(torch.nn.utils.clip_grad_norm_(params, CLIP)) if opt_name == "adamw" else grad_norm(params)
        lr = opt.param_groups[0]["lr"]
        with torch.no_grad():
            probs, kept, _ = block.route(x)
            chosen = torch.argmax(probs, dim=-1)
        opt.step()
        if sched is not None:
            sched.step()
        rec["loss"].append(loss.item())
        rec["grad_norm"].append(norm)
        rec["lr"].append(lr)
        rec["gap"].append(kth_gap(probs, 1))
        rec["dropped"].append(int(x.shape[0] - kept.sum()))
        rec["tokens_per_expert"].append(torch.bincount(chosen, minlength=block.num_experts).numpy())
        rec["expert"].append(torch.where(kept.sum(-1) > 0, chosen, -1).numpy())
    curve = {
        "loss": np.array(rec["loss"], dtype=np.float32),
        "grad_norm": np.array(rec["grad_norm"]),
        "lr": np.array(rec["lr"]),
        "gap": np.array(rec["gap"]),
        "dropped": np.array(rec["dropped"], dtype=np.int32),
        "tokens_per_expert": np.stack(rec["tokens_per_expert"]).astype(np.int32),
        "expert": np.stack(rec["expert"]).astype(np.int8),
    }
    final = {n: p.detach().numpy().copy() for n, p in named}
    return curve, grads1, final, no_grad


def make_switch():
    xs, targets = make_switch_data()
    block = build_switch()
    x0 = xs[0]
    tmpdir = tempfile.mkdtemp()
    try:
        tmp = os.path.join(tmpdir, "m.onnx")
        with quiet(), torch.no_grad():
            torch.onnx.export(block, (x0,), tmp, dynamo=False, opset_version=17, do_constant_folding=False,
                              input_names=["hidden_states"], output_names=["output"])
        proto = onnx.load(tmp)
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
    onnx.checker.check_model(proto)
    inits = {i.name: onnx.numpy_helper.to_array(i) for i in proto.graph.initializer}
    entries = []
    for n, p in block.named_parameters():
        if n not in inits or not np.array_equal(inits[n], p.detach().numpy()):
            raise RuntimeError("switch: parameter %s has no identical initializer (initializers: %s)" % (
                n, sorted(inits)))
        entries.append({"parameter": n, "shape": list(p.shape), "initializers": [{"name": n, "relation": "identical"}]})
    onnx.save(proto, path("switch.onnx"))
    with torch.no_grad():
        np.save(path("switch.output0.npy"), block(x0).numpy())
    info = {"model": "switch", "model_class": "SwitchBlock (this script)", "export_route": "legacy",
            "sizes": SWITCH, "capacity": block.capacity(SWITCH["tokens"]), "parameters": entries, "buffers": [],
            "other_initializers": {"count": len(set(inits) - {e["parameter"] for e in entries})},
            "training": {}}
    for opt_name in OPTIMIZERS:
        curve, grads1, final, no_grad = train_switch(opt_name, xs, targets)
        save_npz("switch.%s.curve.npz" % opt_name, curve)
        save_npz("switch.%s.grads1.npz" % opt_name, grads1)
        save_npz("switch.%s.final.npz" % opt_name, final)
        info["training"][opt_name] = {
            "loss_first_last": [float(curve["loss"][0]), float(curve["loss"][-1])],
            "grad_norm_first_last": [float(curve["grad_norm"][0]), float(curve["grad_norm"][-1])],
            "dropped_per_step": curve["dropped"].tolist(),
            "min_top1_gap": float(curve["gap"].min()),
            "params_without_grad": no_grad,
        }
        log("%-12s %-5s loss %.6f -> %.6f  |g| %.4g -> %.4g  min gap %.3g  dropped %s  no grad: %s" % (
            "switch", opt_name, curve["loss"][0], curve["loss"][-1], curve["grad_norm"][0], curve["grad_norm"][-1],
            curve["gap"].min(), curve["dropped"].tolist(), sorted(no_grad) or "none"))
    with open(path("switch.params.json"), "w") as f:
        json.dump(info, f, indent=1)
        f.write("\n")
    return info


# ── Compiler checks ────────────────────────────────────────────────────────────


def run(cmd):
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return proc.returncode, proc.stdout


def check(bindir, names):
    """Import and raise (moe.layer per MoE layer), compile, run forward, compare with PyTorch."""
    compile_, run_ = os.path.join(bindir, "moe-compile"), os.path.join(bindir, "moe-run")
    ids, mask, _ = load_data()
    first = batch_rows(0, BATCH, NUM_SAMPLES)
    results = {}
    for name in names:
        res = results[name] = {}
        work = tempfile.mkdtemp(prefix="train-ref-%s-" % name)
        onnx_file = path("%s.onnx" % name)
        if name == "switch":
            expected_layers = 1
            feeds = {"hidden_states": np.load(path("block_x.npy"))[0]}
            ref_name, ref = "output", np.load(path("switch.output0.npy"))
        else:
            expected_layers = len(json.load(open(path("%s.params.json" % name)))["moe_layers"])
            feeds = {"input_ids": ids[first].numpy(), "attention_mask": mask[first].numpy()}
            ref_name, ref = "logits", np.load(path("%s.logits0.npy" % name))
        try:
            import onnxruntime
            so = onnxruntime.SessionOptions()
            so.log_severity_level = 4
            sess = onnxruntime.InferenceSession(onnx_file, so, providers=["CPUExecutionProvider"])
            got = sess.run([ref_name], feeds)[0]
            res["ort_max_abs_err"] = float(np.max(np.abs(got.astype(np.float64) - ref)))
            res["ort"] = "ok" if np.allclose(got, ref, rtol=LOGITS_RTOL, atol=1e-6) else "FAIL: mismatch"
        except Exception as exc:  # noqa: BLE001
            res["ort"] = "FAIL: %s" % exc
        mlir = os.path.join(work, "x.mlir")
        rc, out = run([compile_, onnx_file, "--emit=moe", "-o", mlir])
        if rc != 0:
            res["raise"] = "FAIL: " + out.strip()
            log("%-12s raise FAIL\n%s" % (name, out))
            continue
        layers = sum(1 for line in open(mlir) if "moe.layer " in line and "=" in line)
        res["moe_layers"] = layers
        res["raise"] = "ok" if layers == expected_layers else "FAIL: %d moe.layer, expected %d" % (
            layers, expected_layers)
        bundle = os.path.join(work, "bundle")
        rc, out = run([compile_, onnx_file, "-o", bundle])
        if rc != 0:
            res["compile"] = "FAIL: " + out.strip()
            log("%-12s compile FAIL\n%s" % (name, out))
            continue
        res["compile"] = "ok"
        args = [run_, bundle, "--output-dir", os.path.join(work, "out")]
        for k, v in feeds.items():
            f = os.path.join(work, "%s.npy" % k)
            np.save(f, v)
            args += ["--input", "%s=%s" % (k, f)]
        rc, out = run(args)
        if rc != 0:
            res["run"] = "FAIL: " + out.strip()
            log("%-12s run FAIL\n%s" % (name, out))
            continue
        got = np.load(os.path.join(work, "out", "%s.npy" % ref_name))
        err = float(np.max(np.abs(got.astype(np.float64) - ref)))
        ok = got.shape == ref.shape and bool(np.allclose(got, ref, rtol=LOGITS_RTOL, atol=1e-6))
        res["run"] = "ok" if ok else "FAIL: mismatch"
        res["max_abs_err"] = err
        res["max_abs_ref"] = float(np.max(np.abs(ref)))
        log("%-12s raise %s (%d moe.layer)  compile ok  run %s  max |err| %.3g (max |ref| %.3g)  onnxruntime %s" % (
            name, res["raise"], layers, res["run"], err, res["max_abs_ref"], res["ort"]))
        shutil.rmtree(work, ignore_errors=True)
    return results


# ── Main ───────────────────────────────────────────────────────────────────────


def versions():
    import onnxscript
    return {"torch": torch.__version__, "transformers": transformers.__version__, "onnx": onnx.__version__,
            "onnxscript": onnxscript.__version__, "numpy": np.__version__, "python": sys.version.split()[0]}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help="models to make (default: all, and the Switch block)")
    parser.add_argument("--check", metavar="BINDIR", help="only check the files with moe-compile and moe-run")
    parser.add_argument("--export-to", metavar="DIR",
                        help="only export the models to DIR/<model>.<route>.onnx with --route; write nothing here")
    parser.add_argument("--route", default="dynamo", choices=["dynamo", "exporter", "exporter_folded"])
    parser.add_argument("--search-seeds", type=int, metavar="N",
                        help="print the smallest router gaps of both runs for seed offsets 0..N-1; write nothing")
    args = parser.parse_args()
    names = args.names or list(FAMILIES) + ["switch"]
    for n in names:
        if n not in FAMILIES and n != "switch":
            parser.error("unknown model %s" % n)
    if args.check:
        results = check(args.check, names)
        file = path("compiler_check.json")
        old = json.load(open(file)) if os.path.exists(file) else {}
        old.update(results)
        with open(file, "w") as f:
            json.dump(old, f, indent=1, sort_keys=True)
            f.write("\n")
        return 0 if all(all(not str(v).startswith("FAIL") for v in r.values()) for r in results.values()) else 1

    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    if args.export_to:
        ids, mask, _ = load_data()
        os.makedirs(args.export_to, exist_ok=True)
        for name in names:
            if name == "switch":
                continue
            model, _ = build_model(name)
            proto = export_onnx(name, model, ids[:BATCH], mask[:BATCH], args.route)[0]
            out = os.path.join(args.export_to, "%s.%s.onnx" % (name, args.route))
            onnx.save(proto, out)
            log(out)
        return 0
    if args.search_seeds:
        ids, mask, labels = load_data()
        for name in names:
            for offset in range(args.search_seeds):
                FAMILIES[name]["seed_offset"] = offset
                gaps = []
                for opt_name in OPTIMIZERS:
                    curve = train_model(name, opt_name, ids, mask, labels, "batched_mm")[0]
                    gaps += [float(curve[k].min()) for k in curve if "gap." in k]
                log("%-12s offset %2d  smallest gap %.3g" % (name, offset, min(gaps)))
        return 0
    ids, mask, labels = make_data()
    summary = {"versions": versions(), "threads": 1, "deterministic_algorithms": True}
    file = path("manifest.json")
    if os.path.exists(file):
        summary = dict(json.load(open(file)), **summary)
    summary.setdefault("models", {})
    for name in names:
        info = make_switch() if name == "switch" else make_model(name, ids, mask, labels)
        summary["models"][name] = {k: info[k] for k in ("export_route", "training") if k in info}
        summary["models"][name]["experts_implementation"] = info.get("experts_implementation")
    with open(file, "w") as f:
        json.dump(summary, f, indent=1, sort_keys=True)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
