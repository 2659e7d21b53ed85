// Import errors are one diagnostic each, never a crash.

// TorchScript archives do not record input shapes.
// RUN: not moe-translate --import-torchscript %corpus/mixtral.pt 2>&1 | FileCheck %s --check-prefix=NO-SHAPE --implicit-check-not="PLEASE submit"
// NO-SHAPE: mixtral.pt:0:0: error: TorchScript archives do not record input shapes; give each input one with --input-shape hidden_states=D0xD1x...

// RUN: not moe-translate --import-torchscript %S/Inputs/tuple_output.pt --input-shape x=2x8 2>&1 | FileCheck %s --check-prefix=ONE-MISSING --implicit-check-not="PLEASE submit"
// ONE-MISSING: error: TorchScript archives do not record input shapes; give each input one with --input-shape y=D0xD1x...

// RUN: not moe-translate --import-torchscript %corpus/mixtral.pt --input-shape hidden_states=2x4x16 --input-shape tokens=8 2>&1 | FileCheck %s --check-prefix=UNKNOWN-INPUT --implicit-check-not="PLEASE submit"
// UNKNOWN-INPUT: error: --input-shape names 'tokens', which is not an input of forward

// RUN: not moe-translate --import-torchscript %corpus/bad_truncated.pt --input-shape hidden_states=2x4x16 2>&1 | FileCheck %s --check-prefix=TRUNCATED --implicit-check-not="PLEASE submit"
// TRUNCATED: bad_truncated.pt:0:0: error: not a valid TorchScript archive: PytorchStreamReader failed reading zip archive

// An ONNX model is no TorchScript archive either.
// RUN: not moe-translate --import-torchscript %corpus/mixtral.onnx --input-shape hidden_states=2x4x16 2>&1 | FileCheck %s --check-prefix=NOT-ZIP --implicit-check-not="PLEASE submit"
// NOT-ZIP: error: not a valid TorchScript archive:

// RUN: not moe-translate --import-torchscript %S/Inputs/unknown_op.pt --input-shape x=2x8 2>&1 | FileCheck %s --check-prefix=UNKNOWN-OP --implicit-check-not="PLEASE submit"
// UNKNOWN-OP: unknown_op.pt:0:0: error: cannot import aten::fft_fft at {{.*}}gen_inputs.py:{{[0-9]+}}:{{[0-9]+}}: the TorchScript importer has no translation for this op

// A write through a view with no inverse (functionalize.mlir has more).
// RUN: not moe-translate --import-torchscript %S/Inputs/inplace_expand.pt --input-shape x=2x8 2>&1 | FileCheck %s --check-prefix=IN-PLACE --implicit-check-not="PLEASE submit"
// IN-PLACE: error: cannot make aten::add_ at {{.*}}gen_inputs.py:{{[0-9]+}}:{{[0-9]+}} functional: it writes through a view made by aten::expand

// A shape of the wrong rank fails where the graph indexes it.
// RUN: not moe-translate --import-torchscript %corpus/mixtral.pt --input-shape hidden_states=8x16 2>&1 | FileCheck %s --check-prefix=RANK --implicit-check-not="PLEASE submit"
// RANK: error: cannot import aten::size at {{.*}}models.py:{{[0-9]+}}:0: dimension 2 is out of range for rank 2

// A shape that the weights do not fit is rejected by ONNX's shape inference.
// RUN: not moe-translate --import-torchscript %corpus/mixtral.pt --input-shape hidden_states=2x4x15 2>&1 | FileCheck %s --check-prefix=MISMATCH --implicit-check-not="PLEASE submit"
// MISMATCH: error: cannot import aten::linear at {{.*}}linear.py:{{[0-9]+}}:0: ONNX rejects the MatMul made for it (inputs FLOAT[8x15], FLOAT[16x4]): {{.*}}Incompatible dimensions
