"""The Mixtral MoE block on a GPU: moe-run's CUDA bundle against PyTorch eager
and ONNX Runtime's CUDA com.microsoft.MoE, on the same weights and input.

    /usr/bin/python3 bench/gpu_bench.py pack DIR [--dtype bf16]   (here: needs moe-compile)
    python3 bench/gpu_bench.py run DIR --bin BIN                   (on the GPU machine)

`pack` exports the block (the CPU benchmark's module and sizes, in f32 or
bf16) to ONNX,
compiles it with `moe-compile --target=cuda` into DIR, and records which
module parameter each of the bundle's weights holds (stacked over experts,
transposed) instead of the 352 MB of weights, which the GPU machine rebuilds
from its own seeded module. `run` writes those weights, runs the bundle with
moe-run --stats (its warm-up calls left out of the statistics), the module
in PyTorch eager on the GPU and, where
onnxruntime has the CUDA execution provider, one com.microsoft.MoE node in
the same dtype (scripts/gpu-run.sh puts the onnxruntime-gpu that
scripts/gpu-ort-pack.sh carries first on the path);
checks that the outputs agree and prints the medians. See bench/README.md.
"""

import argparse
import json
import os
import re
import shutil
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import moe_bench  # noqa: E402

ROOT = moe_bench.ROOT
SHAPE_ARGS = ("tokens", "hidden", "ffn", "experts", "top_k", "dtype")
TOLERANCES = {"f32": moe_bench.TOLERANCE, "bf16": 5e-2}


def module_and_input(config, device="cpu"):
    args = argparse.Namespace(**config)
    module, x = moe_bench.mixtral_block(args)
    dtype = torch.bfloat16 if config["dtype"] == "bf16" else torch.float32
    return module.to(device, dtype), x.to(device, dtype)


def as_array(tensor):
    """A parameter as NumPy holds it: float32, or bf16 as its uint16 bits."""
    tensor = tensor.detach().cpu()
    if tensor.dtype == torch.bfloat16:
        return tensor.view(torch.int16).numpy().view(np.uint16)
    return tensor.numpy()


def parameters(module):
    return {name: as_array(p) for name, p in module.named_parameters()}


def parameter_views(module):
    """Every parameter, and every family `experts.*.NAME` stacked over the
    experts, each as stored and with its last two axes swapped."""
    params = parameters(module)
    families = {}
    for name in params:
        family = re.sub(r"\.\d+\.", ".*.", name)
        if family != name:
            families.setdefault(family, []).append(name)
    views = [(name, False, array) for name, array in params.items()]
    for family, names in families.items():
        names.sort(key=lambda n: int(re.search(r"\.(\d+)\.", n).group(1)))
        views.append((family, True, np.stack([params[n] for n in names])))
    return [(name, stacked, transposed, np.swapaxes(a, -1, -2) if transposed else a)
            for name, stacked, a in views for transposed in (False, True)]


def weight_sources(bundle, module):
    """For each weight of model.json, the (parameter, stacked, transposed)
    view it equals; an error names any weight that has none or several."""
    spec = json.load(open(os.path.join(bundle, "model.json")))
    blob = os.path.join(bundle, spec["weights_file"])
    views = parameter_views(module)
    sources = []
    for weight in spec["weights"]:
        stored = {"f32": np.float32, "bf16": np.uint16}.get(weight["dtype"])
        if stored is None or len(weight["offsets"]) != 1:
            sys.exit("gpu_bench: weight %s is not one f32 or bf16 array" % weight["symbol"])
        shape = tuple(weight["shape"])
        data = np.fromfile(blob, stored, int(np.prod(shape)), offset=weight["offsets"][0]).reshape(shape)
        found = [(name, stacked, transposed) for name, stacked, transposed, view in views
                 if view.shape == shape and np.array_equal(view, data)]
        if len(found) != 1:
            sys.exit("gpu_bench: weight %s %s matches %d module parameters" % (weight["symbol"], shape, len(found)))
        name, stacked, transposed = found[0]
        sources.append({"symbol": weight["symbol"], "parameter": name, "stacked": stacked,
                        "transposed": transposed})
    return sources


def pack(args):
    config = {name: getattr(args, name) for name in SHAPE_ARGS}
    module, x = module_and_input(config)
    os.makedirs(args.dir, exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        onnx_path, bundle = os.path.join(work, "block.onnx"), os.path.join(work, "bundle")
        moe_bench.export(module, x, onnx_path)
        moe_bench.run_checked([os.path.join(args.build, "bin", "moe-compile"), onnx_path, "--target=cuda",
                               "--input-shape", "hidden_states=" + "x".join(map(str, x.shape)), "-o", bundle])
        sources = weight_sources(bundle, module)
        for name in ("model.json", "model.so"):
            shutil.copy(os.path.join(bundle, name), args.dir)
    json.dump({"config": config, "weights": sources}, open(os.path.join(args.dir, "bench.json"), "w"), indent=2)
    print("gpu_bench: packed the %s into %s" % (moe_bench.describe("mixtral_block", argparse.Namespace(**config)),
                                               args.dir))


LOCAL_WEIGHTS = "weights.local.bin"


def write_weights(bundle, module, sources):
    """The bundle's weights from this machine's module parameters, in the
    layout of weights.bin, for moe-run --weights (which checks the size only:
    another torch may draw other bytes from the same seed)."""
    spec = json.load(open(os.path.join(bundle, "model.json")))
    params = parameters(module)
    with open(os.path.join(bundle, LOCAL_WEIGHTS), "wb") as out:
        for weight, source in zip(spec["weights"], sources):
            if source["stacked"]:
                names = sorted((n for n in params if re.fullmatch(re.escape(source["parameter"]).replace(
                    r"\*", r"\d+"), n)), key=lambda n: int(re.search(r"\.(\d+)\.", n).group(1)))
                array = np.stack([params[n] for n in names])
            else:
                array = params[source["parameter"]]
            if source["transposed"]:
                array = np.swapaxes(array, -1, -2)
            if array.shape != tuple(weight["shape"]):
                sys.exit("gpu_bench: %s gives %s for weight %s %s" % (source["parameter"], array.shape,
                                                                     weight["symbol"], weight["shape"]))
            out.seek(weight["offsets"][0])
            out.write(np.ascontiguousarray(array).tobytes())


def gpu_median_ms(fn, repeat, warmup):
    def synced():
        fn()
        torch.cuda.synchronize()
    return moe_bench.median_ms(synced, repeat, warmup)


def run_ours(args, bundle, x_path, outdir):
    """moe-run's median over its timed calls: each call of the entry and the
    wait for its stream, the --warmup calls before them not counted."""
    cmd = [os.path.join(args.bin, "moe-run"), bundle, "--input", "hidden_states=" + x_path, "--output-dir", outdir,
           "--weights", os.path.join(bundle, LOCAL_WEIGHTS), "--stats", "--warmup", str(args.warmup), "--repeat", str(args.repeat)]
    text = moe_bench.run_checked(cmd, timeout=args.timeout)
    entry = float(re.search(r"^entry: .* median ([\d.]+) ms", text, re.M).group(1))
    tokens = re.search(r"tokens per expert \[([\d, ]*)\]", text)
    return entry, np.load(os.path.join(outdir, "output.npy")), {"tokens": tokens.group(1) if tokens else "?",
                                                                "cmd": " ".join(cmd)}


def run_torch(module, x, repeat, warmup):
    with torch.no_grad():
        out = module(x).float().cpu().numpy()
        return gpu_median_ms(lambda: module(x), repeat, warmup), out, {}


# The ways com.microsoft.MoE can say a Mixtral expert (silu(x W1) * x W3,
# then W2), each in the new [E, out, in] layout: the FC3 form, and SwiGLU
# with W1 and W3 fused in FC1, interleaved by row or concatenated, with
# alpha 1, beta 0 and no clamp. ORT's CUDA kernel has not always computed
# each as documented (moe-semantics.md: the SwiGLU constants it once fixed,
# the FC3 form it remaps onto SwiGLU), so run_ort times the first that
# matches PyTorch.
ORT_ENCODINGS = ("silu + fc3", "swiglu interleaved", "swiglu concatenated")


def ort_block(module, config, encoding):
    """The block as one com.microsoft.MoE node (`encoding`, one of
    ORT_ENCODINGS; top-k renormalized) after the router's MatMul, in the
    block's dtype: an f32 input and output, cast at the graph's edges."""
    from onnx import TensorProto, helper, numpy_helper
    elem = {"f32": TensorProto.FLOAT, "f16": TensorProto.FLOAT16, "bf16": TensorProto.BFLOAT16}[config["dtype"]]
    torch_type = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[config["dtype"]]

    def initializer(name, array):
        if config["dtype"] == "f32":
            return numpy_helper.from_array(np.ascontiguousarray(array, dtype=np.float32), name)
        # numpy has no bf16: raw bits through torch (exact: the values came
        # from the module's bf16 parameters).
        raw = torch.from_numpy(np.ascontiguousarray(array, dtype=np.float32)).to(torch_type)
        return helper.make_tensor(name, elem, list(array.shape), raw.view(torch.int16).numpy().tobytes(), raw=True)

    # Float32 values, not parameters(): that gives bf16 as its uint16 bits,
    # which initializer() would convert as numbers.
    params = {name: p.detach().float().cpu().numpy() for name, p in module.named_parameters()}
    experts = range(config["experts"])
    stack = lambda w: np.stack([params["experts.%d.%s.weight" % (e, w)] for e in experts])  # noqa: E731
    gate, up = stack("w1"), stack("w3")  # [E, I, H] each
    if encoding == "silu + fc3":
        fc1, moe_inputs, attrs = gate, ["fc1", "", "fc2", "", "fc3", ""], {"activation_type": "silu"}
        extra = [initializer("fc3", up)]
    else:
        interleaved = encoding == "swiglu interleaved"
        # Interleaved: row 2i is gate row i, row 2i+1 up row i.
        fc1 = (np.stack([gate, up], axis=2).reshape(gate.shape[0], -1, gate.shape[2]) if interleaved
               else np.concatenate([gate, up], axis=1))
        moe_inputs, extra = ["fc1", "", "fc2", ""], []
        attrs = {"activation_type": "swiglu", "swiglu_fusion": 1 if interleaved else 2,
                 "activation_alpha": 1.0, "activation_beta": 0.0}
    inits = [initializer("router_t", params["gate.weight"].T), initializer("fc1", fc1),
             initializer("fc2", stack("w2"))] + extra
    nodes = [helper.make_node("Cast", ["input"], ["x"], to=elem),
             helper.make_node("MatMul", ["x", "router_t"], ["logits"]),
             helper.make_node("MoE", ["x", "logits"] + moe_inputs, ["y"], domain="com.microsoft",
                              k=config["top_k"], normalize_routing_weights=1, **attrs),
             helper.make_node("Cast", ["y"], ["output"], to=TensorProto.FLOAT)]
    t, h = config["tokens"], config["hidden"]
    graph = helper.make_graph(nodes, "mixtral_block", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [t, h])],
                              [helper.make_tensor_value_info("output", TensorProto.FLOAT, [t, h])], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                   helper.make_opsetid("com.microsoft", 1)])
    # The IR version of the onnx package that writes it, which may be newer
    # than the onnxruntime that reads it accepts (onnx 1.23 writes 14, ORT
    # 1.31 reads up to 13); opset 17 needs no more than IR 8.
    model.ir_version = 8
    return model


def run_ort(module, config, x, repeat, warmup, reference, tolerance):
    """ONNX Runtime's CUDA MoE on device-resident input and output (I/O
    binding: no host copies in the timed runs), every node on the CUDA
    provider (no CPU fallback, which would time copies), in the first of
    ORT_ENCODINGS whose output matches `reference` (else the first, which
    the table then marks); None with the reason where it cannot run.
    scripts/gpu-ort-pack.sh carries an onnxruntime-gpu to a machine that
    has none."""
    try:
        import onnxruntime as ort
    except ImportError:
        return None, "onnxruntime is not installed"
    if hasattr(ort, "preload_dlls"):
        try:
            ort.preload_dlls()  # cuDNN and the CUDA libraries of PyTorch's wheels
        except Exception as e:  # noqa: BLE001 (any failure is only a reason)
            print("onnxruntime.preload_dlls: %s" % e)
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        return None, "onnxruntime %s has no CUDA execution provider (%s)" % (
            ort.__version__, ", ".join(ort.get_available_providers()))
    first = None
    for encoding in ORT_ENCODINGS:
        session = None
        try:
            options = ort.SessionOptions()
            options.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
            session = ort.InferenceSession(ort_block(module, config, encoding).SerializeToString(), options,
                                           providers=["CUDAExecutionProvider"])
            if session.get_providers()[0] != "CUDAExecutionProvider":
                return None, "onnxruntime %s fell back to %s" % (ort.__version__, session.get_providers())
            binding = session.io_binding()
            x_gpu = ort.OrtValue.ortvalue_from_numpy(x.reshape(config["tokens"], config["hidden"]), "cuda", 0)
            binding.bind_ortvalue_input("input", x_gpu)
            binding.bind_output("output", "cuda", 0)
            session.run_with_iobinding(binding)
            out = binding.copy_outputs_to_cpu()[0]
        except Exception as e:  # noqa: BLE001 (the op may lack this dtype or form)
            lines = str(e).strip().splitlines()
            print("ONNX Runtime, %s: cannot run: %s" % (encoding, lines[0] if lines else type(e).__name__))
            continue
        err = moe_bench.rel_err(out, reference)
        print("ONNX Runtime, %s: max err %.1e%s" % (encoding, err, "" if err <= tolerance else " (does not match)"))
        matches = err <= tolerance
        if matches or first is None:
            # gpu_median_ms synchronizes after each call, as for PyTorch.
            timed = (gpu_median_ms(lambda: session.run_with_iobinding(binding), repeat, warmup), out,
                     {"encoding": encoding})
            if matches:
                return timed, None
            first = first or timed
    if first:
        return first, None
    return None, "onnxruntime %s: no encoding of the block ran" % ort.__version__


def run(args):
    if not torch.cuda.is_available():
        sys.exit("gpu_bench: PyTorch sees no GPU")
    meta = json.load(open(os.path.join(args.dir, "bench.json")))
    config = meta["config"]
    module, x = module_and_input(config)
    write_weights(args.dir, module, meta["weights"])
    # float32 files hold bf16 inputs exactly (moe-run rounds them back).
    x_np = x.float().numpy()
    work = tempfile.mkdtemp()
    x_path = os.path.join(work, "input.npy")
    np.save(x_path, x_np)
    print("%s; %s; torch %s" % (moe_bench.describe("mixtral_block", argparse.Namespace(**config)),
                                torch.cuda.get_device_name(), torch.__version__))
    print("%s, TF32 off; each: median ms of %d timed calls after %d warm-up calls (not counted); moe-run: its "
          "--stats entry time, one call of the bundle's entry and the wait for its stream (no process start or "
          "weight load); PyTorch and ONNX Runtime: host clock around one call and torch.cuda.synchronize()"
          % (config["dtype"], args.repeat, args.warmup), flush=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    results = {}
    results["moe-run --target=cuda"] = ours = run_ours(args, args.dir, x_path, os.path.join(work, "out"))
    gpu_module, gpu_x = module.cuda(), x.cuda()
    results["PyTorch eager"] = run_torch(gpu_module, gpu_x, args.repeat, args.warmup)
    tolerance = TOLERANCES[config["dtype"]]
    ort_result, why = run_ort(module, config, x_np, args.repeat, args.warmup, results["PyTorch eager"][1],
                              tolerance)
    if ort_result:
        results["ORT CUDA MoE (%s, %s)" % (config["dtype"], ort_result[2]["encoding"])] = ort_result
    moe_bench.print_table(results, results["PyTorch eager"][1], ours[0], tolerance)
    if why:
        print("ONNX Runtime: not run: %s" % why)
    print("tokens per expert [%s]\ncommand: %s" % (ours[2]["tokens"], ours[2]["cmd"]))
    return 0 if all(moe_bench.rel_err(out, results["PyTorch eager"][1]) <= tolerance
                    for _, out, _ in results.values()) else 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("pack", help="compile the block for cuda into DIR")
    p.add_argument("dir")
    p.add_argument("--build", default=os.path.join(ROOT, "build"), help="the build directory (default build)")
    p.add_argument("--tokens", type=int, default=4096)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--ffn", type=int, default=3584)
    p.add_argument("--experts", type=int, default=8)
    p.add_argument("--top-k", type=int, default=2)
    p.add_argument("--dtype", default="f32", choices=sorted(TOLERANCES), help="the block's weights and activations")
    r = sub.add_parser("run", help="time the packed block on this machine's GPU")
    r.add_argument("dir")
    r.add_argument("--bin", required=True, help="where moe-run is")
    r.add_argument("--repeat", type=int, default=20)
    r.add_argument("--warmup", type=int, default=3)
    r.add_argument("--timeout", type=float, default=300, help="seconds moe-run may take (default 300)")
    args = parser.parse_args()
    if args.command == "pack":
        pack(args)
        return 0
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
