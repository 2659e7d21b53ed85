//===- OrtMoE.cpp - ONNX Runtime's com.microsoft.MoE to moe.layer ---------===//
//
// com.microsoft.MoE (ONNX Runtime contrib op, domain version 1) routes with
// a softmax over raw router logits and a top-k (or Phi-3.5's sparse mixer),
// dropless, then runs the expert FFNs: exactly a `moe.layer`. The weights
// are `[E, out, in]` as moe.layer's, except in ONNX Runtime's legacy layout
// `[E, in, out]`, which is detected from the shapes as its moe_helper.h does
// and transposed. Every attribute value the kernels would not run the same
// way is an error rather than a guess.
//
//===----------------------------------------------------------------------===//

#include "GraphImporter.h"
#include "dialects/moe/IR/MoEOps.h"
#include "dialects/onnx/IR/ONNXDialect.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/InterleavedRange.h"

#include <onnx/defs/schema.h>
#include <onnx/defs/shape_inference.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::onnx_import;
using ::ONNX_NAMESPACE::AttributeProto;
using ::ONNX_NAMESPACE::NodeProto;

namespace {
/// com.microsoft.MoE's inputs, in order.
enum MoEInput {
  kInput,
  kRouter,
  kFc1,
  kFc1Bias,
  kFc2,
  kFc2Bias,
  kFc3,
  kFc3Bias
};
constexpr int kNumMoEInputs = 8;
constexpr const char *kMoEInputNames[kNumMoEInputs] = {"input",
                                                       "router_probs",
                                                       "fc1_experts_weights",
                                                       "fc1_experts_bias",
                                                       "fc2_experts_weights",
                                                       "fc2_experts_bias",
                                                       "fc3_experts_weights",
                                                       "fc3_experts_bias"};

/// com.microsoft.MoE's attributes (docs/ContribOperators.md). The unreleased
/// `num_shared_experts` is left out, so a node using it is rejected as an
/// unsupported attribute.
constexpr std::pair<const char *, AttributeProto::AttributeType>
    kMoEAttributes[] = {{"activation_type", AttributeProto::STRING},
                        {"k", AttributeProto::INT},
                        {"normalize_routing_weights", AttributeProto::INT},
                        {"use_sparse_mixer", AttributeProto::INT},
                        {"swiglu_fusion", AttributeProto::INT},
                        {"swiglu_limit", AttributeProto::FLOAT},
                        {"activation_alpha", AttributeProto::FLOAT},
                        {"activation_beta", AttributeProto::FLOAT}};
} // namespace

void moe::onnx_import::registerMicrosoftSchemas() {
  static const bool registered = [] {
    try {
      auto &domains =
          ::ONNX_NAMESPACE::OpSchemaRegistry::DomainToVersionRange::Instance();
      if (!domains.Map().count(kMicrosoftDomain.str()))
        domains.AddDomainToVersion(kMicrosoftDomain.str(), 1, 1);
      ::ONNX_NAMESPACE::OpSchema schema;
      schema.SetName("MoE").SetDomain(kMicrosoftDomain.str()).SinceVersion(1);
      for (auto [name, type] : kMoEAttributes)
        schema.Attr(name, "", type, /*required=*/false);
      for (auto [i, name] : llvm::enumerate(kMoEInputNames)) {
        bool required = i == kInput || i == kRouter || i == kFc1 || i == kFc2;
        schema.Input(i, name, "", "T",
                     required ? ::ONNX_NAMESPACE::OpSchema::Single
                              : ::ONNX_NAMESPACE::OpSchema::Optional);
      }
      schema.Output(0, "output", "", "T");
      schema.TypeConstraint(
          "T", {"tensor(float)", "tensor(float16)", "tensor(bfloat16)"}, "");
      // The output has the type and shape of `input`.
      schema.TypeAndShapeInferenceFunction(
          ::ONNX_NAMESPACE::propagateShapeAndTypeFromFirstInput);
      ::ONNX_NAMESPACE::RegisterSchema(std::move(schema));
      return true;
    } catch (const std::exception &) {
      // Without the schema, MoE nodes are reported as unknown operators.
      return false;
    }
  }();
  (void)registered;
}

namespace {
/// A com.microsoft.MoE node's attributes, with ONNX Runtime's defaults.
struct MoEAttributes {
  std::string activationType = "relu";
  int64_t k = 1;
  int64_t normalizeRoutingWeights = 0;
  int64_t useSparseMixer = 0;
  int64_t swigluFusion = 0;
  float activationAlpha = 1.0f;
  float activationBeta = 0.0f;
  std::optional<float> swigluLimit;
};

/// Imports one com.microsoft.MoE node; every error names it.
class MoEImporter {
public:
  MoEImporter(GraphImporter &importer, const NodeProto &node)
      : importer(importer), node(node),
        context(importer.getBuilder().getContext()) {}

  LogicalResult import();

private:
  InFlightDiagnostic emitError() { return importer.emitError(node); }
  InFlightDiagnostic emitInputError(int index) {
    return emitError() << "input '" << kMoEInputNames[index] << "' ";
  }
  RankedTensorType getType(int index) {
    return inputs[index] ? cast<RankedTensorType>(inputs[index].getType())
                         : RankedTensorType();
  }
  LogicalResult readAttributes();
  LogicalResult readInputs();
  FailureOr<ActivationAttr> getActivation();
  FailureOr<bool> isLegacyLayout(bool fusedSwiGLU);
  LogicalResult checkShapes(bool legacy, bool fusedSwiGLU);
  Value transpose(Value weight);

  GraphImporter &importer;
  const NodeProto &node;
  MLIRContext *context;
  MoEAttributes attrs;
  /// The node's inputs; null where omitted.
  std::array<Value, kNumMoEInputs> inputs;
};
} // namespace

LogicalResult MoEImporter::readAttributes() {
  for (const AttributeProto &attr : node.attribute()) {
    StringRef name = attr.name();
    if (name == "activation_type")
      attrs.activationType = attr.s();
    else if (name == "k")
      attrs.k = attr.i();
    else if (name == "normalize_routing_weights")
      attrs.normalizeRoutingWeights = attr.i();
    else if (name == "use_sparse_mixer")
      attrs.useSparseMixer = attr.i();
    else if (name == "swiglu_fusion")
      attrs.swigluFusion = attr.i();
    else if (name == "swiglu_limit")
      attrs.swigluLimit = attr.f();
    else if (name == "activation_alpha")
      attrs.activationAlpha = attr.f();
    else if (name == "activation_beta")
      attrs.activationBeta = attr.f();
  }
  // ONNX Runtime tests these flags with `== 1`; other values are not
  // guessed at.
  for (auto [name, value] :
       {std::make_pair("normalize_routing_weights",
                       attrs.normalizeRoutingWeights),
        std::make_pair("use_sparse_mixer", attrs.useSparseMixer)})
    if (value != 0 && value != 1)
      return emitError() << "attribute '" << name << "' is " << value
                         << "; expected 0 or 1";
  if (attrs.useSparseMixer && attrs.k != 2)
    return emitError() << "attribute 'use_sparse_mixer' needs k = 2, got k = "
                       << attrs.k;
  return success();
}

LogicalResult MoEImporter::readInputs() {
  // The schema checks ensured 5 to 8 inputs, the required ones present,
  // all of one type T (f32, f16 or bf16).
  for (auto [i, operand] : llvm::enumerate(importer.getInputs(node)))
    if (!isa<NoneType>(operand.getType()))
      inputs[i] = operand;
  // moe.layer is statically shaped.
  for (int i = 0; i < kNumMoEInputs; ++i)
    if (inputs[i] && !getType(i).hasStaticShape())
      return emitInputError(i)
             << "must have a static shape, got " << getType(i)
             << " (give the model's input shapes with --input-shape)";
  RankedTensorType inputType = getType(kInput);
  if (inputType.getRank() != 2 && inputType.getRank() != 3)
    return emitInputError(kInput)
           << "must be [tokens, hidden] or [batch, seq, hidden], got "
           << inputType;
  for (int weight : {kFc1, kFc2, kFc3})
    if (inputs[weight] && getType(weight).getRank() != 3)
      return emitInputError(weight)
             << "must be [experts, out, in], got " << getType(weight);
  return success();
}

/// `value` as the double of its shortest decimal form, so that 1.702f is
/// 1.702 in the IR rather than 1.7020000219345093.
static APFloat toDouble(float value) {
  for (int digits = 1; digits < 9; ++digits) {
    char text[32];
    std::snprintf(text, sizeof(text), "%.*g", digits, value);
    double shortest = std::strtod(text, nullptr);
    if (static_cast<float>(shortest) == value)
      return APFloat(shortest);
  }
  return APFloat(static_cast<double>(value));
}

FailureOr<ActivationAttr> MoEImporter::getActivation() {
  std::optional<ActivationKind> kind =
      llvm::StringSwitch<std::optional<ActivationKind>>(attrs.activationType)
          .Case("relu", ActivationKind::Relu)
          // ONNX Runtime's CPU kernel computes gelu with the tanh
          // approximation, not erf.
          .Case("gelu", ActivationKind::GeluTanh)
          .Case("silu", ActivationKind::Silu)
          .Case("swiglu", ActivationKind::SwiGLU)
          .Case("identity", ActivationKind::Identity)
          .Default(std::nullopt);
  if (!kind)
    return emitError() << "attribute 'activation_type' is '"
                       << attrs.activationType
                       << "'; expected relu, gelu, silu, swiglu or identity";
  // ONNX Runtime reads swiglu_fusion, the SwiGLU constants and the limit
  // only for swiglu.
  if (*kind != ActivationKind::SwiGLU)
    return ActivationAttr::get(context, *kind);

  std::optional<SwiGLULayout> layout;
  switch (attrs.swigluFusion) {
  case 0:
    layout = SwiGLULayout::Separate;
    break;
  case 1:
    layout = SwiGLULayout::Interleaved;
    break;
  case 2:
    layout = SwiGLULayout::Concatenated;
    break;
  default:
    return emitError() << "attribute 'swiglu_fusion' is " << attrs.swigluFusion
                       << "; expected 0, 1 or 2";
  }
  std::optional<APFloat> limit;
  if (attrs.swigluLimit) {
    float value = *attrs.swigluLimit;
    if (std::isnan(value) || value <= 0)
      return emitError() << "attribute 'swiglu_limit' is " << value
                         << "; expected a positive limit (inf for none)";
    // An infinite limit clamps nothing (mobius writes inf).
    if (!std::isinf(value))
      limit = toDouble(value);
  }
  return ActivationAttr::get(context, ActivationKind::SwiGLU, *layout,
                             toDouble(attrs.activationAlpha),
                             toDouble(attrs.activationBeta), limit);
}

FailureOr<bool> MoEImporter::isLegacyLayout(bool fusedSwiGLU) {
  int64_t hidden = getType(kInput).getShape().back();
  ArrayRef<int64_t> fc1 = getType(kFc1).getShape();
  ArrayRef<int64_t> fc2 = getType(kFc2).getShape();
  if (hidden == 0)
    return emitInputError(kInput) << "has hidden size 0";
  // moe_helper.h: the inter size is the same in both layouts; the legacy
  // layout [E, in, out] puts it first in fc2 (or hidden first in a fused
  // SwiGLU fc1 when both sizes are equal).
  int64_t inter = fc2[1] * fc2[2] / hidden;
  if (hidden != inter)
    return fc2[1] == inter;
  if (fusedSwiGLU)
    return fc1[1] == hidden;
  switch (importer.getOptions().ortMoELayout) {
  case OrtMoELayout::Current:
    return false;
  case OrtMoELayout::Legacy:
    return true;
  case OrtMoELayout::Detect:
    break;
  }
  return emitError() << "the weight layout is ambiguous (hidden size == inter "
                        "size); pass --ort-moe-layout=current or legacy";
}

LogicalResult MoEImporter::checkShapes(bool legacy, bool fusedSwiGLU) {
  ArrayRef<int64_t> input = getType(kInput).getShape();
  ArrayRef<int64_t> router = getType(kRouter).getShape();
  ArrayRef<int64_t> fc2 = getType(kFc2).getShape();
  int64_t tokens = input.size() == 3 ? input[0] * input[1] : input[0];
  int64_t hidden = input.back();
  if (router.size() != 2 || router[0] != tokens)
    return emitInputError(kRouter)
           << "must be [" << tokens << ", experts] (a row per token), got "
           << getType(kRouter);
  int64_t experts = router[1];
  int64_t inter = legacy ? fc2[1] : fc2[2];
  int64_t fc1Out = fusedSwiGLU ? 2 * inter : inter;

  // Expected shapes in the current layout [E, out, in].
  SmallVector<int64_t> expected[kNumMoEInputs];
  expected[kFc1] = {experts, fc1Out, hidden};
  expected[kFc1Bias] = {experts, fc1Out};
  expected[kFc2] = {experts, hidden, inter};
  expected[kFc2Bias] = {experts, hidden};
  expected[kFc3] = {experts, inter, hidden};
  expected[kFc3Bias] = {experts, inter};
  for (int i : {kFc1, kFc1Bias, kFc2, kFc2Bias, kFc3, kFc3Bias}) {
    RankedTensorType type = getType(i);
    if (!type)
      continue;
    bool isWeight = i == kFc1 || i == kFc2 || i == kFc3;
    if (legacy && isWeight)
      std::swap(expected[i][1], expected[i][2]);
    if (type.getShape() != ArrayRef<int64_t>(expected[i]))
      return emitInputError(i)
             << "is " << type << ", expected shape ["
             << llvm::interleaved(expected[i]) << "]"
             << (isWeight ? (legacy ? " (legacy layout [E, in, out])"
                                    : " (layout [E, out, in])")
                          : "");
  }
  if (attrs.k < 1 || attrs.k > experts)
    return emitError() << "attribute 'k' is " << attrs.k << "; expected 1 to "
                       << experts << " (the number of experts)";
  return success();
}

/// `[E, a, b]` -> `[E, b, a]`.
Value MoEImporter::transpose(Value weight) {
  if (!weight)
    return weight;
  OpBuilder &b = importer.getBuilder();
  auto type = cast<RankedTensorType>(weight.getType());
  ArrayRef<int64_t> shape = type.getShape();
  auto transposed = RankedTensorType::get({shape[0], shape[2], shape[1]},
                                          type.getElementType());
  NamedAttribute perm =
      b.getNamedAttr("perm", b.getDenseI64ArrayAttr({0, 2, 1}));
  return moe::onnx::TransposeOp::create(b, importer.getLoc(node),
                                        TypeRange{transposed},
                                        ValueRange{weight}, perm)
      ->getResult(0);
}

LogicalResult MoEImporter::import() {
  if (failed(readAttributes()) || failed(readInputs()))
    return failure();
  FailureOr<ActivationAttr> activation = getActivation();
  if (failed(activation))
    return failure();
  bool fusedSwiGLU = activation->isFusedSwiGLU();
  if (fusedSwiGLU && inputs[kFc3])
    return emitInputError(kFc3) << "is not used with a fused SwiGLU "
                                   "(swiglu_fusion = "
                                << attrs.swigluFusion << ")";
  if (activation->getKind() == ActivationKind::SwiGLU && !fusedSwiGLU &&
      !inputs[kFc3])
    return emitError() << "swiglu with swiglu_fusion = 0 needs input "
                          "'fc3_experts_weights' (the linear half)";
  if (inputs[kFc3Bias] && !inputs[kFc3])
    return emitInputError(kFc3Bias) << "needs input 'fc3_experts_weights'";
  FailureOr<bool> legacy = isLegacyLayout(fusedSwiGLU);
  if (failed(legacy) || failed(checkShapes(*legacy, fusedSwiGLU)))
    return failure();

  OpBuilder &b = importer.getBuilder();
  Location loc = importer.getLoc(node);
  RankedTensorType inputType = getType(kInput);
  // moe.layer takes tokens as rows: [B, S, H] is collapsed to [B*S, H] and
  // the output expanded back.
  SmallVector<ReassociationIndices> rows = {{0, 1}, {2}};
  Value input = inputs[kInput];
  if (inputType.getRank() == 3)
    input = tensor::CollapseShapeOp::create(b, loc, input, rows);
  Value fc1 = inputs[kFc1], fc2 = inputs[kFc2], fc3 = inputs[kFc3];
  if (*legacy) {
    fc1 = transpose(fc1);
    fc2 = transpose(fc2);
    fc3 = transpose(fc3);
  }
  bool sparseMixer = attrs.useSparseMixer;
  Value output = LayerOp::create(
      b, loc, input.getType(), input, inputs[kRouter], fc1, inputs[kFc1Bias],
      fc3, inputs[kFc3Bias], fc2, inputs[kFc2Bias],
      /*selection_bias=*/Value(), /*routed_ids=*/Value(),
      /*routed_weights=*/Value(), /*shared_fc1=*/Value(),
      /*shared_fc3=*/Value(), /*shared_fc2=*/Value(),
      /*shared_gate=*/Value(), b.getI64IntegerAttr(attrs.k), *activation,
      /*capacity=*/IntegerAttr(), /*drop_policy=*/DropPolicyAttr(),
      ScoringFunctionAttr::get(context, ScoringFunction::Softmax),
      SelectionMethodAttr::get(context, sparseMixer
                                            ? SelectionMethod::SparseMixer
                                            : SelectionMethod::TopK),
      // The sparse mixer's weights are never renormalised.
      attrs.normalizeRoutingWeights && !sparseMixer ? b.getUnitAttr()
                                                    : UnitAttr(),
      /*scaling_factor=*/FloatAttr(), /*num_groups=*/IntegerAttr(),
      /*group_topk=*/IntegerAttr(), /*group_score=*/GroupScoreAttr(),
      /*masked_score=*/FloatAttr(),
      /*sinkhorn_tolerance=*/FloatAttr(),
      /*sinkhorn_max_iterations=*/IntegerAttr(),
      // The default 0.01 is the sparse mixer's epsilon that ONNX Runtime
      // hard-codes.
      /*jitter_eps=*/FloatAttr());
  if (inputType.getRank() == 3)
    output = tensor::ExpandShapeOp::create(b, loc, inputType, output, rows);
  importer.setOutputs(node, output);
  return success();
}

LogicalResult moe::onnx_import::importOrtMoE(GraphImporter &importer,
                                             const NodeProto &node) {
  return MoEImporter(importer, node).import();
}
