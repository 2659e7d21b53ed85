// --input-shape: an unknown input, malformed values, a rank mismatch.
// RUN: not moe-translate --import-onnx %corpus/switch.onnx --input-shape foo=16x16 2>&1 \
// RUN:   | FileCheck %s --check-prefix=UNKNOWN --implicit-check-not=error: --implicit-check-not="PLEASE submit"
// RUN: not moe-translate --import-onnx %corpus/switch.onnx --input-shape hidden_states=16 2>&1 \
// RUN:   | FileCheck %s --check-prefix=RANK --implicit-check-not=error: --implicit-check-not="PLEASE submit"
// RUN: not moe-translate --import-onnx %corpus/switch.onnx --input-shape hidden_states 2>&1 \
// RUN:   | FileCheck %s --check-prefix=SYNTAX --implicit-check-not=error: --implicit-check-not="PLEASE submit"
// RUN: not moe-translate --import-onnx %corpus/switch.onnx --input-shape hidden_states=16x-1 2>&1 \
// RUN:   | FileCheck %s --check-prefix=DIM --implicit-check-not=error: --implicit-check-not="PLEASE submit"
// RUN: not moe-translate --import-onnx %corpus/switch.onnx --input-shape hidden_states=16x16 \
// RUN:     --input-shape hidden_states=8x16 2>&1 \
// RUN:   | FileCheck %s --check-prefix=TWICE --implicit-check-not=error: --implicit-check-not="PLEASE submit"
// A static dimension the model declares cannot be replaced (the graph relies
// on it: here the hidden size that the router's MatMul contracts).
// RUN: not moe-translate --import-onnx %corpus/switch.onnx --input-shape hidden_states=16x8 2>&1 \
// RUN:   | FileCheck %s --check-prefix=MISMATCH --implicit-check-not=error: --implicit-check-not="PLEASE submit"

// UNKNOWN: switch.onnx:0:0: error: --input-shape: the model has no input 'foo' (its inputs: hidden_states)
// RANK: switch.onnx:0:0: error: --input-shape: input 'hidden_states' has rank 2, but the shape given has rank 1
// SYNTAX: error: --input-shape expects NAME=D0xD1x..., got 'hidden_states'
// DIM: error: --input-shape 'hidden_states=16x-1': '-1' is not a positive dimension
// TWICE: error: --input-shape gives 'hidden_states' twice
// MISMATCH: switch.onnx:0:0: error: --input-shape: input 'hidden_states' declares dim 1 as 16, but the shape given has 8 (only dynamic dims can be set)
