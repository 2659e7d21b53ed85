// How com.microsoft.MoE's attributes map onto moe.layer (generated models:
// logits are the second graph input, weights [E=4, out, in], H=16, F=32).
// RUN: rm -rf %t && mkdir -p %t
// RUN: %python %S/Inputs/make_model.py moe %t/relu.onnx
// RUN: moe-translate --import-onnx %t/relu.onnx | FileCheck %s --check-prefix=RELU
// RUN: %python %S/Inputs/make_model.py moe %t/gelu.onnx activation_type=gelu bias=1 fc3=1
// RUN: moe-translate --import-onnx %t/gelu.onnx | FileCheck %s --check-prefix=GELU
// RUN: %python %S/Inputs/make_model.py moe %t/identity.onnx activation_type=identity k=3
// RUN: moe-translate --import-onnx %t/identity.onnx | FileCheck %s --check-prefix=IDENTITY
// RUN: %python %S/Inputs/make_model.py moe %t/swiglu.onnx activation_type=swiglu fc3=1 swiglu_limit=inf
// RUN: moe-translate --import-onnx %t/swiglu.onnx | FileCheck %s --check-prefix=SEPARATE
// RUN: %python %S/Inputs/make_model.py moe %t/concat.onnx activation_type=swiglu swiglu_fusion=2 \
// RUN:     activation_alpha=1.5 activation_beta=0.5 swiglu_limit=10
// RUN: moe-translate --import-onnx %t/concat.onnx | FileCheck %s --check-prefix=CONCAT
// RUN: %python %S/Inputs/make_model.py moe %t/sparse.onnx k=2 use_sparse_mixer=1 normalize_routing_weights=1
// RUN: moe-translate --import-onnx %t/sparse.onnx | FileCheck %s --check-prefix=SPARSE
// RUN: %python %S/Inputs/make_model.py moe %t/f16.onnx dtype=f16 k=2 normalize_routing_weights=1
// RUN: moe-translate --import-onnx %t/f16.onnx | FileCheck %s --check-prefix=F16
// hidden == inter with a fused SwiGLU is not ambiguous: fc1 [E, H, 2F] is
// legacy, [E, 2F, H] current.
// RUN: %python %S/Inputs/make_model.py moe %t/fused_legacy.onnx activation_type=swiglu swiglu_fusion=1 \
// RUN:     hidden=16 inter=16 layout=legacy
// RUN: moe-translate --import-onnx %t/fused_legacy.onnx | FileCheck %s --check-prefix=FUSED-LEGACY
// RUN: %python %S/Inputs/make_model.py moe %t/fused_current.onnx activation_type=swiglu swiglu_fusion=1 \
// RUN:     hidden=16 inter=16
// RUN: moe-translate --import-onnx %t/fused_current.onnx | FileCheck %s --check-prefix=FUSED-CURRENT \
// RUN:     --implicit-check-not=onnx.Transpose
// A dynamic token dimension is specialised with --input-shape.
// RUN: %python %S/Inputs/make_model.py moe %t/dynamic.onnx dynamic=1
// RUN: moe-translate --import-onnx %t/dynamic.onnx --input-shape x=8x16 --input-shape logits=8x4 \
// RUN:   | FileCheck %s --check-prefix=DYNAMIC

// A [T, H] input needs no reshaping.
// RELU:      func.func @main_graph(%[[X:.*]]: tensor<8x16xf32> {onnx.name = "x"}, %[[L:.*]]: tensor<8x4xf32> {onnx.name = "logits"})
// RELU-SAME:     -> (tensor<8x16xf32> {onnx.name = "y"})
// RELU:      %[[Y:.*]] = moe.layer softmax topk k 1 %[[X]], %[[L]] fc1(%{{.*}}) fc2(%{{.*}}) activation <relu> :
// RELU-NEXT: return %[[Y]]

// ONNX Runtime's gelu is the tanh approximation; fc3 makes the FFN gated.
// GELU: moe.layer softmax topk k 1 %{{.*}}, %{{.*}} fc1(%{{.*}}, %{{.*}}) fc3(%{{.*}}) fc2(%{{.*}}, %{{.*}}) activation <gelu_tanh> :

// IDENTITY: moe.layer softmax topk k 3 {{.*}} activation <identity> :

// swiglu_fusion = 0: the gate from fc1, the linear half from fc3; an
// infinite limit clamps nothing.
// SEPARATE: moe.layer softmax topk k 1 {{.*}} fc3(%{{.*}}) {{.*}} activation <swiglu> :

// CONCAT: moe.layer {{.*}} fc1(%{{.*}}) fc2(%{{.*}}) activation <swiglu, concatenated, alpha = 1.500000e+00, beta = 5.000000e-01, limit = 1.000000e+01> :
// CONCAT-SAME: tensor<4x64x16xf32>

// The sparse mixer's weights are not renormalised.
// SPARSE: moe.layer softmax sparse_mixer k 2 {{.*}} activation <relu> :

// F16: moe.layer softmax topk k 2 {{.*}} activation <relu> {normalize} : (tensor<8x16xf16>, tensor<8x4xf16>, tensor<4x32x16xf16>, tensor<4x16x32xf16>) -> tensor<8x16xf16>

// FUSED-LEGACY:      onnx.Transpose %{{.*}} {perm = array<i64: 0, 2, 1>} : (tensor<4x16x32xf32>) -> tensor<4x32x16xf32>
// FUSED-LEGACY:      moe.layer {{.*}} activation <swiglu, interleaved> : {{.*}}tensor<4x32x16xf32>, tensor<4x16x16xf32>) -> tensor<8x16xf32>
// FUSED-CURRENT:     moe.layer {{.*}} activation <swiglu, interleaved> : {{.*}}tensor<4x32x16xf32>, tensor<4x16x16xf32>) -> tensor<8x16xf32>

// DYNAMIC: moe.layer {{.*}} : (tensor<8x16xf32>, tensor<8x4xf32>, {{.*}}) -> tensor<8x16xf32>
