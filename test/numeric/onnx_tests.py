"""The numeric tests of convert-onnx-to-linalg (onnx_*.mlir), for gen_tests.py.

Every test puts onnx ops in a `func.func @model(...)` whose arguments are the
test data (so that the lowering, not the constant folder, computes them) and
calls it from `@main` on constants. The expected values are NumPy's
implementation of the same ONNX semantics (np.matmul, np.einsum,
np.take_along_axis, a stable argsort for TopK and ArgMax, ...), evaluated in
float64 on the float32 constants; the float32 evaluation is the noise guard
of the quantization (mlir_text.bad_quant): a draw that could flip a printed
digit is rejected and the next seed tried. Integer and boolean results are
printed exactly (booleans through an onnx.Cast to i64).
"""

import math

import numpy as np

from mlir_text import TestFile, bad_quant, fmt_float, tensor_type

INT64_MAX = 2 ** 63 - 1


class Reject(Exception):
    """The drawn inputs could flip a printed digit; draw again."""


def retry(build, seed, tries=200):
    """build(rng) with seeds seed, seed+1, ... until it is not rejected."""
    for i in range(tries):
        try:
            return build(np.random.default_rng(seed + i))
        except Reject:
            continue
    raise RuntimeError(f"no seed from {seed} worked")


def grid(rng, shape, lo, hi, decimals=2):
    """Values on a decimal grid (exactly printable), as float64."""
    scale = 10 ** decimals
    return np.round(rng.integers(int(lo * scale), int(hi * scale) + 1,
                                 size=shape) / scale, decimals)


def f32(a):
    """The float32 value of a constant, as float64."""
    return np.asarray(a, np.float32).astype(np.float64)


def both(fn, *arrays):
    """fn of the float32 values of `arrays`, in float64 and in float32."""
    x64 = fn(*[np.asarray(a, np.float32).astype(np.float64) for a in arrays])
    x32 = fn(*[np.asarray(a, np.float32) for a in arrays])
    return np.asarray(x64, np.float64), np.asarray(x32, np.float64)


FMT = {
    "f32": lambda v: fmt_float(v, 2),
    "i64": lambda v: str(int(v)),
    "i32": lambda v: str(int(v)),
    "i1": lambda v: "true" if v else "false",
}


class Raw(str):
    """An attribute value written as it is (an elements attribute)."""


def attr_text(key, value):
    """An ONNX attribute as the onnx dialect spells it."""
    if isinstance(value, Raw):
        return f"{key} = {value}"
    if isinstance(value, str):
        return f'{key} = "{value}"'
    if isinstance(value, float):
        mantissa, _, exponent = repr(value).partition("e")
        if "." not in mantissa:
            mantissa += ".0"
        return f"{key} = {mantissa}{'e' + exponent if exponent else ''} : f32"
    if isinstance(value, (list, tuple)):
        return f"{key} = array<i64: {', '.join(str(v) for v in value)}>"
    return f"{key} = {int(value)} : i64"


class OnnxTest:
    """One onnx_*.mlir file: @model's onnx ops and @main's checks."""

    def __init__(self, name, doc):
        self.name = name
        self.f = TestFile(name, doc)
        self.params, self.operands, self.lines = [], [], []
        self.types = {}
        self.checks = []
        self.has_none = False

    def _type(self, value):
        shape, elt = self.types[value]
        return tensor_type(["?" if d < 0 else d for d in shape], elt)

    def _static(self, result, shape, elt):
        """@main's name of `result` (an @model result) with static `shape`."""
        name = f"r#{result}"
        if all(d >= 0 for d in self.types[self.checks[result][0]][0]):
            return name
        cast = self.f.fresh("s")
        self.f.line(f"%{cast} = tensor.cast %{name} : "
                    f"{self._type(self.checks[result][0])} to "
                    f"{tensor_type(shape, elt)}")
        return cast

    def arg(self, arr, elt="f32"):
        """A test input: an @main constant passed as an @model argument."""
        arr = np.asarray(arr)
        self.operands.append(
            self.f._const(self.f.fresh("in"), arr, FMT[elt], elt))
        name = f"arg{len(self.params)}"
        self.params.append(name)
        self.types[name] = (arr.shape, elt)
        return name

    def const(self, arr, elt="i64"):
        """An @model constant (shape operands: axes, K, target shapes)."""
        arr = np.asarray(arr)
        name = self.f.fresh("k")
        lit = (FMT[elt](arr[()]) if arr.ndim == 0 else
               "[" + ", ".join(FMT[elt](v) for v in arr.reshape(-1)) + "]")
        if arr.ndim > 1:
            raise ValueError("model constants are scalars or 1-D")
        self.types[name] = (arr.shape, elt)
        self.lines.append(f"%{name} = arith.constant dense<{lit}> : "
                          f"{self._type(name)}")
        return name

    def op(self, op, inputs, outs, **attrs):
        """%results = onnx.<op> inputs {attrs}; outs: [(shape, elt)]."""
        if "none" in inputs and not self.has_none:
            self.lines.insert(0, "%none = onnx.none")
            self.has_none = True
        names = [self.f.fresh("v") for _ in outs]
        for name, (shape, elt) in zip(names, outs):
            self.types[name] = (tuple(shape), elt)
        in_types = ", ".join("none" if i == "none" else self._type(i)
                             for i in inputs)
        out_types = ", ".join(self._type(n) for n in names)
        text = ", ".join(f"%{n}" for n in names) + f" = onnx.{op} "
        text += ", ".join(f"%{i}" for i in inputs)
        if attrs:
            text += " {" + ", ".join(attr_text(k, v)
                                     for k, v in attrs.items()) + "}"
        self.lines.append(text + f" : ({in_types}) -> ({out_types})")
        return names[0] if len(names) == 1 else names

    def drawn_f32(self, rng, op, operands, fn, S, what, outs=None, **attrs):
        """onnx.<op> on `operands` (a spec (shape, lo, hi) is an input drawn
        on the grid, a string an existing value or "none"), CHECKed against
        fn(*drawn inputs). Inputs are redrawn until no printed digit of the
        reference is fragile. `outs`: the result types where there are
        several (then fn returns one reference per result)."""
        specs = [o for o in operands if not isinstance(o, str)]
        count = len(outs) if outs else 1
        for _ in range(1000):
            arrays = [grid(rng, *spec) for spec in specs]
            refs = [both(lambda *a: fn(*a)[i] if outs else fn(*a), *arrays)
                    for i in range(count)]
            if not any(bad_quant(*ref, S).any() for ref in refs):
                break
        else:
            raise RuntimeError(f"no inputs for {what}")
        drawn = iter([self.arg(a) for a in arrays])
        names = [o if isinstance(o, str) else next(drawn) for o in operands]
        results = self.op(op, names, outs or [(refs[0][0].shape, "f32")],
                          **attrs)
        if not outs:
            self.check_f32(results, refs[0], S, what)
            return arrays
        for i, (result, ref) in enumerate(zip(results, refs)):
            self.check_f32(result, ref, S, f"{what} #{i}")
        return arrays

    def check_f32(self, value, ref, S, what):
        """Return `value` from @model; CHECK round(ref * S) (ref = (x64, x32))."""
        x64, x32 = ref
        self._match(value, x64.shape, what)
        if bad_quant(x64, x32, S).any():
            raise Reject(what)
        self.checks.append((value, lambda r: self.f.print_quant(
            self._static(r, x64.shape, "f32"), x64.shape, x64, x32, S,
            what)))

    def _match(self, value, shape, what):
        """Asserts that `value`'s type (dynamic dims aside) is `shape`."""
        declared = self.types[value][0]
        assert len(declared) == len(shape) and all(
            d < 0 or d == e for d, e in zip(declared, shape)), (what, shape)

    def check_int(self, value, expected, what):
        """Return `value` (integer or bool) from @model; CHECK `expected`."""
        expected = np.asarray(expected)
        shape, elt = self.types[value]
        self._match(value, expected.shape, what)
        if elt != "i64":
            value = self.op("Cast", [value], [(shape, "i64")], to=7)
        self.checks.append((value, lambda r: self.f.print_int(
            self._static(r, expected.shape, "i64"), expected.shape, "i64",
            expected.astype(np.int64), what)))

    def render(self):
        """@model returns the checked values; @main calls and prints it."""
        results = [v for v, _ in self.checks]
        types = ", ".join(self._type(v) for v in results)
        params = ", ".join(f"%{p}: {self._type(p)}" for p in self.params)
        model = [f"func.func @model({params}) -> ({types}) {{"]
        model += ["  " + line for line in self.lines]
        model.append("  return " + ", ".join(f"%{v}" for v in results) +
                     f" : {types}")
        model += ["}", ""]
        self.f.line()
        self.f.line(f"%r:{len(results)} = call @model(" +
                    ", ".join(f"%{o}" for o in self.operands) +
                    f") : ({', '.join(self._type(p) for p in self.params)})"
                    f" -> ({types})")
        for i, (_, emit) in enumerate(self.checks):
            emit(i)
        text = self.f.render()
        at = text.index("func.func @main()")
        return text[:at] + "\n".join(model) + "\n" + text[at:]


# ===----------------------------------------------------------------------===
# Elementwise
# ===----------------------------------------------------------------------===

def test_elementwise():
    rng = np.random.default_rng(3000)
    t = OnnxTest("onnx_elementwise.mlir", """
Elementwise onnx ops with NumPy (multidirectional) broadcasting: [2,3] with
[3] and [2,1] operands, unary float math, variadic Min/Max, Clip with
missing bounds, comparisons and logic on booleans, Where, Cast (float to
int truncates toward zero) and integer arithmetic (Div truncates).
Reference: the same NumPy expressions.""")
    S = 1000
    a, b, c = ((2, 3), -2, 2), ((3,), 0.5, 2), ((2, 1), -1, 1)
    p = ((2, 3), 0.1, 2)

    def check(op, operands, fn, what=None, **attrs):
        return t.drawn_f32(rng, op, operands, fn, S, what or op, **attrs)

    check("Add", [a, b], np.add, "Add([2,3], [3])")
    check("Sub", [c, b], np.subtract, "Sub([2,1], [3])")
    check("Mul", [a, c], np.multiply, "Mul([2,3], [2,1])")
    check("Div", [a, b], np.divide, "Div([2,3], [3])")
    two = t.const(np.array(2.0, np.float32), "f32")
    check("Pow", [a, two], lambda x: x ** 2, "Pow(a, 2)")
    check("Pow", [p, b], np.power, "Pow([2,3], [3])")
    for op, fn, spec in [
            ("Sqrt", np.sqrt, p), ("Reciprocal", lambda x: 1 / x, p),
            ("Neg", np.negative, a), ("Exp", np.exp, a), ("Log", np.log, p),
            ("Tanh", np.tanh, a), ("Erf", np.vectorize(math.erf), a),
            ("Sigmoid", lambda x: 1 / (1 + np.exp(-x)), a),
            ("Relu", lambda x: np.maximum(x, 0), a), ("Abs", np.abs, a),
            ("Ceil", np.ceil, a), ("Floor", np.floor, a)]:
        check(op, [spec], fn)
    check("Min", [a, b, c],
          lambda x, y, z: np.minimum(np.minimum(x, y), z), "Min(a, b, c)")
    check("Max", [a, c], np.maximum, "Max(a, c)")
    lo = t.const(np.array(-0.5, np.float32), "f32")
    hi = t.const(np.array(1.0, np.float32), "f32")
    check("Clip", [a, lo], lambda x: np.maximum(x, -0.5), "Clip(a, -0.5)")
    check("Clip", [a, "none", hi], lambda x: np.minimum(x, 1.0),
          "Clip(a, none, 1)")
    # Comparisons of x with y, which equals x in some elements.
    x = grid(rng, (2, 3), -2, 2)
    y = np.where(rng.random((2, 3)) < 0.5, x, grid(rng, (2, 3), -2, 2))
    z = grid(rng, (2, 1), -1, 1)
    X, Y, Z = t.arg(x), t.arg(y), t.arg(z)
    x32, y32, z32 = (v.astype(np.float32) for v in (x, y, z))
    bools = [((2, 3), "i1")]
    for op, fn in [("Equal", np.equal), ("Greater", np.greater),
                   ("GreaterOrEqual", np.greater_equal),
                   ("Less", np.less), ("LessOrEqual", np.less_equal)]:
        t.check_int(t.op(op, [X, Y], bools), fn(x32, y32), f"{op}(x, y)")
    gt = t.op("Greater", [X, Z], bools)
    le = t.op("LessOrEqual", [X, Y], bools)
    g, l = x32 > z32, x32 <= y32
    t.check_int(t.op("And", [gt, le], bools), g & l, "And")
    t.check_int(t.op("Or", [gt, le], bools), g | l, "Or")
    t.check_int(t.op("Not", [gt], bools), ~g, "Not")
    t.check_f32(t.op("Where", [gt, X, Z], [((2, 3), "f32")]),
                both(lambda u, v: np.where(g, u, v), x, z), 100,
                "Where(x > z, x, z)")
    t.check_int(t.op("Cast", [X], [((2, 3), "i64")], to=7), np.trunc(x32),
                "Cast(x) to i64")
    # Integers.
    nv, dv = np.array([-7, 7, -8, 9]), np.array([2, -2, 3, 4])
    n, d = t.arg(nv, "i64"), t.arg(dv, "i64")
    i4 = [((4,), "i64")]
    t.check_int(t.op("Div", [n, d], i4), np.trunc(nv / dv), "Div (i64)")
    t.check_int(t.op("Mul", [n, d], i4), nv * dv, "Mul (i64)")
    t.check_int(t.op("Max", [n, d], i4), np.maximum(nv, dv), "Max (i64)")
    t.check_int(t.op("Abs", [n], i4), np.abs(nv), "Abs (i64)")
    t.check_int(t.op("Neg", [n], i4), -nv, "Neg (i64)")
    t.check_f32(t.op("Cast", [n], [((4,), "f32")], to=1),
                both(lambda v: v, nv), 1, "Cast(n) to f32")
    return t


# ===----------------------------------------------------------------------===
# MatMul and Gemm
# ===----------------------------------------------------------------------===

def test_linear():
    rng = np.random.default_rng(3100)
    t = OnnxTest("onnx_linear.mlir", """
MatMul with NumPy semantics (2-D, batch dims that broadcast, 1-D operands
whose dim the result drops, integers) and Gemm with transposed operands,
alpha, beta and a broadcast C. Reference: np.matmul.""")

    def check(op, shapes, fn, what, **attrs):
        t.drawn_f32(rng, op, [(s, -1, 1) for s in shapes], fn, 1000, what,
                    **attrs)

    for lhs, rhs in [((3, 4), (4, 2)), ((2, 1, 3, 4), (3, 4, 2)),
                     ((4,), (4, 2)), ((2, 1, 3, 4), (4,)), ((4,), (4,))]:
        check("MatMul", [lhs, rhs], np.matmul, f"MatMul({list(lhs)}, "
              f"{list(rhs)})")
    ia, ib = np.arange(6).reshape(2, 3) - 2, np.arange(6).reshape(3, 2) * 3 - 7
    t.check_int(t.op("MatMul", [t.arg(ia, "i64"), t.arg(ib, "i64")],
                     [((2, 2), "i64")]), ia @ ib, "MatMul (i64)")
    check("Gemm", [(4, 3), (2, 4), (2,)],
          lambda x, y, z: 0.5 * x.T @ y.T + 2.0 * z,
          "Gemm(transA, transB, alpha 0.5, beta 2, C [2])", alpha=0.5,
          beta=2.0, transA=1, transB=1)
    check("Gemm", [(3, 4), (4, 2), (3, 1)], lambda x, y, z: x @ y + z,
          "Gemm(C [3,1])")
    check("Gemm", [(3, 4), (4, 2)], np.matmul, "Gemm(no C)")
    return t


# ===----------------------------------------------------------------------===
# Shape ops
# ===----------------------------------------------------------------------===

def test_shape():
    t = OnnxTest("onnx_shape.mlir", """
Shape and data-movement ops on x = arange(24) as [2,3,4] (i64, exact):
Reshape (0 copies a dim, -1 is inferred), Transpose, Squeeze, Unsqueeze,
Flatten, Concat, Split (sizes, and equal parts with the last smaller),
Slice (negative starts, INT64_MAX ends, a negative step), Expand, Identity,
and Shape, Size, ConstantOfShape and Range, which fold to constants.
Reference: NumPy reshape/transpose/concatenate/slicing/broadcast_to.""")
    x = np.arange(24).reshape(2, 3, 4)
    X = t.arg(x, "i64")

    def check(op, inputs, ref, what, **attrs):
        t.check_int(t.op(op, inputs, [(ref.shape, "i64")], **attrs), ref,
                    what)

    check("Reshape", [X, t.const([0, -1])], x.reshape(2, 12),
          "Reshape(x, [0, -1])")
    check("Reshape", [X, t.const([4, 0, -1])], x.reshape(4, 3, 2),
          "Reshape(x, [4, 0, -1])")
    check("Transpose", [X], x.transpose(2, 0, 1), "Transpose(x, [2, 0, 1])",
          perm=[2, 0, 1])
    check("Transpose", [X], x.transpose(), "Transpose(x)")
    u = np.arange(6).reshape(1, 3, 1, 2)
    U = t.arg(u, "i64")
    check("Squeeze", [U, t.const([0, 2])], u.reshape(3, 2),
          "Squeeze(u, [0, 2])")
    check("Squeeze", [U], u.reshape(3, 2), "Squeeze(u)")
    check("Unsqueeze", [U, t.const([0, -1])], u.reshape(1, 1, 3, 1, 2, 1),
          "Unsqueeze(u, [0, -1])")
    check("Flatten", [X], x.reshape(6, 4), "Flatten(x, 2)", axis=2)
    check("Flatten", [X], x.reshape(1, 24), "Flatten(x, 0)", axis=0)
    y = 100 + np.arange(8).reshape(2, 1, 4)
    Y = t.arg(y, "i64")
    check("Concat", [X, Y], np.concatenate([x, y], 1), "Concat(x, y, 1)",
          axis=1)
    check("Concat", [Y, X, Y], np.concatenate([y, x, y], -2),
          "Concat(y, x, y, -2)", axis=-2)
    s1, s2 = t.op("Split", [X, t.const([1, 3])],
                  [((2, 3, 1), "i64"), ((2, 3, 3), "i64")], axis=2)
    t.check_int(s1, x[:, :, :1], "Split(x, [1, 3], 2)#0")
    t.check_int(s2, x[:, :, 1:], "Split(x, [1, 3], 2)#1")
    e1, e2 = t.op("Split", [X], [((2, 2, 4), "i64"), ((2, 1, 4), "i64")],
                  axis=1, num_outputs=2)
    t.check_int(e1, x[:, :2], "Split(x, axis 1, 2 outputs)#0")
    t.check_int(e2, x[:, 2:], "Split(x, axis 1, 2 outputs)#1")
    check("Slice", [X, t.const([1, -3]), t.const([INT64_MAX, -1]),
                    t.const([1, 2])], x[:, 1:, 1:3],
          "Slice(x, starts [1, -3], ends [max, -1], axes [1, 2])")
    check("Slice", [X, t.const([-1, 2]), t.const([-INT64_MAX, 0]),
                    t.const([2, 1]), t.const([-2, -1])], x[:, 2:0:-1, ::-2],
          "Slice(x, steps [-2, -1])")
    z = np.array([[5], [6], [7]])
    check("Expand", [t.arg(z, "i64"), t.const([2, 1, 4])],
          np.broadcast_to(z, (2, 3, 4)), "Expand([3,1], [2, 1, 4])")
    check("Identity", [X], x, "Identity(x)")
    check("Shape", [X], np.array([2, 3, 4]), "Shape(x)")
    check("Shape", [X], np.array([3, 4]), "Shape(x, start 1)", start=1)
    check("Size", [X], np.array(24), "Size(x)")
    t.check_int(t.op("ConstantOfShape", [t.const([2, 3])], [((2, 3), "i64")],
                     value=Raw("dense<7> : tensor<1xi64>")), np.full((2, 3), 7),
                "ConstantOfShape([2, 3], 7)")
    check("Range", [t.const(np.array(1)), t.const(np.array(10)),
                    t.const(np.array(3))], np.arange(1, 10, 3),
          "Range(1, 10, 3)")
    # Floats through the same reshapes.
    w = np.round(np.arange(12).reshape(3, 4) * 0.25 - 1, 2)
    W = t.arg(w)
    ref = w.reshape(2, 6).T
    v = t.op("Reshape", [W, t.const([2, 6])], [((2, 6), "f32")])
    t.check_f32(t.op("Transpose", [v], [((6, 2), "f32")]), (ref, ref), 100,
                "Transpose(Reshape(w, [2, 6])) (f32)")
    return t


# ===----------------------------------------------------------------------===
# Reductions, normalisations, selections
# ===----------------------------------------------------------------------===

def topk_ref(x, k, axis, largest):
    """Values and indices of TopK: a stable sort, so ties go to the lower
    index."""
    order = np.argsort(-x if largest else x, axis=axis, kind="stable")
    idx = np.take(order, np.arange(k), axis=axis)
    return np.take_along_axis(x, idx, axis=axis), idx


def test_reduce():
    rng = np.random.default_rng(3200)
    t = OnnxTest("onnx_reduce.mlir", """
ReduceSum/Mean/Max over constant axes (operand or attribute) with and
without keepdims, Softmax along an axis, LayerNormalization with its Mean
and InvStdDev outputs, ArgMax and TopK with ties (the lower index wins;
select_last_index the higher) and CumSum (exclusive, reverse).
Reference: NumPy reductions, a stable argsort, np.cumsum.""")
    x = ((2, 3, 4), -2, 2)

    def check(op, operands, fn, what, S=1000, **attrs):
        t.drawn_f32(rng, op, operands, fn, S, what, **attrs)

    check("ReduceSum", [x, t.const([1])], lambda v: v.sum(1, keepdims=True),
          "ReduceSum(x, [1])")
    check("ReduceSum", [x, t.const([0, -1])], lambda v: v.sum((0, 2)),
          "ReduceSum(x, [0, -1], keepdims 0)", keepdims=0)
    check("ReduceSum", [x], lambda v: v.sum(keepdims=True), "ReduceSum(x)")
    check("ReduceMean", [x], lambda v: v.mean(-1),
          "ReduceMean(x, axes attr [-1], keepdims 0)", S=10000, axes=[-1],
          keepdims=0)
    check("ReduceMax", [x, t.const([1])], lambda v: v.max(1),
          "ReduceMax(x, [1], keepdims 0)", keepdims=0)

    def softmax(v, axis):
        e = np.exp(v - v.max(axis, keepdims=True))
        return e / e.sum(axis, keepdims=True)

    check("Softmax", [x], lambda v: softmax(v, 1), "Softmax(x, 1)", axis=1)
    check("Softmax", [x], lambda v: softmax(v, -1), "Softmax(x)")
    eps = 1e-5

    def layer_norm(v, axis, scale, bias=0):
        axes = tuple(range(axis, v.ndim))
        mean = v.mean(axes, keepdims=True)
        var = ((v - mean) ** 2).mean(axes, keepdims=True)
        inv = 1 / np.sqrt(var + v.dtype.type(eps))
        return (v - mean) * inv * scale + bias, mean, inv

    t.drawn_f32(rng, "LayerNormalization",
                [x, ((4,), 0.5, 1), ((4,), -0.5, 0.5)],
                lambda v, s, b: layer_norm(v, 2, s, b), 10000,
                "LayerNormalization(x, scale, bias), Mean, InvStdDev",
                outs=[((2, 3, 4), "f32"), ((2, 3, 1), "f32"),
                      ((2, 3, 1), "f32")], axis=-1, epsilon=eps)
    check("LayerNormalization", [x, ((3, 4), 0.5, 1.5)],
          lambda v, s: layer_norm(v, 1, s)[0],
          "LayerNormalization(x, scale [3,4], axis 1)", axis=1)
    # Selections on values with ties.
    m = rng.integers(-2, 3, size=(3, 5)).astype(np.float64)
    M = t.arg(m)
    idx = [((3, 1), "i64")]
    t.check_int(t.op("ArgMax", [M], idx, axis=1), m.argmax(1)[:, None],
                "ArgMax(m, 1)")
    last = 4 - m[:, ::-1].argmax(1)
    t.check_int(t.op("ArgMax", [M], idx, axis=-1, select_last_index=1),
                last[:, None], "ArgMax(m, -1, select_last_index)")
    t.check_int(t.op("ArgMax", [M], [((5,), "i64")], axis=0, keepdims=0),
                m.argmax(0), "ArgMax(m, 0, keepdims 0)")
    for k, axis, largest in [(3, 1, 1), (2, 0, 0)]:
        vals, ids = topk_ref(m, k, axis, largest)
        v, i = t.op("TopK", [M, t.const([k])],
                    [(vals.shape, "f32"), (ids.shape, "i64")], axis=axis,
                    largest=largest)
        what = f"TopK(m, {k}, axis {axis}, largest {largest})"
        t.check_f32(v, (vals, vals), 1, what + " values")
        t.check_int(i, ids, what + " indices")
    ax = t.const(np.array(1, np.int64))
    for exclusive, reverse in [(0, 0), (1, 0), (0, 1), (1, 1)]:
        r = m[:, ::-1] if reverse else m
        ref = np.cumsum(r, 1) - (r if exclusive else 0)
        ref = ref[:, ::-1] if reverse else ref
        t.check_f32(t.op("CumSum", [M, ax], [((3, 5), "f32")],
                         exclusive=exclusive, reverse=reverse),
                    (ref, ref), 1,
                    f"CumSum(m, 1, exclusive {exclusive}, reverse {reverse})")
    return t


# ===----------------------------------------------------------------------===
# Indexing and Einsum
# ===----------------------------------------------------------------------===

def test_indexing():
    t = OnnxTest("onnx_indexing.mlir", """
Gather (2-D and scalar indices, negative ones), GatherElements, GatherND
(with batch_dims), ScatterElements and ScatterND (reduction none and add,
duplicate indices), OneHot (negative index, axis 0), Trilu (upper/lower,
k) and Einsum (matmul, batched, implicit output, ellipsis, diagonal, full
sum, outer product) on exact small integers.
Reference: np.take, np.take_along_axis, loops, np.triu/tril, np.einsum.""")
    d = np.arange(12).reshape(3, 4) * 2 - 5
    D = t.arg(d, "i64")

    def check(op, inputs, ref, what, **attrs):
        t.check_int(t.op(op, inputs, [(ref.shape, "i64")], **attrs), ref,
                    what)

    gi = np.array([[0, -1], [2, 1]])
    check("Gather", [D, t.arg(gi, "i64")], np.take(d, gi % 3, 0),
          "Gather(d, [[0, -1], [2, 1]], 0)")
    check("Gather", [D, t.arg(np.array(-2), "i64")], d[:, -2],
          "Gather(d, -2, 1)", axis=1)
    ge = np.array([[1, 0], [3, -1], [2, 2]])
    check("GatherElements", [D, t.arg(ge, "i64")],
          np.take_along_axis(d, ge % 4, 1), "GatherElements(d, ge, 1)",
          axis=1)
    gn = np.array([[0, 1], [2, -1]])
    check("GatherND", [D, t.arg(gn, "i64")], np.array([d[0, 1], d[2, -1]]),
          "GatherND(d, [[0, 1], [2, -1]])")
    e = np.arange(24).reshape(2, 3, 4)
    bn = np.array([[2], [0]])
    check("GatherND", [t.arg(e, "i64"), t.arg(bn, "i64")],
          np.array([e[0, 2], e[1, 0]]), "GatherND(e, [[2], [0]], batch 1)",
          batch_dims=1)
    si = np.array([[1, 0], [3, 3], [0, -4]])
    su = np.array([[10, 20], [30, 40], [50, 60]])
    SI, SU = t.arg(si, "i64"), t.arg(su, "i64")
    ref = d.copy()
    for r in range(3):
        for c in range(2):
            ref[r, si[r, c] % 4] += su[r, c]
    check("ScatterElements", [D, SI, SU], ref,
          "ScatterElements(d, si, su, 1, add)", axis=1, reduction="add")
    si0 = np.array([[2, 0, 1, 1]])
    ref = d.copy()
    ref[si0[0], np.arange(4)] = su.reshape(-1)[:4]
    check("ScatterElements", [D, t.arg(si0, "i64"),
                              t.arg(su.reshape(-1)[None, :4], "i64")], ref,
          "ScatterElements(d, [[2, 0, 1, 1]], u, 0)")
    ni = np.array([[1], [-1]])
    nu = np.array([[1, 2, 3, 4], [5, 6, 7, 8]])
    ref = d.copy()
    ref[1], ref[2] = nu[0], nu[1]
    check("ScatterND", [D, t.arg(ni, "i64"), t.arg(nu, "i64")], ref,
          "ScatterND(d, [[1], [-1]], rows)")
    ref = d.copy()
    ref[1, 2] += 100 + 200
    check("ScatterND", [D, t.arg(np.array([[1, 2], [1, 2]]), "i64"),
                        t.arg(np.array([100, 200]), "i64")], ref,
          "ScatterND(d, [[1, 2], [1, 2]], add)", reduction="add")
    oi = np.array([0, 2, -1])
    OI = t.arg(oi, "i64")
    depth, values = t.const(np.array(4)), t.const([0, 5])
    check("OneHot", [OI, depth, values], np.eye(4, dtype=int)[oi % 4] * 5,
          "OneHot([0, 2, -1], 4, [0, 5])")
    check("OneHot", [OI, depth, values], (np.eye(4, dtype=int)[oi % 4] * 5).T,
          "OneHot([0, 2, -1], 4, [0, 5], axis 0)", axis=0)
    check("Trilu", [D, t.const(np.array(1))], np.triu(d, 1), "Trilu(d, 1)")
    check("Trilu", [D, t.const(np.array(-1))], np.tril(d, -1),
          "Trilu(d, -1, lower)", upper=0)
    check("Trilu", [D], np.tril(d), "Trilu(d, lower)", upper=0)
    f = np.arange(8).reshape(4, 2) - 3
    F = t.arg(f, "i64")
    b3 = np.arange(24).reshape(2, 3, 4) % 5 - 2
    c3 = np.arange(16).reshape(2, 4, 2) % 3 - 1
    B3, C3 = t.arg(b3, "i64"), t.arg(c3, "i64")
    q = np.arange(9).reshape(3, 3)
    v, w = np.array([1, -2, 3]), np.array([4, 5])
    for eq, ops, arrays in [("ij,jk->ik", [D, F], [d, f]),
                            ("bij,bjk->bik", [B3, C3], [b3, c3]),
                            ("ij,jk", [D, F], [d, f]),
                            ("...ij->...ji", [B3], [b3]),
                            ("ii->i", [t.arg(q, "i64")], [q]),
                            ("ij->", [D], [d]),
                            ("i,j->ij", [t.arg(v, "i64"), t.arg(w, "i64")],
                             [v, w])]:
        check("Einsum", ops, np.einsum(eq, *arrays), f'Einsum("{eq}")',
              equation=eq)
    return t


# ===----------------------------------------------------------------------===
# Shapes computed in the graph
# ===----------------------------------------------------------------------===

def test_static_shapes():
    def build(rng):
        t = OnnxTest("onnx_static_shapes.mlir", """
A Switch-style router as exporters write it: the number of experts and the
capacity ceil(tokens / experts * 1.0) are computed from Shape, Gather, Cast,
Div, Mul and Ceil, so OneHot, CumSum, Einsum and a Reshape have dynamic
result types that the lowering must make static (the shape computations
fold to constants). Top-1 by ArgMax, position in the expert by CumSum,
tokens beyond the capacity dropped; the dispatched rows [E, C, H] are
reshaped to [E * C, H] with a target shape computed from Shape.
Reference: NumPy loops.""")
        T, H, E = 6, 4, 3
        x, w = grid(rng, (T, H), -1, 1), grid(rng, (H, E), -1, 1)
        X, W = t.arg(x), t.arg(w)
        logits = t.op("MatMul", [X, W], [((T, E), "f32")])
        top = t.op("ArgMax", [logits], [((T,), "i64")], axis=-1, keepdims=0)
        experts = t.op("Gather", [t.op("Shape", [W], [((2,), "i64")]),
                                  t.const(np.array(1))], [((), "i64")])
        mask = t.op("OneHot", [top, experts, t.const([0, 1])],
                    [((T, -1), "i64")], axis=-1)
        tokens = t.op("Cast", [t.op("Gather", [t.op("Shape", [X],
                                                    [((2,), "i64")]),
                                               t.const(np.array(0))],
                                    [((), "i64")])], [((), "f32")], to=1)
        cap = t.op("Ceil", [t.op("Mul", [t.op("Div", [tokens, t.op(
            "Cast", [experts], [((), "f32")], to=1)], [((), "f32")]),
            t.const(np.array(1.0, np.float32), "f32")], [((), "f32")])],
            [((), "f32")])
        pos = t.op("CumSum", [mask, t.const(np.array(0))], [((T, -1), "i64")])
        keep = t.op("Cast", [t.op("LessOrEqual", [
            t.op("Cast", [pos], [((T, -1), "f32")], to=1), cap],
            [((T, -1), "i1")])], [((T, -1), "i64")], to=7)
        kept = t.op("Mul", [mask, keep], [((T, -1), "i64")])
        slot = t.op("Mul", [t.op("Sub", [pos, t.const(np.array(1))],
                                 [((T, -1), "i64")]), kept],
                    [((T, -1), "i64")])
        slots = t.op("Mul", [t.op("OneHot", [slot, cap, t.const([0, 1])],
                                  [((T, -1, -1), "i64")]),
                             t.op("Unsqueeze", [kept, t.const([2])],
                                  [((T, -1, 1), "i64")])],
                     [((T, -1, -1), "i64")])
        rows = t.op("Einsum", [t.op("Cast", [slots], [((T, -1, -1), "f32")],
                                    to=1), X],
                    [((-1, -1, -1), "f32")], equation="tec,th->ech")
        shape = t.op("Shape", [rows], [((3,), "i64")])
        flat = t.op("Concat", [
            t.op("Mul", [t.op("Slice", [shape, t.const([0]), t.const([1])],
                              [((1,), "i64")]),
                         t.op("Slice", [shape, t.const([1]), t.const([2])],
                              [((1,), "i64")])], [((1,), "i64")]),
            t.const([-1])], [((2,), "i64")], axis=0)
        out = t.op("Reshape", [rows, flat], [((-1, -1), "f32")])
        # Reference.
        x32 = x.astype(np.float32)
        logits = np.sort(f32(x) @ f32(w), 1)
        if (logits[:, -1] - logits[:, -2] < 1e-3).any():
            raise Reject("near tie in the argmax")
        choice = (f32(x) @ f32(w)).argmax(1)
        capacity = math.ceil(T / E)
        ref = np.zeros((E, capacity, H))
        onehot = np.eye(E, dtype=int)[choice]
        position = np.cumsum(onehot, 0)
        for tok in range(T):
            e = choice[tok]
            if position[tok, e] <= capacity:
                ref[e, position[tok, e] - 1] = x32[tok]
        t.check_int(kept, onehot * (position <= capacity), "the kept mask")
        ref = ref.reshape(E * capacity, H)
        t.check_f32(out, (ref, ref), 100, "the dispatched rows [E * C, H]")
        return t
    return retry(build, 3300)


def onnx_tests():
    return [test_elementwise(), test_linear(), test_shape(), test_reduce(),
            test_indexing(), test_static_shapes()]
