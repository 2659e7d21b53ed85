// Plan sizes that overflow, degrees of 0, and config files that would be
// read silently wrong: each is one error naming the problem. A degree option
// counts as given whatever its value, so 0 is refused like -1; every product
// of degrees is overflow-checked and the world size is at most 2^31 - 1.

// Options: 0 and negative degrees.
// RUN: not moe-opt %s --moe-set-plan="ep=0" 2>&1 | FileCheck %s --check-prefix=EP0
// RUN: not moe-opt %s --moe-set-plan="pp=0" 2>&1 | FileCheck %s --check-prefix=PP0
// RUN: not moe-opt %s --moe-set-plan="world-size=0" 2>&1 | FileCheck %s --check-prefix=WORLD0
// RUN: not moe-opt %s --moe-set-plan="dp=0 ep=2" 2>&1 | FileCheck %s --check-prefix=DP0
// RUN: not moe-opt %s --moe-set-plan="dp-shard=0" 2>&1 | FileCheck %s --check-prefix=SHARD0
// RUN: not moe-opt %s --moe-set-plan="tp=-1" 2>&1 | FileCheck %s --check-prefix=TPNEG
// RUN: not moe-opt %s --moe-set-plan="seed=-1" 2>&1 | FileCheck %s --check-prefix=SEED
// EP0: error: moe-set-plan: ep must be at least 1, got 0
// PP0: error: moe-set-plan: pp must be at least 1, got 0
// WORLD0: error: moe-set-plan: world-size must be at least 1, got 0
// DP0: error: moe-set-plan: dp must be at least 1, got 0
// SHARD0: error: moe-set-plan: dp-shard must be at least 1, got 0
// TPNEG: error: moe-set-plan: tp must be at least 1, got -1
// SEED: error: moe-set-plan: seed must not be negative, got -1

// Options: products that overflow int64 (2^62 x 4 wraps to 0, which then
// divided the world size) or pass 2^31 - 1 ranks.
// RUN: not moe-opt %s --moe-set-plan="ep=4611686018427387904 tp=4" 2>&1 | FileCheck %s --check-prefix=WRAP
// RUN: not moe-opt %s --moe-set-plan="world-size=8 ep=4611686018427387904 tp=4" 2>&1 | FileCheck %s --check-prefix=WRAP
// RUN: not moe-opt %s --moe-set-plan="pp=4611686018427387904 ep=2 tp=2" 2>&1 | FileCheck %s --check-prefix=WRAP-PP
// RUN: not moe-opt %s --moe-set-plan="dp=65536 ep=32768" 2>&1 | FileCheck %s --check-prefix=RANKS
// RUN: not moe-opt %s --moe-set-plan="world-size=8 ep=2 dp=4611686018427387904" 2>&1 | FileCheck %s --check-prefix=DP-WRAP
// RUN: not moe-opt %s --moe-set-plan="world-size=4294967296 ep=2" 2>&1 | FileCheck %s --check-prefix=WORLD-MAX
// WRAP: error: moe-set-plan: invalid plan: pp x ep x tp = 1 x 4611686018427387904 x 4 is more than the 2147483647 (2^31 - 1) ranks an MPI rank number can count
// WRAP-PP: error: moe-set-plan: invalid plan: pp x ep x tp = 4611686018427387904 x 2 x 2 is more than the 2147483647 (2^31 - 1) ranks
// RANKS: error: moe-set-plan: invalid plan: pp x dp x ep x tp = 1 x 65536 x 32768 x 1 is more than the 2147483647 (2^31 - 1) ranks
// DP-WRAP: error: moe-set-plan: invalid plan: dp = 4611686018427387904 with pp x ep x tp = 2 makes more ranks than int64 counts, not the world size 8
// WORLD-MAX: error: moe-set-plan: invalid plan: the world size 4294967296 is more than the 2147483647 (2^31 - 1) ranks an MPI rank number can count

// The largest world is accepted.
// RUN: moe-opt %s --moe-set-plan="world-size=2147483647" | FileCheck %s --check-prefix=MAX
// MAX: #moe.plan<pp = 1, dp = 2147483647, dp_shard = 1, ep = 1, tp = 1,

// token-shuffle=0 given explicitly wins over the file's global_token_shuffle.
// RUN: moe-opt %s --moe-set-plan="smp-config=%S/Inputs/smp-params.json world-size=16 token-shuffle=0" | FileCheck %s --check-prefix=SHUFFLE-OFF
// SHUFFLE-OFF: token_shuffle = false

// SageMaker JSON: a key given twice (LLVM's parser keeps the last), in the
// parameters or around them.
// RUN: not moe-opt %s --moe-set-plan="smp-config=%S/Inputs/bad-duplicate-key.json" 2>&1 | FileCheck %s --check-prefix=DUP
// RUN: not moe-opt %s --moe-set-plan="smp-config=%S/Inputs/bad-duplicate-section.json" 2>&1 | FileCheck %s --check-prefix=DUP-SECTION
// DUP: error: moe-set-plan: {{.*}}bad-duplicate-key.json: not valid JSON: key "expert_parallel_degree" appears twice in one object (byte 65)
// DUP-SECTION: error: moe-set-plan: {{.*}}bad-duplicate-section.json: not valid JSON: key "smdistributed" appears twice in one object

// SageMaker JSON: nesting that overflowed the parser's stack, and one level
// past the bound (64) and at it.
// RUN: %python -c "print('[' * 200000 + ']' * 200000)" > %t.deep.json
// RUN: not moe-opt %s --moe-set-plan="smp-config=%t.deep.json" 2>&1 | FileCheck %s --check-prefix=DEEP
// RUN: %python -c "print('{\"expert_parallel_degree\": ' + '[' * 64 + ']' * 64 + '}')" > %t.deep64.json
// RUN: not moe-opt %s --moe-set-plan="smp-config=%t.deep64.json" 2>&1 | FileCheck %s --check-prefix=DEEP64
// RUN: %python -c "print('{\"expert_parallel_degree\": ' + '[' * 63 + ']' * 63 + '}')" > %t.deep63.json
// RUN: not moe-opt %s --moe-set-plan="smp-config=%t.deep63.json" 2>&1 | FileCheck %s --check-prefix=DEEP63
// DEEP: error: moe-set-plan: {{.*}}deep.json: not valid JSON: nesting deeper than 64 levels at byte 64
// DEEP64: error: moe-set-plan: {{.*}}deep64.json: not valid JSON: nesting deeper than 64 levels at byte 90
// DEEP63: error: moe-set-plan: {{.*}}deep63.json: 'expert_parallel_degree' must be an integer

// SageMaker JSON: degrees, products and coefficients (1e999 reads as inf).
// RUN: not moe-opt %s --moe-set-plan="smp-config=%S/Inputs/bad-negative-degree.json" 2>&1 | FileCheck %s --check-prefix=SMP-NEG
// RUN: not moe-opt %s --moe-set-plan="smp-config=%S/Inputs/bad-negative-shard.json" 2>&1 | FileCheck %s --check-prefix=SMP-SHARD
// RUN: not moe-opt %s --moe-set-plan="smp-config=%S/Inputs/bad-degree-overflow.json" 2>&1 | FileCheck %s --check-prefix=SMP-WRAP
// RUN: not moe-opt %s --moe-set-plan="smp-config=%S/Inputs/bad-too-many-ranks.json" 2>&1 | FileCheck %s --check-prefix=SMP-RANKS
// RUN: not moe-opt %s --moe-set-plan="smp-config=%S/Inputs/bad-infinite-coeff.json" 2>&1 | FileCheck %s --check-prefix=SMP-INF
// RUN: not moe-opt %s --moe-set-plan="smp-config=%S/Inputs/bad-negative-infinite-coeff.json" 2>&1 | FileCheck %s --check-prefix=SMP-NEG-INF
// SMP-NEG: error: moe-set-plan: {{.*}}: 'tensor_parallel_degree' must be at least 1, got -1
// SMP-SHARD: error: moe-set-plan: {{.*}}: 'hybrid_shard_degree' must be at least 0, got -1
// SMP-WRAP: error: moe-set-plan: invalid plan: pp x ep x tp = 1 x 4611686018427387904 x 4 is more than the 2147483647 (2^31 - 1) ranks
// SMP-RANKS: error: moe-set-plan: invalid plan: pp x ep x tp = 65536 x 65536 x 1 is more than the 2147483647 (2^31 - 1) ranks
// SMP-INF: error: moe-set-plan: {{.*}}: 'moe_aux_loss_coeff' must be finite and not negative, got inf
// SMP-NEG-INF: error: moe-set-plan: {{.*}}: 'moe_z_loss_coeff' must be finite and not negative, got -inf

// Config files that are not files.
// RUN: not moe-opt %s --moe-set-plan="smp-config=%S/Inputs" 2>&1 | FileCheck %s --check-prefix=DIR
// RUN: not moe-opt %s --moe-set-plan="smp-config=/dev/zero" 2>&1 | FileCheck %s --check-prefix=ZERO
// DIR: error: moe-set-plan: cannot read {{.*}}Inputs: it is a directory
// ZERO: error: moe-set-plan: cannot read /dev/zero: {{.+}}

module {}
