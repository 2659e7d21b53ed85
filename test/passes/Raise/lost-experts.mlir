// The Hugging Face loop over `expert_hit` (transformers 4.48+) traced with a
// sample input that reaches only expert 0 of 3: the graph holds one expert,
// and raising it would compile a different model.
// RUN: not moe-opt %s --moe-raise 2>&1 | FileCheck %s --implicit-check-not="PLEASE submit"

// CHECK: error: the MoE block routes to 3 experts but the graph holds 1 expert FFN: a traced export keeps only the experts its sample input reached; export with a loop over every expert

module {
  func.func @main_graph(%arg0: tensor<1x3x2xf32>) -> tensor<1x3x2xf32> {
    %0 = onnx.none
    %cst = arith.constant dense<[[0.000000e+00, 1.000000e-01, -5.000000e-01], [-4.000000e-01, -0.699999988, -4.000000e-01]]> : tensor<2x3xf32>
    %cst_0 = arith.constant dense<[[-5.000000e-01, 3.000000e-01], [-4.000000e-01, 3.000000e-01]]> : tensor<2x2xf32>
    %cst_1 = arith.constant dense<[[0.000000e+00, 4.000000e-01], [2.000000e-01, 0.699999988]]> : tensor<2x2xf32>
    %cst_2 = arith.constant dense<[[-4.000000e-01, 4.000000e-01], [2.000000e-01, -1.000000e-01]]> : tensor<2x2xf32>
    %cst_3 = arith.constant dense<[-1, 2]> : tensor<2xi64>
    %cst_4 = arith.constant dense<[-1, 2]> : tensor<2xi64>
    %1 = onnx.Reshape %arg0, %cst_3 {allowzero = 0 : i64} : (tensor<1x3x2xf32>, tensor<2xi64>) -> tensor<3x2xf32>
    %2 = onnx.MatMul %1, %cst : (tensor<3x2xf32>, tensor<2x3xf32>) -> tensor<3x3xf32>
    %3 = onnx.Softmax %2 {axis = 1 : i64} : (tensor<3x3xf32>) -> tensor<3x3xf32>
    %4 = onnx.Cast %3 {to = 1 : i64} : (tensor<3x3xf32>) -> tensor<3x3xf32>
    %cst_5 = arith.constant dense<1> : tensor<1xi64>
    %5:2 = onnx.TopK %4, %cst_5 {axis = -1 : i64, largest = 1 : i64, sorted = 1 : i64} : (tensor<3x3xf32>, tensor<1xi64>) -> (tensor<3x1xf32>, tensor<3x1xi64>)
    %cst_6 = arith.constant dense<-1> : tensor<1xi64>
    %6 = onnx.ReduceSum %5#0, %cst_6 {keepdims = 1 : i64} : (tensor<3x1xf32>, tensor<1xi64>) -> tensor<3x1xf32>
    %7 = onnx.Div %5#0, %6 : (tensor<3x1xf32>, tensor<3x1xf32>) -> tensor<3x1xf32>
    %8 = onnx.Cast %7 {to = 1 : i64} : (tensor<3x1xf32>) -> tensor<3x1xf32>
    %cst_7 = arith.constant dense<3> : tensor<i64>
    %cst_8 = arith.constant dense<[0, 1]> : tensor<2xi64>
    %9 = onnx.OneHot %5#1, %cst_7, %cst_8 {axis = -1 : i64} : (tensor<3x1xi64>, tensor<i64>, tensor<2xi64>) -> tensor<3x1x?xi64>
    %10 = onnx.Transpose %9 {perm = array<i64: 2, 1, 0>} : (tensor<3x1x?xi64>) -> tensor<?x1x3xi64>
    %cst_9 = arith.constant dense<[-1, -2]> : tensor<2xi64>
    %11 = onnx.ReduceSum %10, %cst_9 {keepdims = 0 : i64} : (tensor<?x1x3xi64>, tensor<2xi64>) -> tensor<?xi64>
    %cst_10 = arith.constant dense<0> : tensor<i64>
    %12 = onnx.Greater %11, %cst_10 : (tensor<?xi64>, tensor<i64>) -> tensor<?xi1>
    %13 = onnx.NonZero %12 : (tensor<?xi1>) -> tensor<1x?xi64>
    %14 = onnx.Transpose %13 {perm = array<i64: 1, 0>} : (tensor<1x?xi64>) -> tensor<?x1xi64>
    %cst_11 = arith.constant dense<1> : tensor<1xi64>
    %15 = onnx.Split %14, %cst_11 {axis = 0 : i64} : (tensor<?x1xi64>, tensor<1xi64>) -> tensor<?x1xi64>
    %cst_12 = arith.constant dense<0> : tensor<1xi64>
    %16 = onnx.Squeeze %15, %cst_12 : (tensor<?x1xi64>, tensor<1xi64>) -> tensor<1xi64>
    %17 = onnx.Gather %10, %16 {axis = 0 : i64} : (tensor<?x1x3xi64>, tensor<1xi64>) -> tensor<1x1x3xi64>
    %cst_13 = arith.constant dense<0> : tensor<1xi64>
    %18 = onnx.Squeeze %17, %cst_13 : (tensor<1x1x3xi64>, tensor<1xi64>) -> tensor<1x3xi64>
    %19 = onnx.Cast %18 {to = 9 : i64} : (tensor<1x3xi64>) -> tensor<1x3xi1>
    %20 = onnx.NonZero %19 : (tensor<1x3xi1>) -> tensor<2x?xi64>
    %21 = onnx.Transpose %20 {perm = array<i64: 1, 0>} : (tensor<2x?xi64>) -> tensor<?x2xi64>
    %cst_14 = arith.constant dense<1> : tensor<2xi64>
    %22:2 = onnx.Split %21, %cst_14 {axis = 1 : i64} : (tensor<?x2xi64>, tensor<2xi64>) -> (tensor<?x1xi64>, tensor<?x1xi64>)
    %cst_15 = arith.constant dense<1> : tensor<1xi64>
    %23 = onnx.Squeeze %22#0, %cst_15 : (tensor<?x1xi64>, tensor<1xi64>) -> tensor<?xi64>
    %cst_16 = arith.constant dense<1> : tensor<1xi64>
    %24 = onnx.Squeeze %22#1, %cst_16 : (tensor<?x1xi64>, tensor<1xi64>) -> tensor<?xi64>
    %cst_17 = arith.constant dense<0> : tensor<1xi64>
    %25 = onnx.Unsqueeze %1, %cst_17 : (tensor<3x2xf32>, tensor<1xi64>) -> tensor<1x3x2xf32>
    %26 = onnx.Gather %25, %24 {axis = 1 : i64} : (tensor<1x3x2xf32>, tensor<?xi64>) -> tensor<1x?x2xf32>
    %27 = onnx.Reshape %26, %cst_4 {allowzero = 0 : i64} : (tensor<1x?x2xf32>, tensor<2xi64>) -> tensor<?x2xf32>
    %28 = onnx.MatMul %27, %cst_0 : (tensor<?x2xf32>, tensor<2x2xf32>) -> tensor<?x2xf32>
    %29 = onnx.Sigmoid %28 : (tensor<?x2xf32>) -> tensor<?x2xf32>
    %30 = onnx.Mul %28, %29 : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x2xf32>
    %31 = onnx.MatMul %27, %cst_1 : (tensor<?x2xf32>, tensor<2x2xf32>) -> tensor<?x2xf32>
    %32 = onnx.Mul %30, %31 : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x2xf32>
    %33 = onnx.MatMul %32, %cst_2 : (tensor<?x2xf32>, tensor<2x2xf32>) -> tensor<?x2xf32>
    %cst_18 = arith.constant dense<2> : tensor<1xi64>
    %34 = onnx.Unsqueeze %8, %cst_18 : (tensor<3x1xf32>, tensor<1xi64>) -> tensor<3x1x1xf32>
    %35 = onnx.Shape %34 : (tensor<3x1x1xf32>) -> tensor<3xi64>
    %cst_19 = arith.constant dense<1> : tensor<1xi64>
    %36 = onnx.Gather %35, %cst_19 {axis = 0 : i64} : (tensor<3xi64>, tensor<1xi64>) -> tensor<1xi64>
    %cst_20 = arith.constant dense<2> : tensor<1xi64>
    %37 = onnx.Gather %35, %cst_20 {axis = 0 : i64} : (tensor<3xi64>, tensor<1xi64>) -> tensor<1xi64>
    %38 = onnx.Flatten %34 {axis = 2 : i64} : (tensor<3x1x1xf32>) -> tensor<3x1xf32>
    %39 = onnx.Mul %24, %36 : (tensor<?xi64>, tensor<1xi64>) -> tensor<?xi64>
    %40 = onnx.Add %23, %39 : (tensor<?xi64>, tensor<?xi64>) -> tensor<?xi64>
    %41 = onnx.Gather %38, %40 {axis = 0 : i64} : (tensor<3x1xf32>, tensor<?xi64>) -> tensor<?x1xf32>
    %42 = onnx.Shape %40 : (tensor<?xi64>) -> tensor<1xi64>
    %cst_21 = arith.constant dense<-1> : tensor<1xi64>
    %43 = onnx.Concat %cst_21, %37 {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>) -> tensor<2xi64>
    %44 = onnx.Reshape %41, %43 {allowzero = 0 : i64} : (tensor<?x1xf32>, tensor<2xi64>) -> tensor<?x1xf32>
    %45 = onnx.Concat %42, %37 {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>) -> tensor<2xi64>
    %46 = onnx.Reshape %44, %45 {allowzero = 0 : i64} : (tensor<?x1xf32>, tensor<2xi64>) -> tensor<?x1xf32>
    %47 = onnx.Mul %33, %46 : (tensor<?x2xf32>, tensor<?x1xf32>) -> tensor<?x2xf32>
    %48 = onnx.Cast %47 {to = 1 : i64} : (tensor<?x2xf32>) -> tensor<?x2xf32>
    %cst_22 = arith.constant dense<[1, 2]> : tensor<2xi64>
    %49 = onnx.Expand %48, %cst_22 : (tensor<?x2xf32>, tensor<2xi64>) -> tensor<?x2xf32>
    %cst_23 = arith.constant dense<1> : tensor<1xi64>
    %50 = onnx.Unsqueeze %24, %cst_23 : (tensor<?xi64>, tensor<1xi64>) -> tensor<?x1xi64>
    %51 = onnx.Shape %49 : (tensor<?x2xf32>) -> tensor<2xi64>
    %52 = onnx.Expand %50, %51 : (tensor<?x1xi64>, tensor<2xi64>) -> tensor<?x2xi64>
    %cst_24 = arith.constant dense<0.000000e+00> : tensor<3x2xf32>
    %53 = onnx.ScatterElements %cst_24, %52, %49 {axis = 0 : i64} : (tensor<3x2xf32>, tensor<?x2xi64>, tensor<?x2xf32>) -> tensor<3x2xf32>
    %cst_25 = arith.constant dense<0.000000e+00> : tensor<3x2xf32>
    %54 = onnx.Add %cst_25, %53 : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
    %cst_26 = arith.constant dense<[1, 3, 2]> : tensor<3xi64>
    %55 = onnx.Reshape %54, %cst_26 {allowzero = 0 : i64} : (tensor<3x2xf32>, tensor<3xi64>) -> tensor<1x3x2xf32>
    return %55 : tensor<1x3x2xf32>
  }
}

