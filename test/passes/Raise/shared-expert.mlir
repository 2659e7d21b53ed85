// Qwen2MoeSparseMoeBlock (test/corpus/models.py) at toy sizes: the per-expert
// loop without renormalisation, plus a shared expert gated by
// sigmoid(x @ g); the sum folds into one moe.layer.
// RUN: moe-opt %s --moe-raise --canonicalize | FileCheck %s

// CHECK-LABEL: func.func @main_graph(
// CHECK:         %[[X:.*]] = onnx.Reshape
// CHECK:         %[[LOGITS:.*]] = onnx.MatMul %[[X]]
// CHECK:         moe.layer softmax topk k 1 %[[X]], %[[LOGITS]] fc1(%{{.*}}) fc3(%{{.*}}) fc2(%{{.*}}) shared_fc1(%{{.*}}) shared_fc3(%{{.*}}) shared_fc2(%{{.*}}) shared_gate(%{{.*}}) activation <swiglu> :
// CHECK-SAME:      tensor<1x2xf32>) -> tensor<3x2xf32>
// CHECK-NOT:     onnx.Sigmoid
// CHECK-NOT:     onnx.Add

module {
  func.func @main_graph(%arg0: tensor<1x3x2xf32>) -> tensor<1x3x2xf32> {
    %0 = onnx.none
    %cst = arith.constant dense<[[5.000000e-01, 1.000000e-01], [-0.699999988, -1.000000e-01]]> : tensor<2x2xf32>
    %cst_0 = arith.constant dense<[[-1.000000e-01, 3.000000e-01], [-3.000000e-01, -4.000000e-01]]> : tensor<2x2xf32>
    %cst_1 = arith.constant dense<[[3.000000e-01, 5.000000e-01], [4.000000e-01, 3.000000e-01]]> : tensor<2x2xf32>
    %cst_2 = arith.constant dense<[[-0.699999988, 4.000000e-01], [-5.000000e-01, 1.000000e-01]]> : tensor<2x2xf32>
    %cst_3 = arith.constant dense<[[-6.000000e-01, 0.699999988], [-4.000000e-01, 5.000000e-01]]> : tensor<2x2xf32>
    %cst_4 = arith.constant dense<[[-3.000000e-01, -0.699999988], [-2.000000e-01, -0.000000e+00]]> : tensor<2x2xf32>
    %cst_5 = arith.constant dense<[[-5.000000e-01, -0.000000e+00], [-5.000000e-01, 1.000000e-01]]> : tensor<2x2xf32>
    %cst_6 = arith.constant dense<[[-3.000000e-01, -4.000000e-01], [4.000000e-01, 6.000000e-01]]> : tensor<2x2xf32>
    %cst_7 = arith.constant dense<[[5.000000e-01, -2.000000e-01], [-6.000000e-01, 0.000000e+00]]> : tensor<2x2xf32>
    %cst_8 = arith.constant dense<[[1.000000e-01, 3.000000e-01], [2.000000e-01, 0.000000e+00]]> : tensor<2x2xf32>
    %cst_9 = arith.constant dense<[[-3.000000e-01], [3.000000e-01]]> : tensor<2x1xf32>
    %cst_10 = arith.constant dense<0> : tensor<i64>
    %cst_11 = arith.constant dense<1> : tensor<i64>
    %cst_12 = arith.constant dense<2> : tensor<i64>
    %cst_13 = arith.constant dense<[-1, 2]> : tensor<2xi64>
    %cst_14 = arith.constant dense<[-1, 2]> : tensor<2xi64>
    %cst_15 = arith.constant dense<[-1, 2]> : tensor<2xi64>
    %1 = onnx.Reshape %arg0, %cst_13 {allowzero = 0 : i64} : (tensor<1x3x2xf32>, tensor<2xi64>) -> tensor<3x2xf32>
    %2 = onnx.MatMul %1, %cst : (tensor<3x2xf32>, tensor<2x2xf32>) -> tensor<3x2xf32>
    %3 = onnx.Softmax %2 {axis = 1 : i64} : (tensor<3x2xf32>) -> tensor<3x2xf32>
    %4 = onnx.Cast %3 {to = 1 : i64} : (tensor<3x2xf32>) -> tensor<3x2xf32>
    %cst_16 = arith.constant dense<1> : tensor<1xi64>
    %5:2 = onnx.TopK %4, %cst_16 {axis = -1 : i64, largest = 1 : i64, sorted = 1 : i64} : (tensor<3x2xf32>, tensor<1xi64>) -> (tensor<3x1xf32>, tensor<3x1xi64>)
    %6 = onnx.Cast %5#0 {to = 1 : i64} : (tensor<3x1xf32>) -> tensor<3x1xf32>
    %cst_17 = arith.constant dense<[0, 1]> : tensor<2xi64>
    %7 = onnx.OneHot %5#1, %cst_12, %cst_17 {axis = -1 : i64} : (tensor<3x1xi64>, tensor<i64>, tensor<2xi64>) -> tensor<3x1x?xi64>
    %8 = onnx.Transpose %7 {perm = array<i64: 2, 1, 0>} : (tensor<3x1x?xi64>) -> tensor<?x1x3xi64>
    %9 = onnx.Gather %8, %cst_10 {axis = 0 : i64} : (tensor<?x1x3xi64>, tensor<i64>) -> tensor<1x3xi64>
    %10 = onnx.Cast %9 {to = 9 : i64} : (tensor<1x3xi64>) -> tensor<1x3xi1>
    %11 = onnx.NonZero %10 : (tensor<1x3xi1>) -> tensor<2x?xi64>
    %12 = onnx.Transpose %11 {perm = array<i64: 1, 0>} : (tensor<2x?xi64>) -> tensor<?x2xi64>
    %cst_18 = arith.constant dense<1> : tensor<2xi64>
    %13:2 = onnx.Split %12, %cst_18 {axis = 1 : i64} : (tensor<?x2xi64>, tensor<2xi64>) -> (tensor<?x1xi64>, tensor<?x1xi64>)
    %cst_19 = arith.constant dense<1> : tensor<1xi64>
    %14 = onnx.Squeeze %13#0, %cst_19 : (tensor<?x1xi64>, tensor<1xi64>) -> tensor<?xi64>
    %cst_20 = arith.constant dense<1> : tensor<1xi64>
    %15 = onnx.Squeeze %13#1, %cst_20 : (tensor<?x1xi64>, tensor<1xi64>) -> tensor<?xi64>
    %cst_21 = arith.constant dense<0> : tensor<1xi64>
    %16 = onnx.Unsqueeze %1, %cst_21 : (tensor<3x2xf32>, tensor<1xi64>) -> tensor<1x3x2xf32>
    %17 = onnx.Gather %16, %15 {axis = 1 : i64} : (tensor<1x3x2xf32>, tensor<?xi64>) -> tensor<1x?x2xf32>
    %18 = onnx.Reshape %17, %cst_14 {allowzero = 0 : i64} : (tensor<1x?x2xf32>, tensor<2xi64>) -> tensor<?x2xf32>
    %19 = onnx.MatMul %18, %cst_0 : (tensor<?x2xf32>, tensor<2x2xf32>) -> tensor<?x2xf32>
    %20 = onnx.Sigmoid %19 : (tensor<?x2xf32>) -> tensor<?x2xf32>
    %21 = onnx.Mul %19, %20 : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x2xf32>
    %22 = onnx.MatMul %18, %cst_1 : (tensor<?x2xf32>, tensor<2x2xf32>) -> tensor<?x2xf32>
    %23 = onnx.Mul %21, %22 : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x2xf32>
    %24 = onnx.MatMul %23, %cst_2 : (tensor<?x2xf32>, tensor<2x2xf32>) -> tensor<?x2xf32>
    %cst_22 = arith.constant dense<2> : tensor<1xi64>
    %25 = onnx.Unsqueeze %6, %cst_22 : (tensor<3x1xf32>, tensor<1xi64>) -> tensor<3x1x1xf32>
    %26 = onnx.Shape %25 : (tensor<3x1x1xf32>) -> tensor<3xi64>
    %cst_23 = arith.constant dense<1> : tensor<1xi64>
    %27 = onnx.Gather %26, %cst_23 {axis = 0 : i64} : (tensor<3xi64>, tensor<1xi64>) -> tensor<1xi64>
    %cst_24 = arith.constant dense<2> : tensor<1xi64>
    %28 = onnx.Gather %26, %cst_24 {axis = 0 : i64} : (tensor<3xi64>, tensor<1xi64>) -> tensor<1xi64>
    %29 = onnx.Flatten %25 {axis = 2 : i64} : (tensor<3x1x1xf32>) -> tensor<3x1xf32>
    %30 = onnx.Mul %15, %27 : (tensor<?xi64>, tensor<1xi64>) -> tensor<?xi64>
    %31 = onnx.Add %14, %30 : (tensor<?xi64>, tensor<?xi64>) -> tensor<?xi64>
    %32 = onnx.Gather %29, %31 {axis = 0 : i64} : (tensor<3x1xf32>, tensor<?xi64>) -> tensor<?x1xf32>
    %33 = onnx.Shape %31 : (tensor<?xi64>) -> tensor<1xi64>
    %cst_25 = arith.constant dense<-1> : tensor<1xi64>
    %34 = onnx.Concat %cst_25, %28 {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>) -> tensor<2xi64>
    %35 = onnx.Reshape %32, %34 {allowzero = 0 : i64} : (tensor<?x1xf32>, tensor<2xi64>) -> tensor<?x1xf32>
    %36 = onnx.Concat %33, %28 {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>) -> tensor<2xi64>
    %37 = onnx.Reshape %35, %36 {allowzero = 0 : i64} : (tensor<?x1xf32>, tensor<2xi64>) -> tensor<?x1xf32>
    %38 = onnx.Mul %24, %37 : (tensor<?x2xf32>, tensor<?x1xf32>) -> tensor<?x2xf32>
    %39 = onnx.Cast %38 {to = 1 : i64} : (tensor<?x2xf32>) -> tensor<?x2xf32>
    %40 = onnx.Gather %8, %cst_11 {axis = 0 : i64} : (tensor<?x1x3xi64>, tensor<i64>) -> tensor<1x3xi64>
    %41 = onnx.Cast %40 {to = 9 : i64} : (tensor<1x3xi64>) -> tensor<1x3xi1>
    %42 = onnx.NonZero %41 : (tensor<1x3xi1>) -> tensor<2x?xi64>
    %43 = onnx.Transpose %42 {perm = array<i64: 1, 0>} : (tensor<2x?xi64>) -> tensor<?x2xi64>
    %cst_26 = arith.constant dense<1> : tensor<2xi64>
    %44:2 = onnx.Split %43, %cst_26 {axis = 1 : i64} : (tensor<?x2xi64>, tensor<2xi64>) -> (tensor<?x1xi64>, tensor<?x1xi64>)
    %cst_27 = arith.constant dense<1> : tensor<1xi64>
    %45 = onnx.Squeeze %44#0, %cst_27 : (tensor<?x1xi64>, tensor<1xi64>) -> tensor<?xi64>
    %cst_28 = arith.constant dense<1> : tensor<1xi64>
    %46 = onnx.Squeeze %44#1, %cst_28 : (tensor<?x1xi64>, tensor<1xi64>) -> tensor<?xi64>
    %47 = onnx.Gather %16, %46 {axis = 1 : i64} : (tensor<1x3x2xf32>, tensor<?xi64>) -> tensor<1x?x2xf32>
    %48 = onnx.Reshape %47, %cst_15 {allowzero = 0 : i64} : (tensor<1x?x2xf32>, tensor<2xi64>) -> tensor<?x2xf32>
    %49 = onnx.MatMul %48, %cst_3 : (tensor<?x2xf32>, tensor<2x2xf32>) -> tensor<?x2xf32>
    %50 = onnx.Sigmoid %49 : (tensor<?x2xf32>) -> tensor<?x2xf32>
    %51 = onnx.Mul %49, %50 : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x2xf32>
    %52 = onnx.MatMul %48, %cst_4 : (tensor<?x2xf32>, tensor<2x2xf32>) -> tensor<?x2xf32>
    %53 = onnx.Mul %51, %52 : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x2xf32>
    %54 = onnx.MatMul %53, %cst_5 : (tensor<?x2xf32>, tensor<2x2xf32>) -> tensor<?x2xf32>
    %55 = onnx.Shape %25 : (tensor<3x1x1xf32>) -> tensor<3xi64>
    %cst_29 = arith.constant dense<1> : tensor<1xi64>
    %56 = onnx.Gather %55, %cst_29 {axis = 0 : i64} : (tensor<3xi64>, tensor<1xi64>) -> tensor<1xi64>
    %cst_30 = arith.constant dense<2> : tensor<1xi64>
    %57 = onnx.Gather %55, %cst_30 {axis = 0 : i64} : (tensor<3xi64>, tensor<1xi64>) -> tensor<1xi64>
    %58 = onnx.Flatten %25 {axis = 2 : i64} : (tensor<3x1x1xf32>) -> tensor<3x1xf32>
    %59 = onnx.Mul %46, %56 : (tensor<?xi64>, tensor<1xi64>) -> tensor<?xi64>
    %60 = onnx.Add %45, %59 : (tensor<?xi64>, tensor<?xi64>) -> tensor<?xi64>
    %61 = onnx.Gather %58, %60 {axis = 0 : i64} : (tensor<3x1xf32>, tensor<?xi64>) -> tensor<?x1xf32>
    %62 = onnx.Shape %60 : (tensor<?xi64>) -> tensor<1xi64>
    %cst_31 = arith.constant dense<-1> : tensor<1xi64>
    %63 = onnx.Concat %cst_31, %57 {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>) -> tensor<2xi64>
    %64 = onnx.Reshape %61, %63 {allowzero = 0 : i64} : (tensor<?x1xf32>, tensor<2xi64>) -> tensor<?x1xf32>
    %65 = onnx.Concat %62, %57 {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>) -> tensor<2xi64>
    %66 = onnx.Reshape %64, %65 {allowzero = 0 : i64} : (tensor<?x1xf32>, tensor<2xi64>) -> tensor<?x1xf32>
    %67 = onnx.Mul %54, %66 : (tensor<?x2xf32>, tensor<?x1xf32>) -> tensor<?x2xf32>
    %68 = onnx.Cast %67 {to = 1 : i64} : (tensor<?x2xf32>) -> tensor<?x2xf32>
    %cst_32 = arith.constant dense<[1, 2]> : tensor<2xi64>
    %69 = onnx.Expand %39, %cst_32 : (tensor<?x2xf32>, tensor<2xi64>) -> tensor<?x2xf32>
    %cst_33 = arith.constant dense<1> : tensor<1xi64>
    %70 = onnx.Unsqueeze %15, %cst_33 : (tensor<?xi64>, tensor<1xi64>) -> tensor<?x1xi64>
    %71 = onnx.Shape %69 : (tensor<?x2xf32>) -> tensor<2xi64>
    %72 = onnx.Expand %70, %71 : (tensor<?x1xi64>, tensor<2xi64>) -> tensor<?x2xi64>
    %cst_34 = arith.constant dense<0.000000e+00> : tensor<3x2xf32>
    %73 = onnx.ScatterElements %cst_34, %72, %69 {axis = 0 : i64} : (tensor<3x2xf32>, tensor<?x2xi64>, tensor<?x2xf32>) -> tensor<3x2xf32>
    %cst_35 = arith.constant dense<0.000000e+00> : tensor<3x2xf32>
    %74 = onnx.Add %cst_35, %73 : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
    %cst_36 = arith.constant dense<[0, 1]> : tensor<2xi64>
    %cst_37 = arith.constant dense<0> : tensor<2xi64>
    %cst_38 = arith.constant dense<[1, 9223372036854775807]> : tensor<2xi64>
    %75 = onnx.Slice %74, %cst_37, %cst_38, %cst_36 : (tensor<3x2xf32>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>) -> tensor<1x2xf32>
    %76 = onnx.Shape %75 : (tensor<1x2xf32>) -> tensor<2xi64>
    %77 = onnx.Expand %68, %76 : (tensor<?x2xf32>, tensor<2xi64>) -> tensor<?x2xf32>
    %cst_39 = arith.constant dense<1> : tensor<1xi64>
    %78 = onnx.Unsqueeze %46, %cst_39 : (tensor<?xi64>, tensor<1xi64>) -> tensor<?x1xi64>
    %79 = onnx.Shape %77 : (tensor<?x2xf32>) -> tensor<2xi64>
    %80 = onnx.Expand %78, %79 : (tensor<?x1xi64>, tensor<2xi64>) -> tensor<?x2xi64>
    %cst_40 = arith.constant dense<0.000000e+00> : tensor<3x2xf32>
    %81 = onnx.ScatterElements %cst_40, %80, %77 {axis = 0 : i64} : (tensor<3x2xf32>, tensor<?x2xi64>, tensor<?x2xf32>) -> tensor<3x2xf32>
    %82 = onnx.Add %74, %81 : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
    %83 = onnx.MatMul %1, %cst_6 : (tensor<3x2xf32>, tensor<2x2xf32>) -> tensor<3x2xf32>
    %84 = onnx.Sigmoid %83 : (tensor<3x2xf32>) -> tensor<3x2xf32>
    %85 = onnx.Mul %83, %84 : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
    %86 = onnx.MatMul %1, %cst_7 : (tensor<3x2xf32>, tensor<2x2xf32>) -> tensor<3x2xf32>
    %87 = onnx.Mul %85, %86 : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
    %88 = onnx.MatMul %87, %cst_8 : (tensor<3x2xf32>, tensor<2x2xf32>) -> tensor<3x2xf32>
    %89 = onnx.MatMul %1, %cst_9 : (tensor<3x2xf32>, tensor<2x1xf32>) -> tensor<3x1xf32>
    %90 = onnx.Sigmoid %89 : (tensor<3x1xf32>) -> tensor<3x1xf32>
    %91 = onnx.Mul %90, %88 : (tensor<3x1xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
    %92 = onnx.Add %82, %91 : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
    %cst_41 = arith.constant dense<[1, 3, 2]> : tensor<3xi64>
    %93 = onnx.Reshape %92, %cst_41 {allowzero = 0 : i64} : (tensor<3x2xf32>, tensor<3xi64>) -> tensor<1x3x2xf32>
    return %93 : tensor<1x3x2xf32>
  }
}

