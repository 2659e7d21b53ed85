// Attention over the keys its mask lets through: 8 query rows in blocks of
// 4; the first block's rows see keys 0-3 only.
// RUN: moe-opt %s --split-input-file --moe-causal-attention="block-rows=4" | FileCheck %s
// A mask of more elements than allowed is not read.
// RUN: moe-opt %s --split-input-file --moe-causal-attention="block-rows=4 max-mask-elements=32" | FileCheck %s --check-prefix=BIG

// A causal mask from constants: every row sees its own key.
// CHECK-LABEL: func.func @causal
// CHECK-DAG: %[[Q0:.*]] = onnx.Slice %arg0, {{.*}} -> tensor<1x2x4x4xf32>
// CHECK-DAG: %[[K0:.*]] = onnx.Slice %arg1, {{.*}} -> tensor<1x2x4x4xf32>
// CHECK: %[[S0:.*]] = onnx.MatMul %[[Q0]], %[[K0]] : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
// CHECK: %[[M0:.*]] = onnx.Slice {{.*}} -> tensor<1x1x4x4xf32>
// CHECK: %[[A0:.*]] = onnx.Add %[[S0]], %[[M0]] : (tensor<1x2x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x2x4x4xf32>
// CHECK: %[[P0:.*]] = onnx.Softmax %[[A0]] {axis = -1 : i64} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
// CHECK: %[[V0:.*]] = onnx.Slice %arg2, {{.*}} -> tensor<1x2x4x4xf32>
// CHECK: %[[O0:.*]] = onnx.MatMul %[[P0]], %[[V0]] : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
// The second block's rows see every key: no slice of K or V.
// CHECK: %[[S1:.*]] = onnx.MatMul %{{.*}}, %arg1 : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
// CHECK: %[[O1:.*]] = onnx.MatMul %{{.*}}, %arg2 : (tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32>
// CHECK: %[[O:.*]] = onnx.Concat %[[O0]], %[[O1]] {axis = 2 : i64} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x8x4xf32>
// CHECK: return %[[O]]
// BIG-LABEL: func.func @causal
// BIG-NOT: onnx.Concat
func.func @causal(%q: tensor<1x2x8x4xf32>, %kt: tensor<1x2x4x8xf32>,
                  %v: tensor<1x2x8x4xf32>) -> tensor<1x2x8x4xf32> {
  %kidx = arith.constant dense<[[[[0, 1, 2, 3, 4, 5, 6, 7]]]]> : tensor<1x1x1x8xi64>
  %qidx = arith.constant dense<[[[[0], [1], [2], [3], [4], [5], [6], [7]]]]> : tensor<1x1x8x1xi64>
  %zero = arith.constant dense<0.0> : tensor<f32>
  %min = arith.constant dense<-3.40282347E+38> : tensor<f32>
  %allowed = onnx.LessOrEqual %kidx, %qidx : (tensor<1x1x1x8xi64>, tensor<1x1x8x1xi64>) -> tensor<1x1x8x8xi1>
  %mask = onnx.Where %allowed, %zero, %min : (tensor<1x1x8x8xi1>, tensor<f32>, tensor<f32>) -> tensor<1x1x8x8xf32>
  %s = onnx.MatMul %q, %kt : (tensor<1x2x8x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x8x8xf32>
  %a = onnx.Add %s, %mask : (tensor<1x2x8x8xf32>, tensor<1x1x8x8xf32>) -> tensor<1x2x8x8xf32>
  %p = onnx.Softmax %a {axis = -1 : i64} : (tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
  %o = onnx.MatMul %p, %v : (tensor<1x2x8x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x8x4xf32>
  return %o : tensor<1x2x8x4xf32>
}

// -----

// transformers' export: the causal mask AND the padding of the input, and
// the rows with no key left zeroed afterwards. The scale after the scores
// moves into each block.
// CHECK-LABEL: func.func @padded_rows_zeroed
// CHECK: %[[S0:.*]] = onnx.MatMul {{.*}} -> tensor<1x2x4x4xf32>
// CHECK: onnx.Mul %[[S0]], %{{.*}} : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
// CHECK: %[[O:.*]] = onnx.Concat {{.*}} -> tensor<1x2x8x4xf32>
// CHECK: onnx.Where %{{.*}}, %{{.*}}, %[[O]]
func.func @padded_rows_zeroed(%q: tensor<1x2x8x4xf32>, %kt: tensor<1x2x4x8xf32>,
                              %v: tensor<1x2x8x4xf32>, %pad: tensor<1x8xi1>)
    -> tensor<1x2x8x4xf32> {
  %kidx = arith.constant dense<[[[[0, 1, 2, 3, 4, 5, 6, 7]]]]> : tensor<1x1x1x8xi64>
  %qidx = arith.constant dense<[[[[0], [1], [2], [3], [4], [5], [6], [7]]]]> : tensor<1x1x8x1xi64>
  %shape = arith.constant dense<[1, 1, 1, 8]> : tensor<4xi64>
  %min = arith.constant dense<-3.40282347E+38> : tensor<f32>
  %one = arith.constant dense<1.0> : tensor<f32>
  %zero = arith.constant dense<0.0> : tensor<f32>
  %last = arith.constant dense<-1> : tensor<1xi64>
  %scale = arith.constant dense<0.5> : tensor<f32>
  %causal = onnx.LessOrEqual %kidx, %qidx : (tensor<1x1x1x8xi64>, tensor<1x1x8x1xi64>) -> tensor<1x1x8x8xi1>
  %keys = onnx.Reshape %pad, %shape : (tensor<1x8xi1>, tensor<4xi64>) -> tensor<1x1x1x8xi1>
  %allowed = onnx.And %causal, %keys : (tensor<1x1x8x8xi1>, tensor<1x1x1x8xi1>) -> tensor<1x1x8x8xi1>
  %removed = onnx.Not %allowed : (tensor<1x1x8x8xi1>) -> tensor<1x1x8x8xi1>
  %removedf = onnx.Cast %removed {to = 1 : i64} : (tensor<1x1x8x8xi1>) -> tensor<1x1x8x8xf32>
  %mask = onnx.Mul %removedf, %min : (tensor<1x1x8x8xf32>, tensor<f32>) -> tensor<1x1x8x8xf32>
  %allowedf = onnx.Cast %allowed {to = 1 : i64} : (tensor<1x1x8x8xi1>) -> tensor<1x1x8x8xf32>
  %count = onnx.ReduceSum %allowedf, %last {keepdims = 1 : i64} : (tensor<1x1x8x8xf32>, tensor<1xi64>) -> tensor<1x1x8x1xf32>
  %none = onnx.Less %count, %one : (tensor<1x1x8x1xf32>, tensor<f32>) -> tensor<1x1x8x1xi1>
  %s = onnx.MatMul %q, %kt : (tensor<1x2x8x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x8x8xf32>
  %ss = onnx.Mul %s, %scale : (tensor<1x2x8x8xf32>, tensor<f32>) -> tensor<1x2x8x8xf32>
  %a = onnx.Add %ss, %mask : (tensor<1x2x8x8xf32>, tensor<1x1x8x8xf32>) -> tensor<1x2x8x8xf32>
  %p = onnx.Softmax %a {axis = -1 : i64} : (tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
  %o = onnx.MatMul %p, %v : (tensor<1x2x8x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x8x4xf32>
  %r = onnx.Where %none, %zero, %o : (tensor<1x1x8x1xi1>, tensor<f32>, tensor<1x2x8x4xf32>) -> tensor<1x2x8x4xf32>
  return %r : tensor<1x2x8x4xf32>
}

// -----

// The same padded mask without the zeroing: a row of padding keys only
// would see a uniform softmax over all 8 keys, so nothing changes.
// CHECK-LABEL: func.func @padded_rows_kept
// CHECK-NOT: onnx.Concat
// CHECK: onnx.MatMul {{.*}} -> tensor<1x2x8x8xf32>
func.func @padded_rows_kept(%q: tensor<1x2x8x4xf32>, %kt: tensor<1x2x4x8xf32>,
                            %v: tensor<1x2x8x4xf32>, %pad: tensor<1x8xi1>)
    -> tensor<1x2x8x4xf32> {
  %kidx = arith.constant dense<[[[[0, 1, 2, 3, 4, 5, 6, 7]]]]> : tensor<1x1x1x8xi64>
  %qidx = arith.constant dense<[[[[0], [1], [2], [3], [4], [5], [6], [7]]]]> : tensor<1x1x8x1xi64>
  %shape = arith.constant dense<[1, 1, 1, 8]> : tensor<4xi64>
  %min = arith.constant dense<-3.40282347E+38> : tensor<f32>
  %causal = onnx.LessOrEqual %kidx, %qidx : (tensor<1x1x1x8xi64>, tensor<1x1x8x1xi64>) -> tensor<1x1x8x8xi1>
  %keys = onnx.Reshape %pad, %shape : (tensor<1x8xi1>, tensor<4xi64>) -> tensor<1x1x1x8xi1>
  %allowed = onnx.And %causal, %keys : (tensor<1x1x8x8xi1>, tensor<1x1x1x8xi1>) -> tensor<1x1x8x8xi1>
  %removed = onnx.Not %allowed : (tensor<1x1x8x8xi1>) -> tensor<1x1x8x8xi1>
  %removedf = onnx.Cast %removed {to = 1 : i64} : (tensor<1x1x8x8xi1>) -> tensor<1x1x8x8xf32>
  %mask = onnx.Mul %removedf, %min : (tensor<1x1x8x8xf32>, tensor<f32>) -> tensor<1x1x8x8xf32>
  %s = onnx.MatMul %q, %kt : (tensor<1x2x8x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x8x8xf32>
  %a = onnx.Add %s, %mask : (tensor<1x2x8x8xf32>, tensor<1x1x8x8xf32>) -> tensor<1x2x8x8xf32>
  %p = onnx.Softmax %a {axis = -1 : i64} : (tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
  %o = onnx.MatMul %p, %v : (tensor<1x2x8x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x8x4xf32>
  return %o : tensor<1x2x8x4xf32>
}

// -----

// A mask that removes nothing for sure (-1e4 is not -inf to a softmax), and
// one that the program's input gives: left alone.
// CHECK-LABEL: func.func @soft_mask
// CHECK-NOT: onnx.Concat
// CHECK-LABEL: func.func @input_mask
// CHECK-NOT: onnx.Concat
func.func @soft_mask(%q: tensor<1x2x8x4xf32>, %kt: tensor<1x2x4x8xf32>,
                     %v: tensor<1x2x8x4xf32>) -> tensor<1x2x8x4xf32> {
  %kidx = arith.constant dense<[[[[0, 1, 2, 3, 4, 5, 6, 7]]]]> : tensor<1x1x1x8xi64>
  %qidx = arith.constant dense<[[[[0], [1], [2], [3], [4], [5], [6], [7]]]]> : tensor<1x1x8x1xi64>
  %zero = arith.constant dense<0.0> : tensor<f32>
  %low = arith.constant dense<-1.0e+04> : tensor<f32>
  %allowed = onnx.LessOrEqual %kidx, %qidx : (tensor<1x1x1x8xi64>, tensor<1x1x8x1xi64>) -> tensor<1x1x8x8xi1>
  %mask = onnx.Where %allowed, %zero, %low : (tensor<1x1x8x8xi1>, tensor<f32>, tensor<f32>) -> tensor<1x1x8x8xf32>
  %s = onnx.MatMul %q, %kt : (tensor<1x2x8x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x8x8xf32>
  %a = onnx.Add %s, %mask : (tensor<1x2x8x8xf32>, tensor<1x1x8x8xf32>) -> tensor<1x2x8x8xf32>
  %p = onnx.Softmax %a {axis = -1 : i64} : (tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
  %o = onnx.MatMul %p, %v : (tensor<1x2x8x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x8x4xf32>
  return %o : tensor<1x2x8x4xf32>
}
func.func @input_mask(%q: tensor<1x2x8x4xf32>, %kt: tensor<1x2x4x8xf32>,
                      %v: tensor<1x2x8x4xf32>, %mask: tensor<1x1x8x8xf32>)
    -> tensor<1x2x8x4xf32> {
  %s = onnx.MatMul %q, %kt : (tensor<1x2x8x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x8x8xf32>
  %a = onnx.Add %s, %mask : (tensor<1x2x8x8xf32>, tensor<1x1x8x8xf32>) -> tensor<1x2x8x8xf32>
  %p = onnx.Softmax %a {axis = -1 : i64} : (tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
  %o = onnx.MatMul %p, %v : (tensor<1x2x8x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x8x4xf32>
  return %o : tensor<1x2x8x4xf32>
}

// -----

// After moe-sequence-parallel each of 2 ranks holds 4 query rows, its rows
// of a causal mask computed whole: rank 0's rows see keys 0-3 at most,
// rank 1's all 8. One case of static shapes per rank.
// CHECK-LABEL: func.func @rank_rows
// CHECK: %[[RANK:.*]] = shard.process_multi_index on @world axes = [0] : index
// CHECK: %[[O:.*]] = scf.index_switch %[[RANK]] -> tensor<1x2x4x4xf32>
// CHECK: case 0 {
// CHECK: onnx.Softmax {{.*}} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
// CHECK: default {
// CHECK: onnx.Softmax {{.*}} : (tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
// CHECK: return %[[O]]
module {
  shard.grid @world(shape = 2)
  func.func @rank_rows(%q: tensor<1x2x4x4xf32>, %kt: tensor<1x2x4x8xf32>,
                       %v: tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32> {
    %kidx = arith.constant dense<[[[[0, 1, 2, 3, 4, 5, 6, 7]]]]> : tensor<1x1x1x8xi64>
    %qidx = arith.constant dense<[[[[0], [1], [2], [3], [4], [5], [6], [7]]]]> : tensor<1x1x8x1xi64>
    %zero = arith.constant dense<0.0> : tensor<f32>
    %min = arith.constant dense<-3.40282347E+38> : tensor<f32>
    %allowed = onnx.LessOrEqual %kidx, %qidx : (tensor<1x1x1x8xi64>, tensor<1x1x8x1xi64>) -> tensor<1x1x8x8xi1>
    %whole = onnx.Where %allowed, %zero, %min : (tensor<1x1x8x8xi1>, tensor<f32>, tensor<f32>) -> tensor<1x1x8x8xf32>
    %mask = shard.all_slice %whole on @world grid_axes = [0] slice_axis = 2 : tensor<1x1x8x8xf32> -> tensor<1x1x4x8xf32>
    %s = onnx.MatMul %q, %kt : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
    %a = onnx.Add %s, %mask : (tensor<1x2x4x8xf32>, tensor<1x1x4x8xf32>) -> tensor<1x2x4x8xf32>
    %p = onnx.Softmax %a {axis = -1 : i64} : (tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
    %o = onnx.MatMul %p, %v : (tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32>
    return %o : tensor<1x2x4x4xf32>
  }
}

// -----

// Zigzag order (moe-sequence-parallel{zigzag=1}) with transformers' mask
// and zeroing, each rank computing its own rows of them: the query indices
// reordered as chunks 0, 3, 1, 2 of 2 rows, then sliced; rank 0 holds rows
// 0-1 and 6-7, rank 1 rows 2-5. A block ends after 4 rows, or where the
// keys jump by more than that: rank 0's rows 0-1 see 2 keys and rows 6-7
// all 8.
// CHECK-LABEL: func.func @zigzag_rows
// BIG-LABEL: func.func @zigzag_rows
// BIG-NOT: scf.index_switch
// CHECK: scf.index_switch
// CHECK: case 0 {
// CHECK: onnx.Softmax {{.*}} : (tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32>
// CHECK: onnx.Softmax {{.*}} : (tensor<1x2x2x8xf32>) -> tensor<1x2x2x8xf32>
// CHECK: default {
// CHECK: onnx.MatMul {{.*}} -> tensor<1x2x4x6xf32>
// CHECK: onnx.Softmax {{.*}} : (tensor<1x2x4x6xf32>) -> tensor<1x2x4x6xf32>
// CHECK-NOT: onnx.Softmax
// CHECK: onnx.Where
module {
  shard.grid @world(shape = 2)
  func.func @zigzag_rows(%q: tensor<1x2x4x4xf32>, %kt: tensor<1x2x4x8xf32>,
                         %v: tensor<1x2x8x4xf32>, %pad: tensor<1x8xi1>)
      -> tensor<1x2x4x4xf32> {
    %kidx = arith.constant dense<[[[[0, 1, 2, 3, 4, 5, 6, 7]]]]> : tensor<1x1x1x8xi64>
    %qidx = arith.constant dense<[[[[0], [1], [2], [3], [4], [5], [6], [7]]]]> : tensor<1x1x8x1xi64>
    %shape = arith.constant dense<[1, 1, 1, 8]> : tensor<4xi64>
    %min = arith.constant dense<-3.40282347E+38> : tensor<f32>
    %one = arith.constant dense<1.0> : tensor<f32>
    %zero = arith.constant dense<0.0> : tensor<f32>
    %last = arith.constant dense<-1> : tensor<1xi64>
    %rows = arith.constant dense<2> : tensor<1xi64>
    %c0 = arith.constant dense<0> : tensor<1xi64>
    %c2 = arith.constant dense<2> : tensor<1xi64>
    %c4 = arith.constant dense<4> : tensor<1xi64>
    %c6 = arith.constant dense<6> : tensor<1xi64>
    %c8 = arith.constant dense<8> : tensor<1xi64>
    %q0 = onnx.Slice %qidx, %c0, %c2, %rows : (tensor<1x1x8x1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x1x2x1xi64>
    %q3 = onnx.Slice %qidx, %c6, %c8, %rows : (tensor<1x1x8x1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x1x2x1xi64>
    %q1 = onnx.Slice %qidx, %c2, %c4, %rows : (tensor<1x1x8x1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x1x2x1xi64>
    %q2 = onnx.Slice %qidx, %c4, %c6, %rows : (tensor<1x1x8x1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x1x2x1xi64>
    %qz = onnx.Concat %q0, %q3, %q1, %q2 {axis = 2 : i64} : (tensor<1x1x2x1xi64>, tensor<1x1x2x1xi64>, tensor<1x1x2x1xi64>, tensor<1x1x2x1xi64>) -> tensor<1x1x8x1xi64>
    %mine = shard.all_slice %qz on @world grid_axes = [0] slice_axis = 2 : tensor<1x1x8x1xi64> -> tensor<1x1x4x1xi64>
    %causal = onnx.LessOrEqual %kidx, %mine : (tensor<1x1x1x8xi64>, tensor<1x1x4x1xi64>) -> tensor<1x1x4x8xi1>
    %keys = onnx.Reshape %pad, %shape : (tensor<1x8xi1>, tensor<4xi64>) -> tensor<1x1x1x8xi1>
    %allowed = onnx.And %causal, %keys : (tensor<1x1x4x8xi1>, tensor<1x1x1x8xi1>) -> tensor<1x1x4x8xi1>
    %removed = onnx.Not %allowed : (tensor<1x1x4x8xi1>) -> tensor<1x1x4x8xi1>
    %removedf = onnx.Cast %removed {to = 1 : i64} : (tensor<1x1x4x8xi1>) -> tensor<1x1x4x8xf32>
    %mask = onnx.Mul %removedf, %min : (tensor<1x1x4x8xf32>, tensor<f32>) -> tensor<1x1x4x8xf32>
    %allowedf = onnx.Cast %allowed {to = 1 : i64} : (tensor<1x1x4x8xi1>) -> tensor<1x1x4x8xf32>
    %count = onnx.ReduceSum %allowedf, %last {keepdims = 1 : i64} : (tensor<1x1x4x8xf32>, tensor<1xi64>) -> tensor<1x1x4x1xf32>
    %none = onnx.Less %count, %one : (tensor<1x1x4x1xf32>, tensor<f32>) -> tensor<1x1x4x1xi1>
    %s = onnx.MatMul %q, %kt : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
    %a = onnx.Add %s, %mask : (tensor<1x2x4x8xf32>, tensor<1x1x4x8xf32>) -> tensor<1x2x4x8xf32>
    %p = onnx.Softmax %a {axis = -1 : i64} : (tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
    %o = onnx.MatMul %p, %v : (tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32>
    %r = onnx.Where %none, %zero, %o : (tensor<1x1x4x1xi1>, tensor<f32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
    return %r : tensor<1x2x4x4xf32>
  }
}
