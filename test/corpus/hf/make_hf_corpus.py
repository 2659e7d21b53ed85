#!/usr/bin/env python3
"""Build the Hugging Face MoE corpus in this directory from the real transformers code.

    python test/corpus/hf/make_hf_corpus.py [family ...]

Needs the pinned packages of requirements.txt (see README.md for the venv).  No
weights are downloaded: every model is a tiny config built with the library's
own config class, initialised by the library (`AutoModelForCausalLM.from_config`)
under a fixed seed, in eval mode and float32.  Float parameters and buffers that
the library initialises to all zeros (router and expert biases, DeepSeek's
`e_score_correction_bias`, ...) are then set to seeded N(0, 0.2) values so that
an importer ignoring them gives wrong numbers.

For each family it writes, per route (see README.md):

    <family>.block.legacy.onnx      torch.onnx.export(block, (x,), dynamo=False, opset_version=17)
    <family>.block.legacy_dynamic.onnx  the same with batch and sequence dynamic; the reference input is [3, 4, H]
    <family>.block.dynamo.onnx      torch.onnx.export(block, (x,), dynamo=True)
    <family>.model.exporter.onnx    transformers.exporters.OnnxExporter, OnnxConfig()
    mixtral.model.exporter_long.onnx  the same, 640 tokens (1280 router picks)
    <family>.model.exporter_ort.onnx  the same with OnnxConfig(ort_fusions="cuda")
    <family>.block.trace.pt         torch.jit.save(torch.jit.trace(block, (x,)))
    <family>.block.trace_eager.pt   the same with experts_implementation="eager"
    <family>.block.script.pt        torch.jit.save(torch.jit.script(block)) when scripting works
    <family>.<route>.in.<input>.npy / .out.<output>.npy   PyTorch eager reference

The block routes first use the model's own experts implementation (what
`from_config` picks: `grouped_mm`); when the export fails with it they retry with
`eager`, then `batched_mm`, and record every failure.  The ONNX exporter writes
its weights to a `.onnx.data` sidecar; they are folded back into the `.onnx`
file.  Node metadata `pkg.torch.onnx.stack_trace` (absolute source paths) is
dropped from the dynamo-based files; the other node metadata is kept.

Every ONNX file is checked with onnx.checker and run with onnxruntime on the
CPU against the reference; every .pt is reloaded and rerun.  The results go to
manifest.json and to the table in README.md (between the TABLE markers).
"""

import collections
import contextlib
import io
import json
import os
import re
import shutil
import sys
import tempfile
import traceback
import warnings
import zlib

import numpy as np
import onnx
import torch
import transformers

HERE = os.path.dirname(os.path.abspath(__file__))
LEGACY_OPSET = 17
TOKENS = (2, 8)  # [batch, sequence] of every input
INIT_STD = 0.2  # config.initializer_range, and the std of the zero-initialised tensors made nonzero
ORT_ATOL = 1e-4  # match if max |ort - ref| <= ORT_ATOL * max(1, max |ref|)

# ── Families ───────────────────────────────────────────────────────────────────
# name, config class, config kwargs, index of an MoE layer, getter of its MoE block.


def _layers(model):
    return model.model.layers


FAMILIES = [
    dict(name="mixtral", config="MixtralConfig", layer=0, block=lambda m, i: _layers(m)[i].mlp,
         kwargs=dict(vocab_size=96, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                     num_attention_heads=2, num_key_value_heads=1, num_local_experts=4, num_experts_per_tok=2)),
    dict(name="qwen2_moe", config="Qwen2MoeConfig", layer=0, block=lambda m, i: _layers(m)[i].mlp,
         kwargs=dict(vocab_size=96, hidden_size=16, intermediate_size=32, moe_intermediate_size=32,
                     shared_expert_intermediate_size=32, num_hidden_layers=2, num_attention_heads=2,
                     num_key_value_heads=1, num_experts=8, num_experts_per_tok=2)),
    dict(name="qwen3_moe", config="Qwen3MoeConfig", layer=0, block=lambda m, i: _layers(m)[i].mlp,
         kwargs=dict(vocab_size=96, hidden_size=16, intermediate_size=32, moe_intermediate_size=32,
                     num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1, head_dim=8,
                     num_experts=8, num_experts_per_tok=2, norm_topk_prob=True)),
    dict(name="olmoe", config="OlmoeConfig", layer=0, block=lambda m, i: _layers(m)[i].mlp,
         kwargs=dict(vocab_size=96, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                     num_attention_heads=2, num_key_value_heads=1, num_experts=8, num_experts_per_tok=2)),
    dict(name="deepseek_v3", config="DeepseekV3Config", layer=1, block=lambda m, i: _layers(m)[i].mlp,
         kwargs=dict(vocab_size=96, hidden_size=16, intermediate_size=32, moe_intermediate_size=32,
                     num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2, n_routed_experts=8,
                     n_shared_experts=1, num_experts_per_tok=2, n_group=4, topk_group=2, first_k_dense_replace=1,
                     routed_scaling_factor=2.5, norm_topk_prob=True, q_lora_rank=16, kv_lora_rank=16,
                     qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=8, head_dim=8)),
    dict(name="phimoe", config="PhimoeConfig", layer=0, block=lambda m, i: _layers(m)[i].mlp,
         kwargs=dict(vocab_size=96, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                     num_attention_heads=2, num_key_value_heads=1, num_local_experts=4, num_experts_per_tok=2)),
    dict(name="gpt_oss", config="GptOssConfig", layer=0, block=lambda m, i: _layers(m)[i].mlp,
         kwargs=dict(vocab_size=96, hidden_size=16, intermediate_size=32, num_hidden_layers=2, head_dim=8,
                     num_attention_heads=2, num_key_value_heads=1, num_local_experts=4, num_experts_per_tok=2,
                     sliding_window=4, layer_types=["sliding_attention", "full_attention"])),
    dict(name="granitemoe", config="GraniteMoeConfig", layer=0, block=lambda m, i: _layers(m)[i].block_sparse_moe,
         kwargs=dict(vocab_size=96, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                     num_attention_heads=2, num_key_value_heads=1, num_local_experts=4, num_experts_per_tok=2)),
    dict(name="qwen3_next", config="Qwen3NextConfig", layer=0, block=lambda m, i: _layers(m)[i].mlp,
         kwargs=dict(vocab_size=96, hidden_size=16, intermediate_size=32, moe_intermediate_size=32,
                     shared_expert_intermediate_size=32, num_hidden_layers=2, num_attention_heads=2,
                     num_key_value_heads=1, head_dim=8, linear_key_head_dim=8, linear_value_head_dim=8,
                     linear_num_key_heads=2, linear_num_value_heads=2, num_experts=8, num_experts_per_tok=2,
                     layer_types=["linear_attention", "full_attention"])),
    dict(name="llama4", config="Llama4TextConfig", layer=0, block=lambda m, i: _layers(m)[i].feed_forward,
         kwargs=dict(vocab_size=96, hidden_size=16, intermediate_size=32, intermediate_size_mlp=32,
                     num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1, head_dim=8,
                     num_local_experts=4, num_experts_per_tok=2, interleave_moe_layer_step=1,
                     attention_chunk_size=8)),
    dict(name="dbrx", config="DbrxConfig", layer=0, block=lambda m, i: m.transformer.blocks[i].ffn,
         kwargs=dict(vocab_size=96, d_model=16, n_heads=2, n_layers=2, max_seq_len=64,
                     attn_config=dict(kv_n_heads=1, clip_qkv=8.0),
                     ffn_config=dict(ffn_hidden_size=32, moe_num_experts=4, moe_top_k=2)),
         # DbrxAttention reads attn_config.rope_theta, which DbrxAttentionConfig (5.24) does not define.
         fixup=lambda c: setattr(c.attn_config, "rope_theta", c.rope_parameters["rope_theta"])),
    dict(name="jamba", config="JambaConfig", layer=1, block=lambda m, i: _layers(m)[i].feed_forward,
         kwargs=dict(vocab_size=96, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                     num_attention_heads=2, num_key_value_heads=1, num_experts=4, num_experts_per_tok=2,
                     expert_layer_period=2, expert_layer_offset=1, attn_layer_period=2, attn_layer_offset=0,
                     use_mamba_kernels=False, mamba_d_state=4, mamba_d_conv=4, mamba_expand=2, mamba_dt_rank=4)),
]

ROUTES = ["block.legacy", "block.legacy_dynamic", "block.dynamo", "model.exporter",
          "model.exporter_long", "model.exporter_ort", "block.trace", "block.trace_eager",
          "block.script"]
# model.exporter_long: one family only, with more router picks (tokens x k) than the
# constant folders of the compiler evaluate whole (1024).
LONG_FAMILIES = {"mixtral"}
LONG_TOKENS = (1, 640)
FALLBACK_IMPLS = ["eager", "batched_mm"]

# ── Helpers ────────────────────────────────────────────────────────────────────


def path(name):
    return os.path.join(HERE, name)


def seed_of(name):
    return zlib.crc32(name.encode()) & 0x7FFFFFFF


def error_text(exc):
    """The informative part of an exception message, without ANSI colours."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc)).strip()
    text = re.sub(r"/\S*/site-packages/", "site-packages/", text)
    if "## Exception summary" in text:
        text = text.split("## Exception summary", 1)[1]
        text = text.split("(Refer to the full stack trace", 1)[0]
        lines = [line for line in text.splitlines() if line.strip() and line.strip() != "⬆️"]
        text = " | ".join(lines)
    else:
        lines = [line for line in text.splitlines() if line.strip()]
        text = " | ".join(lines[:3])
    return "%s: %s" % (type(exc).__name__, text[:600])


@contextlib.contextmanager
def quiet():
    """Swallow the exporters' progress prints, warnings and C++ logs (file descriptors 1 and 2)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    with open(os.devnull, "w") as devnull, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        os.dup2(devnull.fileno(), 1)
        os.dup2(devnull.fileno(), 2)
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


class FirstOutput(torch.nn.Module):
    """Returns only the hidden states of a block whose forward returns a tuple."""

    def __init__(self, block):
        super().__init__()
        self.block = block

    def forward(self, hidden_states):
        return self.block(hidden_states)[0]


def build_model(fam):
    # "config_class" / "model_class" (optional): classes that the transformers namespace does not
    # export; by default the config class is named by "config" and the model is the causal LM.
    config_class = fam.get("config_class") or getattr(transformers, fam["config"])
    config = config_class(initializer_range=INIT_STD, **fam["kwargs"])
    if "fixup" in fam:
        fam["fixup"](config)
    torch.manual_seed(seed_of(fam["name"]))
    with quiet():
        if fam.get("model_class") is None:
            model = transformers.AutoModelForCausalLM.from_config(config, torch_dtype=torch.float32)
        else:
            model = fam["model_class"]._from_config(config, torch_dtype=torch.float32)
    model.eval()
    # Zero-initialised float tensors that the computation reads: make them nonzero.
    made_nonzero = []
    gen = torch.Generator().manual_seed(seed_of(fam["name"]) + 1)
    with torch.no_grad():
        tensors = list(model.named_parameters()) + list(model.named_buffers())
        for name, tensor in tensors:
            if tensor.is_floating_point() and tensor.numel() > 0 and not tensor.any():
                tensor.copy_(torch.randn(tensor.shape, generator=gen) * INIT_STD)
                made_nonzero.append(name)
    return model, made_nonzero


def set_impl(model, impl):
    if impl is not None:
        model.set_experts_implementation(impl)


def get_impl(model):
    try:
        return model.get_experts_implementation().get("")
    except Exception:  # noqa: BLE001
        return getattr(model.config, "_experts_implementation", None)


def all_nodes(graph):
    for node in graph.node:
        yield node
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from all_nodes(attr.g)
            for g in attr.graphs:
                yield from all_nodes(g)


def inventory(model):
    """{domain: Counter(op: count)} over the graph, its subgraphs and its local functions."""
    inv = collections.defaultdict(collections.Counter)
    for node in all_nodes(model.graph):
        inv[node.domain or "ai.onnx"][node.op_type] += 1
    for fn in model.functions:
        for node in fn.node:
            inv["function:" + (node.domain or "ai.onnx")][node.op_type] += 1
    return inv


def finish_onnx(src, dst):
    """Load (with external data), drop stack traces, save as one file."""
    model = onnx.load(src, load_external_data=True)
    for node in all_nodes(model.graph):
        keep = [p for p in node.metadata_props if p.key != "pkg.torch.onnx.stack_trace"]
        del node.metadata_props[:]
        node.metadata_props.extend(keep)
    onnx.save(model, dst, save_as_external_data=False)
    return onnx.load(dst)


def save_npy(name, array):
    np.save(path(name), np.ascontiguousarray(array))


def run_ort(file, feeds):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.log_severity_level = 4
    sess = ort.InferenceSession(file, so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(None, feeds)))


def compare(got, ref):
    err = float(np.max(np.abs(got.astype(np.float64) - ref.astype(np.float64))))
    ok = err <= ORT_ATOL * max(1.0, float(np.max(np.abs(ref))))
    return err, ok


# ── Routes ─────────────────────────────────────────────────────────────────────


def block_attempts(model, rec):
    """Experts implementations to try for a block route: the model's own, then the fallbacks."""
    default = get_impl(model)
    impls = [default]
    if getattr(model, "_can_set_experts_implementation", lambda: False)():
        impls += [i for i in FALLBACK_IMPLS if i != default]
    return default, impls


def export_block_onnx(fam, model, block, x, x_ref, route, rec):
    default, impls = block_attempts(model, rec)
    out = "%s.%s.onnx" % (fam["name"], route)
    rec["failures"] = []
    for impl in impls:
        set_impl(model, impl)
        tmpdir = tempfile.mkdtemp()
        tmp = os.path.join(tmpdir, "m.onnx")
        try:
            with quiet(), torch.no_grad():
                if route == "block.legacy":
                    torch.onnx.export(block, (x,), tmp, dynamo=False, opset_version=LEGACY_OPSET,
                                      input_names=["hidden_states"], output_names=["output"])
                elif route == "block.legacy_dynamic":
                    # Batch and sequence symbolic, as users export for serving.
                    torch.onnx.export(block, (x,), tmp, dynamo=False, opset_version=LEGACY_OPSET,
                                      input_names=["hidden_states"], output_names=["output"],
                                      dynamic_axes={"hidden_states": {0: "batch", 1: "sequence"},
                                                    "output": {0: "batch", 1: "sequence"}})
                else:
                    torch.onnx.export(block, (x,), tmp, dynamo=True,
                                      input_names=["hidden_states"], output_names=["output"])
            finish_onnx(tmp, path(out))
            rec["experts_impl"] = impl
            break
        except Exception as exc:  # noqa: BLE001
            rec["failures"].append("experts_implementation=%s: %s" % (impl, error_text(exc)))
        finally:
            shutil.rmtree(tmpdir, ignore_errors=True)
    set_impl(model, default)
    if "experts_impl" not in rec:
        rec["exported"] = False
        return
    rec["exported"] = True
    rec["file"] = out
    set_impl(model, rec["experts_impl"])
    with torch.no_grad():
        ref = block(x_ref).numpy()
    set_impl(model, default)
    save_npy("%s.%s.in.hidden_states.npy" % (fam["name"], route), x_ref.numpy())
    save_npy("%s.%s.out.output.npy" % (fam["name"], route), ref)
    check_onnx(out, {"hidden_states": x_ref.numpy()}, {"output": ref}, rec)


def export_model(fam, model, ids, ids_ref, route, rec):
    from transformers.exporters import OnnxConfig, OnnxExporter
    out = "%s.%s.onnx" % (fam["name"], route)
    plain = route in ("model.exporter", "model.exporter_long")
    config = OnnxConfig() if plain else OnnxConfig(ort_fusions="cuda")
    rec["exporter_config"] = "OnnxConfig()" if plain else 'OnnxConfig(ort_fusions="cuda")'
    # The implementation the exporter runs the experts with: its own switch to `batched_mm` for
    # ort_fusions="cuda" (exporter_onnx.use_experts_implementation), else the model's.
    rec["experts_impl"] = "batched_mm" if (route == "model.exporter_ort" and getattr(
        model, "_can_set_experts_implementation", lambda: False)()) else get_impl(model)
    tmpdir = tempfile.mkdtemp()
    sample = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    try:
        with quiet():
            exported = OnnxExporter().export(model, sample, config)
            exported.save_pretrained(tmpdir)
        proto = finish_onnx(os.path.join(tmpdir, "model.onnx"), path(out))
    except Exception as exc:  # noqa: BLE001
        rec["exported"] = False
        rec["failures"] = [error_text(exc)]
        return
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
    rec["exported"] = True
    rec["file"] = out
    graph_inputs = [i.name for i in proto.graph.input]
    graph_outputs = [o.name for o in proto.graph.output]
    rec["graph_inputs"] = graph_inputs
    rec["graph_outputs"] = graph_outputs
    feeds = {}
    mask_ref = torch.ones_like(ids_ref)
    kwargs = {}
    for name in graph_inputs:
        if name == "input_ids":
            feeds[name] = ids_ref.numpy()
            kwargs["input_ids"] = ids_ref
        elif name == "attention_mask":
            feeds[name] = mask_ref.numpy()
            kwargs["attention_mask"] = mask_ref
        elif name == "position_ids":
            pos = torch.arange(ids_ref.shape[1]).expand_as(ids_ref)
            feeds[name] = pos.numpy()
            kwargs["position_ids"] = pos
        else:
            rec.setdefault("notes", []).append("graph input %s has no reference" % name)
    with torch.no_grad():
        result = model(**kwargs, use_cache=True)
    # A causal LM returns logits; a text model without the head (model_class) its hidden states.
    main = "logits" if getattr(result, "logits", None) is not None else "last_hidden_state"
    refs = {main: getattr(result, main).float().numpy()}
    # The KV cache the graph returns as cache.layers.<i>.keys / .values.
    cache = getattr(result, "past_key_values", None)
    for name in graph_outputs:
        parts = name.split(".")
        if len(parts) != 4 or parts[:2] != ["cache", "layers"] or parts[3] not in ("keys", "values"):
            continue
        try:
            tensor = getattr(cache.layers[int(parts[2])], parts[3])
        except (AttributeError, IndexError, TypeError, ValueError):
            continue
        # A sliding-window layer's cache keeps fewer positions than the graph
        # returns: such a cache is no reference for the graph's output.
        declared = [d.dim_value for o in proto.graph.output if o.name == name
                    for d in o.type.tensor_type.shape.dim]
        if torch.is_tensor(tensor) and list(tensor.shape) == declared:
            refs[name] = tensor.float().numpy()
    for name, value in feeds.items():
        save_npy("%s.%s.in.%s.npy" % (fam["name"], route, name), value)
    for name, value in refs.items():
        save_npy("%s.%s.out.%s.npy" % (fam["name"], route, name), value)
    rec["outputs_without_reference"] = [o for o in graph_outputs if o not in refs]
    check_onnx(out, feeds, refs, rec)


def check_onnx(out, feeds, refs, rec):
    proto = onnx.load(path(out))
    rec["bytes"] = os.path.getsize(path(out))
    rec["opsets"] = {(o.domain or "ai.onnx"): o.version for o in proto.opset_import}
    rec["ops"] = {d: dict(sorted(c.items())) for d, c in sorted(inventory(proto).items())}
    try:
        onnx.checker.check_model(proto)
        rec["checker"] = "ok"
    except Exception as exc:  # noqa: BLE001
        rec["checker"] = error_text(exc)
    try:
        got = run_ort(path(out), feeds)
        results = {}
        for name, ref in refs.items():
            err, ok = compare(got[name], ref)
            results[name] = (err, ok)
        rec["ort_cpu"] = {n: {"max_abs_err": e, "match": o} for n, (e, o) in results.items()}
        rec["ort_match"] = all(o for _, o in results.values())
    except Exception as exc:  # noqa: BLE001
        rec["ort_cpu"] = {"error": error_text(exc)}
        rec["ort_match"] = None


def export_pt(fam, model, block, x, x_ref, route, rec):
    out = "%s.%s.pt" % (fam["name"], route)
    default = get_impl(model)
    impl = "eager" if route == "block.trace_eager" else default
    if route == "block.trace_eager" and (impl == default or not getattr(
            model, "_can_set_experts_implementation", lambda: False)()):
        rec["exported"] = False
        rec["failures"] = ["skipped: the model's own experts implementation is already %s or cannot be set" % default]
        return
    set_impl(model, impl)
    rec["experts_impl"] = impl
    try:
        with quiet(), torch.no_grad():
            if route == "block.script":
                module = torch.jit.script(block)
            else:
                module = torch.jit.trace(block, (x,))
            torch.jit.save(module, path(out))
    except Exception as exc:  # noqa: BLE001
        rec["exported"] = False
        rec["failures"] = [error_text(exc)]
        set_impl(model, default)
        return
    rec["exported"] = True
    rec["file"] = out
    rec["bytes"] = os.path.getsize(path(out))
    with torch.no_grad():
        ref = block(x_ref)
    set_impl(model, default)
    save_npy("%s.%s.in.hidden_states.npy" % (fam["name"], route), x_ref.numpy())
    save_npy("%s.%s.out.output.npy" % (fam["name"], route), ref.numpy())
    with quiet():
        loaded = torch.jit.load(path(out))
    graph = str(loaded.inlined_graph)
    rec["ops"] = {"torchscript": dict(sorted(collections.Counter(
        re.findall(r"= ((?:aten|prim|transformers|onnx)::\w+)", graph)).items()))}
    try:
        with torch.no_grad():
            got = loaded(x_ref).numpy()
        err, ok = compare(got, ref.numpy())
        rec["reload"] = {"max_abs_err": err, "match": ok}
    except Exception as exc:  # noqa: BLE001
        rec["reload"] = {"error": error_text(exc)}


# ── Per family ─────────────────────────────────────────────────────────────────


def make_family(fam, routes=None):
    name = fam["name"]
    recs = {}
    try:
        model, made_nonzero = build_model(fam)
    except Exception as exc:  # noqa: BLE001
        return {"error": error_text(exc)}, {}
    info = {
        "config_class": fam["config"],
        "model_class": type(model).__name__,
        "config_kwargs": fam["kwargs"],
        "made_nonzero": made_nonzero,
        "experts_impl_default": get_impl(model),
        "moe_layer": fam["layer"],
    }
    raw_block = fam["block"](model, fam["layer"])
    info["block_class"] = type(raw_block).__name__
    hidden = model.config.hidden_size if hasattr(model.config, "hidden_size") else model.config.d_model
    gen = torch.Generator().manual_seed(seed_of(name) + 2)
    x = torch.randn(2, 8, hidden, generator=gen)
    x_ref = torch.randn(2, 8, hidden, generator=gen)
    ids = torch.randint(0, model.config.vocab_size, TOKENS, generator=gen)
    ids_ref = torch.randint(0, model.config.vocab_size, TOKENS, generator=gen)
    with torch.no_grad():
        sample_out = raw_block(x)
    block = raw_block
    if isinstance(sample_out, tuple):
        block = FirstOutput(raw_block).eval()
        info["block_wrapped"] = "%s returns a tuple of %d; exported through a wrapper returning element 0" % (
            type(raw_block).__name__, len(sample_out))
    # Effect of the tensors made nonzero on the block output (0 would mean the test could not see them).
    block_nonzero = [n for n in made_nonzero if n.startswith(block_prefix(model, raw_block))]
    if block_nonzero:
        with torch.no_grad():
            y1 = block(x_ref)
            saved = {n: t.detach().clone() for n, t in named_tensors(model).items() if n in block_nonzero}
            for n in block_nonzero:
                named_tensors(model)[n].zero_()
            y0 = block(x_ref)
            for n, t in saved.items():
                named_tensors(model)[n].copy_(t)
        info["block_nonzero_effect"] = float((y1 - y0).abs().max())
    for route in routes or ROUTES:
        if route == "model.exporter_long" and name not in LONG_FAMILIES:
            continue
        rec = {"family": name, "route": route}
        try:
            if route == "model.exporter_long":
                gen_long = torch.Generator().manual_seed(seed_of(name) + 4)
                long_ids = torch.randint(0, model.config.vocab_size, LONG_TOKENS, generator=gen_long)
                long_ref = torch.randint(0, model.config.vocab_size, LONG_TOKENS, generator=gen_long)
                export_model(fam, model, long_ids, long_ref, route, rec)
            elif route == "block.legacy_dynamic":
                # The reference input has another shape than the traced one.
                gen_dynamic = torch.Generator().manual_seed(seed_of(name) + 3)
                x_dynamic = torch.randn(3, 4, hidden, generator=gen_dynamic)
                export_block_onnx(fam, model, block, x, x_dynamic, route, rec)
            elif route in ("block.legacy", "block.dynamo"):
                export_block_onnx(fam, model, block, x, x_ref, route, rec)
            elif route.startswith("model."):
                export_model(fam, model, ids, ids_ref, route, rec)
            else:
                export_pt(fam, model, block, x, x_ref, route, rec)
        except Exception as exc:  # noqa: BLE001
            rec["exported"] = False
            rec.setdefault("failures", []).append("script error: " + error_text(exc))
            traceback.print_exc()
        recs[route] = rec
        print(summary_line(rec), flush=True)
    return info, recs


def named_tensors(model):
    d = dict(model.named_parameters())
    d.update(dict(model.named_buffers()))
    return d


def block_prefix(model, block):
    for n, m in model.named_modules():
        if m is block:
            return n + "."
    return "\0"


def ops_text(rec):
    parts = []
    for domain, counts in rec.get("ops", {}).items():
        prefix = "" if domain in ("ai.onnx", "torchscript") else domain + "."
        parts += ["%s%s:%d" % (prefix, op, n) for op, n in counts.items()]
    return " ".join(parts)


def ort_text(rec):
    if "ort_cpu" in rec:
        if "error" in rec["ort_cpu"]:
            return "ORT error"
        return " ".join("%s err %.2e %s" % (n, v["max_abs_err"], "ok" if v["match"] else "MISMATCH")
                        for n, v in rec["ort_cpu"].items())
    if "reload" in rec:
        if "error" in rec["reload"]:
            return "reload error"
        return "reload err %.2e %s" % (rec["reload"]["max_abs_err"], "ok" if rec["reload"]["match"] else "MISMATCH")
    return ""


def summary_line(rec):
    if not rec.get("exported"):
        return "%-12s %-20s FAILED  %s" % (rec["family"], rec["route"], (rec.get("failures") or ["?"])[-1][:300])
    return "%-12s %-20s %-10s opset %s  %s  [%s]" % (
        rec["family"], rec["route"], rec.get("experts_impl"), rec.get("opsets", {}).get("ai.onnx", "-"),
        ort_text(rec), ops_text(rec))


# ── README table ───────────────────────────────────────────────────────────────


def table(families, records):
    rows = ["| file | family | route | experts impl | default opset | other domains | ops | ORT CPU / reload | notes |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for fam in families:
        name = fam["name"]
        for route in ROUTES:
            rec = records.get(name, {}).get(route)
            if rec is None:
                continue
            if not rec.get("exported"):
                notes = "; ".join(rec.get("failures", [])).replace("|", "\\|")
                rows.append("| — | %s | %s | — | — | — | — | — | **not exported**: %s |" % (name, route, notes))
                continue
            opsets = rec.get("opsets", {})
            other = ", ".join("%s v%d" % (d, v) for d, v in opsets.items() if d != "ai.onnx") or "—"
            notes = []
            if rec.get("failures"):
                notes.append("failed first with " + "; ".join(rec["failures"]))
            if rec.get("outputs_without_reference"):
                notes.append("outputs without reference: " + ", ".join(rec["outputs_without_reference"]))
            if "ort_cpu" in rec and "error" in rec["ort_cpu"]:
                notes.append("ORT: " + rec["ort_cpu"]["error"])
            if "reload" in rec and "error" in rec["reload"]:
                notes.append("reload: " + rec["reload"]["error"])
            if rec.get("checker", "ok") != "ok":
                notes.append("onnx.checker: " + rec["checker"])
            notes += rec.get("notes", [])
            rows.append("| `%s` | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                rec["file"], name, route, rec.get("experts_impl"), opsets.get("ai.onnx", "—"), other,
                ops_text(rec), ort_text(rec), "; ".join(notes).replace("|", "\\|") or ""))
    return "\n".join(rows)


def family_table(infos):
    rows = ["| family | config class | model class | MoE block (layer) | tensors made nonzero | their effect on the block output (max abs) |",
            "| --- | --- | --- | --- | --- | --- |"]
    for name, info in infos.items():
        if "error" in info:
            rows.append("| %s | — | — | — | — | build failed: %s |" % (name, info["error"]))
            continue
        block = "`%s` (%d)" % (info["block_class"], info["moe_layer"])
        if info.get("block_wrapped"):
            block += "; " + info["block_wrapped"]
        rows.append("| %s | `%s` | `%s` | %s | %s | %s |" % (
            name, info["config_class"], info["model_class"], block,
            ", ".join("`%s`" % n for n in info["made_nonzero"]) or "—",
            "%.3g" % info["block_nonzero_effect"] if "block_nonzero_effect" in info else "—"))
    return "\n".join(rows)


def union_ops(records):
    union = collections.defaultdict(set)
    for recs in records.values():
        for rec in recs.values():
            for domain, counts in rec.get("ops", {}).items():
                union[domain].update(counts)
    return {d: sorted(s) for d, s in sorted(union.items())}


def write_readme(families, infos, records):
    readme = path("README.md")
    if not os.path.exists(readme):
        return
    text = open(readme).read()
    union = union_ops(records)
    block = "\n\n".join([
        "### Families\n\n" + family_table(infos),
        "### Files\n\n" + table(families, records),
        "### Op types across all files (union, by domain)\n\n" + "\n".join(
            "- **%s**: %s" % (d, " ".join(ops)) for d, ops in union.items()),
    ])
    start, end = "<!-- BEGIN TABLE (written by make_hf_corpus.py) -->", "<!-- END TABLE -->"
    if start in text and end in text:
        text = text.split(start)[0] + start + "\n\n" + block + "\n\n" + end + text.split(end, 1)[1]
        with open(readme, "w") as f:
            f.write(text)


def main(argv):
    torch.set_num_threads(max(1, min(8, os.cpu_count() or 1)))
    wanted = set(argv[1:])
    families = [f for f in FAMILIES if not wanted or f["name"] in wanted]
    manifest_path = path("manifest.json")
    manifest = json.load(open(manifest_path)) if (wanted and os.path.exists(manifest_path)) else {}
    infos = manifest.get("families", {})
    records = manifest.get("records", {})
    for fam in families:
        for old in os.listdir(HERE):
            if old.startswith(fam["name"] + ".") and old.endswith((".onnx", ".pt", ".npy")):
                os.remove(path(old))
        print("== %s (%s)" % (fam["name"], fam["config"]), flush=True)
        info, recs = make_family(fam)
        infos[fam["name"]] = info
        records[fam["name"]] = recs
    order = [f["name"] for f in FAMILIES]
    infos = {n: infos[n] for n in order if n in infos}
    records = {n: records[n] for n in order if n in records}
    versions = {m.__name__: m.__version__ for m in (torch, transformers, onnx, np)}
    import onnxruntime
    import onnxscript
    versions["onnxscript"] = onnxscript.__version__
    versions["onnxruntime"] = onnxruntime.__version__
    manifest = {"versions": versions, "families": infos, "records": records, "op_union": union_ops(records)}
    with open(manifest_path, "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=False, default=str)
        f.write("\n")
    write_readme(FAMILIES, infos, records)
    total = sum(os.path.getsize(path(n)) for n in os.listdir(HERE) if n.endswith((".onnx", ".pt", ".npy")))
    print("corpus: %.2f MB in data files" % (total / 1e6))
    print("op types (union):")
    for d, ops in manifest["op_union"].items():
        print("  %s: %s" % (d, " ".join(ops)))


if __name__ == "__main__":
    main(sys.argv)
