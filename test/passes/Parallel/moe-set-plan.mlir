// Plans from options, from a SageMaker config, and options over a config.
// RUN: moe-opt %s --moe-set-plan="ep=4 dp=2" | FileCheck %s --check-prefix=OPTS
// RUN: moe-opt %s --moe-set-plan="world-size=16 ep=4 tp=2" | FileCheck %s --check-prefix=WORLD
// RUN: moe-opt %s --moe-set-plan="smp-config=%S/Inputs/smp-params.json world-size=16" | FileCheck %s --check-prefix=SMP
// RUN: moe-opt %s --moe-set-plan="smp-config=%S/Inputs/smp-estimator.json world-size=8 seed=3 dispatcher=all-gather" | FileCheck %s --check-prefix=OVERRIDE

// OPTS: module attributes {moe.plan = #moe.plan<pp = 1, dp = 2, dp_shard = 1, ep = 4, tp = 1, dispatcher = all_to_all, token_shuffle = false, load_balancing = sinkhorn, aux_loss_coeff = 1.000000e-03, z_loss_coeff = 1.000000e-03, seed = 12345>}
// The data-parallel degree is what the world leaves.
// WORLD: #moe.plan<pp = 1, dp = 2, dp_shard = 1, ep = 4, tp = 2,
// Every MoEConfig field, hybrid sharding, and 0/1 booleans as the SMP samples pass them.
// SMP: #moe.plan<pp = 1, dp = 4, dp_shard = 2, ep = 4, tp = 1, dispatcher = all_gather, token_shuffle = true, load_balancing = aux_loss, aux_loss_coeff = 1.000000e-02, z_loss_coeff = 0.000000e+00, seed = 42>
// The estimator's `distribution` dict; options win over the file.
// OVERRIDE: #moe.plan<pp = 1, dp = 4, dp_shard = 1, ep = 2, tp = 1, dispatcher = all_gather, token_shuffle = false, load_balancing = sinkhorn, aux_loss_coeff = 1.000000e-03, z_loss_coeff = 1.000000e-03, seed = 3>

module {}
