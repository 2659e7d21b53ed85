// DeepseekV3MoE (test/corpus/models.py) at toy sizes: sigmoid scores, a
// selection bias, 4 experts in 2 groups (the best 1 kept by its top-2 sum,
// the others masked with 0.0 as Hugging Face does), top-2, normalised and
// scaled by 2.5; the experts in the dense fallback form (every expert on all
// tokens, weighted by (ids == e)); plus an ungated shared expert.
// RUN: moe-opt %s --moe-raise --canonicalize | FileCheck %s

// CHECK-LABEL: func.func @main_graph(
// CHECK-SAME:    %[[X:.*]]: tensor<3x2xf32>
// CHECK:         %[[LOGITS:.*]] = onnx.MatMul
// CHECK:         moe.layer sigmoid grouped_topk k 2 %[[X]], %[[LOGITS]] bias(%{{.*}}) groups 2 top 1 by top2_sum masked = 0.000000e+00 fc1(%{{.*}}) fc3(%{{.*}}) fc2(%{{.*}}) shared_fc1(%{{.*}}) shared_fc3(%{{.*}}) shared_fc2(%{{.*}}) activation <swiglu> {normalize, scaling_factor = 2.500000e+00 : f64}
// CHECK-SAME:      tensor<4xf32>, tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<3x2xf32>
// CHECK-NOT:     onnx.Equal
// CHECK-NOT:     onnx.TopK

module {
  func.func @main_graph(%arg0: tensor<3x2xf32>) -> tensor<3x2xf32> {
    %0 = onnx.none
    %cst = arith.constant dense<0.000000e+00> : tensor<2x4xf32>
    %cst_0 = arith.constant dense<0.000000e+00> : tensor<1x4xf32>
    %cst_1 = arith.constant dense<[[0.000000e+00, 1.000000e-01], [-1.000000e-01, 4.000000e-01]]> : tensor<2x2xf32>
    %cst_2 = arith.constant dense<[[0.699999988, 0.699999988], [4.000000e-01, -1.000000e-01]]> : tensor<2x2xf32>
    %cst_3 = arith.constant dense<[[-6.000000e-01, 5.000000e-01], [-3.000000e-01, -0.000000e+00]]> : tensor<2x2xf32>
    %cst_4 = arith.constant dense<[[-4.000000e-01, -0.699999988], [-5.000000e-01, -6.000000e-01]]> : tensor<2x2xf32>
    %cst_5 = arith.constant dense<[[-1.000000e-01, 4.000000e-01], [4.000000e-01, -0.699999988]]> : tensor<2x2xf32>
    %cst_6 = arith.constant dense<[[4.000000e-01, -1.000000e-01], [-6.000000e-01, -3.000000e-01]]> : tensor<2x2xf32>
    %cst_7 = arith.constant dense<[[-1.000000e-01, -6.000000e-01], [-1.000000e-01, -6.000000e-01]]> : tensor<2x2xf32>
    %cst_8 = arith.constant dense<[[-1.000000e-01, -3.000000e-01], [0.000000e+00, 3.000000e-01]]> : tensor<2x2xf32>
    %cst_9 = arith.constant dense<[[-6.000000e-01, 6.000000e-01], [-0.000000e+00, -3.000000e-01]]> : tensor<2x2xf32>
    %cst_10 = arith.constant dense<[[6.000000e-01, -6.000000e-01], [3.000000e-01, 4.000000e-01]]> : tensor<2x2xf32>
    %cst_11 = arith.constant dense<[[-1.000000e-01, 6.000000e-01], [-3.000000e-01, -6.000000e-01]]> : tensor<2x2xf32>
    %cst_12 = arith.constant dense<[[1.000000e-01, 5.000000e-01], [-1.000000e-01, 2.000000e-01]]> : tensor<2x2xf32>
    %cst_13 = arith.constant dense<[[3.000000e-01, -2.000000e-01], [2.000000e-01, -1.000000e-01]]> : tensor<2x2xf32>
    %cst_14 = arith.constant dense<[[-6.000000e-01, 6.000000e-01], [4.000000e-01, 5.000000e-01]]> : tensor<2x2xf32>
    %cst_15 = arith.constant dense<[[-5.000000e-01, -5.000000e-01], [0.000000e+00, -4.000000e-01]]> : tensor<2x2xf32>
    %cst_16 = arith.constant dense<[-1, 2]> : tensor<2xi64>
    %1 = onnx.Reshape %arg0, %cst_16 {allowzero = 0 : i64} : (tensor<3x2xf32>, tensor<2xi64>) -> tensor<3x2xf32>
    %2 = onnx.Cast %1 {to = 1 : i64} : (tensor<3x2xf32>) -> tensor<3x2xf32>
    %3 = onnx.MatMul %2, %cst : (tensor<3x2xf32>, tensor<2x4xf32>) -> tensor<3x4xf32>
    %4 = onnx.Sigmoid %3 : (tensor<3x4xf32>) -> tensor<3x4xf32>
    %cst_17 = arith.constant dense<[-1, 4]> : tensor<2xi64>
    %5 = onnx.Reshape %4, %cst_17 {allowzero = 0 : i64} : (tensor<3x4xf32>, tensor<2xi64>) -> tensor<3x4xf32>
    %6 = onnx.Add %5, %cst_0 : (tensor<3x4xf32>, tensor<1x4xf32>) -> tensor<3x4xf32>
    %cst_18 = arith.constant dense<[-1, 2, 2]> : tensor<3xi64>
    %7 = onnx.Reshape %6, %cst_18 {allowzero = 0 : i64} : (tensor<3x4xf32>, tensor<3xi64>) -> tensor<3x2x2xf32>
    %cst_19 = arith.constant dense<2> : tensor<1xi64>
    %8:2 = onnx.TopK %7, %cst_19 {axis = -1 : i64, largest = 1 : i64, sorted = 1 : i64} : (tensor<3x2x2xf32>, tensor<1xi64>) -> (tensor<3x2x2xf32>, tensor<3x2x2xi64>)
    %cst_20 = arith.constant dense<-1> : tensor<1xi64>
    %9 = onnx.ReduceSum %8#0, %cst_20 {keepdims = 0 : i64} : (tensor<3x2x2xf32>, tensor<1xi64>) -> tensor<3x2xf32>
    %cst_21 = arith.constant dense<1> : tensor<1xi64>
    %10:2 = onnx.TopK %9, %cst_21 {axis = -1 : i64, largest = 1 : i64, sorted = 0 : i64} : (tensor<3x2xf32>, tensor<1xi64>) -> (tensor<3x1xf32>, tensor<3x1xi64>)
    %cst_22 = arith.constant dense<0.000000e+00> : tensor<3x2xf32>
    %cst_23 = arith.constant dense<1.000000e+00> : tensor<f32>
    %11 = onnx.Shape %10#1 : (tensor<3x1xi64>) -> tensor<2xi64>
    %12 = onnx.Expand %cst_23, %11 : (tensor<f32>, tensor<2xi64>) -> tensor<3x1xf32>
    %13 = onnx.ScatterElements %cst_22, %10#1, %12 {axis = 1 : i64} : (tensor<3x2xf32>, tensor<3x1xi64>, tensor<3x1xf32>) -> tensor<3x2xf32>
    %cst_24 = arith.constant dense<-1> : tensor<1xi64>
    %14 = onnx.Unsqueeze %13, %cst_24 : (tensor<3x2xf32>, tensor<1xi64>) -> tensor<3x2x1xf32>
    %cst_25 = arith.constant dense<[-1, 2, 2]> : tensor<3xi64>
    %cst_26 = arith.constant dense<3> : tensor<1xi64>
    %15 = onnx.ConstantOfShape %cst_26 {value = dense<1> : tensor<1xi64>} : (tensor<1xi64>) -> tensor<3xi64>
    %cst_27 = arith.constant dense<-1> : tensor<i64>
    %16 = onnx.Mul %15, %cst_27 : (tensor<3xi64>, tensor<i64>) -> tensor<3xi64>
    %cst_28 = arith.constant dense<[-1, 2, 2]> : tensor<3xi64>
    %17 = onnx.Equal %cst_28, %16 : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi1>
    %18 = onnx.Where %17, %15, %cst_25 : (tensor<3xi1>, tensor<3xi64>, tensor<3xi64>) -> tensor<3xi64>
    %19 = onnx.Expand %14, %18 : (tensor<3x2x1xf32>, tensor<3xi64>) -> tensor<3x2x?xf32>
    %cst_29 = arith.constant dense<[-1, 4]> : tensor<2xi64>
    %20 = onnx.Reshape %19, %cst_29 {allowzero = 0 : i64} : (tensor<3x2x?xf32>, tensor<2xi64>) -> tensor<?x4xf32>
    %21 = onnx.Cast %20 {to = 9 : i64} : (tensor<?x4xf32>) -> tensor<?x4xi1>
    %22 = onnx.Not %21 : (tensor<?x4xi1>) -> tensor<?x4xi1>
    %23 = onnx.Cast %22 {to = 9 : i64} : (tensor<?x4xi1>) -> tensor<?x4xi1>
    %cst_30 = arith.constant dense<0.000000e+00> : tensor<f32>
    %24 = onnx.Where %23, %cst_30, %6 : (tensor<?x4xi1>, tensor<f32>, tensor<3x4xf32>) -> tensor<3x4xf32>
    %cst_31 = arith.constant dense<2> : tensor<1xi64>
    %25:2 = onnx.TopK %24, %cst_31 {axis = -1 : i64, largest = 1 : i64, sorted = 0 : i64} : (tensor<3x4xf32>, tensor<1xi64>) -> (tensor<3x2xf32>, tensor<3x2xi64>)
    %26 = onnx.GatherElements %4, %25#1 {axis = 1 : i64} : (tensor<3x4xf32>, tensor<3x2xi64>) -> tensor<3x2xf32>
    %27 = onnx.ReduceSum %26, %cst_20 {keepdims = 1 : i64} : (tensor<3x2xf32>, tensor<1xi64>) -> tensor<3x1xf32>
    %cst_32 = arith.constant dense<9.99999968E-21> : tensor<f32>
    %28 = onnx.Add %27, %cst_32 : (tensor<3x1xf32>, tensor<f32>) -> tensor<3x1xf32>
    %29 = onnx.Div %26, %28 : (tensor<3x2xf32>, tensor<3x1xf32>) -> tensor<3x2xf32>
    %cst_33 = arith.constant dense<2.500000e+00> : tensor<f32>
    %30 = onnx.Mul %29, %cst_33 : (tensor<3x2xf32>, tensor<f32>) -> tensor<3x2xf32>
    %cst_34 = arith.constant dense<[-1, 2]> : tensor<2xi64>
    %31 = onnx.Reshape %arg0, %cst_34 {allowzero = 0 : i64} : (tensor<3x2xf32>, tensor<2xi64>) -> tensor<3x2xf32>
    %cst_35 = arith.constant dense<0> : tensor<i64>
    %32 = onnx.Equal %25#1, %cst_35 : (tensor<3x2xi64>, tensor<i64>) -> tensor<3x2xi1>
    %33 = onnx.Cast %32 {to = 1 : i64} : (tensor<3x2xi1>) -> tensor<3x2xf32>
    %34 = onnx.Mul %30, %33 : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
    %35 = onnx.ReduceSum %34, %cst_20 {keepdims = 0 : i64} : (tensor<3x2xf32>, tensor<1xi64>) -> tensor<3xf32>
    %cst_36 = arith.constant dense<1> : tensor<1xi64>
    %36 = onnx.Unsqueeze %35, %cst_36 : (tensor<3xf32>, tensor<1xi64>) -> tensor<3x1xf32>
    %37 = onnx.MatMul %31, %cst_1 : (tensor<3x2xf32>, tensor<2x2xf32>) -> tensor<3x2xf32>
    %38 = onnx.Sigmoid %37 : (tensor<3x2xf32>) -> tensor<3x2xf32>
    %39 = onnx.Mul %37, %38 : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
    %40 = onnx.MatMul %31, %cst_2 : (tensor<3x2xf32>, tensor<2x2xf32>) -> tensor<3x2xf32>
    %41 = onnx.Mul %39, %40 : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
    %42 = onnx.MatMul %41, %cst_3 : (tensor<3x2xf32>, tensor<2x2xf32>) -> tensor<3x2xf32>
    %43 = onnx.Mul %36, %42 : (tensor<3x1xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
    %cst_37 = arith.constant dense<0.000000e+00> : tensor<3x2xf32>
    %44 = onnx.Add %cst_37, %43 : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
    %cst_38 = arith.constant dense<1> : tensor<i64>
    %45 = onnx.Equal %25#1, %cst_38 : (tensor<3x2xi64>, tensor<i64>) -> tensor<3x2xi1>
    %46 = onnx.Cast %45 {to = 1 : i64} : (tensor<3x2xi1>) -> tensor<3x2xf32>
    %47 = onnx.Mul %30, %46 : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
    %48 = onnx.ReduceSum %47, %cst_20 {keepdims = 0 : i64} : (tensor<3x2xf32>, tensor<1xi64>) -> tensor<3xf32>
    %cst_39 = arith.constant dense<1> : tensor<1xi64>
    %49 = onnx.Unsqueeze %48, %cst_39 : (tensor<3xf32>, tensor<1xi64>) -> tensor<3x1xf32>
    %50 = onnx.MatMul %31, %cst_4 : (tensor<3x2xf32>, tensor<2x2xf32>) -> tensor<3x2xf32>
    %51 = onnx.Sigmoid %50 : (tensor<3x2xf32>) -> tensor<3x2xf32>
    %52 = onnx.Mul %50, %51 : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
    %53 = onnx.MatMul %31, %cst_5 : (tensor<3x2xf32>, tensor<2x2xf32>) -> tensor<3x2xf32>
    %54 = onnx.Mul %52, %53 : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
    %55 = onnx.MatMul %54, %cst_6 : (tensor<3x2xf32>, tensor<2x2xf32>) -> tensor<3x2xf32>
    %56 = onnx.Mul %49, %55 : (tensor<3x1xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
    %57 = onnx.Add %44, %56 : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
    %cst_40 = arith.constant dense<2> : tensor<i64>
    %58 = onnx.Equal %25#1, %cst_40 : (tensor<3x2xi64>, tensor<i64>) -> tensor<3x2xi1>
    %59 = onnx.Cast %58 {to = 1 : i64} : (tensor<3x2xi1>) -> tensor<3x2xf32>
    %60 = onnx.Mul %30, %59 : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
    %61 = onnx.ReduceSum %60, %cst_20 {keepdims = 0 : i64} : (tensor<3x2xf32>, tensor<1xi64>) -> tensor<3xf32>
    %cst_41 = arith.constant dense<1> : tensor<1xi64>
    %62 = onnx.Unsqueeze %61, %cst_41 : (tensor<3xf32>, tensor<1xi64>) -> tensor<3x1xf32>
    %63 = onnx.MatMul %31, %cst_7 : (tensor<3x2xf32>, tensor<2x2xf32>) -> tensor<3x2xf32>
    %64 = onnx.Sigmoid %63 : (tensor<3x2xf32>) -> tensor<3x2xf32>
    %65 = onnx.Mul %63, %64 : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
    %66 = onnx.MatMul %31, %cst_8 : (tensor<3x2xf32>, tensor<2x2xf32>) -> tensor<3x2xf32>
    %67 = onnx.Mul %65, %66 : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
    %68 = onnx.MatMul %67, %cst_9 : (tensor<3x2xf32>, tensor<2x2xf32>) -> tensor<3x2xf32>
    %69 = onnx.Mul %62, %68 : (tensor<3x1xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
    %70 = onnx.Add %57, %69 : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
    %cst_42 = arith.constant dense<3> : tensor<i64>
    %71 = onnx.Equal %25#1, %cst_42 : (tensor<3x2xi64>, tensor<i64>) -> tensor<3x2xi1>
    %72 = onnx.Cast %71 {to = 1 : i64} : (tensor<3x2xi1>) -> tensor<3x2xf32>
    %73 = onnx.Mul %30, %72 : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
    %74 = onnx.ReduceSum %73, %cst_20 {keepdims = 0 : i64} : (tensor<3x2xf32>, tensor<1xi64>) -> tensor<3xf32>
    %cst_43 = arith.constant dense<1> : tensor<1xi64>
    %75 = onnx.Unsqueeze %74, %cst_43 : (tensor<3xf32>, tensor<1xi64>) -> tensor<3x1xf32>
    %76 = onnx.MatMul %31, %cst_10 : (tensor<3x2xf32>, tensor<2x2xf32>) -> tensor<3x2xf32>
    %77 = onnx.Sigmoid %76 : (tensor<3x2xf32>) -> tensor<3x2xf32>
    %78 = onnx.Mul %76, %77 : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
    %79 = onnx.MatMul %31, %cst_11 : (tensor<3x2xf32>, tensor<2x2xf32>) -> tensor<3x2xf32>
    %80 = onnx.Mul %78, %79 : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
    %81 = onnx.MatMul %80, %cst_12 : (tensor<3x2xf32>, tensor<2x2xf32>) -> tensor<3x2xf32>
    %82 = onnx.Mul %75, %81 : (tensor<3x1xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
    %83 = onnx.Add %70, %82 : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
    %84 = onnx.Cast %83 {to = 1 : i64} : (tensor<3x2xf32>) -> tensor<3x2xf32>
    %cst_44 = arith.constant dense<[3, 2]> : tensor<2xi64>
    %85 = onnx.Reshape %84, %cst_44 {allowzero = 0 : i64} : (tensor<3x2xf32>, tensor<2xi64>) -> tensor<3x2xf32>
    %86 = onnx.MatMul %arg0, %cst_13 : (tensor<3x2xf32>, tensor<2x2xf32>) -> tensor<3x2xf32>
    %87 = onnx.Sigmoid %86 : (tensor<3x2xf32>) -> tensor<3x2xf32>
    %88 = onnx.Mul %86, %87 : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
    %89 = onnx.MatMul %arg0, %cst_14 : (tensor<3x2xf32>, tensor<2x2xf32>) -> tensor<3x2xf32>
    %90 = onnx.Mul %88, %89 : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
    %91 = onnx.MatMul %90, %cst_15 : (tensor<3x2xf32>, tensor<2x2xf32>) -> tensor<3x2xf32>
    %92 = onnx.Add %85, %91 : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
    return %92 : tensor<3x2xf32>
  }
}

