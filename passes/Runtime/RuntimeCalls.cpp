//===- RuntimeCalls.cpp - calls into the moert runtime --------------------===//

#include "passes/Runtime/RuntimeCalls.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"

using namespace mlir;
using namespace mlir::moe;

int64_t runtime::encodeAxes(ArrayRef<int16_t> axes) {
  assert(axes.size() <= 15 && "at most 15 axes fit the encoding");
  int64_t code = 0;
  for (auto [i, axis] : llvm::enumerate(axes))
    code |= static_cast<int64_t>(axis + 1) << (4 * i);
  return code;
}

std::optional<int32_t> runtime::dtypeCode(Type elementType) {
  if (elementType.isF32())
    return 0;
  if (elementType.isF64())
    return 1;
  if (elementType.isInteger(32))
    return 2;
  if (elementType.isInteger(64))
    return 3;
  if (elementType.isF16())
    return 4;
  if (elementType.isBF16())
    return 5;
  return std::nullopt;
}

ValueRange runtime::call(OpBuilder &b, Location loc, StringRef name,
                         ValueRange args, TypeRange results) {
  auto module = b.getInsertionBlock()
                    ->getParentOp()
                    ->getParentOfType<ModuleOp>();
  if (!module)
    module = cast<ModuleOp>(b.getInsertionBlock()->getParentOp());
  auto type = FunctionType::get(b.getContext(), args.getTypes(), results);
  if (!SymbolTable::lookupSymbolIn(module, name)) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(module.getBody());
    func::FuncOp::create(b, loc, name, type).setPrivate();
  }
  return func::CallOp::create(b, loc, name, results, args).getResults();
}

Value runtime::i64Const(OpBuilder &b, Location loc, int64_t value) {
  return arith::ConstantIntOp::create(b, loc, value, 64);
}

Value runtime::i32Const(OpBuilder &b, Location loc, int32_t value) {
  return arith::ConstantIntOp::create(b, loc, value, 32);
}

Value runtime::dataPointer(OpBuilder &b, Location loc, Value memref) {
  Value address =
      memref::ExtractAlignedPointerAsIndexOp::create(b, loc, memref);
  Value asInt = arith::IndexCastOp::create(b, loc, b.getI64Type(), address);
  return LLVM::IntToPtrOp::create(
      b, loc, LLVM::LLVMPointerType::get(b.getContext()), asInt);
}

Value runtime::readPointer(OpBuilder &b, Location loc, Value tensor) {
  auto type = cast<RankedTensorType>(tensor.getType());
  // An identity layout: bufferization copies a strided view into a dense
  // buffer, so the aligned pointer is the first element.
  auto memrefType = MemRefType::get(type.getShape(), type.getElementType());
  Value buffer = bufferization::ToBufferOp::create(b, loc, memrefType, tensor,
                                                   /*read_only=*/true);
  return dataPointer(b, loc, buffer);
}

Value runtime::newBuffer(OpBuilder &b, Location loc, RankedTensorType type) {
  return memref::AllocOp::create(
      b, loc, MemRefType::get(type.getShape(), type.getElementType()),
      b.getI64IntegerAttr(64));
}

Value runtime::asTensor(OpBuilder &b, Location loc, Value buffer) {
  auto type = cast<MemRefType>(buffer.getType());
  return bufferization::ToTensorOp::create(
      b, loc, RankedTensorType::get(type.getShape(), type.getElementType()),
      buffer, /*restrict=*/true, /*writable=*/true);
}

Value runtime::worldRank(OpBuilder &b, Location loc) {
  Value rank = call(b, loc, "moert_rank", {}, {b.getI64Type()}).front();
  return arith::IndexCastOp::create(b, loc, b.getIndexType(), rank);
}

Value runtime::gridCoordinate(OpBuilder &b, Location loc, Value rank,
                              ArrayRef<int64_t> shape, int16_t axis) {
  int64_t stride = 1;
  for (int64_t extent : shape.drop_front(axis + 1))
    stride *= extent;
  Value index = arith::DivUIOp::create(
      b, loc, rank, arith::ConstantIndexOp::create(b, loc, stride));
  return arith::RemUIOp::create(
      b, loc, index, arith::ConstantIndexOp::create(b, loc, shape[axis]));
}

Value runtime::groupPosition(OpBuilder &b, Location loc,
                             ArrayRef<int64_t> shape, ArrayRef<int16_t> axes) {
  Value position = arith::ConstantIndexOp::create(b, loc, 0);
  if (axes.empty())
    return position;
  Value rank = worldRank(b, loc);
  for (int16_t axis : axes) {
    Value scaled = arith::MulIOp::create(
        b, loc, position, arith::ConstantIndexOp::create(b, loc, shape[axis]));
    position = arith::AddIOp::create(
        b, loc, scaled, gridCoordinate(b, loc, rank, shape, axis));
  }
  return position;
}
