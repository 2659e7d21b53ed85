// Every com.microsoft.MoE attribute value or input the importer cannot map
// exactly is one error naming the node (generated models, see ort_moe_attributes).
// RUN: rm -rf %t && mkdir -p %t
// RUN: %python %S/Inputs/make_model.py moe %t/activation.onnx activation_type=foo
// RUN: not moe-translate --import-onnx %t/activation.onnx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=ACTIVATION --implicit-check-not=error: --implicit-check-not="PLEASE submit"
// RUN: %python %S/Inputs/make_model.py moe %t/fusion.onnx activation_type=swiglu swiglu_fusion=3
// RUN: not moe-translate --import-onnx %t/fusion.onnx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=FUSION --implicit-check-not=error: --implicit-check-not="PLEASE submit"
// RUN: %python %S/Inputs/make_model.py moe %t/mixer.onnx k=3 use_sparse_mixer=1
// RUN: not moe-translate --import-onnx %t/mixer.onnx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=MIXER --implicit-check-not=error: --implicit-check-not="PLEASE submit"
// RUN: %python %S/Inputs/make_model.py moe %t/normalize.onnx normalize_routing_weights=2
// RUN: not moe-translate --import-onnx %t/normalize.onnx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=NORMALIZE --implicit-check-not=error: --implicit-check-not="PLEASE submit"
// RUN: %python %S/Inputs/make_model.py moe %t/limit.onnx activation_type=swiglu swiglu_fusion=1 swiglu_limit=-1
// RUN: not moe-translate --import-onnx %t/limit.onnx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=LIMIT --implicit-check-not=error: --implicit-check-not="PLEASE submit"
// RUN: %python %S/Inputs/make_model.py moe %t/shared.onnx num_shared_experts=1
// RUN: not moe-translate --import-onnx %t/shared.onnx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=SHARED --implicit-check-not=error: --implicit-check-not="PLEASE submit"
// RUN: %python %S/Inputs/make_model.py moe %t/fused-fc3.onnx activation_type=swiglu swiglu_fusion=1 fc3=1
// RUN: not moe-translate --import-onnx %t/fused-fc3.onnx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=FUSED-FC3 --implicit-check-not=error: --implicit-check-not="PLEASE submit"
// RUN: %python %S/Inputs/make_model.py moe %t/no-fc3.onnx activation_type=swiglu
// RUN: not moe-translate --import-onnx %t/no-fc3.onnx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=NO-FC3 --implicit-check-not=error: --implicit-check-not="PLEASE submit"
// RUN: %python %S/Inputs/make_model.py moe %t/k.onnx k=5
// RUN: not moe-translate --import-onnx %t/k.onnx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=K --implicit-check-not=error: --implicit-check-not="PLEASE submit"
// RUN: %python %S/Inputs/make_model.py moe %t/dynamic.onnx dynamic=1
// RUN: not moe-translate --import-onnx %t/dynamic.onnx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=DYNAMIC --implicit-check-not=error: --implicit-check-not="PLEASE submit"
// RUN: %python %S/Inputs/make_model.py moe %t/f64.onnx dtype=f64
// RUN: not moe-translate --import-onnx %t/f64.onnx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=F64 --implicit-check-not=error: --implicit-check-not="PLEASE submit"
// RUN: %python %S/Inputs/make_model.py moe %t/ambiguous.onnx hidden=16 inter=16 fc3=1 activation_type=silu
// RUN: not moe-translate --import-onnx %t/ambiguous.onnx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=AMBIGUOUS --implicit-check-not=error: --implicit-check-not="PLEASE submit"
// RUN: %python %S/Inputs/make_model.py moe %t/opset.onnx ms_version=2
// RUN: not moe-translate --import-onnx %t/opset.onnx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=OPSET --implicit-check-not=error: --implicit-check-not="PLEASE submit"
// RUN: %python %S/Inputs/make_model.py error %t/no-import.onnx variant=no_ms_opset
// RUN: not moe-translate --import-onnx %t/no-import.onnx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=NO-IMPORT --implicit-check-not=error: --implicit-check-not="PLEASE submit"
// RUN: %python %S/Inputs/make_model.py error %t/arity.onnx variant=moe_4_inputs
// RUN: not moe-translate --import-onnx %t/arity.onnx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=ARITY --implicit-check-not=error: --implicit-check-not="PLEASE submit"
// RUN: %python %S/Inputs/make_model.py error %t/required.onnx variant=moe_empty_required
// RUN: not moe-translate --import-onnx %t/required.onnx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=REQUIRED --implicit-check-not=error: --implicit-check-not="PLEASE submit"
// RUN: %python %S/Inputs/make_model.py error %t/other-op.onnx variant=ms_other_op
// RUN: not moe-translate --import-onnx %t/other-op.onnx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=OTHER-OP --implicit-check-not=error: --implicit-check-not="PLEASE submit"

// ACTIVATION: activation.onnx:0:0: error: node 'moe' (com.microsoft.MoE): attribute 'activation_type' is 'foo'; expected relu, gelu, silu, swiglu or identity
// FUSION: fusion.onnx:0:0: error: node 'moe' (com.microsoft.MoE): attribute 'swiglu_fusion' is 3; expected 0, 1 or 2
// MIXER: mixer.onnx:0:0: error: node 'moe' (com.microsoft.MoE): attribute 'use_sparse_mixer' needs k = 2, got k = 3
// NORMALIZE: normalize.onnx:0:0: error: node 'moe' (com.microsoft.MoE): attribute 'normalize_routing_weights' is 2; expected 0 or 1
// LIMIT: limit.onnx:0:0: error: node 'moe' (com.microsoft.MoE): attribute 'swiglu_limit' is -1.000000e+00; expected a positive limit (inf for none)
// SHARED: shared.onnx:0:0: error: node 'moe' (com.microsoft.MoE): unsupported attribute 'num_shared_experts'
// FUSED-FC3: fused-fc3.onnx:0:0: error: node 'moe' (com.microsoft.MoE): input 'fc3_experts_weights' is not used with a fused SwiGLU (swiglu_fusion = 1)
// NO-FC3: no-fc3.onnx:0:0: error: node 'moe' (com.microsoft.MoE): swiglu with swiglu_fusion = 0 needs input 'fc3_experts_weights' (the linear half)
// K: k.onnx:0:0: error: node 'moe' (com.microsoft.MoE): attribute 'k' is 5; expected 1 to 4 (the number of experts)
// DYNAMIC: dynamic.onnx:0:0: error: node 'moe' (com.microsoft.MoE): input 'input' must have a static shape, got 'tensor<?x16xf32>' (give the model's input shapes with --input-shape)
// F64: f64.onnx:0:0: error: node 'moe' (com.microsoft.MoE): shape inference failed: input typestr: T, has unsupported type: tensor(double)
// AMBIGUOUS: ambiguous.onnx:0:0: error: node 'moe' (com.microsoft.MoE): the weight layout is ambiguous (hidden size == inter size); pass --ort-moe-layout=current or legacy
// OPSET: opset.onnx:0:0: error: opset 2 of domain 'com.microsoft' is not supported (1)
// NO-IMPORT: no-import.onnx:0:0: error: node 'moe' (com.microsoft.MoE): the model imports no opset of domain 'com.microsoft'
// ARITY: arity.onnx:0:0: error: node 'moe' (com.microsoft.MoE): has input size 4 not in range [min=5, max=8].
// REQUIRED: required.onnx:0:0: error: node 'moe' (com.microsoft.MoE): input 2 is marked single but has an empty string in the graph
// OTHER-OP: other-op.onnx:0:0: error: node 'qattn' (com.microsoft.QAttention): unsupported operator
