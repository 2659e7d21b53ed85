//===- onnx-proto.cpp - Fuzz target: ONNX models, mutated as models -------===//
//
// The ONNX importer again, with a structure-aware mutator: each input is
// parsed as a ModelProto and changed as a model (an operator's type, an
// attribute, a dimension, a value's name, a node dropped, duplicated or
// moved, an initializer resized, an opset version), or through protobuf
// reflection on any field, then serialized again. Byte-level mutations
// rarely produce a model that parses, let alone one that reaches shape
// inference and the graph importer; these do.
//
//===----------------------------------------------------------------------===//

#include "OnnxImport.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace pb = google::protobuf;
using ::ONNX_NAMESPACE::AttributeProto;
using ::ONNX_NAMESPACE::GraphProto;
using ::ONNX_NAMESPACE::ModelProto;
using ::ONNX_NAMESPACE::NodeProto;
using ::ONNX_NAMESPACE::TensorProto;
using ::ONNX_NAMESPACE::TensorShapeProto;
using ::ONNX_NAMESPACE::ValueInfoProto;

extern "C" size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t maxSize);

namespace {
using Random = std::minstd_rand;

size_t pick(Random &rng, size_t n) {
  return std::uniform_int_distribution<size_t>(0, n - 1)(rng);
}
bool oneIn(Random &rng, unsigned n) { return pick(rng, n) == 0; }

/// Integers that reach edge cases: sizes, axes, -1 for "infer", overflow.
int64_t interestingInt(Random &rng, int64_t old) {
  static const int64_t values[] = {0,  1,   2,   3,     4,    8,   16,
                                   -1, -2,  -3,  7,     64,   255, 1 << 16,
                                   INT32_MAX,    INT32_MIN,   INT64_MAX,
                                   INT64_MIN,    INT64_MAX / 2};
  switch (pick(rng, 4)) {
  case 0:
    return values[pick(rng, std::size(values))];
  // Wrapping on purpose (INT64_MIN and INT64_MAX are values too): in
  // unsigned arithmetic, which UBSan rightly refuses to see in signed.
  case 1:
    return static_cast<int64_t>(static_cast<uint64_t>(old) + pick(rng, 5) - 2);
  case 2:
    return static_cast<int64_t>(uint64_t(0) - static_cast<uint64_t>(old));
  default:
    return static_cast<int64_t>(rng()) - static_cast<int64_t>(Random::max() / 2);
  }
}

float interestingFloat(Random &rng, float old) {
  static const float values[] = {0.0f, -0.0f, 1.0f, -1.0f, 0.5f, 1e-12f,
                                 1e30f, std::numeric_limits<float>::infinity(),
                                 -std::numeric_limits<float>::infinity(),
                                 std::numeric_limits<float>::quiet_NaN(),
                                 std::numeric_limits<float>::denorm_min()};
  if (oneIn(rng, 3))
    return old * 2;
  return values[pick(rng, std::size(values))];
}

/// Every operator the linked ONNX library knows, with its domain.
const std::vector<std::pair<std::string, std::string>> &operatorNames() {
  static const auto names = [] {
    std::vector<std::pair<std::string, std::string>> result;
    for (const auto &schema :
         ::ONNX_NAMESPACE::OpSchemaRegistry::get_all_schemas())
      result.emplace_back(schema.domain(), schema.Name());
    // The fused MoE node that ONNX Runtime writes.
    result.emplace_back("com.microsoft", "MoE");
    std::sort(result.begin(), result.end());
    return result;
  }();
  return names;
}

/// The names of the graph's values: inputs, initializers, node outputs.
std::vector<std::string> valueNames(const GraphProto &graph) {
  std::vector<std::string> names;
  for (const ValueInfoProto &v : graph.input())
    names.push_back(v.name());
  for (const TensorProto &t : graph.initializer())
    names.push_back(t.name());
  for (const NodeProto &n : graph.node())
    for (const std::string &o : n.output())
      names.push_back(o);
  return names;
}

std::string someName(Random &rng, const GraphProto &graph) {
  std::vector<std::string> names = valueNames(graph);
  if (names.empty() || oneIn(rng, 8))
    return oneIn(rng, 2) ? "" : "fuzz_" + std::to_string(pick(rng, 4));
  return names[pick(rng, names.size())];
}

/// The value infos whose shapes are worth changing: inputs, outputs, the
/// intermediate ones shape inference starts from.
ValueInfoProto *someValueInfo(Random &rng, GraphProto &graph) {
  size_t n = graph.input_size() + graph.output_size() + graph.value_info_size();
  if (n == 0)
    return nullptr;
  size_t i = pick(rng, n);
  if (i < static_cast<size_t>(graph.input_size()))
    return graph.mutable_input(i);
  i -= graph.input_size();
  if (i < static_cast<size_t>(graph.output_size()))
    return graph.mutable_output(i);
  return graph.mutable_value_info(i - graph.output_size());
}

void mutateShape(Random &rng, TensorShapeProto &shape) {
  if (shape.dim_size() == 0 || oneIn(rng, 6)) {
    shape.add_dim()->set_dim_value(interestingInt(rng, 1));
    return;
  }
  int i = pick(rng, shape.dim_size());
  switch (pick(rng, 4)) {
  case 0: // Drop a dim.
    shape.mutable_dim()->SwapElements(i, shape.dim_size() - 1);
    shape.mutable_dim()->RemoveLast();
    break;
  case 1: // Make it symbolic.
    shape.mutable_dim(i)->set_dim_param(oneIn(rng, 2) ? "batch" : "seq");
    break;
  default:
    shape.mutable_dim(i)->set_dim_value(
        interestingInt(rng, shape.dim(i).dim_value()));
  }
}

void mutateAttribute(Random &rng, AttributeProto &attr) {
  switch (attr.type()) {
  case AttributeProto::INT:
    attr.set_i(interestingInt(rng, attr.i()));
    return;
  case AttributeProto::FLOAT:
    attr.set_f(interestingFloat(rng, attr.f()));
    return;
  case AttributeProto::INTS:
    if (attr.ints_size() && !oneIn(rng, 4)) {
      int i = pick(rng, attr.ints_size());
      attr.set_ints(i, interestingInt(rng, attr.ints(i)));
    } else if (attr.ints_size() && oneIn(rng, 2)) {
      attr.mutable_ints()->RemoveLast();
    } else {
      attr.add_ints(interestingInt(rng, 0));
    }
    return;
  case AttributeProto::FLOATS:
    if (attr.floats_size() && oneIn(rng, 2))
      attr.set_floats(pick(rng, attr.floats_size()),
                      interestingFloat(rng, 1.0f));
    else
      attr.add_floats(interestingFloat(rng, 1.0f));
    return;
  case AttributeProto::STRING: {
    static const char *values[] = {"",      "NOTSET", "SAME_UPPER", "tanh",
                                   "none",  "relu",   "constant",   "bij,bjk->bik",
                                   "x,y->", "..."};
    attr.set_s(values[pick(rng, std::size(values))]);
    return;
  }
  case AttributeProto::TENSOR: {
    TensorProto &t = *attr.mutable_t();
    if (t.dims_size())
      t.set_dims(pick(rng, t.dims_size()), interestingInt(rng, 1));
    else
      t.add_dims(interestingInt(rng, 1));
    return;
  }
  default:
    // A different type than the one the operator expects.
    attr.set_type(static_cast<AttributeProto::AttributeType>(pick(rng, 15)));
  }
}

void mutateInitializer(Random &rng, TensorProto &t) {
  switch (pick(rng, 5)) {
  case 0: // Resize: the data no longer matches the dims.
    if (t.dims_size()) {
      int i = pick(rng, t.dims_size());
      t.set_dims(i, interestingInt(rng, t.dims(i)));
    } else
      t.add_dims(interestingInt(rng, 1));
    return;
  case 1: // Truncate or grow the data.
    if (t.has_raw_data()) {
      std::string raw = t.raw_data();
      raw.resize(oneIn(rng, 2) ? raw.size() / 2 : raw.size() + pick(rng, 9));
      t.set_raw_data(raw);
    } else if (t.float_data_size()) {
      t.mutable_float_data()->RemoveLast();
    } else {
      t.add_int64_data(interestingInt(rng, 0));
    }
    return;
  case 2:
    t.set_data_type(static_cast<int32_t>(pick(rng, 24)));
    return;
  case 3: // Add or drop a dim.
    if (t.dims_size() && oneIn(rng, 2))
      t.mutable_dims()->RemoveLast();
    else
      t.add_dims(oneIn(rng, 2) ? 1 : interestingInt(rng, 2));
    return;
  default:
    if (t.has_raw_data() && !t.raw_data().empty()) {
      std::string raw = t.raw_data();
      raw[pick(rng, raw.size())] ^= static_cast<char>(1 << pick(rng, 8));
      t.set_raw_data(raw);
    } else if (t.float_data_size()) {
      int i = pick(rng, t.float_data_size());
      t.set_float_data(i, interestingFloat(rng, t.float_data(i)));
    } else if (t.int64_data_size()) {
      int i = pick(rng, t.int64_data_size());
      t.set_int64_data(i, interestingInt(rng, t.int64_data(i)));
    }
  }
}

/// One change that an exporter, a user or a corrupted file could make.
void mutateModel(Random &rng, ModelProto &model) {
  GraphProto &graph = *model.mutable_graph();
  int nodes = graph.node_size();
  switch (pick(rng, 12)) {
  case 0: // Another operator.
    if (nodes) {
      NodeProto &node = *graph.mutable_node(pick(rng, nodes));
      const auto &[domain, name] =
          operatorNames()[pick(rng, operatorNames().size())];
      node.set_op_type(name);
      node.set_domain(domain);
      return;
    }
    break;
  case 1: // An attribute's value.
    if (nodes) {
      NodeProto &node = *graph.mutable_node(pick(rng, nodes));
      if (node.attribute_size()) {
        mutateAttribute(rng,
                        *node.mutable_attribute(pick(rng, node.attribute_size())));
        return;
      }
    }
    break;
  case 2: // A dimension of an input, output or intermediate value.
    if (ValueInfoProto *v = someValueInfo(rng, graph)) {
      mutateShape(rng, *v->mutable_type()->mutable_tensor_type()->mutable_shape());
      return;
    }
    break;
  case 3: // An element type.
    if (ValueInfoProto *v = someValueInfo(rng, graph)) {
      v->mutable_type()->mutable_tensor_type()->set_elem_type(
          static_cast<int32_t>(pick(rng, 24)));
      return;
    }
    break;
  case 4: // A node's input or output is another value.
    if (nodes) {
      NodeProto &node = *graph.mutable_node(pick(rng, nodes));
      bool input = node.input_size() && (!node.output_size() || oneIn(rng, 2));
      auto &names = input ? *node.mutable_input() : *node.mutable_output();
      if (names.size()) {
        *names.Mutable(pick(rng, names.size())) = someName(rng, graph);
        return;
      }
    }
    break;
  case 5: // Drop a node.
    if (nodes) {
      graph.mutable_node()->SwapElements(pick(rng, nodes), nodes - 1);
      graph.mutable_node()->RemoveLast();
      return;
    }
    break;
  case 6: // Duplicate a node (its outputs are defined twice).
    if (nodes) {
      *graph.add_node() = graph.node(pick(rng, nodes));
      return;
    }
    break;
  case 7: // Move a node: values may be used before they are defined.
    if (nodes > 1) {
      graph.mutable_node()->SwapElements(pick(rng, nodes), pick(rng, nodes));
      return;
    }
    break;
  case 8: // An initializer's size or data.
    if (graph.initializer_size()) {
      mutateInitializer(rng,
                        *graph.mutable_initializer(pick(rng, graph.initializer_size())));
      return;
    }
    break;
  case 9: // An input or attribute dropped or added.
    if (nodes) {
      NodeProto &node = *graph.mutable_node(pick(rng, nodes));
      if (oneIn(rng, 2) && node.input_size())
        node.mutable_input()->RemoveLast();
      else if (oneIn(rng, 2) && node.attribute_size())
        node.mutable_attribute()->RemoveLast();
      else
        node.add_input(someName(rng, graph));
      return;
    }
    break;
  case 10: // An opset version.
    if (model.opset_import_size()) {
      auto &opset = *model.mutable_opset_import(pick(rng, model.opset_import_size()));
      opset.set_version(oneIn(rng, 2) ? 12 + pick(rng, 18)
                                      : interestingInt(rng, opset.version()));
      return;
    }
    break;
  default:
    break;
  }
  // A graph output that names another value.
  if (graph.output_size())
    graph.mutable_output(pick(rng, graph.output_size()))
        ->set_name(someName(rng, graph));
}

/// A field of some message in the model, reached through reflection.
struct Slot {
  pb::Message *message;
  const pb::FieldDescriptor *field;
};

void collectSlots(pb::Message &message, std::vector<Slot> &slots, int depth) {
  if (depth > 8)
    return;
  const pb::Reflection *reflection = message.GetReflection();
  const pb::Descriptor *descriptor = message.GetDescriptor();
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const pb::FieldDescriptor *field = descriptor->field(i);
    slots.push_back({&message, field});
    if (field->cpp_type() != pb::FieldDescriptor::CPPTYPE_MESSAGE)
      continue;
    if (field->is_repeated()) {
      for (int j = 0, e = reflection->FieldSize(message, field); j < e; ++j)
        collectSlots(*reflection->MutableRepeatedMessage(&message, field, j),
                     slots, depth + 1);
    } else if (reflection->HasField(message, field)) {
      collectSlots(*reflection->MutableMessage(&message, field), slots,
                   depth + 1);
    }
  }
}

std::string mutateString(Random &rng, std::string s) {
  switch (pick(rng, 4)) {
  case 0:
    return "";
  case 1:
    s.resize(s.size() / 2);
    return s;
  case 2:
    return s + static_cast<char>(pick(rng, 256));
  default:
    if (!s.empty())
      s[pick(rng, s.size())] ^= static_cast<char>(1 << pick(rng, 8));
    return s;
  }
}

/// Sets a singular field, or element `index` of a repeated one (-1).
void mutateScalar(Random &rng, pb::Message &m, const pb::FieldDescriptor *f,
                  int index) {
  const pb::Reflection *r = m.GetReflection();
  bool rep = index >= 0;
  switch (f->cpp_type()) {
#define MOE_FUZZ_SCALAR(CPP, NAME, MUTATE)                                     \
  case pb::FieldDescriptor::CPP: {                                             \
    auto old = rep ? r->GetRepeated##NAME(m, f, index) : r->Get##NAME(m, f);   \
    auto value = MUTATE;                                                       \
    if (rep)                                                                   \
      r->SetRepeated##NAME(&m, f, index, value);                               \
    else                                                                       \
      r->Set##NAME(&m, f, value);                                              \
    return;                                                                    \
  }
    MOE_FUZZ_SCALAR(CPPTYPE_INT32, Int32,
                    static_cast<int32_t>(interestingInt(rng, old)))
    MOE_FUZZ_SCALAR(CPPTYPE_INT64, Int64, interestingInt(rng, old))
    MOE_FUZZ_SCALAR(CPPTYPE_UINT32, UInt32,
                    static_cast<uint32_t>(interestingInt(rng, old)))
    MOE_FUZZ_SCALAR(CPPTYPE_UINT64, UInt64,
                    static_cast<uint64_t>(interestingInt(rng, old)))
    MOE_FUZZ_SCALAR(CPPTYPE_FLOAT, Float, interestingFloat(rng, old))
    MOE_FUZZ_SCALAR(CPPTYPE_DOUBLE, Double,
                    static_cast<double>(interestingFloat(rng, old)))
    MOE_FUZZ_SCALAR(CPPTYPE_BOOL, Bool, !old)
    MOE_FUZZ_SCALAR(CPPTYPE_STRING, String, mutateString(rng, old))
#undef MOE_FUZZ_SCALAR
  case pb::FieldDescriptor::CPPTYPE_ENUM: {
    const pb::EnumDescriptor *e = f->enum_type();
    int value = oneIn(rng, 8) ? static_cast<int>(interestingInt(rng, 0))
                              : e->value(pick(rng, e->value_count()))->number();
    if (rep)
      r->SetRepeatedEnumValue(&m, f, index, value);
    else
      r->SetEnumValue(&m, f, value);
    return;
  }
  case pb::FieldDescriptor::CPPTYPE_MESSAGE:
    return;
  }
}

/// Any field of any message: set, cleared, or a repeated field's element
/// changed, added, duplicated or removed.
void mutateReflection(Random &rng, ModelProto &model) {
  std::vector<Slot> slots;
  collectSlots(model, slots, 0);
  if (slots.empty())
    return;
  auto [m, f] = slots[pick(rng, slots.size())];
  const pb::Reflection *r = m->GetReflection();
  bool isMessage = f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE;
  if (!f->is_repeated()) {
    if (oneIn(rng, 8))
      r->ClearField(m, f);
    else if (isMessage)
      r->MutableMessage(m, f); // Present, even if empty.
    else
      mutateScalar(rng, *m, f, -1);
    return;
  }
  int n = r->FieldSize(*m, f);
  switch (n ? pick(rng, 4) : 0) {
  case 0: // Add an element: a copy of another, or a default one.
    if (isMessage) {
      pb::Message *added = r->AddMessage(m, f);
      if (n)
        added->CopyFrom(r->GetRepeatedMessage(*m, f, pick(rng, n)));
    } else {
      switch (f->cpp_type()) {
      case pb::FieldDescriptor::CPPTYPE_INT32:
        r->AddInt32(m, f, 0);
        break;
      case pb::FieldDescriptor::CPPTYPE_INT64:
        r->AddInt64(m, f, 0);
        break;
      case pb::FieldDescriptor::CPPTYPE_UINT32:
        r->AddUInt32(m, f, 0);
        break;
      case pb::FieldDescriptor::CPPTYPE_UINT64:
        r->AddUInt64(m, f, 0);
        break;
      case pb::FieldDescriptor::CPPTYPE_FLOAT:
        r->AddFloat(m, f, 0);
        break;
      case pb::FieldDescriptor::CPPTYPE_DOUBLE:
        r->AddDouble(m, f, 0);
        break;
      case pb::FieldDescriptor::CPPTYPE_BOOL:
        r->AddBool(m, f, false);
        break;
      case pb::FieldDescriptor::CPPTYPE_STRING:
        r->AddString(m, f, "");
        break;
      case pb::FieldDescriptor::CPPTYPE_ENUM:
        r->AddEnumValue(m, f, 0);
        break;
      default:
        break;
      }
      mutateScalar(rng, *m, f, r->FieldSize(*m, f) - 1);
    }
    return;
  case 1: // Remove one.
    r->SwapElements(m, f, pick(rng, n), n - 1);
    r->RemoveLast(m, f);
    return;
  case 2: // Swap two.
    r->SwapElements(m, f, pick(rng, n), pick(rng, n));
    return;
  default:
    if (!isMessage)
      mutateScalar(rng, *m, f, pick(rng, n));
  }
}

/// Writes `model` to `data` if it fits; the new size, or 0.
size_t serialize(const ModelProto &model, uint8_t *data, size_t maxSize) {
  std::string bytes;
  if (!model.SerializeToString(&bytes) || bytes.size() > maxSize)
    return 0;
  std::copy(bytes.begin(), bytes.end(), data);
  return bytes.size();
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  moe_fuzz::importOnnxBytes(data, size);
  return 0;
}

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size,
                                          size_t maxSize, unsigned seed) {
  Random rng(seed);
  ModelProto model;
  // Inputs that are not models (yet), and now and then the bytes of one
  // that is, get libFuzzer's own byte-level mutations.
  if (oneIn(rng, 16) || !model.ParseFromArray(data, static_cast<int>(size)))
    return LLVMFuzzerMutate(data, size, maxSize);
  for (size_t i = 0, n = 1 + pick(rng, 3); i < n; ++i) {
    if (oneIn(rng, 3))
      mutateReflection(rng, model);
    else
      mutateModel(rng, model);
  }
  if (size_t written = serialize(model, data, maxSize))
    return written;
  return LLVMFuzzerMutate(data, size, maxSize);
}

/// A node of one model, with the initializers it reads, spliced into the
/// other.
extern "C" size_t LLVMFuzzerCustomCrossOver(const uint8_t *data1, size_t size1,
                                            const uint8_t *data2, size_t size2,
                                            uint8_t *out, size_t maxOutSize,
                                            unsigned seed) {
  Random rng(seed);
  ModelProto model, donor;
  if (!model.ParseFromArray(data1, static_cast<int>(size1)) ||
      !donor.ParseFromArray(data2, static_cast<int>(size2)) ||
      donor.graph().node_size() == 0)
    return 0;
  const NodeProto &node = donor.graph().node(pick(rng, donor.graph().node_size()));
  GraphProto &graph = *model.mutable_graph();
  std::set<std::string> inputs(node.input().begin(), node.input().end());
  for (const TensorProto &t : donor.graph().initializer())
    if (inputs.count(t.name()))
      *graph.add_initializer() = t;
  auto at = graph.mutable_node();
  *at->Add() = node;
  if (at->size() > 1)
    at->SwapElements(at->size() - 1, pick(rng, at->size()));
  return serialize(model, out, maxOutSize);
}
