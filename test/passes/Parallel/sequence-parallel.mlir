// The dense layers around an MoE block on each rank's tokens: a decoder
// layer (embedding, norm, attention, residual, MoE block, LM head) of 16
// tokens on 2 and on dp x ep = 4 token ranks. Attention gathers its keys
// and values, the program's outputs are gathered, and nothing else moves.
// RUN: moe-opt %s --moe-set-plan="ep=2" --moe-partition --moe-sequence-parallel --canonicalize | FileCheck %s --check-prefix=EP2
// RUN: moe-opt %s --moe-set-plan="dp=2 ep=2" --moe-partition --moe-sequence-parallel --canonicalize | FileCheck %s --check-prefix=DPEP
// Without the pass every rank runs the layer whole.
// RUN: moe-opt %s --moe-set-plan="ep=2" --moe-partition --canonicalize | FileCheck %s --check-prefix=WHOLE
// Zigzag order: rank r takes chunks r and 3-r of 4.
// RUN: moe-opt %s --moe-set-plan="ep=2" --moe-partition --moe-sequence-parallel=zigzag=1 --canonicalize | FileCheck %s --check-prefix=ZIGZAG
// A capacity keeps tokens by their order: no zigzag.
// RUN: moe-opt %s --moe-set-plan="ep=2" --moe-partition --moe-sequence-parallel=zigzag=1 --canonicalize | FileCheck %s --check-prefix=KEEP
// One rank: nothing to do.
// RUN: moe-opt %s --moe-set-plan --moe-partition --moe-sequence-parallel | FileCheck %s --check-prefix=ONE

func.func @layer(%ids: tensor<1x16xi64>, %mask: tensor<1x1x16x16xf32>,
                 %w1: tensor<4x16x8xf32>, %w3: tensor<4x16x8xf32>,
                 %w2: tensor<4x8x16xf32>)
    -> (tensor<1x16x32xf32>, tensor<1x2x16x4xf32>, tensor<1x1x8xf32>) {
  %emb = arith.constant dense<0.5> : tensor<32x8xf32>
  %wq = arith.constant dense<0.25> : tensor<8x8xf32>
  %wk = arith.constant dense<0.125> : tensor<8x8xf32>
  %wv = arith.constant dense<0.0625> : tensor<8x8xf32>
  %wo = arith.constant dense<1.0> : tensor<8x8xf32>
  %wr = arith.constant dense<0.75> : tensor<4x8xf32>
  %lm = arith.constant dense<2.0> : tensor<8x32xf32>
  %norm = arith.constant dense<1.5> : tensor<8xf32>
  %two = arith.constant dense<2.0> : tensor<f32>
  %last = arith.constant dense<-1> : tensor<1xi64>
  %tokens = arith.constant dense<1> : tensor<1xi64>
  %heads = arith.constant dense<[1, 16, 2, 4]> : tensor<4xi64>
  %flat = arith.constant dense<[1, 16, 8]> : tensor<3xi64>
  %rows = arith.constant dense<[16, 8]> : tensor<2xi64>
  %h = onnx.Gather %emb, %ids {axis = 0 : i64}
      : (tensor<32x8xf32>, tensor<1x16xi64>) -> tensor<1x16x8xf32>
  // RMS norm over the hidden dimension.
  %sq = onnx.Pow %h, %two : (tensor<1x16x8xf32>, tensor<f32>) -> tensor<1x16x8xf32>
  %ms = onnx.ReduceMean %sq, %last {keepdims = 1 : i64}
      : (tensor<1x16x8xf32>, tensor<1xi64>) -> tensor<1x16x1xf32>
  %rs = onnx.Sqrt %ms : (tensor<1x16x1xf32>) -> tensor<1x16x1xf32>
  %hn = onnx.Div %h, %rs : (tensor<1x16x8xf32>, tensor<1x16x1xf32>) -> tensor<1x16x8xf32>
  %x = onnx.Mul %norm, %hn : (tensor<8xf32>, tensor<1x16x8xf32>) -> tensor<1x16x8xf32>
  // Attention, 2 heads of 4.
  %q0 = onnx.MatMul %x, %wq : (tensor<1x16x8xf32>, tensor<8x8xf32>) -> tensor<1x16x8xf32>
  %k0 = onnx.MatMul %x, %wk : (tensor<1x16x8xf32>, tensor<8x8xf32>) -> tensor<1x16x8xf32>
  %v0 = onnx.MatMul %x, %wv : (tensor<1x16x8xf32>, tensor<8x8xf32>) -> tensor<1x16x8xf32>
  %q1 = onnx.Reshape %q0, %heads : (tensor<1x16x8xf32>, tensor<4xi64>) -> tensor<1x16x2x4xf32>
  %k1 = onnx.Reshape %k0, %heads : (tensor<1x16x8xf32>, tensor<4xi64>) -> tensor<1x16x2x4xf32>
  %v1 = onnx.Reshape %v0, %heads : (tensor<1x16x8xf32>, tensor<4xi64>) -> tensor<1x16x2x4xf32>
  %q = onnx.Transpose %q1 {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x16x2x4xf32>) -> tensor<1x2x16x4xf32>
  %k = onnx.Transpose %k1 {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x16x2x4xf32>) -> tensor<1x2x16x4xf32>
  %v = onnx.Transpose %v1 {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x16x2x4xf32>) -> tensor<1x2x16x4xf32>
  %kt = onnx.Transpose %k {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x2x16x4xf32>) -> tensor<1x2x4x16xf32>
  %s = onnx.MatMul %q, %kt : (tensor<1x2x16x4xf32>, tensor<1x2x4x16xf32>) -> tensor<1x2x16x16xf32>
  %sm = onnx.Add %s, %mask : (tensor<1x2x16x16xf32>, tensor<1x1x16x16xf32>) -> tensor<1x2x16x16xf32>
  %p = onnx.Softmax %sm {axis = -1 : i64} : (tensor<1x2x16x16xf32>) -> tensor<1x2x16x16xf32>
  %o = onnx.MatMul %p, %v : (tensor<1x2x16x16xf32>, tensor<1x2x16x4xf32>) -> tensor<1x2x16x4xf32>
  %o1 = onnx.Transpose %o {perm = array<i64: 0, 2, 1, 3>} : (tensor<1x2x16x4xf32>) -> tensor<1x16x2x4xf32>
  %o2 = onnx.Reshape %o1, %flat : (tensor<1x16x2x4xf32>, tensor<3xi64>) -> tensor<1x16x8xf32>
  %a = onnx.MatMul %o2, %wo : (tensor<1x16x8xf32>, tensor<8x8xf32>) -> tensor<1x16x8xf32>
  %r = onnx.Add %h, %a : (tensor<1x16x8xf32>, tensor<1x16x8xf32>) -> tensor<1x16x8xf32>
  // The MoE block on the residual's rows.
  %t = onnx.Reshape %r, %rows : (tensor<1x16x8xf32>, tensor<2xi64>) -> tensor<16x8xf32>
  %logits = onnx.Gemm %t, %wr {transB = 1 : i64} : (tensor<16x8xf32>, tensor<4x8xf32>) -> tensor<16x4xf32>
  %y = moe.layer softmax topk k 2 %t, %logits fc1(%w1) fc3(%w3) fc2(%w2)
      activation <swiglu> {normalize}
      : (tensor<16x8xf32>, tensor<16x4xf32>, tensor<4x16x8xf32>,
         tensor<4x16x8xf32>, tensor<4x8x16xf32>) -> tensor<16x8xf32>
  %y3 = onnx.Reshape %y, %flat : (tensor<16x8xf32>, tensor<3xi64>) -> tensor<1x16x8xf32>
  %out = onnx.Add %r, %y3 : (tensor<1x16x8xf32>, tensor<1x16x8xf32>) -> tensor<1x16x8xf32>
  %vocab = onnx.MatMul %out, %lm : (tensor<1x16x8xf32>, tensor<8x32xf32>) -> tensor<1x16x32xf32>
  // A mean over the tokens mixes them: it takes the gathered value.
  %pooled = onnx.ReduceMean %out, %tokens {keepdims = 1 : i64}
      : (tensor<1x16x8xf32>, tensor<1xi64>) -> tensor<1x1x8xf32>
  return %vocab, %k, %pooled : tensor<1x16x32xf32>, tensor<1x2x16x4xf32>, tensor<1x1x8xf32>
}

// EP2-LABEL: func.func @layer
// Each rank looks up its 8 tokens, and takes its 8 rows of the mask.
// EP2-DAG: %[[IDS:.*]] = shard.all_slice %arg0 on @world grid_axes = [3] slice_axis = 1 : tensor<1x16xi64> -> tensor<1x8xi64>
// EP2-DAG: %[[MASK:.*]] = shard.all_slice %arg1 on @world grid_axes = [3] slice_axis = 2 : tensor<1x1x16x16xf32> -> tensor<1x1x8x16xf32>
// EP2: %[[H:.*]] = onnx.Gather %{{.*}}, %[[IDS]] {{.*}} -> tensor<1x8x8xf32>
// EP2: onnx.ReduceMean {{.*}} : (tensor<1x8x8xf32>, tensor<1xi64>) -> tensor<1x8x1xf32>
// EP2: %[[Q:.*]] = onnx.MatMul %[[X:.*]], %{{.*}} : (tensor<1x8x8xf32>, tensor<8x8xf32>) -> tensor<1x8x8xf32>
// EP2: %[[K:.*]] = onnx.MatMul %[[X]], %{{.*}} : (tensor<1x8x8xf32>, tensor<8x8xf32>) -> tensor<1x8x8xf32>
// EP2: %[[V:.*]] = onnx.MatMul %[[X]], %{{.*}} : (tensor<1x8x8xf32>, tensor<8x8xf32>) -> tensor<1x8x8xf32>
// Keys gathered once, right after their projection; the KV cache output
// reuses them.
// EP2: %[[KALL:.*]] = shard.all_gather %[[K]] on @world grid_axes = [3] gather_axis = 1 : tensor<1x8x8xf32> -> tensor<1x16x8xf32>
// EP2: onnx.Reshape %[[KALL]]
// EP2: %[[KW:.*]] = onnx.Transpose {{.*}} -> tensor<1x2x16x4xf32>
// EP2: %[[KT:.*]] = onnx.Transpose %[[KW]] {{.*}} -> tensor<1x2x4x16xf32>
// EP2: %[[S:.*]] = onnx.MatMul %{{.*}}, %[[KT]] : (tensor<1x2x8x4xf32>, tensor<1x2x4x16xf32>) -> tensor<1x2x8x16xf32>
// EP2: onnx.Add %[[S]], %[[MASK]] : (tensor<1x2x8x16xf32>, tensor<1x1x8x16xf32>) -> tensor<1x2x8x16xf32>
// EP2: %[[P:.*]] = onnx.Softmax {{.*}} : (tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32>
// Values gathered right after their projection.
// EP2: %[[VALL:.*]] = shard.all_gather %[[V]] on @world grid_axes = [3] gather_axis = 1 : tensor<1x8x8xf32> -> tensor<1x16x8xf32>
// EP2: onnx.MatMul %[[P]], %{{.*}} : (tensor<1x2x8x16xf32>, tensor<1x2x16x4xf32>) -> tensor<1x2x8x4xf32>
// EP2: %[[A:.*]] = onnx.MatMul {{.*}} : (tensor<1x8x8xf32>, tensor<8x8xf32>) -> tensor<1x8x8xf32>
// EP2: %[[R:.*]] = onnx.Add %[[H]], %[[A]] : (tensor<1x8x8xf32>, tensor<1x8x8xf32>) -> tensor<1x8x8xf32>
// The block's rows are this rank's already: no slice of them, nor of the router's logits.
// EP2: %[[T:.*]] = onnx.Reshape %[[R]], %{{.*}} : (tensor<1x8x8xf32>, tensor<2xi64>) -> tensor<8x8xf32>
// EP2: %[[L:.*]] = onnx.Gemm %[[T]], %{{.*}} : (tensor<8x8xf32>, tensor<4x8xf32>) -> tensor<8x4xf32>
// EP2: moe.router softmax topk %[[L]]
// EP2: moe.dispatch %[[T]],
// EP2: %[[Y:.*]] = moe.combine
// EP2-NOT: shard.all_gather %[[Y]]
// EP2: %[[Y3:.*]] = onnx.Reshape %[[Y]], %{{.*}} : (tensor<8x8xf32>, tensor<3xi64>) -> tensor<1x8x8xf32>
// EP2: %[[OUT:.*]] = onnx.Add %[[R]], %[[Y3]] : (tensor<1x8x8xf32>, tensor<1x8x8xf32>) -> tensor<1x8x8xf32>
// EP2: %[[VOC:.*]] = onnx.MatMul %[[OUT]], %{{.*}} : (tensor<1x8x8xf32>, tensor<8x32xf32>) -> tensor<1x8x32xf32>
// EP2: %[[OALL:.*]] = shard.all_gather %[[OUT]] on @world grid_axes = [3] gather_axis = 1 : tensor<1x8x8xf32> -> tensor<1x16x8xf32>
// EP2: %[[POOL:.*]] = onnx.ReduceMean %[[OALL]], %{{.*}} : (tensor<1x16x8xf32>, tensor<1xi64>) -> tensor<1x1x8xf32>
// EP2: %[[VALL2:.*]] = shard.all_gather %[[VOC]] on @world grid_axes = [3] gather_axis = 1 : tensor<1x8x32xf32> -> tensor<1x16x32xf32>
// EP2: return %[[VALL2]], %[[KW]], %[[POOL]]

// Four token ranks over dp and ep: blocks of 4 tokens.
// DPEP-LABEL: func.func @layer
// DPEP: shard.all_slice %arg0 on @world grid_axes = [1, 3] slice_axis = 1 : tensor<1x16xi64> -> tensor<1x4xi64>
// DPEP: onnx.MatMul {{.*}} : (tensor<1x2x4x4xf32>, tensor<1x2x4x16xf32>) -> tensor<1x2x4x16xf32>
// DPEP: onnx.Gemm {{.*}} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x4xf32>
// DPEP: shard.all_gather {{.*}} on @world grid_axes = [1, 3] gather_axis = 1 : tensor<1x4x32xf32> -> tensor<1x16x32xf32>

// Chunks 0, 3, 1, 2 of 4 tokens each, so that rank 0 holds tokens 0-3 and
// 12-15 and rank 1 tokens 4-11; gathered values are put back in order
// (chunks 0, 2, 3, 1 of what the ranks hold).
// ZIGZAG-LABEL: func.func @layer
// ZIGZAG-DAG: %[[C0:.*]] = arith.constant dense<0> : tensor<1xi64>
// ZIGZAG-DAG: %[[C4:.*]] = arith.constant dense<4> : tensor<1xi64>
// ZIGZAG-DAG: %[[C8:.*]] = arith.constant dense<8> : tensor<1xi64>
// ZIGZAG-DAG: %[[C12:.*]] = arith.constant dense<12> : tensor<1xi64>
// ZIGZAG-DAG: %[[C16:.*]] = arith.constant dense<16> : tensor<1xi64>
// ZIGZAG: %[[I0:.*]] = onnx.Slice %arg0, %[[C0]], %[[C4]], %{{.*}} : ({{.*}}) -> tensor<1x4xi64>
// ZIGZAG: %[[I3:.*]] = onnx.Slice %arg0, %[[C12]], %[[C16]], %{{.*}} : ({{.*}}) -> tensor<1x4xi64>
// ZIGZAG: %[[I1:.*]] = onnx.Slice %arg0, %[[C4]], %[[C8]], %{{.*}} : ({{.*}}) -> tensor<1x4xi64>
// ZIGZAG: %[[I2:.*]] = onnx.Slice %arg0, %[[C8]], %[[C12]], %{{.*}} : ({{.*}}) -> tensor<1x4xi64>
// ZIGZAG: %[[IDS:.*]] = onnx.Concat %[[I0]], %[[I3]], %[[I1]], %[[I2]] {axis = 1 : i64}
// ZIGZAG: %[[MINE:.*]] = shard.all_slice %[[IDS]] on @world grid_axes = [3] slice_axis = 1 : tensor<1x16xi64> -> tensor<1x8xi64>
// ZIGZAG: onnx.Gather %{{.*}}, %[[MINE]]
// ZIGZAG: %[[K:.*]] = shard.all_gather %{{.*}} on @world grid_axes = [3] gather_axis = 1 : tensor<1x8x8xf32> -> tensor<1x16x8xf32>
// ZIGZAG: %[[K0:.*]] = onnx.Slice %[[K]], %[[C0]], %[[C4]], %{{.*}} : ({{.*}}) -> tensor<1x4x8xf32>
// ZIGZAG: %[[K1:.*]] = onnx.Slice %[[K]], %[[C8]], %[[C12]], %{{.*}} : ({{.*}}) -> tensor<1x4x8xf32>
// ZIGZAG: %[[K2:.*]] = onnx.Slice %[[K]], %[[C12]], %[[C16]], %{{.*}} : ({{.*}}) -> tensor<1x4x8xf32>
// ZIGZAG: %[[K3:.*]] = onnx.Slice %[[K]], %[[C4]], %[[C8]], %{{.*}} : ({{.*}}) -> tensor<1x4x8xf32>
// ZIGZAG: onnx.Concat %[[K0]], %[[K1]], %[[K2]], %[[K3]] {axis = 1 : i64}
// The experts are sliced in EP's order.
// ZIGZAG: shard.all_slice %arg2 on @world grid_axes = [3] slice_axis = 0 : tensor<4x16x8xf32> -> tensor<2x16x8xf32>
// ZIGZAG: %[[LOGITS:.*]] = shard.all_gather %{{.*}} on @world grid_axes = [3] gather_axis = 1 : tensor<1x8x32xf32> -> tensor<1x16x32xf32>
// ZIGZAG: onnx.Concat {{.*}} -> tensor<1x16x32xf32>

// WHOLE-LABEL: func.func @layer
// WHOLE: onnx.MatMul {{.*}} : (tensor<1x2x16x4xf32>, tensor<1x2x4x16xf32>) -> tensor<1x2x16x16xf32>
// WHOLE: shard.all_slice {{.*}} slice_axis = 0 {moe.tokens} : tensor<16x8xf32> -> tensor<8x8xf32>
// WHOLE: onnx.MatMul {{.*}} : (tensor<1x16x8xf32>, tensor<8x32xf32>) -> tensor<1x16x32xf32>

// ONE-NOT: shard.
// ONE: onnx.MatMul {{.*}} : (tensor<1x2x16x4xf32>, tensor<1x2x4x16xf32>) -> tensor<1x2x16x16xf32>

// KEEP-LABEL: func.func @capacity
// KEEP-NOT: onnx.Concat
// KEEP: shard.all_slice %arg0 on @world grid_axes = [3] slice_axis = 0 : tensor<16x8xf32> -> tensor<8x8xf32>
// KEEP-NOT: onnx.Concat
// KEEP: return
func.func @capacity(%x: tensor<16x8xf32>, %l: tensor<16x4xf32>,
                    %w1: tensor<4x16x8xf32>, %w2: tensor<4x8x16xf32>)
    -> tensor<16x8xf32> {
  %y = moe.layer softmax topk k 2 %x, %l capacity 8 drop position
      fc1(%w1) fc2(%w2) activation <relu>
      : (tensor<16x8xf32>, tensor<16x4xf32>, tensor<4x16x8xf32>,
         tensor<4x8x16xf32>) -> tensor<16x8xf32>
  %r = onnx.Add %x, %y : (tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
  return %r : tensor<16x8xf32>
}

// A mask every rank could compute whole from constants: each computes the
// rows of its block only, from its rows of the query indices.
// EP2-LABEL: func.func @computed_mask
// EP2: %[[ROWS:.*]] = shard.all_slice %{{.*}} on @world grid_axes = [3] slice_axis = 0 : tensor<16x1xi64> -> tensor<8x1xi64>
// EP2: %[[ALLOWED:.*]] = onnx.LessOrEqual %{{.*}}, %[[ROWS]] : (tensor<1x16xi64>, tensor<8x1xi64>) -> tensor<8x16xi1>
// EP2: %[[MASK:.*]] = onnx.Where %[[ALLOWED]], {{.*}} -> tensor<8x16xf32>
// EP2: onnx.Add %{{.*}}, %[[MASK]] : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
func.func @computed_mask(%x: tensor<16x8xf32>, %l: tensor<16x4xf32>,
                         %w1: tensor<4x16x8xf32>, %w2: tensor<4x8x16xf32>,
                         %kt: tensor<8x16xf32>) -> tensor<16x16xf32> {
  %kidx = arith.constant dense<[[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]]> : tensor<1x16xi64>
  %qidx = arith.constant dense<[[0], [1], [2], [3], [4], [5], [6], [7], [8], [9], [10], [11], [12], [13], [14], [15]]> : tensor<16x1xi64>
  %zero = arith.constant dense<0.0> : tensor<f32>
  %min = arith.constant dense<-3.40282347E+38> : tensor<f32>
  %y = moe.layer softmax topk k 2 %x, %l fc1(%w1) fc2(%w2) activation <relu>
      : (tensor<16x8xf32>, tensor<16x4xf32>, tensor<4x16x8xf32>,
         tensor<4x8x16xf32>) -> tensor<16x8xf32>
  %s = onnx.MatMul %y, %kt : (tensor<16x8xf32>, tensor<8x16xf32>) -> tensor<16x16xf32>
  %allowed = onnx.LessOrEqual %kidx, %qidx : (tensor<1x16xi64>, tensor<16x1xi64>) -> tensor<16x16xi1>
  %mask = onnx.Where %allowed, %zero, %min : (tensor<16x16xi1>, tensor<f32>, tensor<f32>) -> tensor<16x16xf32>
  %a = onnx.Add %s, %mask : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>
  return %a : tensor<16x16xf32>
}
