// Attribute values of current opsets that the lowering does not implement
// are refused at import, naming the node and the attribute (tiny models made
// by Inputs/make_opset_models.py).
// RUN: not moe-translate --import-onnx %S/Inputs/opset20_allowzero.onnx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=ALLOWZERO --implicit-check-not=error:
// RUN: not moe-translate --import-onnx %S/Inputs/opset20_pad_reflect.onnx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=PAD --implicit-check-not=error:
// RUN: not moe-translate --import-onnx %S/Inputs/opset20_gelu_sigmoid.onnx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=GELU --implicit-check-not=error:
// RUN: not moe-translate --import-onnx %S/Inputs/opset20_scatter_reduction.onnx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=SCATTER --implicit-check-not=error:

// ALLOWZERO: opset20_allowzero.onnx:0:0: error: node 'reshape' (Reshape): attribute 'allowzero' = 1 with a 0 in the shape (an empty dimension) is not supported
// PAD: opset20_pad_reflect.onnx:0:0: error: node 'pad' (Pad): attribute 'mode' = 'reflect' is not supported (only 'constant')
// GELU: opset20_gelu_sigmoid.onnx:0:0: error: node 'gelu' (Gelu): attribute 'approximate' = 'sigmoid' is not supported (none or tanh)
// ScatterND reduction="max" (opset 18) is lowered; "mean" is no ONNX value.
// SCATTER: opset20_scatter_reduction.onnx:0:0: error: node 'bad' (ScatterND): attribute 'reduction' = 'mean' is not supported
