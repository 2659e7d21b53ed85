//===- ONNXOps.td - the onnx import dialect ----------------*- tablegen -*-===//
//
// One op per ONNX operator that MoE models export to, with ONNX semantics,
// inputs, outputs and attribute names as in the ONNX specification. Both
// importers (ONNX and TorchScript) produce these ops; the raising passes
// find MoE blocks in them, and what remains is lowered to linalg.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_DIALECTS_ONNX_IR_ONNXOPS_TD
#define MOE_DIALECTS_ONNX_IR_ONNXOPS_TD

include "dialects/Common/BufferBounds.td"
include "mlir/IR/OpBase.td"
include "mlir/IR/BuiltinTypes.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def ONNX_Dialect : Dialect {
  let name = "onnx";
  let cppNamespace = "::mlir::moe::onnx";
  let summary = "ONNX operators as imported from model files";
  let description = [{
    A thin, faithful image of an ONNX graph: `onnx.MatMul`, `onnx.TopK`, ...
    Each op takes its ONNX inputs in order (a missing optional input is the
    `none` value of `onnx.none`), returns its ONNX outputs, and keeps its
    ONNX attributes under their ONNX names (ints as `i64`, floats as `f32`,
    int and float lists as dense arrays, strings as strings, tensors as
    elements attributes). Shapes come from the model (ONNX shape inference);
    data-dependent sizes (NonZero) are dynamic.

    ```mlir
    %logits = onnx.MatMul %x, %wr : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
    %p = onnx.Softmax %logits {axis = 1 : i64} : (tensor<8x4xf32>) -> tensor<8x4xf32>
    %v, %i = onnx.TopK %p, %k {axis = -1 : i64, largest = 1 : i64, sorted = 1 : i64}
        : (tensor<8x4xf32>, tensor<1xi64>) -> (tensor<8x2xf32>, tensor<8x2xi64>)
    ```
  }];
}

/// An ONNX operator with `minInputs..maxInputs` inputs and
/// `minOutputs..maxOutputs` outputs (-1: unbounded), checked by the verifier.
/// Its ranked inputs and outputs are bounded (BoundedBuffers): the static
/// dimensions of each give an element count and byte size that fit int64
/// and at most 2^40 bytes.
class ONNX_Op<string opType, int minInputs, int maxInputs, int minOutputs = 1,
              int maxOutputs = 1, list<Trait> traits = [],
              code extraVerification = "">
    : Op<ONNX_Dialect, opType, !listconcat([Pure, BoundedBuffers], traits)> {
  let summary = "ONNX " # opType;
  let description = "The ONNX operator `" # opType # "` (ONNX semantics); "
      "its inputs, outputs and attributes are ONNX's.";
  let arguments = (ins Variadic<AnyType>:$inputs);
  let results = (outs Variadic<AnyType>:$outputs);
  let assemblyFormat =
      "($inputs^)? attr-dict `:` functional-type($inputs, $outputs)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    static constexpr int kMinInputs = }] # minInputs # [{;
    static constexpr int kMaxInputs = }] # maxInputs # [{;
    static constexpr int kMinOutputs = }] # minOutputs # [{;
    static constexpr int kMaxOutputs = }] # maxOutputs # [{;
  }];
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::verify() {
      if (::mlir::failed(::mlir::moe::onnx::verifyArity(
              *this, kMinInputs, kMaxInputs, kMinOutputs, kMaxOutputs)))
        return ::mlir::failure();
      }] # extraVerification # [{
      return ::mlir::success();
    }
  }];
}

/// Each result element is a function of the operands' elements at the same
/// index, the operands broadcast numpy-style to the result's shape (ONNX
/// multidirectional broadcasting). Shape inference, sequence parallelism
/// and the lowering's broadcast maps rely on it.
def ONNX_Elementwise : NativeOpTrait<"Elementwise"> {
  let cppNamespace = "::mlir::moe::onnx::OpTrait";
}

class ONNX_ElementwiseOp<string opType, int minInputs, int maxInputs>
    : ONNX_Op<opType, minInputs, maxInputs, 1, 1, [ONNX_Elementwise]>;

def ONNX_NoneOp : Op<ONNX_Dialect, "none", [Pure]> {
  let summary = "the value of a missing optional input";
  let description = [{
    ONNX marks an omitted optional input with an empty name; its place in
    the operand list holds this op's `none` result.
    ```mlir
    %none = onnx.none
    ```
  }];
  let results = (outs NoneType:$none);
  let assemblyFormat = "attr-dict";
}

// Elementwise arithmetic and activations.
def ONNX_AbsOp : ONNX_ElementwiseOp<"Abs", 1, 1>;
def ONNX_AddOp : ONNX_ElementwiseOp<"Add", 2, 2>;
def ONNX_SubOp : ONNX_ElementwiseOp<"Sub", 2, 2>;
def ONNX_MulOp : ONNX_ElementwiseOp<"Mul", 2, 2>;
def ONNX_DivOp : ONNX_ElementwiseOp<"Div", 2, 2>;
def ONNX_PowOp : ONNX_ElementwiseOp<"Pow", 2, 2>;
def ONNX_ModOp : ONNX_ElementwiseOp<"Mod", 2, 2>;
def ONNX_SqrtOp : ONNX_ElementwiseOp<"Sqrt", 1, 1>;
def ONNX_ReciprocalOp : ONNX_ElementwiseOp<"Reciprocal", 1, 1>;
def ONNX_NegOp : ONNX_ElementwiseOp<"Neg", 1, 1>;
def ONNX_ExpOp : ONNX_ElementwiseOp<"Exp", 1, 1>;
def ONNX_LogOp : ONNX_ElementwiseOp<"Log", 1, 1>;
def ONNX_TanhOp : ONNX_ElementwiseOp<"Tanh", 1, 1>;
def ONNX_CosOp : ONNX_ElementwiseOp<"Cos", 1, 1>;
def ONNX_SinOp : ONNX_ElementwiseOp<"Sin", 1, 1>;
def ONNX_ErfOp : ONNX_ElementwiseOp<"Erf", 1, 1>;
def ONNX_SigmoidOp : ONNX_ElementwiseOp<"Sigmoid", 1, 1>;
def ONNX_ReluOp : ONNX_ElementwiseOp<"Relu", 1, 1>;
def ONNX_SignOp : ONNX_ElementwiseOp<"Sign", 1, 1>;
def ONNX_RoundOp : ONNX_ElementwiseOp<"Round", 1, 1>;
def ONNX_TanOp : ONNX_ElementwiseOp<"Tan", 1, 1>;
def ONNX_AsinOp : ONNX_ElementwiseOp<"Asin", 1, 1>;
def ONNX_AcosOp : ONNX_ElementwiseOp<"Acos", 1, 1>;
def ONNX_AtanOp : ONNX_ElementwiseOp<"Atan", 1, 1>;
def ONNX_SinhOp : ONNX_ElementwiseOp<"Sinh", 1, 1>;
def ONNX_CoshOp : ONNX_ElementwiseOp<"Cosh", 1, 1>;
def ONNX_AsinhOp : ONNX_ElementwiseOp<"Asinh", 1, 1>;
def ONNX_AcoshOp : ONNX_ElementwiseOp<"Acosh", 1, 1>;
def ONNX_AtanhOp : ONNX_ElementwiseOp<"Atanh", 1, 1>;
def ONNX_SoftplusOp : ONNX_ElementwiseOp<"Softplus", 1, 1>;
def ONNX_GeluOp : ONNX_ElementwiseOp<"Gelu", 1, 1>;
def ONNX_CeilOp : ONNX_ElementwiseOp<"Ceil", 1, 1>;
def ONNX_FloorOp : ONNX_ElementwiseOp<"Floor", 1, 1>;
def ONNX_MinOp : ONNX_ElementwiseOp<"Min", 1, -1>;
def ONNX_MaxOp : ONNX_ElementwiseOp<"Max", 1, -1>;
def ONNX_SumOp : ONNX_ElementwiseOp<"Sum", 1, -1>;
def ONNX_MeanOp : ONNX_ElementwiseOp<"Mean", 1, -1>;
def ONNX_IsNaNOp : ONNX_ElementwiseOp<"IsNaN", 1, 1>;
def ONNX_IsInfOp : ONNX_ElementwiseOp<"IsInf", 1, 1>;
def ONNX_ClipOp : ONNX_ElementwiseOp<"Clip", 1, 3>;

def ONNX_SoftmaxOp : ONNX_Op<"Softmax", 1, 1>;
def ONNX_LayerNormalizationOp : ONNX_Op<"LayerNormalization", 2, 3, 1, 3>;
def ONNX_RMSNormalizationOp : ONNX_Op<"RMSNormalization", 2, 2>;

// Linear algebra.
def ONNX_MatMulOp : ONNX_Op<"MatMul", 2, 2>;
def ONNX_GemmOp : ONNX_Op<"Gemm", 2, 3>;
def ONNX_EinsumOp : ONNX_Op<"Einsum", 1, -1>;
def ONNX_ConvOp : ONNX_Op<"Conv", 2, 3>;

// Reductions, selection and scans. The import gives every reduction its
// axes as the input (the opset 18 form).
def ONNX_ReduceSumOp : ONNX_Op<"ReduceSum", 1, 2>;
def ONNX_ReduceMeanOp : ONNX_Op<"ReduceMean", 1, 2>;
def ONNX_ReduceMaxOp : ONNX_Op<"ReduceMax", 1, 2>;
def ONNX_ReduceMinOp : ONNX_Op<"ReduceMin", 1, 2>;
def ONNX_ReduceProdOp : ONNX_Op<"ReduceProd", 1, 2>;
def ONNX_ReduceL1Op : ONNX_Op<"ReduceL1", 1, 2>;
def ONNX_ReduceL2Op : ONNX_Op<"ReduceL2", 1, 2>;
def ONNX_ReduceLogSumExpOp : ONNX_Op<"ReduceLogSumExp", 1, 2>;
def ONNX_TopKOp : ONNX_Op<"TopK", 2, 2, 2, 2>;
def ONNX_ArgMaxOp : ONNX_Op<"ArgMax", 1, 1>;
def ONNX_ArgMinOp : ONNX_Op<"ArgMin", 1, 1>;
def ONNX_CumSumOp : ONNX_Op<"CumSum", 2, 2>;
def ONNX_OneHotOp : ONNX_Op<"OneHot", 3, 3>;
def ONNX_NonZeroOp : ONNX_Op<"NonZero", 1, 1>;

// Indexing.
def ONNX_GatherOp : ONNX_Op<"Gather", 2, 2>;
def ONNX_GatherElementsOp : ONNX_Op<"GatherElements", 2, 2>;
def ONNX_GatherNDOp : ONNX_Op<"GatherND", 2, 2>;
def ONNX_ScatterElementsOp : ONNX_Op<"ScatterElements", 3, 3>;
def ONNX_ScatterNDOp : ONNX_Op<"ScatterND", 3, 3>;

// Comparisons and logic.
def ONNX_EqualOp : ONNX_ElementwiseOp<"Equal", 2, 2>;
def ONNX_GreaterOp : ONNX_ElementwiseOp<"Greater", 2, 2>;
def ONNX_GreaterOrEqualOp : ONNX_ElementwiseOp<"GreaterOrEqual", 2, 2>;
def ONNX_LessOp : ONNX_ElementwiseOp<"Less", 2, 2>;
def ONNX_LessOrEqualOp : ONNX_ElementwiseOp<"LessOrEqual", 2, 2>;
def ONNX_AndOp : ONNX_ElementwiseOp<"And", 2, 2>;
def ONNX_OrOp : ONNX_ElementwiseOp<"Or", 2, 2>;
def ONNX_XorOp : ONNX_ElementwiseOp<"Xor", 2, 2>;
def ONNX_BitwiseAndOp : ONNX_ElementwiseOp<"BitwiseAnd", 2, 2>;
def ONNX_BitwiseOrOp : ONNX_ElementwiseOp<"BitwiseOr", 2, 2>;
def ONNX_BitwiseXorOp : ONNX_ElementwiseOp<"BitwiseXor", 2, 2>;
def ONNX_BitwiseNotOp : ONNX_ElementwiseOp<"BitwiseNot", 1, 1>;
def ONNX_NotOp : ONNX_ElementwiseOp<"Not", 1, 1>;
def ONNX_WhereOp : ONNX_ElementwiseOp<"Where", 3, 3>;

// Types and shapes.
def ONNX_CastOp : ONNX_ElementwiseOp<"Cast", 1, 1>;
// A Reshape keeps the element count: checked where both shapes are static.
def ONNX_ReshapeOp : ONNX_Op<"Reshape", 2, 2, 1, 1, [], [{
      if (::mlir::failed(::mlir::moe::onnx::verifyReshape(*this)))
        return ::mlir::failure();
    }]>;
def ONNX_TransposeOp : ONNX_Op<"Transpose", 1, 1>;
def ONNX_SqueezeOp : ONNX_Op<"Squeeze", 1, 2>;
def ONNX_UnsqueezeOp : ONNX_Op<"Unsqueeze", 2, 2>;
def ONNX_ConcatOp : ONNX_Op<"Concat", 1, -1>;
def ONNX_SplitOp : ONNX_Op<"Split", 1, 2, 1, -1>;
def ONNX_SliceOp : ONNX_Op<"Slice", 3, 5>;
def ONNX_ExpandOp : ONNX_Op<"Expand", 2, 2>;
def ONNX_TileOp : ONNX_Op<"Tile", 2, 2>;
def ONNX_PadOp : ONNX_Op<"Pad", 2, 4>;
def ONNX_FlattenOp : ONNX_Op<"Flatten", 1, 1>;
def ONNX_ShapeOp : ONNX_Op<"Shape", 1, 1>;
def ONNX_SizeOp : ONNX_Op<"Size", 1, 1>;
def ONNX_ConstantOfShapeOp : ONNX_Op<"ConstantOfShape", 1, 1>;
def ONNX_ConstantOp : ONNX_Op<"Constant", 0, 0>;
def ONNX_RangeOp : ONNX_Op<"Range", 3, 3>;
def ONNX_IdentityOp : ONNX_ElementwiseOp<"Identity", 1, 1>;
def ONNX_TriluOp : ONNX_Op<"Trilu", 1, 2>;

#endif // MOE_DIALECTS_ONNX_IR_ONNXOPS_TD
