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

// A Reshape with allowzero = 1 and a 0 in its shape makes an empty tensor,
// so its data is empty too: the empty input is refused first.
// ALLOWZERO: opset20_allowzero.onnx:0:0: error: input 'x' declares dim 1 as 0: empty or negative dimensions are not supported
// PAD: opset20_pad_reflect.onnx:0:0: error: node 'pad' (Pad): attribute 'mode' = 'reflect' is not supported (only 'constant')
// GELU: opset20_gelu_sigmoid.onnx:0:0: error: node 'gelu' (Gelu): attribute 'approximate' = 'sigmoid' is not supported (none or tanh)
// ScatterND reduction="max" (opset 18) is lowered; "mean" is no ONNX value.
// SCATTER: opset20_scatter_reduction.onnx:0:0: error: node 'bad' (ScatterND): attribute 'reduction' = 'mean' is not supported
