#!/usr/bin/env python3
"""Every MoE family of the installed transformers, exported tiny, and surveyed with moe-compile.

    python test/corpus/hf/make_hf_families.py [family ...]          export (then survey with --bin)
    python test/corpus/hf/make_hf_families.py --survey-only --bin DIR   survey the files already written

Writes test/corpus/hf_families/ (see its README.md).  The families are found in
the library itself: every model type of CONFIG_MAPPING whose modeling module
defines experts, grouped by module.  The 12 families of test/corpus/hf are
skipped.  Each family gets the tiny config of make_hf_corpus.py, set through
whichever field names its config class spells (num_experts, n_routed_experts,
moe_num_experts, ...), and is built, initialised and exported by the helpers of
make_hf_corpus.py on three routes: block.legacy, model.exporter and
model.exporter_ort.  The saved .onnx files carry no metadata_props.

The survey runs test/e2e/run_corpus.py (one rank and --ep 2) on every file that
onnxruntime's CPU provider matched or could not run, and classifies it as
raised (every plan passed), refused (moe-compile failed) or wrong.
"""

import argparse
import collections
import dataclasses
import importlib
import inspect
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
OUT = os.path.join(REPO, "test", "corpus", "hf_families")

ROUTES = ["block.legacy", "model.exporter", "model.exporter_ort"]
ROUTE_TIMEOUT_S = 120  # per route of a family (export and ORT check)
SURVEY_TIMEOUT_S = 120  # per moe-compile / moe-run in the survey
SURVEY_PLANS = "ep2"  # one rank and --ep 2
JOBS = max(1, min(2, os.cpu_count() or 1))
# Hidden, expert intermediate, layers, vocabulary, heads, KV heads: as in make_hf_corpus.py.
HIDDEN, FFN, LAYERS, VOCAB, HEADS, KV_HEADS, HEAD_DIM = 16, 32, 2, 96, 2, 1, 8
EXPERTS, GROUPED_EXPERTS, TOP_K = 4, 8, 2

# Classes that mark a modeling module as MoE (the survey's first filter; the built model decides).
MOE_SOURCE = re.compile(r"^class \w*(?:Experts|MoE|SparseMoe|MoeBlock|NaiveMoe)\w*\(|self\.experts\s*=", re.M)
SUBMODEL = re.compile(r"Vision|Audio|Encoder|Sam|Talker|Code2Wav|CodePredictor")

# ── Config fields ──────────────────────────────────────────────────────────────
# Field name (as the config class spells it) -> tiny value.  Only fields the class declares
# are set; a field whose default is None stays None unless marked in SET_WHEN_NONE.
SIZES = {
    "vocab_size": VOCAB, "hidden_size": HIDDEN, "d_model": HIDDEN,
    "num_hidden_layers": LAYERS, "num_layers": LAYERS, "n_layers": LAYERS,
    "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS,
    "head_dim": HEAD_DIM, "kv_channels": HEAD_DIM,
    "q_lora_rank": 16, "kv_lora_rank": 16, "o_lora_rank": 16, "o_groups": 1,
    "qk_rope_head_dim": HEAD_DIM, "qk_nope_head_dim": HEAD_DIM, "v_head_dim": HEAD_DIM,
    "first_k_dense_replace": 1, "num_dense_layers": 1, "decoder_sparse_step": 1, "mlp_only_layers": [],
    "moe_layer_start_index": 1, "moe_layer_interval": 1, "moe_layer_end_index": -1,
    "num_mtp_layers": 0, "num_nextn_predict_layers": 0,
    "zero_expert_num": 2, "router_hidden_size": HIDDEN,
    "index_n_heads": HEADS, "index_head_dim": HEAD_DIM, "index_topk": 4, "index_topk_blocks": 2,
    "indexer_n_heads": HEADS, "indexer_head_dim": HEAD_DIM, "indexer_kv_heads": KV_HEADS,
    "swa_num_attention_heads": HEADS, "swa_num_key_value_heads": KV_HEADS, "swa_head_dim": HEAD_DIM,
    "linear_num_heads": HEADS, "linear_head_dim": HEAD_DIM, "linear_num_key_heads": HEADS,
    "linear_num_value_heads": HEADS, "linear_key_head_dim": HEAD_DIM, "linear_value_head_dim": HEAD_DIM,
    "mamba_n_heads": HEADS, "mamba_num_heads": HEADS, "mamba_head_dim": HEAD_DIM, "mamba_d_state": 8,
    "mamba_n_groups": 1, "n_groups": 1, "mamba_chunk_size": 8, "mamba_dt_rank": 4,
    "use_mamba_kernels": False, "rotary_dim": HEAD_DIM,
    "hidden_size_per_layer_input": 8, "vocab_size_per_layer_input": VOCAB,
    "gated_norm_rank": 8, "hc_lowrank": 8, "loop_gate_rank": 8, "ple_embed_dim": 8,
    "heads_per_ngram": HEADS, "n_layers_per_attn_res_block": 1,
}
EXPERT_COUNTS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts")
TOP_KS = ("num_experts_per_tok", "moe_k", "moe_topk", "top_k", "moe_top_k", "top_k_experts",
          "num_experts_per_token")
SHARED_COUNTS = ("n_shared_experts", "num_shared_experts", "moe_num_shared_experts")
SET_WHEN_NONE = ({"head_dim", "index_topk", "mlp_only_layers", "moe_intermediate_size", "expert_intermediate_size"}
                 | set(EXPERT_COUNTS) | set(TOP_KS))
# Fields named like a size that are not one.
NOT_SIZES = {"max_position_embeddings", "sliding_window", "sliding_window_size", "max_window_layers",
             "moe_latent_size"}

# Family-specific values on top of the generic ones (config fields), and other quirks.
OVERRIDES = {
    "gemma4": dict(enable_moe_block=True),
    "doge": dict(is_moe=True, num_experts=16),  # product-key experts: num_experts is a square
    "zaya": dict(num_experts_per_tok=1),  # "ZAYA currently supports num_experts_per_tok=1 only"
    # "num_key_value_heads must match num_attention_heads"; its sliding layers read swa_* kwargs
    # (not fields) whose defaults make a 150 MB model.
    "dots3_note": dict(num_key_value_heads=HEADS, swa_num_attention_heads=HEADS, swa_num_key_value_heads=HEADS,
                       swa_q_lora_rank=16, swa_kv_lora_rank=16, swa_head_dim=2 * HEAD_DIM,
                       swa_qk_nope_head_dim=HEAD_DIM, swa_v_head_dim=HEAD_DIM),
    "deepseek_ocr2": dict(mlp_layer_types=["dense", "sparse"]),  # no default: read from the checkpoint
    "lfm2_moe": dict(layer_types=["conv", "full_attention"]),  # no default either
    "granitemoehybrid": dict(layer_types=["linear_attention", "full_attention"]),  # default: all Mamba
    "nemotron_h": dict(layers_block_type=["full_attention", "moe"]),  # one mixer per layer, the MoE one of them
    # "num_key_value_heads must match num_attention_heads"; "Expecting NoPE for the DSA attention layers"
    "glm5_next": dict(num_key_value_heads=HEADS, qk_rope_head_dim=0, index_kpool=2),
    "qwen4_exp": dict(indexer_n_heads=HEADS, indexer_kv_heads=1, indexer_head_dim=HEAD_DIM, indexer_budget=4,
                      indexer_compress_ratio=2),  # its indexed attention layers need all five
    "step3p7": dict(sliding_window=4),
    "ernie4_5_vl_moe": dict(mrope_section=[1, 1, 2]),  # its rotary reads [h, w, t] sections, t last
    "glm4v_moe": dict(mrope_section=[1, 1, 0]),  # partial rotary: 2 frequencies
}


def config_fields(config_class):
    """{field name: default} of a (dataclass) config class."""
    fields = {}
    for f in dataclasses.fields(config_class):
        if f.default is not dataclasses.MISSING:
            fields[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
            fields[f.name] = f.default_factory()  # type: ignore[misc]
        else:
            fields[f.name] = None
    return fields


def tiny_kwargs(family, config_class):
    """The config kwargs of the tiny model for `config_class`, in its own spelling."""
    fields = config_fields(config_class)
    kwargs = {}

    def put(name, value):
        if name in fields and (fields[name] is not None or name in SET_WHEN_NONE):
            kwargs[name] = value

    try:
        instance = config_class()
    except Exception:  # noqa: BLE001
        instance = None
    grouped = any(fields.get(n) not in (None, 0, 1) for n in ("n_group", "num_expert_group"))
    for name, default in fields.items():
        if name in SIZES:
            put(name, SIZES[name])
        elif name in NOT_SIZES or isinstance(default, bool):
            continue
        elif name.endswith(("intermediate_size", "ffn_hidden_size", "moe_hidden_size", "expert_dim",
                            "share_expert_dim")) and ((isinstance(default, int) and default > 0)
                                                      or (default is None and name in SET_WHEN_NONE)):
            kwargs[name] = FFN
            if isinstance(getattr(instance, name, None), list):  # one size per kind of expert
                kwargs[name] = [FFN] * len(getattr(instance, name))
        elif name.endswith("vocab_size") and isinstance(default, int) and default > VOCAB:
            kwargs[name] = VOCAB
        elif name.endswith("_token_id") and isinstance(default, int) and default >= VOCAB:
            kwargs[name] = default % VOCAB
    for name in EXPERT_COUNTS:
        put(name, GROUPED_EXPERTS if grouped else EXPERTS)
    for name in TOP_KS:
        put(name, TOP_K)
    for name in SHARED_COUNTS:
        if name in fields and (fields[name] is None or fields[name] > 1):
            kwargs[name] = 1
    if "kv_lora_rank" in fields:  # multi-head latent attention: as many KV heads as heads
        put("num_key_value_heads", HEADS)
    for name in fields:
        # Per-layer kinds (attention / linear attention / mamba, dense / sparse MLP): two layers of
        # two kinds, the default's first and last kinds.
        kinds = getattr(instance, name, None) if name.endswith(("layer_types", "layers_block_type")) else None
        if isinstance(kinds, (list, tuple)) and len(set(kinds)) > 1:
            second = kinds[-1] if kinds[-1] != kinds[0] else next(k for k in kinds if k != kinds[0])
            kwargs[name] = [kinds[0], second]
    rope = getattr(instance, "rope_parameters", None)
    if isinstance(rope, dict) and "mrope_section" in rope:  # 3-D rotary sections: sum to head_dim / 2
        kwargs["rope_parameters"] = dict(rope, mrope_section=[2, 1, 1])
    if grouped:
        for name in ("n_group", "num_expert_group"):
            put(name, 4)
        put("topk_group", 2)
    kwargs.update(OVERRIDES.get(family, {}))
    if "mrope_section" in kwargs:  # a key of rope_parameters, not a field
        kwargs["rope_parameters"] = dict(getattr(instance, "rope_parameters", None) or {},
                                         mrope_section=kwargs.pop("mrope_section"))
    return {k: v for k, v in kwargs.items() if k != "initializer_range"}


# ── Discovery ──────────────────────────────────────────────────────────────────


def discover(transformers):
    """[{name, model_type, config, model_class, ...} or {name, skip}] for every MoE module."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES, model_type_to_module_name
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    base = os.path.join(os.path.dirname(transformers.__file__), "models")
    modules = collections.defaultdict(list)
    for model_type in CONFIG_MAPPING_NAMES:
        modules[model_type_to_module_name(model_type)].append(model_type)
    found = []
    for module in sorted(modules):
        folder = os.path.join(base, module)
        if not os.path.isdir(folder):
            continue
        sources = [f for f in sorted(os.listdir(folder)) if f.startswith("modeling_") and f.endswith(".py")]
        if not any(MOE_SOURCE.search(open(os.path.join(folder, f)).read()) for f in sources):
            continue
        found.append(resolve(transformers, module, sorted(modules[module]), CONFIG_MAPPING_NAMES,
                             MODEL_FOR_CAUSAL_LM_MAPPING_NAMES))
    return found


def module_classes(transformers, module):
    """The PreTrainedModel subclasses that transformers.models.<module> defines: {name: class}."""
    classes = {}
    package = "transformers.models." + module
    for name in sorted(os.listdir(os.path.join(os.path.dirname(transformers.__file__), "models", module))):
        if not (name.startswith("modeling_") and name.endswith(".py")):
            continue
        try:
            mod = importlib.import_module(package + "." + name[:-3])
        except Exception:  # noqa: BLE001
            continue
        for cls_name, cls in vars(mod).items():
            if (inspect.isclass(cls) and issubclass(cls, transformers.PreTrainedModel)
                    and cls.__module__ == mod.__name__ and "PreTrained" not in cls_name):
                classes[cls_name] = cls
    return classes


def resolve(transformers, module, model_types, config_names, causal_names):
    """Which config and model class of `module` to build: a causal LM (the text one of a
    multimodal family first), else the text decoder without its head."""
    entry = {"name": module, "model_types": model_types}
    configs = {t: config_names[t] for t in model_types}
    classes = module_classes(transformers, module)
    by_config = collections.defaultdict(list)
    for cls_name, cls in classes.items():
        config_class = getattr(cls, "config_class", None)
        if config_class is not None:
            by_config[config_class.__name__].append(cls_name)

    def text_rank(config_name):
        return (0 if "Text" in config_name else 1, len(config_name))

    candidates = sorted((c for c in set(configs.values()) if not SUBMODEL.search(c)), key=text_rank)
    for config_name in candidates:  # causal LM, from the class itself or the auto mapping
        names = [n for n in by_config.get(config_name, []) if n.endswith("ForCausalLM")]
        names += [causal_names[t] for t, c in configs.items() if c == config_name and t in causal_names
                  and causal_names[t].endswith("ForCausalLM") and causal_names[t] in classes]
        if names:
            entry.update(config=config_name, model_class=sorted(names)[0], head="causal LM")
            break
    else:
        for config_name in candidates:  # the text decoder of a multimodal family, without its head
            names = [n for n in by_config.get(config_name, []) if n.endswith("TextModel")]
            if names:
                entry.update(config=config_name, model_class=sorted(names)[0],
                             head="text model (the family has no causal LM class)")
                break
    if "config" not in entry:
        plain = [n for c in candidates for n in by_config.get(c, []) if n.endswith("Model")]
        entry["skip"] = ("no causal LM or text decoder class (model classes: %s)"
                         % (", ".join(sorted(classes)) or "none"))
        entry["config"] = candidates[0] if candidates else sorted(configs.values())[0]
        if plain:
            entry["model_class_seen"] = plain[0]
    return entry


# ── MoE block ──────────────────────────────────────────────────────────────────


def is_experts(name, module):
    leaf = name.rsplit(".", 1)[-1]
    cls = type(module).__name__
    if "shared" in leaf.lower() or "Shared" in cls:
        return False
    return leaf == "experts" or cls.endswith("Experts")


def has_attention(module):
    return any(re.search(r"attn|attention|mixer|mamba", n, re.I) for n, _ in module.named_children())


def find_moe_blocks(model):
    """[(layer index, block path, block, inline)] of the decoder's MoE blocks: the modules that hold
    the experts (inline when that is the decoder layer itself)."""
    modules = dict(model.named_modules())
    hits = []
    for name, module in modules.items():
        if "." not in name or not is_experts(name, module):
            continue
        parent_name = name.rsplit(".", 1)[0]
        if re.search(r"attn|attention|vision|visual|audio", parent_name, re.I):
            continue
        hits.append(parent_name)
    if not hits:  # product-key or other experts without an experts module
        hits = [n for n, m in modules.items() if re.search(r"MoE$|Moe$|SparseMoe|MoeBlock", type(m).__name__)
                and not re.search(r"attn|attention", n, re.I)]
    blocks = []
    for parent_name in hits:
        match = re.search(r"(?:^|\.)(?:layers|blocks|h)\.(\d+)\.", parent_name + ".")
        if match:
            parent = modules[parent_name]
            blocks.append((int(match.group(1)), parent_name, parent, has_attention(parent)))
    return blocks


def pick_block(model, blocks):
    """The first block that runs on hidden states alone: (layer, path, block, why not) where
    `why not` says why no block can be exported alone (None when one can)."""
    import torch
    hfc = sys.modules["make_hf_corpus"]
    first = None
    for layer, block_path, block, inline in blocks:
        if inline:
            why = ("the decoder layer %s calls the experts inline (no MoE block module)" % type(block).__name__)
        else:
            try:
                with torch.no_grad(), hfc.quiet():
                    block(torch.zeros(2, 8, model.config.hidden_size))
                return layer, block_path, block, None
            except Exception as exc:  # noqa: BLE001
                why = "the MoE block's forward does not run on the hidden states alone: " + hfc.error_text(exc)
        first = first or (layer, block_path, block, why)
    return first


# ── Export (one family, in a child process) ───────────────────────────────────


class RouteTimeout(BaseException):
    """Raised by the alarm; a BaseException so that the exporters' `except Exception` let it through."""


def _alarm(signum, frame):
    raise RouteTimeout()


def strip_metadata(file):
    """Drop every metadata_props (model, graph, functions, nodes) and node doc_string; one file."""
    import onnx
    hfc = sys.modules["make_hf_corpus"]
    model = onnx.load(file)
    del model.metadata_props[:]
    del model.graph.metadata_props[:]
    nodes = list(hfc.all_nodes(model.graph))
    for fn in model.functions:
        del fn.metadata_props[:]
        nodes += list(fn.node)
    for node in nodes:
        del node.metadata_props[:]
        node.doc_string = ""
    onnx.save(model, file, save_as_external_data=False)


def export_family(entry):
    """Builds the family and writes its routes; returns (info, records)."""
    import torch
    import transformers
    import make_hf_corpus as hfc
    name = entry["name"]
    mod_classes = module_classes(transformers, name)
    config_class = (getattr(transformers, entry["config"], None)
                    or getattr(importlib.import_module("transformers.models." + name), entry["config"]))
    kwargs = tiny_kwargs(name, config_class)
    fam = dict(name=name, config=entry["config"], config_class=config_class, kwargs=kwargs, layer=0,
               model_class=mod_classes[entry["model_class"]])
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(ROUTE_TIMEOUT_S)
    try:
        model, _ = hfc.build_model(fam)
        blocks = find_moe_blocks(model)
        if not blocks:
            signal.alarm(0)
            return {"config_class": entry["config"], "model_class": type(model).__name__, "config_kwargs": kwargs,
                    "error": "no MoE block in the built model (modules: %s)" % ", ".join(
                        sorted({type(m).__name__ for m in model.modules()})[:40])}, {}
        layer, block_path, block, block_error = pick_block(model, blocks)
        signal.alarm(0)
    except RouteTimeout:
        return {"config_class": entry["config"], "config_kwargs": kwargs,
                "error": "building the model took longer than %d s" % ROUTE_TIMEOUT_S}, {}
    except Exception as exc:  # noqa: BLE001
        signal.alarm(0)
        return {"config_class": entry["config"], "config_kwargs": kwargs, "error": hfc.error_text(exc)}, {}
    for old in os.listdir(OUT):
        if old.startswith(name + ".") and old.endswith((".onnx", ".npy")):
            os.remove(os.path.join(OUT, old))
    real_block = block
    fam["layer"] = layer
    fam["block"] = (lambda m, i: torch.nn.Identity()) if block_error else (
        lambda m, i: m.get_submodule(block_path))
    info, records = None, {}
    for route in ROUTES:
        if block_error and route.startswith("block."):
            records[route] = {"family": name, "route": route, "exported": False, "failures": [block_error]}
            print(hfc.summary_line(records[route]), flush=True)
            continue
        signal.alarm(ROUTE_TIMEOUT_S)
        try:
            route_info, recs = hfc.make_family(fam, routes=[route])
            signal.alarm(0)
        except RouteTimeout:
            for old in os.listdir(OUT):
                if old.startswith("%s.%s." % (name, route)):
                    os.remove(os.path.join(OUT, old))
            recs = {route: {"family": name, "route": route, "exported": False,
                            "failures": ["timed out after %d s" % ROUTE_TIMEOUT_S]}}
            route_info = None
            print(hfc.summary_line(recs[route]), flush=True)
        except Exception as exc:  # noqa: BLE001
            signal.alarm(0)
            traceback.print_exc()
            recs = {route: {"family": name, "route": route, "exported": False,
                            "failures": ["script error: " + hfc.error_text(exc)]}}
            route_info = None
        if info is None and route_info and "error" not in route_info:
            info = route_info
        rec = recs[route]
        if rec.get("file"):
            strip_metadata(os.path.join(OUT, rec["file"]))
            rec["bytes"] = os.path.getsize(os.path.join(OUT, rec["file"]))
        records[route] = rec
    if info is None:
        info = {"config_class": entry["config"], "config_kwargs": kwargs}
    info["model_class"] = info.get("model_class") or entry["model_class"]
    info["model_head"] = entry["head"]
    info["moe_layer"] = layer
    info["block_path"] = block_path
    info["block_class"] = type(real_block).__name__
    if block_error:
        info["block_note"] = block_error
        info.pop("block_nonzero_effect", None)
        info.pop("block_wrapped", None)
    info["config_kwargs"] = kwargs
    return info, records


def child_main(name, result):
    import torch
    import transformers
    torch.set_num_threads(1)
    entry = next(e for e in discover(transformers) if e["name"] == name)
    info, records = export_family(entry)
    with open(result, "w") as f:
        json.dump({"info": info, "records": records}, f, default=str)


# ── Survey ─────────────────────────────────────────────────────────────────────


def surveyable(rec):
    """Whether the file goes to the survey: ORT matched, or its CPU provider lacks a kernel."""
    if not rec.get("file") or not rec["file"].endswith(".onnx"):
        return False, "not exported"
    if rec.get("ort_match"):
        return True, ""
    error = rec.get("ort_cpu", {}).get("error")
    if error and re.search(r"NOT_IMPLEMENTED|not implemented|Could not find an implementation", error):
        return True, ""
    if error:
        return False, "ORT CPU: " + error
    return False, "ORT CPU mismatch: " + json.dumps(rec.get("ort_cpu"))


def first_error_line(log):
    lines = [l.strip() for l in log.splitlines() if l.strip()]
    for line in lines:
        if re.search(r"error|fail|unsupported|not supported|cannot|unknown", line, re.I):
            return line
    return lines[0] if lines else "(no message)"


def survey_one(bin_dir, stem, work_root="/tmp"):
    work = os.path.join(work_root, "fam.%s" % stem)
    cmd = ["/usr/bin/python3", os.path.join(REPO, "test", "e2e", "run_corpus.py"), "--bin", bin_dir,
           "--corpus", OUT, "--work", work, "--plans", SURVEY_PLANS, "--timeout", str(SURVEY_TIMEOUT_S), stem]
    start = time.time()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=4 * SURVEY_TIMEOUT_S + 60, cwd=REPO)
        out, rc = done.stdout + done.stderr, done.returncode
    except subprocess.TimeoutExpired:
        out, rc = "", None
    shutil.rmtree(work, ignore_errors=True)
    result = {"seconds": round(time.time() - start, 1)}
    if rc is None:
        result.update(result="wrong", reason="run_corpus.py timed out")
        return result
    fails = re.findall(r"^FAIL (.*?): (.*?)(?=^(?:FAIL|PASS) |^\S+: \d+ of \d+ plans passed|\Z)", out, re.M | re.S)
    compile_fails = [(label, msg) for label, msg in fails if msg.startswith("moe-compile:")]
    # Outputs right, but no MoE layer: the block ran as plain onnx ops.
    unraised = fails and all(msg.strip() == "--stats printed no layer" for _, msg in fails)
    if rc == 0 and not fails:
        result.update(result="raised", reason="")
    elif unraised:
        result.update(result="not raised", reason="outputs match, but no MoE layer was raised: "
                      "the block ran as plain onnx ops", plan=fails[0][0].split(" ", 1)[1])
    elif compile_fails and not compile_fails[0][1].startswith("moe-compile: timed out"):
        label, msg = compile_fails[0]
        result.update(result="refused", reason=first_error_line(msg[len("moe-compile:"):]),
                      plan=label.split(" ", 1)[1])
    elif fails:
        label, msg = fails[0]
        result.update(result="wrong", reason=first_error_line(msg) if msg.startswith(("moe-run", "moe-compile"))
                      else msg.strip().splitlines()[0], plan=label.split(" ", 1)[1])
    else:
        last = (out.strip().splitlines() or ["(no output)"])[-1]
        result.update(result="wrong", reason="run_corpus.py exit %s: %s" % (rc, last))
    result["reason"] = short(result["reason"])[:400]
    return result


def short(text):
    """`text` without this directory's path (error lines start with the model file's path)."""
    return text.replace(OUT + os.sep, "")


def survey(manifest, bin_dir, work_root="/tmp"):
    from concurrent.futures import ThreadPoolExecutor
    jobs, results = [], {}
    for name, recs in manifest["records"].items():
        for route, rec in recs.items():
            ok, why = surveyable(rec)
            stem = "%s.%s" % (name, route)
            if ok:
                jobs.append(stem)
            elif rec.get("file"):
                results[stem] = {"result": "not surveyed", "reason": why[:400]}
    with ThreadPoolExecutor(JOBS) as pool:
        for stem, result in zip(jobs, pool.map(lambda s: survey_one(bin_dir, s, work_root), jobs)):
            results[stem] = result
            print("%-44s %-8s %s" % (stem, result["result"], result["reason"][:200]), flush=True)
    manifest["survey"] = {"bin": bin_dir, "plans": SURVEY_PLANS, "timeout_s": SURVEY_TIMEOUT_S,
                          "files": dict(sorted(results.items()))}
    return manifest


# ── Reports ────────────────────────────────────────────────────────────────────


def cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


SURVEY_LINE = "survey %-18s raised %d, refused %d, not raised %d, wrong %d, not surveyed %d"


def totals(manifest):
    fams = manifest["families"]
    built = [n for n, i in fams.items() if "error" not in i and "skip" not in i]
    skipped = {n: i.get("skip") or i.get("error") for n, i in fams.items() if n not in built}
    files = [(n, r) for n, recs in manifest["records"].items() for r, rec in recs.items() if rec.get("file")]
    counts = collections.OrderedDict((r, collections.Counter()) for r in ROUTES)
    for stem, res in manifest.get("survey", {}).get("files", {}).items():
        counts[stem.split(".", 1)[1]][res["result"]] += 1
    lines = ["families discovered: %d (MoE modules of transformers %s)" % (
                 len(fams), manifest["versions"]["transformers"]),
             "families built: %d" % len(built),
             "families skipped: %d" % len(skipped)]
    reasons = collections.Counter(re.sub(r" \(.*", "", str(v)) for v in skipped.values())
    lines += ["  %d: %s" % (c, r) for r, c in reasons.most_common()]
    lines.append("files exported: %d (%s)" % (len(files), ", ".join(
        "%s %d" % (r, sum(1 for _, rr in files if rr == r)) for r in ROUTES)))
    if manifest.get("survey"):
        for route, c in counts.items():
            lines.append(SURVEY_LINE % (route, c["raised"], c["refused"], c["not raised"], c["wrong"],
                                        c["not surveyed"]))
        allc = sum(counts.values(), collections.Counter())
        lines.append(SURVEY_LINE % ("all", allc["raised"], allc["refused"], allc["not raised"],
                                    allc["wrong"], allc["not surveyed"]))
    return lines


def family_rows(manifest):
    rows = ["| family | config class | model class | MoE block (layer) | notes / skip reason |",
            "| --- | --- | --- | --- | --- |"]
    for name, info in manifest["families"].items():
        if "skip" in info or ("error" in info and "block_class" not in info):
            rows.append("| %s | `%s` | %s | — | **skipped**: %s |" % (
                name, info.get("config_class", "—"),
                "`%s`" % info["model_class"] if info.get("model_class") else "—",
                cell(info.get("skip") or info.get("error"))))
            continue
        notes = [info.get("model_head", "")]
        if info.get("block_note"):
            notes.append(info["block_note"])
        if info.get("block_wrapped"):
            notes.append(info["block_wrapped"])
        if info.get("made_nonzero"):
            notes.append("%d zero-initialised tensors made nonzero" % len(info["made_nonzero"]))
        if "block_nonzero_effect" in info:
            notes.append("their effect on the block output %.3g" % info["block_nonzero_effect"])
        if info.get("experts_impl_default"):
            notes.append("experts impl %s" % info["experts_impl_default"])
        rows.append("| %s | `%s` | `%s` | `%s` (%s) | %s |" % (
            name, info["config_class"], info["model_class"], info["block_class"], info["moe_layer"],
            cell("; ".join(n for n in notes if n))))
    return "\n".join(rows)


def file_rows(manifest):
    survey_files = manifest.get("survey", {}).get("files", {})
    rows = ["| file | route | experts impl | ORT CPU | survey | reason |", "| --- | --- | --- | --- | --- | --- |"]
    for name, recs in manifest["records"].items():
        for route, rec in recs.items():
            if not rec.get("file"):
                rows.append("| — (%s) | %s | — | — | not exported | %s |" % (
                    name, route, cell("; ".join(rec.get("failures", []))[:400])))
                continue
            res = survey_files.get("%s.%s" % (name, route), {})
            ort = ("ok" if rec.get("ort_match") else "error" if "error" in rec.get("ort_cpu", {})
                   else "mismatch")
            rows.append("| `%s` | %s | %s | %s | %s | %s |" % (
                rec["file"], route, rec.get("experts_impl") or "—", ort, res.get("result", "—"),
                cell(short(res.get("reason", "")))))
    return "\n".join(rows)


def reason_rows(manifest):
    groups = collections.defaultdict(list)
    for stem, res in manifest.get("survey", {}).get("files", {}).items():
        if res["result"] in ("refused", "not raised", "wrong"):
            groups[(res["result"], normalise(res["reason"]))].append(stem)
    rows = ["| result | reason | files | examples |", "| --- | --- | --- | --- |"]
    for (result, reason), stems in sorted(groups.items(), key=lambda kv: (kv[0][0], -len(kv[1]), kv[0][1])):
        rows.append("| %s | %s | %d | %s |" % (result, cell(reason), len(stems),
                                              ", ".join("`%s`" % s for s in stems[:4])))
    return "\n".join(rows)


def normalise(reason):
    """A reason without the names that differ from file to file (paths, node names, numbers in shapes)."""
    reason = re.sub(r"/tmp/fam\.\S+", "<work>", short(reason))
    reason = re.sub(r"\S+\.onnx\b", "<file>", reason)
    reason = re.sub(r"'(?:node_|/)[^']*'", "'<node>'", reason)
    reason = re.sub(r"\b\d+(\.\d+)?(e[-+]?\d+)?\b", "N", reason)
    return re.sub(r"^<file>:N:N: error: ", "", reason)


def write_readme(manifest):
    readme = os.path.join(OUT, "README.md")
    text = open(readme).read() if os.path.exists(readme) else ""
    start, end = "<!-- BEGIN TABLES (written by make_hf_families.py) -->", "<!-- END TABLES -->"
    body = "\n\n".join([
        "### Totals\n\n```\n" + "\n".join(totals(manifest)) + "\n```",
        "### Families\n\n" + family_rows(manifest),
        "### Survey by failure reason\n\n" + reason_rows(manifest),
        "### Files\n\n" + file_rows(manifest),
    ])
    if start in text and end in text:
        text = text.split(start)[0] + start + "\n\n" + body + "\n\n" + end + text.split(end, 1)[1]
    else:
        text = text + "\n" + start + "\n\n" + body + "\n\n" + end + "\n"
    with open(readme, "w") as f:
        f.write(text)


# ── Main ───────────────────────────────────────────────────────────────────────


def run_children(entries):
    """Exports each family in its own process (JOBS at a time); {name: (info, records)}."""
    pending = list(entries)
    running, done = {}, {}
    tmp = os.path.join("/tmp", "hf_families.%d" % os.getpid())
    os.makedirs(tmp, exist_ok=True)
    limit = ROUTE_TIMEOUT_S * (len(ROUTES) + 1) + 60
    while pending or running:
        while pending and len(running) < JOBS:
            entry = pending.pop(0)
            result = os.path.join(tmp, entry["name"] + ".json")
            log = open(os.path.join(tmp, entry["name"] + ".log"), "w")
            proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--child", entry["name"],
                                     "--result", result], stdout=log, stderr=subprocess.STDOUT)
            running[entry["name"]] = (proc, result, log, time.time())
            print("== %s (%s, %s)" % (entry["name"], entry["config"], entry["model_class"]), flush=True)
        time.sleep(0.5)
        for name, (proc, result, log, start) in list(running.items()):
            if proc.poll() is None and time.time() - start < limit:
                continue
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            log.close()
            del running[name]
            if os.path.exists(result):
                with open(result) as f:
                    data = json.load(f)
                done[name] = (data["info"], data["records"])
            else:
                tail = open(log.name).read().strip().splitlines()[-3:]
                done[name] = ({"error": "export process %s: %s" % (
                    "killed after %d s" % limit if proc.returncode in (-9, None) else "exit %s" % proc.returncode,
                    " | ".join(tail)[-400:])}, {})
            for line in open(log.name).read().splitlines():
                if re.match(r"^\S+\s+(block|model)\.", line):
                    print("  " + line[:260], flush=True)
            if "error" in done[name][0]:
                print("  %s: %s" % (name, done[name][0]["error"][:300]), flush=True)
    shutil.rmtree(tmp, ignore_errors=True)
    return done


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("families", nargs="*", help="only these families (merged into manifest.json)")
    parser.add_argument("--survey-only", action="store_true", help="survey the files already written")
    parser.add_argument("--bin", help="moe-compile / moe-run directory for the survey (no survey without it)")
    parser.add_argument("--check", action="store_true",
                        help="with --survey-only: write nothing; fail where a file is wrong or its "
                             "result differs from manifest.json's (the test suite's run)")
    parser.add_argument("--work", default="/tmp", help="where the survey's bundles go")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sys.path.insert(0, HERE)
    if not args.survey_only:  # the survey needs no torch: any python3 runs it
        import make_hf_corpus as hfc  # noqa: E402  (torch, transformers, onnx)
        hfc.HERE = OUT  # its route helpers write through path(): into this directory
    if args.child:
        child_main(args.child, args.result)
        return 0
    manifest_path = os.path.join(OUT, "manifest.json")
    if args.survey_only:
        if not args.bin:
            parser.error("--survey-only needs --bin")
        with open(manifest_path) as f:
            manifest = json.load(f)
    else:
        import numpy as np
        import onnx
        import onnxruntime
        import onnxscript
        import torch
        import transformers
        os.makedirs(OUT, exist_ok=True)
        entries = discover(transformers)
        in_hf = {f["name"] for f in hfc.FAMILIES}
        manifest = {}
        if args.families and os.path.exists(manifest_path):
            with open(manifest_path) as f:
                manifest = json.load(f)
        infos = manifest.get("families", {})
        records = manifest.get("records", {})
        todo = []
        for entry in entries:
            name = entry["name"]
            if args.families and name not in args.families:
                continue
            if name in in_hf:
                infos[name] = {"config_class": entry["config"], "model_class": entry.get("model_class"),
                               "skip": "in test/corpus/hf"}
                records.pop(name, None)
            elif "skip" in entry:
                infos[name] = {"config_class": entry["config"], "skip": entry["skip"]}
                records.pop(name, None)
            else:
                todo.append(entry)
        for name, (info, recs) in run_children(todo).items():
            infos[name] = info
            records[name] = recs
        order = [e["name"] for e in entries]
        versions = {m.__name__: m.__version__ for m in (torch, transformers, onnx, np, onnxscript, onnxruntime)}
        manifest = {"versions": versions,
                    "settings": {"routes": ROUTES, "route_timeout_s": ROUTE_TIMEOUT_S, "hidden": HIDDEN,
                                 "expert_intermediate": FFN, "experts": EXPERTS,
                                 "experts_group_limited": GROUPED_EXPERTS, "top_k": TOP_K, "layers": LAYERS,
                                 "vocab": VOCAB, "heads": HEADS, "kv_heads": KV_HEADS},
                    "families": {n: infos[n] for n in order if n in infos},
                    "records": {n: records[n] for n in order if n in records},
                    "survey": manifest.get("survey", {})}
        if args.families and manifest["survey"]:
            for stem in list(manifest["survey"].get("files", {})):
                if stem.split(".", 1)[0] in args.families:
                    del manifest["survey"]["files"][stem]
    if args.check:
        if not (args.survey_only and args.bin):
            parser.error("--check needs --survey-only and --bin")
        recorded = json.loads(json.dumps(manifest.get("survey", {}).get("files", {})))
        manifest = survey(manifest, os.path.abspath(args.bin), args.work)
        problems = []
        for stem, res in manifest["survey"]["files"].items():
            before = recorded.get(stem, {}).get("result")
            if res["result"] == "wrong":
                problems.append("WRONG %s: %s" % (stem, res["reason"]))
            elif before != res["result"]:
                problems.append("CHANGED %s: %s, manifest.json has %s (%s)" % (
                    stem, res["result"], before, res["reason"]))
        print("\n".join(problems + totals(manifest)))
        return 1 if problems else 0
    if args.bin:
        manifest = survey(manifest, os.path.abspath(args.bin), args.work)
    with open(manifest_path, "w") as f:
        json.dump(manifest, f, indent=1, default=str)
        f.write("\n")
    write_readme(manifest)
    size = sum(os.path.getsize(os.path.join(OUT, n)) for n in os.listdir(OUT))
    print("\n".join(totals(manifest)))
    print("directory: %.2f MB" % (size / 1e6))
    return 0


if __name__ == "__main__":
    sys.exit(main())
