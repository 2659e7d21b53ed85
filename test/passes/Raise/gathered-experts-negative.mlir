// Lookalikes of the batched_mm form that must not be raised: each pair must
// be token p / k's pick p % k, run through the expert the router chose.
// RUN: moe-opt %s --moe-raise --split-input-file | FileCheck %s
// RUN: moe-opt %s --moe-raise=explain --split-input-file 2>&1 >/dev/null | FileCheck %s --check-prefix=WHY

// The up projection's weights are gathered by other ids than the router's
// (2 - id).
// CHECK-LABEL: func.func @main_graph
// CHECK-NOT: moe.layer
// CHECK: onnx.TopK
// CHECK: onnx.GatherND
// WHY: remark: not raised: not two expert weights gathered by the router's ids
module {
  func.func @main_graph(%arg0: tensor<3x2xf32>) -> tensor<3x2xf32> {
    %router = arith.constant dense<[[0.1, 0.43], [0.21, 0.09], [-0.15, 0.29]]> : tensor<3x2xf32>
    %w1 = arith.constant dense<[[[-0.12, 0.78], [0.93, -0.23], [0.58, 0.06], [0.14, 0.85]], [[-0.86, -0.83], [-0.96, 0.67], [0.56, 0.74], [0.96, 0.6]], [[-0.08, 0.56], [-0.76, 0.28], [-0.71, 0.89], [0.04, -0.17]]]> : tensor<3x4x2xf32>
    %w2 = arith.constant dense<[[[-0.47, 0.55], [-0.09, 0.14]], [[-0.96, 0.24], [0.22, 0.23]], [[0.89, 0.36], [-0.28, -0.13]]]> : tensor<3x2x2xf32>
    %k = arith.constant dense<2> : tensor<1xi64>
    %m1 = arith.constant dense<-1> : tensor<1xi64>
    %one = arith.constant dense<1> : tensor<1xi64>
    %rep = arith.constant dense<[1, 2, 1]> : tensor<3xi64>
    %flat = arith.constant dense<[-1, 2]> : tensor<2xi64>
    %halves = arith.constant dense<2> : tensor<2xi64>
    %tkh = arith.constant dense<[3, 2, 2]> : tensor<3xi64>
    %kth = arith.constant dense<[2, 3, 2]> : tensor<3xi64>
    %0 = onnx.Gemm %arg0, %router {alpha = 1.000000e+00 : f32, beta = 1.000000e+00 : f32, transA = 0 : i64, transB = 1 : i64} : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x3xf32>
    %1 = onnx.Softmax %0 {axis = -1 : i64} : (tensor<3x3xf32>) -> tensor<3x3xf32>
    %2:2 = onnx.TopK %1, %k {axis = -1 : i64, largest = 1 : i64, sorted = 1 : i64} : (tensor<3x3xf32>, tensor<1xi64>) -> (tensor<3x2xf32>, tensor<3x2xi64>)
    %3 = onnx.ReduceSum %2#0, %m1 {keepdims = 1 : i64} : (tensor<3x2xf32>, tensor<1xi64>) -> tensor<3x1xf32>
    %4 = onnx.Div %2#0, %3 : (tensor<3x2xf32>, tensor<3x1xf32>) -> tensor<3x2xf32>
    %5 = onnx.Unsqueeze %arg0, %one : (tensor<3x2xf32>, tensor<1xi64>) -> tensor<3x1x2xf32>
    %6 = onnx.Expand %5, %rep : (tensor<3x1x2xf32>, tensor<3xi64>) -> tensor<3x2x2xf32>
    %7 = onnx.Reshape %6, %flat : (tensor<3x2x2xf32>, tensor<2xi64>) -> tensor<6x2xf32>
    %8 = onnx.Reshape %2#1, %m1 : (tensor<3x2xi64>, tensor<1xi64>) -> tensor<6xi64>
    %9 = onnx.Unsqueeze %8, %m1 : (tensor<6xi64>, tensor<1xi64>) -> tensor<6x1xi64>
    %two = arith.constant dense<2> : tensor<i64>
    %other = onnx.Sub %two, %9 : (tensor<i64>, tensor<6x1xi64>) -> tensor<6x1xi64>
    %10 = onnx.GatherND %w1, %other {batch_dims = 0 : i64} : (tensor<3x4x2xf32>, tensor<6x1xi64>) -> tensor<6x4x2xf32>
    %11 = onnx.Unsqueeze %7, %m1 : (tensor<6x2xf32>, tensor<1xi64>) -> tensor<6x2x1xf32>
    %12 = onnx.MatMul %10, %11 : (tensor<6x4x2xf32>, tensor<6x2x1xf32>) -> tensor<6x4x1xf32>
    %13 = onnx.Squeeze %12, %m1 : (tensor<6x4x1xf32>, tensor<1xi64>) -> tensor<6x4xf32>
    %14:2 = onnx.Split %13, %halves {axis = 1 : i64} : (tensor<6x4xf32>, tensor<2xi64>) -> (tensor<6x2xf32>, tensor<6x2xf32>)
    %15 = onnx.Sigmoid %14#0 : (tensor<6x2xf32>) -> tensor<6x2xf32>
    %16 = onnx.Mul %14#0, %15 : (tensor<6x2xf32>, tensor<6x2xf32>) -> tensor<6x2xf32>
    %17 = onnx.Mul %16, %14#1 : (tensor<6x2xf32>, tensor<6x2xf32>) -> tensor<6x2xf32>
    %18 = onnx.GatherND %w2, %9 {batch_dims = 0 : i64} : (tensor<3x2x2xf32>, tensor<6x1xi64>) -> tensor<6x2x2xf32>
    %19 = onnx.Unsqueeze %17, %m1 : (tensor<6x2xf32>, tensor<1xi64>) -> tensor<6x2x1xf32>
    %20 = onnx.MatMul %18, %19 : (tensor<6x2x2xf32>, tensor<6x2x1xf32>) -> tensor<6x2x1xf32>
    %21 = onnx.Squeeze %20, %m1 : (tensor<6x2x1xf32>, tensor<1xi64>) -> tensor<6x2xf32>
    %22 = onnx.Reshape %4, %m1 : (tensor<3x2xf32>, tensor<1xi64>) -> tensor<6xf32>
    %23 = onnx.Unsqueeze %22, %m1 : (tensor<6xf32>, tensor<1xi64>) -> tensor<6x1xf32>
    %24 = onnx.Mul %21, %23 : (tensor<6x2xf32>, tensor<6x1xf32>) -> tensor<6x2xf32>
    %25 = onnx.Reshape %24, %tkh : (tensor<6x2xf32>, tensor<3xi64>) -> tensor<3x2x2xf32>
    %26 = onnx.ReduceSum %25, %one {keepdims = 0 : i64} : (tensor<3x2x2xf32>, tensor<1xi64>) -> tensor<3x2xf32>
    return %26 : tensor<3x2xf32>
  }
}

// -----

// x repeated whole (x.repeat(k, 1)), not each token in place: pair p reads
// token p % T.
// CHECK-LABEL: func.func @main_graph
// CHECK-NOT: moe.layer
// CHECK: onnx.TopK
// WHY: remark: not raised: the rows are not x with each token repeated k times
module {
  func.func @main_graph(%arg0: tensor<3x2xf32>) -> tensor<3x2xf32> {
    %router = arith.constant dense<[[0.1, 0.43], [0.21, 0.09], [-0.15, 0.29]]> : tensor<3x2xf32>
    %w1 = arith.constant dense<[[[-0.12, 0.78], [0.93, -0.23], [0.58, 0.06], [0.14, 0.85]], [[-0.86, -0.83], [-0.96, 0.67], [0.56, 0.74], [0.96, 0.6]], [[-0.08, 0.56], [-0.76, 0.28], [-0.71, 0.89], [0.04, -0.17]]]> : tensor<3x4x2xf32>
    %w2 = arith.constant dense<[[[-0.47, 0.55], [-0.09, 0.14]], [[-0.96, 0.24], [0.22, 0.23]], [[0.89, 0.36], [-0.28, -0.13]]]> : tensor<3x2x2xf32>
    %k = arith.constant dense<2> : tensor<1xi64>
    %m1 = arith.constant dense<-1> : tensor<1xi64>
    %one = arith.constant dense<1> : tensor<1xi64>
    %rep = arith.constant dense<[1, 2, 1]> : tensor<3xi64>
    %flat = arith.constant dense<[-1, 2]> : tensor<2xi64>
    %halves = arith.constant dense<2> : tensor<2xi64>
    %tkh = arith.constant dense<[3, 2, 2]> : tensor<3xi64>
    %kth = arith.constant dense<[2, 3, 2]> : tensor<3xi64>
    %0 = onnx.Gemm %arg0, %router {alpha = 1.000000e+00 : f32, beta = 1.000000e+00 : f32, transA = 0 : i64, transB = 1 : i64} : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x3xf32>
    %1 = onnx.Softmax %0 {axis = -1 : i64} : (tensor<3x3xf32>) -> tensor<3x3xf32>
    %2:2 = onnx.TopK %1, %k {axis = -1 : i64, largest = 1 : i64, sorted = 1 : i64} : (tensor<3x3xf32>, tensor<1xi64>) -> (tensor<3x2xf32>, tensor<3x2xi64>)
    %3 = onnx.ReduceSum %2#0, %m1 {keepdims = 1 : i64} : (tensor<3x2xf32>, tensor<1xi64>) -> tensor<3x1xf32>
    %4 = onnx.Div %2#0, %3 : (tensor<3x2xf32>, tensor<3x1xf32>) -> tensor<3x2xf32>
    %tiles = arith.constant dense<[2, 1]> : tensor<2xi64>
    %7 = onnx.Tile %arg0, %tiles : (tensor<3x2xf32>, tensor<2xi64>) -> tensor<6x2xf32>
    %8 = onnx.Reshape %2#1, %m1 : (tensor<3x2xi64>, tensor<1xi64>) -> tensor<6xi64>
    %9 = onnx.Unsqueeze %8, %m1 : (tensor<6xi64>, tensor<1xi64>) -> tensor<6x1xi64>
    %10 = onnx.GatherND %w1, %9 {batch_dims = 0 : i64} : (tensor<3x4x2xf32>, tensor<6x1xi64>) -> tensor<6x4x2xf32>
    %11 = onnx.Unsqueeze %7, %m1 : (tensor<6x2xf32>, tensor<1xi64>) -> tensor<6x2x1xf32>
    %12 = onnx.MatMul %10, %11 : (tensor<6x4x2xf32>, tensor<6x2x1xf32>) -> tensor<6x4x1xf32>
    %13 = onnx.Squeeze %12, %m1 : (tensor<6x4x1xf32>, tensor<1xi64>) -> tensor<6x4xf32>
    %14:2 = onnx.Split %13, %halves {axis = 1 : i64} : (tensor<6x4xf32>, tensor<2xi64>) -> (tensor<6x2xf32>, tensor<6x2xf32>)
    %15 = onnx.Sigmoid %14#0 : (tensor<6x2xf32>) -> tensor<6x2xf32>
    %16 = onnx.Mul %14#0, %15 : (tensor<6x2xf32>, tensor<6x2xf32>) -> tensor<6x2xf32>
    %17 = onnx.Mul %16, %14#1 : (tensor<6x2xf32>, tensor<6x2xf32>) -> tensor<6x2xf32>
    %18 = onnx.GatherND %w2, %9 {batch_dims = 0 : i64} : (tensor<3x2x2xf32>, tensor<6x1xi64>) -> tensor<6x2x2xf32>
    %19 = onnx.Unsqueeze %17, %m1 : (tensor<6x2xf32>, tensor<1xi64>) -> tensor<6x2x1xf32>
    %20 = onnx.MatMul %18, %19 : (tensor<6x2x2xf32>, tensor<6x2x1xf32>) -> tensor<6x2x1xf32>
    %21 = onnx.Squeeze %20, %m1 : (tensor<6x2x1xf32>, tensor<1xi64>) -> tensor<6x2xf32>
    %22 = onnx.Reshape %4, %m1 : (tensor<3x2xf32>, tensor<1xi64>) -> tensor<6xf32>
    %23 = onnx.Unsqueeze %22, %m1 : (tensor<6xf32>, tensor<1xi64>) -> tensor<6x1xf32>
    %24 = onnx.Mul %21, %23 : (tensor<6x2xf32>, tensor<6x1xf32>) -> tensor<6x2xf32>
    %25 = onnx.Reshape %24, %tkh : (tensor<6x2xf32>, tensor<3xi64>) -> tensor<3x2x2xf32>
    %26 = onnx.ReduceSum %25, %one {keepdims = 0 : i64} : (tensor<3x2x2xf32>, tensor<1xi64>) -> tensor<3x2xf32>
    return %26 : tensor<3x2xf32>
  }
}

// -----

// The rows gathered by arange(T * k) % T.
// CHECK-LABEL: func.func @main_graph
// CHECK-NOT: moe.layer
// CHECK: onnx.TopK
// WHY: remark: not raised: the rows are not x with each token repeated k times
module {
  func.func @main_graph(%arg0: tensor<3x2xf32>) -> tensor<3x2xf32> {
    %router = arith.constant dense<[[0.1, 0.43], [0.21, 0.09], [-0.15, 0.29]]> : tensor<3x2xf32>
    %w1 = arith.constant dense<[[[-0.12, 0.93, 0.58, 0.14], [0.78, -0.23, 0.06, 0.85]], [[-0.86, -0.96, 0.56, 0.96], [-0.83, 0.67, 0.74, 0.6]], [[-0.08, -0.76, -0.71, 0.04], [0.56, 0.28, 0.89, -0.17]]]> : tensor<3x2x4xf32>
    %w2 = arith.constant dense<[[[-0.47, -0.09], [0.55, 0.14]], [[-0.96, 0.22], [0.24, 0.23]], [[0.89, -0.28], [0.36, -0.13]]]> : tensor<3x2x2xf32>
    %b1 = arith.constant dense<[[0.4, -0.88, 0.33, 0.34], [-0.58, -0.74, -0.37, -0.27], [0.14, -0.12, 0.98, -0.8]]> : tensor<3x4xf32>
    %b2 = arith.constant dense<[[-0.58, -0.68], [0.31, -0.49], [-0.07, -0.51]]> : tensor<3x2xf32>
    %k = arith.constant dense<2> : tensor<1xi64>
    %m1 = arith.constant dense<-1> : tensor<1xi64>
    %one = arith.constant dense<1> : tensor<1xi64>
    %rep = arith.constant dense<[1, 2, 1]> : tensor<3xi64>
    %flat = arith.constant dense<[-1, 2]> : tensor<2xi64>
    %halves = arith.constant dense<2> : tensor<2xi64>
    %tkh = arith.constant dense<[3, 2, 2]> : tensor<3xi64>
    %kth = arith.constant dense<[2, 3, 2]> : tensor<3xi64>
    %0 = onnx.Gemm %arg0, %router {alpha = 1.000000e+00 : f32, beta = 1.000000e+00 : f32, transA = 0 : i64, transB = 1 : i64} : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x3xf32>
    %1 = onnx.Softmax %0 {axis = -1 : i64} : (tensor<3x3xf32>) -> tensor<3x3xf32>
    %2:2 = onnx.TopK %1, %k {axis = -1 : i64, largest = 1 : i64, sorted = 1 : i64} : (tensor<3x3xf32>, tensor<1xi64>) -> (tensor<3x2xf32>, tensor<3x2xi64>)
    %3 = onnx.ReduceSum %2#0, %m1 {keepdims = 1 : i64} : (tensor<3x2xf32>, tensor<1xi64>) -> tensor<3x1xf32>
    %4 = onnx.Div %2#0, %3 : (tensor<3x2xf32>, tensor<3x1xf32>) -> tensor<3x2xf32>
    %c0 = arith.constant dense<0> : tensor<i64>
    %c1 = arith.constant dense<1> : tensor<i64>
    %c2 = arith.constant dense<2> : tensor<i64>
    %c3 = arith.constant dense<3> : tensor<i64>
    %c6 = arith.constant dense<6> : tensor<i64>
    %pairs = onnx.Range %c0, %c6, %c1 : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<6xi64>
    %token = onnx.Mod %pairs, %c3 : (tensor<6xi64>, tensor<i64>) -> tensor<6xi64>
    %7 = onnx.Gather %arg0, %token {axis = 0 : i64} : (tensor<3x2xf32>, tensor<6xi64>) -> tensor<6x2xf32>
    %8 = onnx.Reshape %2#1, %m1 : (tensor<3x2xi64>, tensor<1xi64>) -> tensor<6xi64>
    %9 = onnx.Unsqueeze %8, %m1 : (tensor<6xi64>, tensor<1xi64>) -> tensor<6x1xi64>
    %10 = onnx.GatherND %w1, %9 {batch_dims = 0 : i64} : (tensor<3x2x4xf32>, tensor<6x1xi64>) -> tensor<6x2x4xf32>
    %11 = onnx.Unsqueeze %7, %one : (tensor<6x2xf32>, tensor<1xi64>) -> tensor<6x1x2xf32>
    %12 = onnx.MatMul %11, %10 : (tensor<6x1x2xf32>, tensor<6x2x4xf32>) -> tensor<6x1x4xf32>
    %s13 = onnx.Squeeze %12, %one : (tensor<6x1x4xf32>, tensor<1xi64>) -> tensor<6x4xf32>
    %gb1 = onnx.GatherND %b1, %9 {batch_dims = 0 : i64} : (tensor<3x4xf32>, tensor<6x1xi64>) -> tensor<6x4xf32>
    %13 = onnx.Add %s13, %gb1 : (tensor<6x4xf32>, tensor<6x4xf32>) -> tensor<6x4xf32>
    %14:2 = onnx.Split %13, %halves {axis = 1 : i64} : (tensor<6x4xf32>, tensor<2xi64>) -> (tensor<6x2xf32>, tensor<6x2xf32>)
    %15 = onnx.Sigmoid %14#0 : (tensor<6x2xf32>) -> tensor<6x2xf32>
    %16 = onnx.Mul %14#0, %15 : (tensor<6x2xf32>, tensor<6x2xf32>) -> tensor<6x2xf32>
    %17 = onnx.Mul %16, %14#1 : (tensor<6x2xf32>, tensor<6x2xf32>) -> tensor<6x2xf32>
    %18 = onnx.GatherND %w2, %9 {batch_dims = 0 : i64} : (tensor<3x2x2xf32>, tensor<6x1xi64>) -> tensor<6x2x2xf32>
    %19 = onnx.Unsqueeze %17, %one : (tensor<6x2xf32>, tensor<1xi64>) -> tensor<6x1x2xf32>
    %20 = onnx.MatMul %19, %18 : (tensor<6x1x2xf32>, tensor<6x2x2xf32>) -> tensor<6x1x2xf32>
    %s21 = onnx.Squeeze %20, %one : (tensor<6x1x2xf32>, tensor<1xi64>) -> tensor<6x2xf32>
    %gb2 = onnx.GatherND %b2, %9 {batch_dims = 0 : i64} : (tensor<3x2xf32>, tensor<6x1xi64>) -> tensor<6x2xf32>
    %21 = onnx.Add %s21, %gb2 : (tensor<6x2xf32>, tensor<6x2xf32>) -> tensor<6x2xf32>
    %22 = onnx.Reshape %4, %m1 : (tensor<3x2xf32>, tensor<1xi64>) -> tensor<6xf32>
    %23 = onnx.Unsqueeze %22, %m1 : (tensor<6xf32>, tensor<1xi64>) -> tensor<6x1xf32>
    %24 = onnx.Mul %21, %23 : (tensor<6x2xf32>, tensor<6x1xf32>) -> tensor<6x2xf32>
    %25 = onnx.Reshape %24, %tkh : (tensor<6x2xf32>, tensor<3xi64>) -> tensor<3x2x2xf32>
    %26 = onnx.ReduceSum %25, %one {keepdims = 0 : i64} : (tensor<3x2x2xf32>, tensor<1xi64>) -> tensor<3x2xf32>
    return %26 : tensor<3x2xf32>
  }
}

// -----

// The weighted rows read as [k, T, H] and summed over the first axis.
// CHECK-LABEL: func.func @main_graph
// CHECK-NOT: moe.layer
// CHECK: onnx.TopK
// WHY: remark: not raised: rows are not summed over k per token
module {
  func.func @main_graph(%arg0: tensor<3x2xf32>) -> tensor<3x2xf32> {
    %router = arith.constant dense<[[0.1, 0.43], [0.21, 0.09], [-0.15, 0.29]]> : tensor<3x2xf32>
    %w1 = arith.constant dense<[[[-0.12, 0.78], [0.93, -0.23], [0.58, 0.06], [0.14, 0.85]], [[-0.86, -0.83], [-0.96, 0.67], [0.56, 0.74], [0.96, 0.6]], [[-0.08, 0.56], [-0.76, 0.28], [-0.71, 0.89], [0.04, -0.17]]]> : tensor<3x4x2xf32>
    %w2 = arith.constant dense<[[[-0.47, 0.55], [-0.09, 0.14]], [[-0.96, 0.24], [0.22, 0.23]], [[0.89, 0.36], [-0.28, -0.13]]]> : tensor<3x2x2xf32>
    %k = arith.constant dense<2> : tensor<1xi64>
    %m1 = arith.constant dense<-1> : tensor<1xi64>
    %one = arith.constant dense<1> : tensor<1xi64>
    %rep = arith.constant dense<[1, 2, 1]> : tensor<3xi64>
    %flat = arith.constant dense<[-1, 2]> : tensor<2xi64>
    %halves = arith.constant dense<2> : tensor<2xi64>
    %tkh = arith.constant dense<[3, 2, 2]> : tensor<3xi64>
    %kth = arith.constant dense<[2, 3, 2]> : tensor<3xi64>
    %0 = onnx.Gemm %arg0, %router {alpha = 1.000000e+00 : f32, beta = 1.000000e+00 : f32, transA = 0 : i64, transB = 1 : i64} : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x3xf32>
    %1 = onnx.Softmax %0 {axis = -1 : i64} : (tensor<3x3xf32>) -> tensor<3x3xf32>
    %2:2 = onnx.TopK %1, %k {axis = -1 : i64, largest = 1 : i64, sorted = 1 : i64} : (tensor<3x3xf32>, tensor<1xi64>) -> (tensor<3x2xf32>, tensor<3x2xi64>)
    %3 = onnx.ReduceSum %2#0, %m1 {keepdims = 1 : i64} : (tensor<3x2xf32>, tensor<1xi64>) -> tensor<3x1xf32>
    %4 = onnx.Div %2#0, %3 : (tensor<3x2xf32>, tensor<3x1xf32>) -> tensor<3x2xf32>
    %5 = onnx.Unsqueeze %arg0, %one : (tensor<3x2xf32>, tensor<1xi64>) -> tensor<3x1x2xf32>
    %6 = onnx.Expand %5, %rep : (tensor<3x1x2xf32>, tensor<3xi64>) -> tensor<3x2x2xf32>
    %7 = onnx.Reshape %6, %flat : (tensor<3x2x2xf32>, tensor<2xi64>) -> tensor<6x2xf32>
    %8 = onnx.Reshape %2#1, %m1 : (tensor<3x2xi64>, tensor<1xi64>) -> tensor<6xi64>
    %9 = onnx.Unsqueeze %8, %m1 : (tensor<6xi64>, tensor<1xi64>) -> tensor<6x1xi64>
    %10 = onnx.GatherND %w1, %9 {batch_dims = 0 : i64} : (tensor<3x4x2xf32>, tensor<6x1xi64>) -> tensor<6x4x2xf32>
    %11 = onnx.Unsqueeze %7, %m1 : (tensor<6x2xf32>, tensor<1xi64>) -> tensor<6x2x1xf32>
    %12 = onnx.MatMul %10, %11 : (tensor<6x4x2xf32>, tensor<6x2x1xf32>) -> tensor<6x4x1xf32>
    %13 = onnx.Squeeze %12, %m1 : (tensor<6x4x1xf32>, tensor<1xi64>) -> tensor<6x4xf32>
    %14:2 = onnx.Split %13, %halves {axis = 1 : i64} : (tensor<6x4xf32>, tensor<2xi64>) -> (tensor<6x2xf32>, tensor<6x2xf32>)
    %15 = onnx.Sigmoid %14#0 : (tensor<6x2xf32>) -> tensor<6x2xf32>
    %16 = onnx.Mul %14#0, %15 : (tensor<6x2xf32>, tensor<6x2xf32>) -> tensor<6x2xf32>
    %17 = onnx.Mul %16, %14#1 : (tensor<6x2xf32>, tensor<6x2xf32>) -> tensor<6x2xf32>
    %18 = onnx.GatherND %w2, %9 {batch_dims = 0 : i64} : (tensor<3x2x2xf32>, tensor<6x1xi64>) -> tensor<6x2x2xf32>
    %19 = onnx.Unsqueeze %17, %m1 : (tensor<6x2xf32>, tensor<1xi64>) -> tensor<6x2x1xf32>
    %20 = onnx.MatMul %18, %19 : (tensor<6x2x2xf32>, tensor<6x2x1xf32>) -> tensor<6x2x1xf32>
    %21 = onnx.Squeeze %20, %m1 : (tensor<6x2x1xf32>, tensor<1xi64>) -> tensor<6x2xf32>
    %22 = onnx.Reshape %4, %m1 : (tensor<3x2xf32>, tensor<1xi64>) -> tensor<6xf32>
    %23 = onnx.Unsqueeze %22, %m1 : (tensor<6xf32>, tensor<1xi64>) -> tensor<6x1xf32>
    %24 = onnx.Mul %21, %23 : (tensor<6x2xf32>, tensor<6x1xf32>) -> tensor<6x2xf32>
    %25 = onnx.Reshape %24, %kth : (tensor<6x2xf32>, tensor<3xi64>) -> tensor<2x3x2xf32>
    %zero = arith.constant dense<0> : tensor<1xi64>
    %26 = onnx.ReduceSum %25, %zero {keepdims = 0 : i64} : (tensor<2x3x2xf32>, tensor<1xi64>) -> tensor<3x2xf32>
    return %26 : tensor<3x2xf32>
  }
}
