//===- FoldedParameters.cpp - torch parameters an exporter folded ---------===//
//
// The FX node text this reads (one node's "pkg.torch.onnx.fx_node"):
//
//   %linear : [num_users=1] = call_function[target=torch.ops.aten.linear.
//   default](args = (%mul_4, %p_model_layers_0_self_attn_q_proj_weight),
//   kwargs = {})
//
// and its "pkg.torch.onnx.name_scopes", the module paths around it:
//
//   ['', 'model', 'model.layers.0', 'model.layers.0.self_attn',
//    'model.layers.0.self_attn.q_proj', 'linear']
//
//===----------------------------------------------------------------------===//

#include "FoldedParameters.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/Sequence.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace mlir::moe::onnx_import;
using ONNX_NAMESPACE::GraphProto;
using ONNX_NAMESPACE::NodeProto;
using ONNX_NAMESPACE::TensorProto;

namespace {

StringRef metadata(const NodeProto &node, StringRef key) {
  for (const auto &entry : node.metadata_props())
    if (entry.key() == key)
      return entry.value();
  return {};
}

/// An FX call: its target and its arguments' text, split at the top level.
struct FxCall {
  StringRef target;
  SmallVector<StringRef> args;
};

std::optional<FxCall> parseFxCall(StringRef text) {
  constexpr StringLiteral kTarget = "call_function[target=",
                          kArgs = "](args = (";
  size_t t = text.find(kTarget), a = text.find(kArgs);
  if (t == StringRef::npos || a == StringRef::npos || a < t)
    return std::nullopt;
  FxCall call;
  call.target = text.slice(t + kTarget.size(), a);
  StringRef rest = text.drop_front(a + kArgs.size());
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < rest.size(); ++i) {
    char c = rest[i];
    if (c == '(' || c == '[' || c == '{') {
      ++depth;
    } else if ((c == ')' || c == ']' || c == '}') && depth > 0) {
      --depth;
    } else if (c == ')' && depth == 0) {
      call.args.push_back(rest.slice(start, i).trim());
      return call;
    } else if (c == ',' && depth == 0) {
      call.args.push_back(rest.slice(start, i).trim());
      start = i + 1;
    }
  }
  return std::nullopt;
}

/// The innermost module path of a node's name scopes, or "".
StringRef moduleScope(const NodeProto &node) {
  StringRef text = metadata(node, "pkg.torch.onnx.name_scopes");
  SmallVector<StringRef> scopes;
  while (true) {
    size_t open = text.find('\'');
    if (open == StringRef::npos)
      break;
    size_t close = text.find('\'', open + 1);
    if (close == StringRef::npos)
      break;
    scopes.push_back(text.slice(open + 1, close));
    text = text.drop_front(close + 1);
  }
  // The last scope is the op's own name.
  return scopes.size() >= 2 ? scopes[scopes.size() - 2] : StringRef();
}

bool isFloat(const TensorProto &tensor) {
  switch (tensor.data_type()) {
  case TensorProto::FLOAT:
  case TensorProto::FLOAT16:
  case TensorProto::BFLOAT16:
  case TensorProto::DOUBLE:
    return true;
  default:
    return false;
  }
}

/// Whether an FX node named `name` is a transpose of its input's last two
/// dimensions (aten.transpose / aten.t, as FX names their results).
bool isTransposeName(StringRef name) {
  for (StringRef stem : {"transpose", "t"}) {
    if (!name.consume_front(stem))
      continue;
    if (name.empty())
      return true;
    int64_t index;
    return name.consume_front("_") && !name.getAsInteger(10, index);
  }
  return false;
}

SmallVector<int64_t> swapLastTwo(int64_t rank) {
  SmallVector<int64_t> perm(llvm::seq<int64_t>(0, rank).begin(),
                           llvm::seq<int64_t>(0, rank).end());
  std::swap(perm[rank - 2], perm[rank - 1]);
  return perm;
}

} // namespace

FailureOr<llvm::StringMap<FoldedParameter>>
moe::onnx_import::findFoldedParameters(const GraphProto &graph, Location loc,
                                       bool allowUnrecovered) {
  llvm::StringMap<FoldedParameter> folded;
  StringRef signature;
  for (const auto &entry : graph.metadata_props())
    if (entry.key() == "pkg.torch.export.ExportedProgram.graph_signature")
      signature = entry.value();
  if (signature.empty())
    return folded;

  // placeholder -> torch name, in the signature's order.
  llvm::MapVector<StringRef, StringRef> parameters;
  SmallVector<StringRef> lines;
  signature.split(lines, '\n');
  constexpr StringLiteral kParameter = ": PARAMETER target='";
  for (StringRef line : lines) {
    size_t at = line.find(kParameter);
    if (at == StringRef::npos)
      continue;
    StringRef target = line.drop_front(at + kParameter.size());
    parameters.insert({line.take_front(at).trim(), target.take_until(
                                                       [](char c) {
                                                         return c == '\'';
                                                       })});
  }

  llvm::StringMap<const TensorProto *> initializers;
  for (const TensorProto &tensor : graph.initializer())
    initializers[tensor.name()] = &tensor;
  // A wrapper module's attribute prefixes the signature's names; where the
  // initializers are named without it, so are the parameters found here.
  int direct = 0, unprefixed = 0;
  for (auto &[placeholder, target] : parameters) {
    direct += initializers.contains(target);
    unprefixed += initializers.contains(target.split('.').second);
  }
  auto torchName = [&](StringRef target) {
    return unprefixed > direct ? target.split('.').second : target;
  };

  // Each candidate: initializer -> (parameter, permutation).
  llvm::StringMap<SmallVector<FoldedParameter>> candidates;
  auto propose = [&](StringRef initializer, StringRef placeholder,
                     SmallVector<int64_t> toTorch) {
    auto it = parameters.find(placeholder.drop_front()); // "%p_..."
    if (!placeholder.starts_with("%") || it == parameters.end())
      return;
    candidates[initializer].push_back(
        {torchName(it->second).str(), std::move(toTorch)});
  };
  // Transposed copies named after their FX node: module -> initializers, in
  // the order of their first use.
  llvm::MapVector<StringRef, SmallVector<StringRef>> transposedByModule;
  llvm::StringSet<> deferred;
  for (const NodeProto &node : graph.node()) {
    std::optional<FxCall> call =
        parseFxCall(metadata(node, "pkg.torch.onnx.fx_node"));
    if (!call)
      continue;
    for (auto [index, input] : llvm::enumerate(node.input())) {
      auto it = initializers.find(input);
      if (it == initializers.end() || !isFloat(*it->second) ||
          it->second->dims_size() == 0)
        continue;
      int64_t rank = it->second->dims_size();
      StringRef op = node.op_type();
      bool linear = call->target == "torch.ops.aten.linear.default";
      if (linear && index == 1 && call->args.size() >= 2 && rank == 2) {
        bool transB = false;
        for (const auto &attr : node.attribute())
          if (attr.name() == "transB")
            transB = attr.i() != 0;
        if (op == "MatMul" || (op == "Gemm" && !transB))
          propose(input, call->args[1], {1, 0});
        else if (op == "Gemm")
          propose(input, call->args[1], {});
      } else if ((op == "Gather" || op == "GatherND") && index == 0 &&
                 !call->args.empty()) {
        propose(input, call->args[0], {});
      }
      if (isTransposeName(input) && rank >= 2 && !deferred.contains(input) &&
          llvm::is_contained(call->args, "%" + input)) {
        deferred.insert(input);
        transposedByModule[moduleScope(node)].push_back(input);
      }
    }
  }

  llvm::StringSet<> present;
  for (auto &[placeholder, target] : parameters)
    if (initializers.contains(torchName(target)))
      present.insert(torchName(target));
  // One parameter for each initializer and one initializer for each
  // parameter: anything else is not recognized.
  llvm::StringMap<int> claims;
  for (auto &[initializer, options] : candidates) {
    bool agree = llvm::all_of(options, [&](const FoldedParameter &p) {
      return p.name == options.front().name && p.toTorch == options.front().toTorch;
    });
    if (agree && !present.contains(options.front().name))
      ++claims[options.front().name];
  }
  for (auto &[initializer, options] : candidates) {
    const FoldedParameter &p = options.front();
    if (claims.lookup(p.name) == 1 &&
        llvm::all_of(options, [&](const FoldedParameter &o) {
          return o.name == p.name && o.toTorch == p.toTorch;
        }))
      folded[initializer] = p;
  }
  llvm::StringSet<> recovered;
  for (auto &entry : folded)
    recovered.insert(entry.second.name);

  // A module's transposed copies, matched in order of use to its
  // parameters not found otherwise, in the signature's (registration)
  // order: transformers' fused experts read gate_up_proj, then down_proj.
  for (auto &[module, names] : transposedByModule) {
    if (module.empty())
      continue;
    SmallVector<std::string> unmatched;
    for (auto &[placeholder, target] : parameters) {
      std::string name = torchName(target).str();
      StringRef parent = StringRef(target).rsplit('.').first;
      if (parent == module && !present.contains(name) &&
          !recovered.contains(name))
        unmatched.push_back(name);
    }
    SmallVector<StringRef> unclaimed;
    for (StringRef name : names)
      if (!folded.contains(name))
        unclaimed.push_back(name);
    if (unmatched.size() != unclaimed.size())
      continue;
    for (auto [initializer, name] : llvm::zip(unclaimed, unmatched)) {
      folded[initializer] = {name, swapLastTwo(
                                       initializers[initializer]->dims_size())};
      recovered.insert(name);
    }
  }

  SmallVector<std::string> missing;
  for (auto &[placeholder, target] : parameters) {
    std::string name = torchName(target).str();
    if (!present.contains(name) && !recovered.contains(name))
      missing.push_back(name);
  }
  if (!missing.empty() && !allowUnrecovered) {
    InFlightDiagnostic diag = mlir::emitError(loc)
                              << "the exporter folded " << missing.size()
                              << " parameters into constants that cannot be "
                                 "mapped back to them:";
    for (const std::string &name : ArrayRef(missing).take_front(5))
      diag << " '" << name << "'";
    if (missing.size() > 5)
      diag << " ...";
    diag << "; training would leave them as exported. Export without "
            "folding (OnnxConfig(optimize=False), torch.onnx.export(..., "
            "optimize=False)), or accept them frozen "
            "(--allow-frozen-weights)";
    return failure();
  }
  return folded;
}
