// Each invalid plan is one error that names the problem.
// RUN: not moe-opt %s --moe-set-plan="world-size=8 ep=3" 2>&1 | FileCheck %s --check-prefix=EP-WORLD
// RUN: not moe-opt %s --moe-set-plan="world-size=8 ep=4 tp=4" 2>&1 | FileCheck %s --check-prefix=PRODUCT
// RUN: not moe-opt %s --moe-set-plan="world-size=8 ep=2 tp=2 dp=4" 2>&1 | FileCheck %s --check-prefix=DP-WORLD
// RUN: not moe-opt %s --moe-set-plan="dp=4 dp-shard=3" 2>&1 | FileCheck %s --check-prefix=SHARD
// RUN: not moe-opt %s --moe-set-plan="ep=-2" 2>&1 | FileCheck %s --check-prefix=NEGATIVE
// RUN: not moe-opt %s --moe-set-plan="dispatcher=broadcast" 2>&1 | FileCheck %s --check-prefix=DISPATCHER
// RUN: not moe-opt %s --moe-set-plan="smp-config=%S/Inputs/missing.json" 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: not moe-opt %s --moe-set-plan="smp-config=%S/Inputs/bad-unknown-field.json" 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not moe-opt %s --moe-set-plan="smp-config=%S/Inputs/bad-negative-coeff.json" 2>&1 | FileCheck %s --check-prefix=COEFF
// RUN: not moe-opt %s --moe-set-plan="smp-config=%S/Inputs/bad-balancing.json" 2>&1 | FileCheck %s --check-prefix=BALANCING
// RUN: not moe-opt %s --moe-set-plan="smp-config=%S/Inputs/bad-type.json" 2>&1 | FileCheck %s --check-prefix=TYPE
// RUN: not moe-opt %s --moe-set-plan="smp-config=%S/Inputs/bad-zero-degree.json" 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not moe-opt %s --moe-set-plan="smp-config=%S/Inputs/bad-context-parallel.json" 2>&1 | FileCheck %s --check-prefix=CONTEXT
// RUN: not moe-opt %s --moe-set-plan="smp-config=%S/Inputs/bad-smp-moe-off.json" 2>&1 | FileCheck %s --check-prefix=SMPMOE
// RUN: not moe-opt %s --moe-set-plan="smp-config=%S/Inputs/bad-not-json.json" 2>&1 | FileCheck %s --check-prefix=JSON

// EP-WORLD: error: moe-set-plan: invalid plan: ep = 3 does not divide the world size 8
// PRODUCT: error: moe-set-plan: invalid plan: pp x ep x tp = 16 does not divide the world size 8
// DP-WORLD: error: moe-set-plan: invalid plan: dp = 4 with pp x ep x tp = 4 makes 16 ranks, not the world size 8
// SHARD: error: moe-set-plan: invalid plan: the weight-sharding degree 3 does not divide dp = 4
// NEGATIVE: error: moe-set-plan: ep must be at least 1, got -2
// DISPATCHER: error: moe-set-plan: dispatcher must be all-to-all or all-gather, got 'broadcast'
// MISSING: error: moe-set-plan: cannot read {{.*}}missing.json: No such file or directory
// UNKNOWN: error: moe-set-plan: {{.*}}bad-unknown-field.json: unknown field 'expert_paralel_degree'
// COEFF: error: moe-set-plan: {{.*}}bad-negative-coeff.json: 'moe_aux_loss_coeff' must be finite and not negative, got -0.5
// BALANCING: error: moe-set-plan: {{.*}}: 'moe_load_balancing' must be one of "sinkhorn", "aux_loss", "balanced" or "none"
// TYPE: error: moe-set-plan: {{.*}}: 'expert_parallel_degree' must be an integer
// ZERO: error: moe-set-plan: {{.*}}: 'expert_parallel_degree' must be at least 1, got 0
// CONTEXT: error: moe-set-plan: {{.*}}: 'context_parallel_degree' is 2, but context parallelism is not supported; use 1
// SMPMOE: error: moe-set-plan: {{.*}}: 'smp_moe' is false, which asks for another MoE implementation than this one
// JSON: error: moe-set-plan: {{.*}}bad-not-json.json: not valid JSON: {{.*}}

module {}
