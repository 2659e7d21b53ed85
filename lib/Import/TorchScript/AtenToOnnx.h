//===- AtenToOnnx.h - what the aten op translations share -------*- C++ -*-===//
//
// Internal to the TorchScript importer. The aten op translations live in
// AtenToOnnx.cpp (arithmetic, casts, linear algebra, reductions, routing)
// and AtenShapes.cpp (shapes, indexing, lists, factories); each registers
// its own in the table that lookupHandler() reads.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_LIB_IMPORT_TORCHSCRIPT_ATENTOONNX_H
#define MOE_LIB_IMPORT_TORCHSCRIPT_ATENTOONNX_H

#include "GraphTranslator.h"

namespace mlir::moe::torchscript {

using HandlerMap = llvm::DenseMap<c10::unique_t, Handler>;
void addArithmeticHandlers(HandlerMap &handlers);
void addShapeHandlers(HandlerMap &handlers);

/// Registers `handler` for each of `kinds`.
inline void addHandler(HandlerMap &handlers,
                       std::initializer_list<c10::Symbol> kinds,
                       Handler handler) {
  for (c10::Symbol kind : kinds)
    handlers[kind] = handler;
}

/// Makes `name` result `i` of `node`.
inline void setResult(GraphTranslator &t, Node *node, std::string name,
                      unsigned i = 0) {
  t.setTensor(node->output(i), std::move(name));
}

/// A known or runtime int as a 1-D int64 tensor of one element.
std::string intAs1D(GraphTranslator &t, Value *value);
/// A known or runtime int as a 0-d int64 tensor.
std::string intAs0D(GraphTranslator &t, Value *value);
/// Both operands of an elementwise op in the dtype torch computes it in.
std::pair<std::string, std::string> promoted(GraphTranslator &t, Value *lhs,
                                             Value *rhs);

} // namespace mlir::moe::torchscript

#endif // MOE_LIB_IMPORT_TORCHSCRIPT_ATENTOONNX_H
