// Lookalikes of the per-expert loop that must not be raised: what decides
// the semantics differs from a routed MoE block.
// RUN: moe-opt %s --moe-raise --split-input-file | FileCheck %s

// The experts' outputs are not scaled by the routing weights.
// CHECK-LABEL: func.func @main_graph
// CHECK-NOT: moe.layer
// CHECK: onnx.TopK
module {
  func.func @main_graph(%arg0: tensor<1x3x2xf32>) -> tensor<1x3x2xf32> {
    %0 = onnx.none
    %cst = arith.constant dense<[[-0.000000e+00, -6.000000e-01], [4.000000e-01, -5.000000e-01]]> : tensor<2x2xf32>
    %cst_0 = arith.constant dense<[[-3.000000e-01, -0.000000e+00], [2.000000e-01, 6.000000e-01]]> : tensor<2x2xf32>
    %cst_1 = arith.constant dense<[[-0.699999988, -3.000000e-01], [-5.000000e-01, 0.000000e+00]]> : tensor<2x2xf32>
    %cst_2 = arith.constant dense<[[-1.000000e-01, -2.000000e-01], [2.000000e-01, -1.000000e-01]]> : tensor<2x2xf32>
    %cst_3 = arith.constant dense<[[3.000000e-01, -5.000000e-01], [4.000000e-01, -3.000000e-01]]> : tensor<2x2xf32>
    %cst_4 = arith.constant dense<[[-1.000000e-01, 6.000000e-01], [1.000000e-01, -0.699999988]]> : tensor<2x2xf32>
    %cst_5 = arith.constant dense<[[3.000000e-01, -1.000000e-01], [6.000000e-01, 5.000000e-01]]> : tensor<2x2xf32>
    %cst_6 = arith.constant dense<0> : tensor<i64>
    %cst_7 = arith.constant dense<1> : tensor<i64>
    %cst_8 = arith.constant dense<2> : tensor<i64>
    %cst_9 = arith.constant dense<[-1, 2]> : tensor<2xi64>
    %cst_10 = arith.constant dense<[-1, 2]> : tensor<2xi64>
    %cst_11 = arith.constant dense<[-1, 2]> : tensor<2xi64>
    %1 = onnx.Reshape %arg0, %cst_9 {allowzero = 0 : i64} : (tensor<1x3x2xf32>, tensor<2xi64>) -> tensor<3x2xf32>
    %2 = onnx.MatMul %1, %cst : (tensor<3x2xf32>, tensor<2x2xf32>) -> tensor<3x2xf32>
    %3 = onnx.Softmax %2 {axis = 1 : i64} : (tensor<3x2xf32>) -> tensor<3x2xf32>
    %4 = onnx.Cast %3 {to = 1 : i64} : (tensor<3x2xf32>) -> tensor<3x2xf32>
    %cst_12 = arith.constant dense<1> : tensor<1xi64>
    %5:2 = onnx.TopK %4, %cst_12 {axis = -1 : i64, largest = 1 : i64, sorted = 1 : i64} : (tensor<3x2xf32>, tensor<1xi64>) -> (tensor<3x1xf32>, tensor<3x1xi64>)
    %cst_13 = arith.constant dense<-1> : tensor<1xi64>
    %6 = onnx.ReduceSum %5#0, %cst_13 {keepdims = 1 : i64} : (tensor<3x1xf32>, tensor<1xi64>) -> tensor<3x1xf32>
    %7 = onnx.Div %5#0, %6 : (tensor<3x1xf32>, tensor<3x1xf32>) -> tensor<3x1xf32>
    %8 = onnx.Cast %7 {to = 1 : i64} : (tensor<3x1xf32>) -> tensor<3x1xf32>
    %cst_14 = arith.constant dense<[0, 1]> : tensor<2xi64>
    %9 = onnx.OneHot %5#1, %cst_8, %cst_14 {axis = -1 : i64} : (tensor<3x1xi64>, tensor<i64>, tensor<2xi64>) -> tensor<3x1x?xi64>
    %10 = onnx.Transpose %9 {perm = array<i64: 2, 1, 0>} : (tensor<3x1x?xi64>) -> tensor<?x1x3xi64>
    %11 = onnx.Gather %10, %cst_6 {axis = 0 : i64} : (tensor<?x1x3xi64>, tensor<i64>) -> tensor<1x3xi64>
    %12 = onnx.Cast %11 {to = 9 : i64} : (tensor<1x3xi64>) -> tensor<1x3xi1>
    %13 = onnx.NonZero %12 : (tensor<1x3xi1>) -> tensor<2x?xi64>
    %14 = onnx.Transpose %13 {perm = array<i64: 1, 0>} : (tensor<2x?xi64>) -> tensor<?x2xi64>
    %cst_15 = arith.constant dense<1> : tensor<2xi64>
    %15:2 = onnx.Split %14, %cst_15 {axis = 1 : i64} : (tensor<?x2xi64>, tensor<2xi64>) -> (tensor<?x1xi64>, tensor<?x1xi64>)
    %cst_16 = arith.constant dense<1> : tensor<1xi64>
    %16 = onnx.Squeeze %15#0, %cst_16 : (tensor<?x1xi64>, tensor<1xi64>) -> tensor<?xi64>
    %cst_17 = arith.constant dense<1> : tensor<1xi64>
    %17 = onnx.Squeeze %15#1, %cst_17 : (tensor<?x1xi64>, tensor<1xi64>) -> tensor<?xi64>
    %cst_18 = arith.constant dense<0> : tensor<1xi64>
    %18 = onnx.Unsqueeze %1, %cst_18 : (tensor<3x2xf32>, tensor<1xi64>) -> tensor<1x3x2xf32>
    %19 = onnx.Gather %18, %17 {axis = 1 : i64} : (tensor<1x3x2xf32>, tensor<?xi64>) -> tensor<1x?x2xf32>
    %20 = onnx.Reshape %19, %cst_10 {allowzero = 0 : i64} : (tensor<1x?x2xf32>, tensor<2xi64>) -> tensor<?x2xf32>
    %21 = onnx.MatMul %20, %cst_0 : (tensor<?x2xf32>, tensor<2x2xf32>) -> tensor<?x2xf32>
    %22 = onnx.Sigmoid %21 : (tensor<?x2xf32>) -> tensor<?x2xf32>
    %23 = onnx.Mul %21, %22 : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x2xf32>
    %24 = onnx.MatMul %20, %cst_1 : (tensor<?x2xf32>, tensor<2x2xf32>) -> tensor<?x2xf32>
    %25 = onnx.Mul %23, %24 : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x2xf32>
    %26 = onnx.MatMul %25, %cst_2 : (tensor<?x2xf32>, tensor<2x2xf32>) -> tensor<?x2xf32>
    %cst_19 = arith.constant dense<2> : tensor<1xi64>
    %27 = onnx.Unsqueeze %8, %cst_19 : (tensor<3x1xf32>, tensor<1xi64>) -> tensor<3x1x1xf32>
    %28 = onnx.Shape %27 : (tensor<3x1x1xf32>) -> tensor<3xi64>
    %cst_20 = arith.constant dense<1> : tensor<1xi64>
    %29 = onnx.Gather %28, %cst_20 {axis = 0 : i64} : (tensor<3xi64>, tensor<1xi64>) -> tensor<1xi64>
    %cst_21 = arith.constant dense<2> : tensor<1xi64>
    %30 = onnx.Gather %28, %cst_21 {axis = 0 : i64} : (tensor<3xi64>, tensor<1xi64>) -> tensor<1xi64>
    %31 = onnx.Flatten %27 {axis = 2 : i64} : (tensor<3x1x1xf32>) -> tensor<3x1xf32>
    %32 = onnx.Mul %17, %29 : (tensor<?xi64>, tensor<1xi64>) -> tensor<?xi64>
    %33 = onnx.Add %16, %32 : (tensor<?xi64>, tensor<?xi64>) -> tensor<?xi64>
    %34 = onnx.Gather %31, %33 {axis = 0 : i64} : (tensor<3x1xf32>, tensor<?xi64>) -> tensor<?x1xf32>
    %35 = onnx.Shape %33 : (tensor<?xi64>) -> tensor<1xi64>
    %cst_22 = arith.constant dense<-1> : tensor<1xi64>
    %36 = onnx.Concat %cst_22, %30 {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>) -> tensor<2xi64>
    %37 = onnx.Reshape %34, %36 {allowzero = 0 : i64} : (tensor<?x1xf32>, tensor<2xi64>) -> tensor<?x1xf32>
    %38 = onnx.Concat %35, %30 {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>) -> tensor<2xi64>
    %39 = onnx.Reshape %37, %38 {allowzero = 0 : i64} : (tensor<?x1xf32>, tensor<2xi64>) -> tensor<?x1xf32>
    %unrouted = arith.constant dense<1.0> : tensor<3x1xf32>
    %40 = onnx.Mul %26, %unrouted : (tensor<?x2xf32>, tensor<3x1xf32>) -> tensor<?x2xf32>
    %41 = onnx.Cast %40 {to = 1 : i64} : (tensor<?x2xf32>) -> tensor<?x2xf32>
    %42 = onnx.Gather %10, %cst_7 {axis = 0 : i64} : (tensor<?x1x3xi64>, tensor<i64>) -> tensor<1x3xi64>
    %43 = onnx.Cast %42 {to = 9 : i64} : (tensor<1x3xi64>) -> tensor<1x3xi1>
    %44 = onnx.NonZero %43 : (tensor<1x3xi1>) -> tensor<2x?xi64>
    %45 = onnx.Transpose %44 {perm = array<i64: 1, 0>} : (tensor<2x?xi64>) -> tensor<?x2xi64>
    %cst_23 = arith.constant dense<1> : tensor<2xi64>
    %46:2 = onnx.Split %45, %cst_23 {axis = 1 : i64} : (tensor<?x2xi64>, tensor<2xi64>) -> (tensor<?x1xi64>, tensor<?x1xi64>)
    %cst_24 = arith.constant dense<1> : tensor<1xi64>
    %47 = onnx.Squeeze %46#0, %cst_24 : (tensor<?x1xi64>, tensor<1xi64>) -> tensor<?xi64>
    %cst_25 = arith.constant dense<1> : tensor<1xi64>
    %48 = onnx.Squeeze %46#1, %cst_25 : (tensor<?x1xi64>, tensor<1xi64>) -> tensor<?xi64>
    %49 = onnx.Gather %18, %48 {axis = 1 : i64} : (tensor<1x3x2xf32>, tensor<?xi64>) -> tensor<1x?x2xf32>
    %50 = onnx.Reshape %49, %cst_11 {allowzero = 0 : i64} : (tensor<1x?x2xf32>, tensor<2xi64>) -> tensor<?x2xf32>
    %51 = onnx.MatMul %50, %cst_3 : (tensor<?x2xf32>, tensor<2x2xf32>) -> tensor<?x2xf32>
    %52 = onnx.Sigmoid %51 : (tensor<?x2xf32>) -> tensor<?x2xf32>
    %53 = onnx.Mul %51, %52 : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x2xf32>
    %54 = onnx.MatMul %50, %cst_4 : (tensor<?x2xf32>, tensor<2x2xf32>) -> tensor<?x2xf32>
    %55 = onnx.Mul %53, %54 : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x2xf32>
    %56 = onnx.MatMul %55, %cst_5 : (tensor<?x2xf32>, tensor<2x2xf32>) -> tensor<?x2xf32>
    %cst_26 = arith.constant dense<2> : tensor<1xi64>
    %57 = onnx.Unsqueeze %8, %cst_26 : (tensor<3x1xf32>, tensor<1xi64>) -> tensor<3x1x1xf32>
    %58 = onnx.Shape %57 : (tensor<3x1x1xf32>) -> tensor<3xi64>
    %cst_27 = arith.constant dense<1> : tensor<1xi64>
    %59 = onnx.Gather %58, %cst_27 {axis = 0 : i64} : (tensor<3xi64>, tensor<1xi64>) -> tensor<1xi64>
    %cst_28 = arith.constant dense<2> : tensor<1xi64>
    %60 = onnx.Gather %58, %cst_28 {axis = 0 : i64} : (tensor<3xi64>, tensor<1xi64>) -> tensor<1xi64>
    %61 = onnx.Flatten %57 {axis = 2 : i64} : (tensor<3x1x1xf32>) -> tensor<3x1xf32>
    %62 = onnx.Mul %48, %59 : (tensor<?xi64>, tensor<1xi64>) -> tensor<?xi64>
    %63 = onnx.Add %47, %62 : (tensor<?xi64>, tensor<?xi64>) -> tensor<?xi64>
    %64 = onnx.Gather %61, %63 {axis = 0 : i64} : (tensor<3x1xf32>, tensor<?xi64>) -> tensor<?x1xf32>
    %65 = onnx.Shape %63 : (tensor<?xi64>) -> tensor<1xi64>
    %cst_29 = arith.constant dense<-1> : tensor<1xi64>
    %66 = onnx.Concat %cst_29, %60 {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>) -> tensor<2xi64>
    %67 = onnx.Reshape %64, %66 {allowzero = 0 : i64} : (tensor<?x1xf32>, tensor<2xi64>) -> tensor<?x1xf32>
    %68 = onnx.Concat %65, %60 {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>) -> tensor<2xi64>
    %69 = onnx.Reshape %67, %68 {allowzero = 0 : i64} : (tensor<?x1xf32>, tensor<2xi64>) -> tensor<?x1xf32>
    %70 = onnx.Mul %56, %69 : (tensor<?x2xf32>, tensor<?x1xf32>) -> tensor<?x2xf32>
    %71 = onnx.Cast %70 {to = 1 : i64} : (tensor<?x2xf32>) -> tensor<?x2xf32>
    %cst_30 = arith.constant dense<[1, 2]> : tensor<2xi64>
    %72 = onnx.Expand %41, %cst_30 : (tensor<?x2xf32>, tensor<2xi64>) -> tensor<?x2xf32>
    %cst_31 = arith.constant dense<1> : tensor<1xi64>
    %73 = onnx.Unsqueeze %17, %cst_31 : (tensor<?xi64>, tensor<1xi64>) -> tensor<?x1xi64>
    %74 = onnx.Shape %72 : (tensor<?x2xf32>) -> tensor<2xi64>
    %75 = onnx.Expand %73, %74 : (tensor<?x1xi64>, tensor<2xi64>) -> tensor<?x2xi64>
    %cst_32 = arith.constant dense<0.000000e+00> : tensor<3x2xf32>
    %76 = onnx.ScatterElements %cst_32, %75, %72 {axis = 0 : i64} : (tensor<3x2xf32>, tensor<?x2xi64>, tensor<?x2xf32>) -> tensor<3x2xf32>
    %cst_33 = arith.constant dense<0.000000e+00> : tensor<3x2xf32>
    %77 = onnx.Add %cst_33, %76 : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
    %cst_34 = arith.constant dense<[0, 1]> : tensor<2xi64>
    %cst_35 = arith.constant dense<0> : tensor<2xi64>
    %cst_36 = arith.constant dense<[1, 9223372036854775807]> : tensor<2xi64>
    %78 = onnx.Slice %77, %cst_35, %cst_36, %cst_34 : (tensor<3x2xf32>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>) -> tensor<1x2xf32>
    %79 = onnx.Shape %78 : (tensor<1x2xf32>) -> tensor<2xi64>
    %80 = onnx.Expand %71, %79 : (tensor<?x2xf32>, tensor<2xi64>) -> tensor<?x2xf32>
    %cst_37 = arith.constant dense<1> : tensor<1xi64>
    %81 = onnx.Unsqueeze %48, %cst_37 : (tensor<?xi64>, tensor<1xi64>) -> tensor<?x1xi64>
    %82 = onnx.Shape %80 : (tensor<?x2xf32>) -> tensor<2xi64>
    %83 = onnx.Expand %81, %82 : (tensor<?x1xi64>, tensor<2xi64>) -> tensor<?x2xi64>
    %cst_38 = arith.constant dense<0.000000e+00> : tensor<3x2xf32>
    %84 = onnx.ScatterElements %cst_38, %83, %80 {axis = 0 : i64} : (tensor<3x2xf32>, tensor<?x2xi64>, tensor<?x2xf32>) -> tensor<3x2xf32>
    %85 = onnx.Add %77, %84 : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
    %cst_39 = arith.constant dense<[1, 3, 2]> : tensor<3xi64>
    %86 = onnx.Reshape %85, %cst_39 {allowzero = 0 : i64} : (tensor<3x2xf32>, tensor<3xi64>) -> tensor<1x3x2xf32>
    return %86 : tensor<1x3x2xf32>
  }
}


// -----

// The softmax runs over the tokens, not the experts.
// CHECK-LABEL: func.func @main_graph
// CHECK-NOT: moe.layer
// CHECK: onnx.TopK
module {
  func.func @main_graph(%arg0: tensor<1x3x2xf32>) -> tensor<1x3x2xf32> {
    %0 = onnx.none
    %cst = arith.constant dense<[[-0.000000e+00, -6.000000e-01], [4.000000e-01, -5.000000e-01]]> : tensor<2x2xf32>
    %cst_0 = arith.constant dense<[[-3.000000e-01, -0.000000e+00], [2.000000e-01, 6.000000e-01]]> : tensor<2x2xf32>
    %cst_1 = arith.constant dense<[[-0.699999988, -3.000000e-01], [-5.000000e-01, 0.000000e+00]]> : tensor<2x2xf32>
    %cst_2 = arith.constant dense<[[-1.000000e-01, -2.000000e-01], [2.000000e-01, -1.000000e-01]]> : tensor<2x2xf32>
    %cst_3 = arith.constant dense<[[3.000000e-01, -5.000000e-01], [4.000000e-01, -3.000000e-01]]> : tensor<2x2xf32>
    %cst_4 = arith.constant dense<[[-1.000000e-01, 6.000000e-01], [1.000000e-01, -0.699999988]]> : tensor<2x2xf32>
    %cst_5 = arith.constant dense<[[3.000000e-01, -1.000000e-01], [6.000000e-01, 5.000000e-01]]> : tensor<2x2xf32>
    %cst_6 = arith.constant dense<0> : tensor<i64>
    %cst_7 = arith.constant dense<1> : tensor<i64>
    %cst_8 = arith.constant dense<2> : tensor<i64>
    %cst_9 = arith.constant dense<[-1, 2]> : tensor<2xi64>
    %cst_10 = arith.constant dense<[-1, 2]> : tensor<2xi64>
    %cst_11 = arith.constant dense<[-1, 2]> : tensor<2xi64>
    %1 = onnx.Reshape %arg0, %cst_9 {allowzero = 0 : i64} : (tensor<1x3x2xf32>, tensor<2xi64>) -> tensor<3x2xf32>
    %2 = onnx.MatMul %1, %cst : (tensor<3x2xf32>, tensor<2x2xf32>) -> tensor<3x2xf32>
    %3 = onnx.Softmax %2 {axis = 0 : i64} : (tensor<3x2xf32>) -> tensor<3x2xf32>
    %4 = onnx.Cast %3 {to = 1 : i64} : (tensor<3x2xf32>) -> tensor<3x2xf32>
    %cst_12 = arith.constant dense<1> : tensor<1xi64>
    %5:2 = onnx.TopK %4, %cst_12 {axis = -1 : i64, largest = 1 : i64, sorted = 1 : i64} : (tensor<3x2xf32>, tensor<1xi64>) -> (tensor<3x1xf32>, tensor<3x1xi64>)
    %cst_13 = arith.constant dense<-1> : tensor<1xi64>
    %6 = onnx.ReduceSum %5#0, %cst_13 {keepdims = 1 : i64} : (tensor<3x1xf32>, tensor<1xi64>) -> tensor<3x1xf32>
    %7 = onnx.Div %5#0, %6 : (tensor<3x1xf32>, tensor<3x1xf32>) -> tensor<3x1xf32>
    %8 = onnx.Cast %7 {to = 1 : i64} : (tensor<3x1xf32>) -> tensor<3x1xf32>
    %cst_14 = arith.constant dense<[0, 1]> : tensor<2xi64>
    %9 = onnx.OneHot %5#1, %cst_8, %cst_14 {axis = -1 : i64} : (tensor<3x1xi64>, tensor<i64>, tensor<2xi64>) -> tensor<3x1x?xi64>
    %10 = onnx.Transpose %9 {perm = array<i64: 2, 1, 0>} : (tensor<3x1x?xi64>) -> tensor<?x1x3xi64>
    %11 = onnx.Gather %10, %cst_6 {axis = 0 : i64} : (tensor<?x1x3xi64>, tensor<i64>) -> tensor<1x3xi64>
    %12 = onnx.Cast %11 {to = 9 : i64} : (tensor<1x3xi64>) -> tensor<1x3xi1>
    %13 = onnx.NonZero %12 : (tensor<1x3xi1>) -> tensor<2x?xi64>
    %14 = onnx.Transpose %13 {perm = array<i64: 1, 0>} : (tensor<2x?xi64>) -> tensor<?x2xi64>
    %cst_15 = arith.constant dense<1> : tensor<2xi64>
    %15:2 = onnx.Split %14, %cst_15 {axis = 1 : i64} : (tensor<?x2xi64>, tensor<2xi64>) -> (tensor<?x1xi64>, tensor<?x1xi64>)
    %cst_16 = arith.constant dense<1> : tensor<1xi64>
    %16 = onnx.Squeeze %15#0, %cst_16 : (tensor<?x1xi64>, tensor<1xi64>) -> tensor<?xi64>
    %cst_17 = arith.constant dense<1> : tensor<1xi64>
    %17 = onnx.Squeeze %15#1, %cst_17 : (tensor<?x1xi64>, tensor<1xi64>) -> tensor<?xi64>
    %cst_18 = arith.constant dense<0> : tensor<1xi64>
    %18 = onnx.Unsqueeze %1, %cst_18 : (tensor<3x2xf32>, tensor<1xi64>) -> tensor<1x3x2xf32>
    %19 = onnx.Gather %18, %17 {axis = 1 : i64} : (tensor<1x3x2xf32>, tensor<?xi64>) -> tensor<1x?x2xf32>
    %20 = onnx.Reshape %19, %cst_10 {allowzero = 0 : i64} : (tensor<1x?x2xf32>, tensor<2xi64>) -> tensor<?x2xf32>
    %21 = onnx.MatMul %20, %cst_0 : (tensor<?x2xf32>, tensor<2x2xf32>) -> tensor<?x2xf32>
    %22 = onnx.Sigmoid %21 : (tensor<?x2xf32>) -> tensor<?x2xf32>
    %23 = onnx.Mul %21, %22 : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x2xf32>
    %24 = onnx.MatMul %20, %cst_1 : (tensor<?x2xf32>, tensor<2x2xf32>) -> tensor<?x2xf32>
    %25 = onnx.Mul %23, %24 : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x2xf32>
    %26 = onnx.MatMul %25, %cst_2 : (tensor<?x2xf32>, tensor<2x2xf32>) -> tensor<?x2xf32>
    %cst_19 = arith.constant dense<2> : tensor<1xi64>
    %27 = onnx.Unsqueeze %8, %cst_19 : (tensor<3x1xf32>, tensor<1xi64>) -> tensor<3x1x1xf32>
    %28 = onnx.Shape %27 : (tensor<3x1x1xf32>) -> tensor<3xi64>
    %cst_20 = arith.constant dense<1> : tensor<1xi64>
    %29 = onnx.Gather %28, %cst_20 {axis = 0 : i64} : (tensor<3xi64>, tensor<1xi64>) -> tensor<1xi64>
    %cst_21 = arith.constant dense<2> : tensor<1xi64>
    %30 = onnx.Gather %28, %cst_21 {axis = 0 : i64} : (tensor<3xi64>, tensor<1xi64>) -> tensor<1xi64>
    %31 = onnx.Flatten %27 {axis = 2 : i64} : (tensor<3x1x1xf32>) -> tensor<3x1xf32>
    %32 = onnx.Mul %17, %29 : (tensor<?xi64>, tensor<1xi64>) -> tensor<?xi64>
    %33 = onnx.Add %16, %32 : (tensor<?xi64>, tensor<?xi64>) -> tensor<?xi64>
    %34 = onnx.Gather %31, %33 {axis = 0 : i64} : (tensor<3x1xf32>, tensor<?xi64>) -> tensor<?x1xf32>
    %35 = onnx.Shape %33 : (tensor<?xi64>) -> tensor<1xi64>
    %cst_22 = arith.constant dense<-1> : tensor<1xi64>
    %36 = onnx.Concat %cst_22, %30 {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>) -> tensor<2xi64>
    %37 = onnx.Reshape %34, %36 {allowzero = 0 : i64} : (tensor<?x1xf32>, tensor<2xi64>) -> tensor<?x1xf32>
    %38 = onnx.Concat %35, %30 {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>) -> tensor<2xi64>
    %39 = onnx.Reshape %37, %38 {allowzero = 0 : i64} : (tensor<?x1xf32>, tensor<2xi64>) -> tensor<?x1xf32>
    %40 = onnx.Mul %26, %39 : (tensor<?x2xf32>, tensor<?x1xf32>) -> tensor<?x2xf32>
    %41 = onnx.Cast %40 {to = 1 : i64} : (tensor<?x2xf32>) -> tensor<?x2xf32>
    %42 = onnx.Gather %10, %cst_7 {axis = 0 : i64} : (tensor<?x1x3xi64>, tensor<i64>) -> tensor<1x3xi64>
    %43 = onnx.Cast %42 {to = 9 : i64} : (tensor<1x3xi64>) -> tensor<1x3xi1>
    %44 = onnx.NonZero %43 : (tensor<1x3xi1>) -> tensor<2x?xi64>
    %45 = onnx.Transpose %44 {perm = array<i64: 1, 0>} : (tensor<2x?xi64>) -> tensor<?x2xi64>
    %cst_23 = arith.constant dense<1> : tensor<2xi64>
    %46:2 = onnx.Split %45, %cst_23 {axis = 1 : i64} : (tensor<?x2xi64>, tensor<2xi64>) -> (tensor<?x1xi64>, tensor<?x1xi64>)
    %cst_24 = arith.constant dense<1> : tensor<1xi64>
    %47 = onnx.Squeeze %46#0, %cst_24 : (tensor<?x1xi64>, tensor<1xi64>) -> tensor<?xi64>
    %cst_25 = arith.constant dense<1> : tensor<1xi64>
    %48 = onnx.Squeeze %46#1, %cst_25 : (tensor<?x1xi64>, tensor<1xi64>) -> tensor<?xi64>
    %49 = onnx.Gather %18, %48 {axis = 1 : i64} : (tensor<1x3x2xf32>, tensor<?xi64>) -> tensor<1x?x2xf32>
    %50 = onnx.Reshape %49, %cst_11 {allowzero = 0 : i64} : (tensor<1x?x2xf32>, tensor<2xi64>) -> tensor<?x2xf32>
    %51 = onnx.MatMul %50, %cst_3 : (tensor<?x2xf32>, tensor<2x2xf32>) -> tensor<?x2xf32>
    %52 = onnx.Sigmoid %51 : (tensor<?x2xf32>) -> tensor<?x2xf32>
    %53 = onnx.Mul %51, %52 : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x2xf32>
    %54 = onnx.MatMul %50, %cst_4 : (tensor<?x2xf32>, tensor<2x2xf32>) -> tensor<?x2xf32>
    %55 = onnx.Mul %53, %54 : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x2xf32>
    %56 = onnx.MatMul %55, %cst_5 : (tensor<?x2xf32>, tensor<2x2xf32>) -> tensor<?x2xf32>
    %cst_26 = arith.constant dense<2> : tensor<1xi64>
    %57 = onnx.Unsqueeze %8, %cst_26 : (tensor<3x1xf32>, tensor<1xi64>) -> tensor<3x1x1xf32>
    %58 = onnx.Shape %57 : (tensor<3x1x1xf32>) -> tensor<3xi64>
    %cst_27 = arith.constant dense<1> : tensor<1xi64>
    %59 = onnx.Gather %58, %cst_27 {axis = 0 : i64} : (tensor<3xi64>, tensor<1xi64>) -> tensor<1xi64>
    %cst_28 = arith.constant dense<2> : tensor<1xi64>
    %60 = onnx.Gather %58, %cst_28 {axis = 0 : i64} : (tensor<3xi64>, tensor<1xi64>) -> tensor<1xi64>
    %61 = onnx.Flatten %57 {axis = 2 : i64} : (tensor<3x1x1xf32>) -> tensor<3x1xf32>
    %62 = onnx.Mul %48, %59 : (tensor<?xi64>, tensor<1xi64>) -> tensor<?xi64>
    %63 = onnx.Add %47, %62 : (tensor<?xi64>, tensor<?xi64>) -> tensor<?xi64>
    %64 = onnx.Gather %61, %63 {axis = 0 : i64} : (tensor<3x1xf32>, tensor<?xi64>) -> tensor<?x1xf32>
    %65 = onnx.Shape %63 : (tensor<?xi64>) -> tensor<1xi64>
    %cst_29 = arith.constant dense<-1> : tensor<1xi64>
    %66 = onnx.Concat %cst_29, %60 {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>) -> tensor<2xi64>
    %67 = onnx.Reshape %64, %66 {allowzero = 0 : i64} : (tensor<?x1xf32>, tensor<2xi64>) -> tensor<?x1xf32>
    %68 = onnx.Concat %65, %60 {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>) -> tensor<2xi64>
    %69 = onnx.Reshape %67, %68 {allowzero = 0 : i64} : (tensor<?x1xf32>, tensor<2xi64>) -> tensor<?x1xf32>
    %70 = onnx.Mul %56, %69 : (tensor<?x2xf32>, tensor<?x1xf32>) -> tensor<?x2xf32>
    %71 = onnx.Cast %70 {to = 1 : i64} : (tensor<?x2xf32>) -> tensor<?x2xf32>
    %cst_30 = arith.constant dense<[1, 2]> : tensor<2xi64>
    %72 = onnx.Expand %41, %cst_30 : (tensor<?x2xf32>, tensor<2xi64>) -> tensor<?x2xf32>
    %cst_31 = arith.constant dense<1> : tensor<1xi64>
    %73 = onnx.Unsqueeze %17, %cst_31 : (tensor<?xi64>, tensor<1xi64>) -> tensor<?x1xi64>
    %74 = onnx.Shape %72 : (tensor<?x2xf32>) -> tensor<2xi64>
    %75 = onnx.Expand %73, %74 : (tensor<?x1xi64>, tensor<2xi64>) -> tensor<?x2xi64>
    %cst_32 = arith.constant dense<0.000000e+00> : tensor<3x2xf32>
    %76 = onnx.ScatterElements %cst_32, %75, %72 {axis = 0 : i64} : (tensor<3x2xf32>, tensor<?x2xi64>, tensor<?x2xf32>) -> tensor<3x2xf32>
    %cst_33 = arith.constant dense<0.000000e+00> : tensor<3x2xf32>
    %77 = onnx.Add %cst_33, %76 : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
    %cst_34 = arith.constant dense<[0, 1]> : tensor<2xi64>
    %cst_35 = arith.constant dense<0> : tensor<2xi64>
    %cst_36 = arith.constant dense<[1, 9223372036854775807]> : tensor<2xi64>
    %78 = onnx.Slice %77, %cst_35, %cst_36, %cst_34 : (tensor<3x2xf32>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>) -> tensor<1x2xf32>
    %79 = onnx.Shape %78 : (tensor<1x2xf32>) -> tensor<2xi64>
    %80 = onnx.Expand %71, %79 : (tensor<?x2xf32>, tensor<2xi64>) -> tensor<?x2xf32>
    %cst_37 = arith.constant dense<1> : tensor<1xi64>
    %81 = onnx.Unsqueeze %48, %cst_37 : (tensor<?xi64>, tensor<1xi64>) -> tensor<?x1xi64>
    %82 = onnx.Shape %80 : (tensor<?x2xf32>) -> tensor<2xi64>
    %83 = onnx.Expand %81, %82 : (tensor<?x1xi64>, tensor<2xi64>) -> tensor<?x2xi64>
    %cst_38 = arith.constant dense<0.000000e+00> : tensor<3x2xf32>
    %84 = onnx.ScatterElements %cst_38, %83, %80 {axis = 0 : i64} : (tensor<3x2xf32>, tensor<?x2xi64>, tensor<?x2xf32>) -> tensor<3x2xf32>
    %85 = onnx.Add %77, %84 : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
    %cst_39 = arith.constant dense<[1, 3, 2]> : tensor<3xi64>
    %86 = onnx.Reshape %85, %cst_39 {allowzero = 0 : i64} : (tensor<3x2xf32>, tensor<3xi64>) -> tensor<1x3x2xf32>
    return %86 : tensor<1x3x2xf32>
  }
}

