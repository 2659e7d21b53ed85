// A Mixtral-style MoE block as the importers produce it: the router matmul,
// then one fused moe.layer (softmax top-2, renormalised, SwiGLU experts).
// 8 tokens, hidden 16, 4 experts of width 32. @main fills the inputs with a
// deterministic pattern, runs the block and prints its output.

func.func @mixtral_block(%x: tensor<8x16xf32>, %router: tensor<16x4xf32>,
                         %w1: tensor<4x32x16xf32>, %w3: tensor<4x32x16xf32>,
                         %w2: tensor<4x16x32xf32>) -> tensor<8x16xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<8x4xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<8x4xf32>) -> tensor<8x4xf32>
  %logits = linalg.matmul ins(%x, %router : tensor<8x16xf32>, tensor<16x4xf32>)
                          outs(%init : tensor<8x4xf32>) -> tensor<8x4xf32>
  %y = moe.layer softmax topk k 2 %x, %logits fc1(%w1) fc3(%w3) fc2(%w2)
      activation <swiglu> {normalize}
      : (tensor<8x16xf32>, tensor<8x4xf32>, tensor<4x32x16xf32>,
         tensor<4x32x16xf32>, tensor<4x16x32xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// sin(seed * (linear index + 1)) * scale: varied, reproducible values.
func.func @pattern2(%seed: f32, %scale: f32) -> tensor<8x16xf32> {
  %e = tensor.empty() : tensor<8x16xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]} outs(%e : tensor<8x16xf32>) {
  ^bb0(%out: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %c16 = arith.constant 16 : index
    %c1 = arith.constant 1 : index
    %row = arith.muli %i, %c16 : index
    %lin0 = arith.addi %row, %j : index
    %lin = arith.addi %lin0, %c1 : index
    %n = arith.index_cast %lin : index to i32
    %f = arith.sitofp %n : i32 to f32
    %a = arith.mulf %f, %seed : f32
    %s = math.sin %a : f32
    %v = arith.mulf %s, %scale : f32
    linalg.yield %v : f32
  } -> tensor<8x16xf32>
  return %r : tensor<8x16xf32>
}

func.func @pattern3(%seed: f32, %scale: f32, %init: tensor<4x?x?xf32>) -> tensor<4x?x?xf32> {
  %c1i = arith.constant 1 : index
  %c2i = arith.constant 2 : index
  %d1 = tensor.dim %init, %c1i : tensor<4x?x?xf32>
  %d2 = tensor.dim %init, %c2i : tensor<4x?x?xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(e, i, j) -> (e, i, j)>],
                       iterator_types = ["parallel", "parallel", "parallel"]} outs(%init : tensor<4x?x?xf32>) {
  ^bb0(%out: f32):
    %e = linalg.index 0 : index
    %i = linalg.index 1 : index
    %j = linalg.index 2 : index
    %c1 = arith.constant 1 : index
    %plane = arith.muli %e, %d1 : index
    %rowBase = arith.addi %plane, %i : index
    %row = arith.muli %rowBase, %d2 : index
    %lin0 = arith.addi %row, %j : index
    %lin = arith.addi %lin0, %c1 : index
    %n = arith.index_cast %lin : index to i32
    %f = arith.sitofp %n : i32 to f32
    %a = arith.mulf %f, %seed : f32
    %s = math.sin %a : f32
    %v = arith.mulf %s, %scale : f32
    linalg.yield %v : f32
  } -> tensor<4x?x?xf32>
  return %r : tensor<4x?x?xf32>
}

func.func private @printMemrefF32(tensor<*xf32>)

func.func @main() {
  %one = arith.constant 1.0 : f32
  %small = arith.constant 0.25 : f32
  %x = call @pattern2(%one, %one) : (f32, f32) -> tensor<8x16xf32>
  %xr = call @pattern2(%small, %one) : (f32, f32) -> tensor<8x16xf32>
  %router = tensor.collapse_shape %xr [[0, 1]] : tensor<8x16xf32> into tensor<128xf32>
  %router2 = tensor.extract_slice %router[0] [64] [1] : tensor<128xf32> to tensor<64xf32>
  %r = tensor.expand_shape %router2 [[0, 1]] output_shape [16, 4] : tensor<64xf32> into tensor<16x4xf32>

  %s1 = arith.constant 0.7 : f32
  %s3 = arith.constant 1.3 : f32
  %s2 = arith.constant 2.9 : f32
  %scale = arith.constant 0.2 : f32
  %e1 = tensor.empty() : tensor<4x32x16xf32>
  %e1d = tensor.cast %e1 : tensor<4x32x16xf32> to tensor<4x?x?xf32>
  %w1d = call @pattern3(%s1, %scale, %e1d) : (f32, f32, tensor<4x?x?xf32>) -> tensor<4x?x?xf32>
  %w3d = call @pattern3(%s3, %scale, %e1d) : (f32, f32, tensor<4x?x?xf32>) -> tensor<4x?x?xf32>
  %e2 = tensor.empty() : tensor<4x16x32xf32>
  %e2d = tensor.cast %e2 : tensor<4x16x32xf32> to tensor<4x?x?xf32>
  %w2d = call @pattern3(%s2, %scale, %e2d) : (f32, f32, tensor<4x?x?xf32>) -> tensor<4x?x?xf32>
  %w1 = tensor.cast %w1d : tensor<4x?x?xf32> to tensor<4x32x16xf32>
  %w3 = tensor.cast %w3d : tensor<4x?x?xf32> to tensor<4x32x16xf32>
  %w2 = tensor.cast %w2d : tensor<4x?x?xf32> to tensor<4x16x32xf32>

  %y = call @mixtral_block(%x, %r, %w1, %w3, %w2)
      : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<4x32x16xf32>, tensor<4x32x16xf32>, tensor<4x16x32xf32>) -> tensor<8x16xf32>
  %u = tensor.cast %y : tensor<8x16xf32> to tensor<*xf32>
  call @printMemrefF32(%u) : (tensor<*xf32>) -> ()
  return
}
