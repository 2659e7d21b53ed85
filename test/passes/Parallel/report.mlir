// `report` names every exchange with its type and what each rank sends.
// RUN: moe-opt %s --moe-set-plan="dp=2 ep=2" --moe-partition=report -o /dev/null 2>&1 | FileCheck %s
// Ragged exchanges send at most their buffer, after the counts.
// RUN: moe-opt %S/expert-parallel.mlir --moe-set-plan="ep=2" --moe-partition=report -o /dev/null 2>&1 | FileCheck %s --check-prefix=RAGGED

func.func @block(%x: tensor<16x8xf32>, %logits: tensor<16x8xf32>,
                 %w1: tensor<8x16x8xf32>, %w2: tensor<8x8x16xf32>) -> tensor<16x8xf32> {
  %y = moe.layer softmax topk k 2 %x, %logits capacity 4 drop position
      fc1(%w1) fc2(%w2) activation <silu>
      : (tensor<16x8xf32>, tensor<16x8xf32>, tensor<8x16x8xf32>,
         tensor<8x8x16xf32>) -> tensor<16x8xf32>
  return %y : tensor<16x8xf32>
}

// CHECK: remark: exchange moe.prefix_sum over [dp, ep] (4 ranks): 'tensor<8xi32>' -> 'tensor<8xi32>'; each rank sends 32 bytes
// CHECK: remark: exchange shard.all_to_all over [ep] (2 ranks): 'tensor<8x4x8xf32>' -> 'tensor<8x4x8xf32>'; each rank sends 512 bytes
// CHECK: remark: exchange shard.all_to_all over [ep] (2 ranks): 'tensor<8xi32>' -> 'tensor<8xi32>'; each rank sends 16 bytes
// CHECK: remark: exchange shard.all_to_all over [ep] (2 ranks): 'tensor<8x4x8xf32>' -> 'tensor<8x4x8xf32>'; each rank sends 512 bytes
// CHECK: remark: exchange shard.all_gather over [dp, ep] (4 ranks): 'tensor<4x8xf32>' -> 'tensor<16x8xf32>'; each rank sends 384 bytes
// CHECK-NOT: remark

// RAGGED: remark: exchange moe.all_to_all over [ep] (2 ranks): 'tensor<16x8xf32>', 'tensor<8xi32>' -> 'tensor<32x8xf32>', 'tensor<8xi32>'; each rank sends up to 512 bytes after 32 bytes of counts
// RAGGED: remark: exchange moe.all_to_all over [ep] (2 ranks): 'tensor<32x8xf32>', 'tensor<8xi32>' -> 'tensor<16x8xf32>', 'tensor<8xi32>'; each rank sends up to 1024 bytes after 32 bytes of counts
// RAGGED: remark: exchange shard.all_gather over [ep] (2 ranks): 'tensor<8x8xf32>' -> 'tensor<16x8xf32>'; each rank sends 256 bytes
