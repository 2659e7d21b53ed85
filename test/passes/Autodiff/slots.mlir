// RUN: moe-opt %s --moe-set-plan="ep=2" --moe-place-experts="redundant-per-rank=1" --moe-partition --moe-autodiff="loss=mse" | FileCheck %s
// RUN: moe-opt %s --moe-set-plan --moe-place-experts="redundant-per-rank=1" --moe-partition --moe-autodiff="loss=mse" | FileCheck %s --check-prefix=ONE

// Experts on slots, differentiated: each group (source rank x local slot)
// keeps its own weight gradient and moe.slot_grad_sum adds them per slot
// in source order over the EP ranks, so that every replica's gradient has
// the bits of one copy serving every rank. 4 experts on 2 ranks with one
// redundant slot each: 6 slots, 3 per rank, 6 groups per rank.
// CHECK-LABEL: func.func @main
// CHECK: %[[T:.*]] = moe.slot_table layer 0 experts 4 initial [0, 1, 2, 3, 0, 1] : tensor<6xi32>
// CHECK: moe.place %{{.*}}, %[[T]] source %{{.*}} ranks 2
// CHECK: %{{.*}}, %[[D1:.*]], %[[D2:.*]] = moe.experts_grad {{.*}} activation <relu> per_group {{.*}} -> (tensor<16x4xf32>, tensor<6x8x4xf32>, tensor<6x4x8xf32>)
// CHECK-DAG: moe.slot_grad_sum %[[D1]], %[[T]] on @world grid_axes = [3] : (tensor<6x8x4xf32>, tensor<6xi32>) -> tensor<3x8x4xf32>
// CHECK-DAG: moe.slot_grad_sum %[[D2]], %[[T]] on @world grid_axes = [3] : (tensor<6x4x8xf32>, tensor<6xi32>) -> tensor<3x4x8xf32>
// CHECK: return {{.*}} tensor<3x4x8xf32>, tensor<3x8x4xf32>

// On one rank the sum has no exchange: a part per slot, the first slot's.
// ONE: %[[T:.*]] = moe.slot_table layer 0 experts 4 initial [0, 1, 2, 3, 0] : tensor<5xi32>
// ONE: %{{.*}}, %[[D1:.*]], %{{.*}} = moe.experts_grad {{.*}} per_group {{.*}} -> (tensor<16x4xf32>, tensor<5x8x4xf32>, tensor<5x4x8xf32>)
// ONE: moe.slot_grad_sum %[[D1]], %[[T]] : (tensor<5x8x4xf32>, tensor<5xi32>) -> tensor<5x8x4xf32>
func.func @main(%x: tensor<8x4xf32> {onnx.name = "x"}) -> (tensor<8x4xf32> {onnx.name = "y"}) {
  %rw = arith.constant dense_resource<router.w> : tensor<4x4xf32>
  %logits = onnx.MatMul %x, %rw : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
  %w1 = arith.constant dense_resource<experts.w1> : tensor<4x8x4xf32>
  %w2 = arith.constant dense_resource<experts.w2> : tensor<4x4x8xf32>
  %y = moe.layer softmax topk k 2 %x, %logits fc1(%w1) fc2(%w2) activation <relu>
      : (tensor<8x4xf32>, tensor<8x4xf32>, tensor<4x8x4xf32>, tensor<4x4x8xf32>) -> tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}

{-#
  dialect_resources: {
    builtin: {
      router.w: "0x0400000014ff4d3ccc7058bc9728833d4cde2b3c01695bbdfd1b143d9487053e52f6c13dfe1f90bd449401be104b7fbdbe6a873b49156ebef03bb3bc9e29ffbde6f795bd",
      experts.w1: "0x04000000b1ed5ebd7a8e01bd979a283dba81d53d589752bc05ed0b3e5c3b88bd81fa0f3ddc07b93d9e071a3cc64498bdf5c4bcbd087c3bbd4462b43c12c5cebd4c5babbce86f82bcc5875d3d48d9af3c888f113d73e785bde65b54bce58ea03d67ed183ea6ed00be9a061b3e51d1093e3803a03d5ea4d83c319500bd234d153effba483ec77c383ea8aa063e0d62123db276f7bd5d86e9b93172863d9fed03be8dd7213d7a12303daf8c8e3de281f2bd468487bd8dc332bd4f93efbd7c1c323e02204bbdf7be063d98d2d3bccb25223e7934073eebb5813db0a361be117daa3bd9048c3d809ccd3d40187dbdef923a3e4e3607be1f7b87bd8c7fbf3dfebda03b850b4d3e576f9a3c9bad81bd67a61abd7b77dfbd9ed502beb81b813da70b6e3d1590043e138b9abdf0f62c3e926debbc2b38213ee34431bd82a096bdca9fcc3cd93dd33d28e6833c26d56fbd455709be03840fbe1ee64d3d77b1ca3d139786bca907dcbd8dccb23dc21c03be4e0992bd715e7e3d1a6a66beca411e3d763d6ebd3a0b333c0b0ff8bb7692a53c9a2a8e3d6a509bbd3182113e3ab4943de4cbac3d6c90ee3d4e4ca13d08deac3d84b4f73b051a12be05425dbcbb989dbd52b011be7bb9d33cbbe068bd69e7d2bd4c9bd5bd24e3db3c7be9123d6e6b073ee161b6ba695ed53d88970f3ece8deb3d063572be6aa2fb3dbd1b0b3da6932d3d040e183dffc61c3d",
      experts.w2: "0x0400000002d5023dca0213bd3aba42be267232bcb29aa4bdac37dd3dba8eecbc1ac4083cd2ffadbda62651bd892a97ba381a18be3d52f63cedc92dbcded5f2bd3c9475be6a25523de5c7f3bc691759bd3775c1bcd4013a3e1530a3bbc1ea0d3cb94618be01b0283ecbe6bb3d1d82da3dc9369c3b1cbbbb3d98f0173d89297b3d5a5a79bc17ed16be99b5d23dce2346be5e8ec4bc798ba7bce893d5bd9f227b3d2f1ca4bcf7f032bd5bed543def3443bd473b0e3ebcf40f3d6b4942bdbd1747bef7e905be3c95de3dc4d1a5bba1efe7bcdb44283ee15703beace26fbd699241bdec29703d5be487bd86417bbd075e24beea5e953deb18a53db91f43bddfce853cf15d04be324141bd281a0d3e99615e3ccb946c3e9237a1bd3baf6d3d8b28a0bc4dc2673d9e0a3dbae3dd65bd1bb0b1bd28fb9c3ebd71fdbb8d814ebe5ad584bdcfdc8a3dafcd4cbd484f0b3e8a4acd3d749779bc6e6b41bd83c8cdbd685a8fbd90d916be0da9f63d44e3223ee8a000be3802f2bd7a1835beb865c5bd610b9fbe51f0e9bddccd043e64960dbdd304af3d1f4848bdd64a343e0a33a33cd8771cbd22af823e57e704bd461bfabd9967a53c62827ebb1e62da3d29c0bcbd58cea43d94a4ae3d0bbe88bdc0ba853c5423aabdf335703e313590bd4c9439bd9c48dabd72c50dbd59091aba433e9d3d2a0e7abd9f2f98bc6b0c11beb573a9bdec188d3e223fd53d"
    }
  }
#-}
