"""Text of the generated numeric lit tests: MLIR and FileCheck lines.

TestFile collects the body of one test's `func.func @main()`: constants
(`arith.constant dense<...>`), op text, and results printed with
printMemrefI32/I64 followed by the CHECK lines of the expected values. Float
results are quantized in the IR (roundeven(x * S) as i32) and checked as
exact integers; bad_quant tells whether float32 noise could flip one.
The op emitters at the end write moe ops with the weights of a dict
(w1, b1, w3, b3, w2, b2, gate) and an activation (moe_reference.Act).
"""

import numpy as np

MARGIN = 0.05      # min distance of x*S from a .5 boundary
F32_TOL = 0.02     # max |x64 - x32| * S
MAX_Q = 30000      # max |x*S|

RUN = ("// RUN: moe-opt %s --moe-lower-to-llvm | mlir-runner -e main "
       "-entry-point-result=void "
       "-shared-libs=%mlir_runner_utils,%mlir_c_runner_utils | FileCheck %s")


# ===----------------------------------------------------------------------===
# Quantization guards
# ===----------------------------------------------------------------------===

def bad_quant(x64, x32, S):
    """Per-element: would float32 noise possibly flip round(x * S)?"""
    y = np.asarray(x64, np.float64) * S
    frac = np.abs(y - np.floor(y) - 0.5)
    noise = np.abs(np.asarray(x64, np.float64) -
                   np.asarray(x32, np.float64)) * S
    return (frac < MARGIN) | (noise > F32_TOL) | (np.abs(y) > MAX_Q)


def bad_rows(x64, x32, S):
    """bad_quant reduced to the leading dimension: rows with a bad element."""
    b = bad_quant(x64, x32, S)
    return b.reshape(b.shape[0], -1).any(axis=1)


def quantize(x64, S):
    """round(x64 * S) as int64 (asserting no value is near a .5 boundary)."""
    y = np.asarray(x64, np.float64) * S
    assert not (np.abs(y - np.floor(y) - 0.5) < MARGIN).any()
    return np.round(y).astype(np.int64)


# ===----------------------------------------------------------------------===
# Literals and printed memrefs
# ===----------------------------------------------------------------------===

def fmt_float(v, decimals):
    """v with at most `decimals` decimals, trailing zeros dropped ("1.0")."""
    s = f"{float(v):.{decimals}f}".rstrip("0")
    if s.endswith("."):
        s += "0"
    if s == "-0.0":
        s = "0.0"
    return s


def tensor_type(shape, elt):
    """tensor<AxBxelt>, or tensor<elt> for shape ()."""
    if len(shape) == 0:
        return f"tensor<{elt}>"
    return "tensor<" + "x".join(str(d) for d in shape) + f"x{elt}>"


def dense_literal(arr, fmt, indent):
    """The nested [..] of a dense<> literal, one innermost row a line."""
    arr = np.asarray(arr)
    if arr.ndim == 0:
        return fmt(arr[()])
    if arr.ndim == 1:
        return "[" + ", ".join(fmt(v) for v in arr) + "]"
    inner = [dense_literal(a, fmt, indent + " ") for a in arr]
    sep = ",\n" + indent + " "
    return "[" + sep.join(inner) + "]"


def memref_print_text(arr):
    """The data lines printMemref* prints, whitespace collapsed."""
    arr = np.asarray(arr)
    if arr.ndim == 0:
        return [f"[{int(arr)}]"]
    out = []

    def rec(a, dim, rank):
        if dim == 0:
            out.append(str(int(a)))
            return
        n = a.shape[0]
        out.append("[")
        rec(a[0], dim - 1, rank)
        if n <= 1:
            out.append("]")
            return
        out.append(", ")
        if dim > 1:
            out.append("\n")
        for i in range(1, n - 1):
            out.append(" " * (rank - dim + 1))
            rec(a[i], dim - 1, rank)
            out.append(", ")
            if dim > 1:
                out.append("\n")
        out.append(" " * (rank - dim + 1))
        rec(a[n - 1], dim - 1, rank)
        out.append("]")

    rec(arr, arr.ndim, arr.ndim)
    text = "".join(out)
    return [" ".join(line.split()) for line in text.split("\n")]


def escape_check(line):
    """FileCheck reads `[[` as a variable: write bracket runs as a regex."""
    out, i = [], 0
    while i < len(line):
        if line[i] == "[":
            j = i
            while j < len(line) and line[j] == "[":
                j += 1
            if j - i >= 2:
                out.append("{{" + "\\[" * (j - i) + "}}")
            else:
                out.append("[")
            i = j
        else:
            out.append(line[i])
            i += 1
    return "".join(out)


def _printer(elt):
    return "printMemrefI32" if elt == "i32" else "printMemrefI64"


# ===----------------------------------------------------------------------===
# Test files
# ===----------------------------------------------------------------------===

class TestFile:
    """One generated test: file name, header comment and @main's body."""

    def __init__(self, name, doc):
        self.name = name
        self.doc = doc
        self.body = []
        self.n = 0
        self.decls = set()

    def fresh(self, base):
        """A new SSA name base<n>."""
        self.n += 1
        return f"{base}{self.n}"

    def line(self, text=""):
        """One line of @main's body (indented; blank if empty)."""
        self.body.append(("  " + text) if text else "")

    def comment(self, text):
        """Comment lines, one per line of text."""
        for t in text.split("\n"):
            self.line("// " + t if t else "//")

    def _const(self, name, arr, fmt, elt):
        arr = np.asarray(arr)
        lit = dense_literal(arr, fmt, "      ")
        ty = tensor_type(arr.shape, elt)
        if "\n" in lit:
            self.line(f"%{name} = arith.constant dense<\n      {lit}> : {ty}")
        else:
            self.line(f"%{name} = arith.constant dense<{lit}> : {ty}")
        return name

    def const_f32(self, name, arr, decimals=2):
        """%name = an f32 tensor constant; returns name."""
        return self._const(name, arr, lambda v: fmt_float(v, decimals), "f32")

    def const_i32(self, name, arr):
        """%name = an i32 tensor constant; returns name."""
        return self._const(name, arr, lambda v: str(int(v)), "i32")

    def _checks(self, expected):
        expected = np.asarray(expected)
        sizes = "[" + ", ".join(str(d) for d in expected.shape) + "]"
        self.line(f"// CHECK: rank = {expected.ndim} offset = {{{{[0-9]+}}}} "
                  f"sizes = {sizes} strides = [{{{{.*}}}}] data =")
        for l in memref_print_text(expected):
            self.line("// CHECK-NEXT: " + escape_check(l))

    def print_int(self, value, shape, elt, expected, what):
        """Print integer tensor %value (elt i32 or i64), CHECK `expected`."""
        self.decls.add(elt)
        c = self.fresh("p")
        src = tensor_type(shape, elt)
        self.line()
        self.comment(what)
        self.line(f"%{c} = tensor.cast %{value} : {src} to tensor<*x{elt}>")
        self.line(f"call @{_printer(elt)}(%{c}) : (tensor<*x{elt}>) -> ()")
        self._checks(expected)

    def print_quant(self, value, shape, x64, x32, S, what):
        """Quantize float `value` by S, print it, CHECK round(x64 * S)."""
        assert not bad_quant(x64, x32, S).any(), (self.name, what)
        q = quantize(x64, S)
        rank = len(shape)
        dims = ", ".join(f"d{i}" for i in range(rank))
        idmap = f"affine_map<({dims}) -> ({dims})>"
        iters = ", ".join(['"parallel"'] * rank)
        e = self.fresh("qe")
        qv = self.fresh("q")
        ity = tensor_type(shape, "i32")
        self.line()
        self.comment(f"{what}, x {S:.0e}")
        self.line(f"%{e} = tensor.empty() : {ity}")
        self.line(f"%{qv} = linalg.generic {{indexing_maps = [{idmap}, {idmap}], "
                  f"iterator_types = [{iters}]}}")
        self.line(f"    ins(%{value} : {tensor_type(shape, 'f32')}) outs(%{e} : {ity}) {{")
        self.line("^bb0(%in: f32, %out: i32):")
        self.line("  %wide = arith.extf %in : f32 to f64")
        self.line(f"  %scale = arith.constant {float(S):.1f} : f64")
        self.line("  %scaled = arith.mulf %wide, %scale : f64")
        self.line("  %rounded = math.roundeven %scaled : f64")
        self.line("  %int = arith.fptosi %rounded : f64 to i32")
        self.line("  linalg.yield %int : i32")
        self.line(f"}} -> {ity}")
        self.decls.add("i32")
        c = self.fresh("p")
        self.line(f"%{c} = tensor.cast %{qv} : {ity} to tensor<*xi32>")
        self.line(f"call @printMemrefI32(%{c}) : (tensor<*xi32>) -> ()")
        self._checks(q)

    def render(self):
        """The whole file: RUN line, doc comment, printer decls, @main."""
        out = ["// Generated by gen_tests.py (same directory); do not edit.",
               "// Regenerate: /usr/bin/python3 test/numeric/gen_tests.py",
               RUN, "//"]
        for d in self.doc.strip("\n").split("\n"):
            out.append(("// " + d) if d else "//")
        out.append("")
        for elt in sorted(self.decls):
            # The printer only reads: results that lower to constants
            # (read-only globals) may be passed without a copy.
            out.append(f"func.func private @{_printer(elt)}("
                       f"tensor<*x{elt}> {{bufferization.access = \"read\"}})")
        out.append("")
        out.append("func.func @main() {")
        out.extend(self.body)
        out.append("  return")
        out.append("}")
        return "\n".join(out) + "\n"


# ===----------------------------------------------------------------------===
# moe ops
# ===----------------------------------------------------------------------===

def activation_attr(act):
    """The #moe.activation parameters of an Act, e.g. <swiglu, interleaved>."""
    if act.kind != "swiglu":
        return f"<{act.kind}>"
    parts = ["swiglu"]
    if act.layout != "separate":
        parts.append(act.layout)
    if act.alpha != 1.0:
        parts.append(f"alpha = {act.alpha!r}")
    if act.beta != 0.0:
        parts.append(f"beta = {act.beta!r}")
    if act.limit is not None:
        parts.append(f"limit = {act.limit!r}")
    return "<" + ", ".join(parts) + ">"


def route_attrs(route):
    """The attr-dict of a moe.layer for normalize and scaling_factor."""
    attrs = []
    if route.get("normalize"):
        attrs.append("normalize")
    if route.get("scaling_factor", 1.0) != 1.0:
        attrs.append(f"scaling_factor = {route['scaling_factor']!r}")
    return (" {" + ", ".join(attrs) + "}") if attrs else ""


def emit_weights(f, prefix, w):
    """A constant %prefix_key per weight of w; returns {key: SSA name}."""
    names = {}
    for key in sorted(w):
        names[key] = f"{prefix}_{key}"
        f.const_f32(names[key], w[key])
    return names


def ffn_operands(w, names):
    """`fc1(..) fc3(..) fc3_bias(..) fc2(..)` for the weights in w, and the
    types of those operands in order."""
    def ty(key):
        return tensor_type(w[key].shape, "f32")

    txt = f"fc1(%{names['w1']}"
    types = [ty("w1")]
    if "b1" in w:
        txt += f", %{names['b1']}"
        types.append(ty("b1"))
    txt += ")"
    if "w3" in w:
        txt += f" fc3(%{names['w3']})"
        types.append(ty("w3"))
    if "b3" in w:
        txt += f" fc3_bias(%{names['b3']})"
        types.append(ty("b3"))
    txt += f" fc2(%{names['w2']}"
    types.append(ty("w2"))
    if "b2" in w:
        txt += f", %{names['b2']}"
        types.append(ty("b2"))
    txt += ")"
    return txt, types


def experts_call(f, name, rows_name, rows_shape, counts_name, G, w, wnames, act,
                 out_shape):
    """Emit one moe.experts. w: dict of weights; wnames: their SSA names."""
    fc, fc_types = ffn_operands(w, wnames)
    types = [tensor_type(rows_shape, "f32"), tensor_type((G,), "i32")] + fc_types
    f.line()
    f.line(f"%{name} = moe.experts %{rows_name}, %{counts_name} {fc} "
           f"activation {activation_attr(act)}")
    f.line(f"    : ({', '.join(types)})")
    f.line(f"   -> {tensor_type(out_shape, 'f32')}")


def shared_call(f, name, xname, T, H, w, names, act, M):
    """Emit one moe.shared_expert on %xname [T, H] -> [T, M]."""
    fc, fc_types = ffn_operands(w, names)
    txt = f"moe.shared_expert %{xname} {fc}"
    types = [tensor_type((T, H), "f32")] + fc_types
    if "gate" in w:
        txt += f" gate(%{names['gate']})"
        types.append(tensor_type(w["gate"].shape, "f32"))
    f.line()
    f.line(f"%{name} = {txt} activation {activation_attr(act)}")
    f.line(f"    : ({', '.join(types)})")
    f.line(f"   -> {tensor_type((T, M), 'f32')}")


def layer_call(f, name, T, H, E, k, w, names, act, route, bias=None,
               shared=None, snames=None, capacity=None, policy=None):
    """Emit one moe.layer on %x [T, H] and %logits [T, E] -> [T, H].

    route: router_rows keyword arguments (scoring, selection, ...); bias:
    the SSA name of the selection bias; shared, snames: the shared expert's
    weights and their SSA names."""
    types = [tensor_type((T, H), "f32"), tensor_type((T, E), "f32")]
    mid = ""
    if bias is not None:
        mid += f" bias(%{bias})"
    if route.get("selection") == "grouped_topk":
        mid += (f" groups {route['num_groups']} top {route['group_topk']}"
                f" by {route['group_score']}")
    if capacity:
        mid += f" capacity {capacity} drop {policy}"
    txt, fc_types = ffn_operands(w, names)
    types += fc_types
    if bias is not None:
        types.append(tensor_type((E,), "f32"))
    if shared:
        for key, kw in (("w1", "shared_fc1"), ("w3", "shared_fc3"),
                        ("w2", "shared_fc2"), ("gate", "shared_gate")):
            if key in shared:
                txt += f" {kw}(%{snames[key]})"
                types.append(tensor_type(shared[key].shape, "f32"))
    f.line()
    f.line(f"%{name} = moe.layer {route['scoring']} {route['selection']} k {k}"
           f" %x, %logits{mid}")
    f.line(f"    {txt}")
    f.line(f"    activation {activation_attr(act)}{route_attrs(route)}")
    f.line(f"    : ({', '.join(types)})")
    f.line(f"   -> {tensor_type((T, H), 'f32')}")
