func.func @main(%rows: tensor<40x4xf32> {onnx.name = "rows"}, %counts: tensor<2xi32> {onnx.name = "counts"}) -> (tensor<40x3xf32> {onnx.name = "y"}) {
  %w1 = arith.constant dense<0.5> : tensor<2x5x4xf32>
  %w2 = arith.constant dense<0.25> : tensor<2x3x5xf32>
  %y = moe.experts %rows, %counts fc1(%w1) fc2(%w2) activation <relu>
      : (tensor<40x4xf32>, tensor<2xi32>, tensor<2x5x4xf32>, tensor<2x3x5xf32>) -> tensor<40x3xf32>
  return %y : tensor<40x3xf32>
}
