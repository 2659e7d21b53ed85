// What the ONNX importer refuses before reading a model's graph: an
// ir_version outside [3, the linked ONNX library's IR_VERSION], an
// --input-shape that contradicts a static dim the model declares (or its
// rank), and inputs with more elements than one buffer may hold. Each is
// one error and a non-zero exit, never a crash (models from
// Inputs/make_bounds_models.py).
// RUN: rm -rf %t && mkdir -p %t

// ir_version: newer than the library knows, older than 3, unset (0).
// RUN: %python %S/Inputs/make_bounds_models.py ir_version %t/ir99.onnx 99
// RUN: not moe-translate --import-onnx %t/ir99.onnx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=IR99 --implicit-check-not=error: --implicit-check-not="PLEASE submit"
// RUN: %python %S/Inputs/make_bounds_models.py ir_version %t/ir2.onnx 2
// RUN: not moe-translate --import-onnx %t/ir2.onnx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=IR2 --implicit-check-not=error: --implicit-check-not="PLEASE submit"
// RUN: %python %S/Inputs/make_bounds_models.py ir_version %t/ir0.onnx 0
// RUN: not moe-translate --import-onnx %t/ir0.onnx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=IR0 --implicit-check-not=error: --implicit-check-not="PLEASE submit"
// moe-compile reads models through the same importer.
// RUN: not moe-compile %t/ir99.onnx -o %t/out 2>&1 \
// RUN:   | FileCheck %s --check-prefix=IR99 --implicit-check-not=error: --implicit-check-not="PLEASE submit"
// IR99: ir99.onnx:0:0: error: ir_version 99 is not supported (3 to {{[0-9]+}})
// IR2: ir2.onnx:0:0: error: ir_version 2 is not supported (3 to {{[0-9]+}})
// IR0: ir0.onnx:0:0: error: ir_version 0 is not supported (3 to {{[0-9]+}})

// The oldest and a current ir_version import.
// RUN: %python %S/Inputs/make_bounds_models.py ir_version %t/ir3.onnx 3
// RUN: moe-translate --import-onnx %t/ir3.onnx | FileCheck %s --check-prefix=IR-OK
// RUN: %python %S/Inputs/make_bounds_models.py ir_version %t/ir10.onnx 10
// RUN: moe-translate --import-onnx %t/ir10.onnx | FileCheck %s --check-prefix=IR-OK
// IR-OK: func.func @main_graph(%{{.*}}: tensor<2x4x16xf32> {onnx.name = "x"})

// --input-shape on x: [batch, 4, 16] and z: [2, 4, 16].
// RUN: %python %S/Inputs/make_bounds_models.py shapes %t/shapes.onnx
// A static dim changed (the brief's x=2x8x16 for [2, 4, 16]), in the middle
// and at the end, next to a dim that fills a dynamic one.
// RUN: not moe-translate --import-onnx %t/shapes.onnx --input-shape z=2x8x16 2>&1 \
// RUN:   | FileCheck %s --check-prefix=STATIC-MID --implicit-check-not=error: --implicit-check-not="PLEASE submit"
// RUN: not moe-translate --import-onnx %t/shapes.onnx --input-shape x=3x4x8 2>&1 \
// RUN:   | FileCheck %s --check-prefix=STATIC-LAST --implicit-check-not=error: --implicit-check-not="PLEASE submit"
// RUN: not moe-translate --import-onnx %t/shapes.onnx --input-shape z=3x4x16 2>&1 \
// RUN:   | FileCheck %s --check-prefix=STATIC-FIRST --implicit-check-not=error: --implicit-check-not="PLEASE submit"
// RUN: not moe-compile %t/shapes.onnx --input-shape z=2x8x16 -o %t/out 2>&1 \
// RUN:   | FileCheck %s --check-prefix=STATIC-MID --implicit-check-not=error: --implicit-check-not="PLEASE submit"
// STATIC-MID: shapes.onnx:0:0: error: --input-shape: input 'z' declares dim 1 as 4, but the shape given has 8 (only dynamic dims can be set)
// STATIC-LAST: shapes.onnx:0:0: error: --input-shape: input 'x' declares dim 2 as 16, but the shape given has 8 (only dynamic dims can be set)
// STATIC-FIRST: shapes.onnx:0:0: error: --input-shape: input 'z' declares dim 0 as 2, but the shape given has 3 (only dynamic dims can be set)

// The wrong rank, fewer or more dims.
// RUN: not moe-translate --import-onnx %t/shapes.onnx --input-shape z=2x4 2>&1 \
// RUN:   | FileCheck %s --check-prefix=RANK-LESS --implicit-check-not=error: --implicit-check-not="PLEASE submit"
// RUN: not moe-translate --import-onnx %t/shapes.onnx --input-shape x=1x3x4x16 2>&1 \
// RUN:   | FileCheck %s --check-prefix=RANK-MORE --implicit-check-not=error: --implicit-check-not="PLEASE submit"
// RANK-LESS: shapes.onnx:0:0: error: --input-shape: input 'z' has rank 3, but the shape given has rank 2
// RANK-MORE: shapes.onnx:0:0: error: --input-shape: input 'x' has rank 3, but the shape given has rank 4

// Filling the dynamic dim, and repeating the static ones, import.
// RUN: moe-translate --import-onnx %t/shapes.onnx --input-shape x=3x4x16 --input-shape z=2x4x16 \
// RUN:   | FileCheck %s --check-prefix=FILL
// FILL: func.func @main_graph(%{{.*}}: tensor<3x4x16xf32> {onnx.name = "x"}, %{{.*}}: tensor<2x4x16xf32> {onnx.name = "z"})
// FILL: onnx.Relu %{{.*}} : (tensor<3x4x16xf32>) -> tensor<3x4x16xf32>

// Sizes: a dynamic dim filled with 2^40 (2^46 elements), 2^62 (the count
// overflows int64), and a model that declares [2^40, 2^40] itself.
// RUN: not moe-translate --import-onnx %t/shapes.onnx --input-shape x=1099511627776x4x16 2>&1 \
// RUN:   | FileCheck %s --check-prefix=HUGE-FILL --implicit-check-not=error: --implicit-check-not="PLEASE submit"
// RUN: not moe-translate --import-onnx %t/shapes.onnx --input-shape x=4611686018427387904x4x16 2>&1 \
// RUN:   | FileCheck %s --check-prefix=WRAP-FILL --implicit-check-not=error: --implicit-check-not="PLEASE submit"
// RUN: %python %S/Inputs/make_bounds_models.py huge %t/huge.onnx
// RUN: not moe-translate --import-onnx %t/huge.onnx 2>&1 \
// RUN:   | FileCheck %s --check-prefix=HUGE-MODEL --implicit-check-not=error: --implicit-check-not="PLEASE submit"
// HUGE-FILL: shapes.onnx:0:0: error: input 'x' of shape [1099511627776, 4, 16] has more elements than one buffer may hold (2^40 bytes)
// WRAP-FILL: shapes.onnx:0:0: error: input 'x' of shape [4611686018427387904, 4, 16] has more elements than one buffer may hold (2^40 bytes)
// HUGE-MODEL: huge.onnx:0:0: error: input 'x' of shape [1099511627776, 1099511627776] has more elements than one buffer may hold (2^40 bytes)
