// Mixtral's loop over `expert_hit` traced with a sample that reached only
// experts 1 and 3: both imports hold 2 of the 4 experts, and raising says so
// instead of compiling a different model.
// RUN: moe-translate --import-onnx %corpus/mixtral_lost_experts.onnx | not moe-opt --moe-raise 2>&1 | FileCheck %s --implicit-check-not="PLEASE submit"
// RUN: moe-translate --import-torchscript %corpus/mixtral_lost_experts.pt --input-shape hidden_states=2x4x16 | not moe-opt --moe-raise 2>&1 | FileCheck %s --implicit-check-not="PLEASE submit"

// CHECK: error: the MoE block routes to 4 experts but the graph holds 2 expert FFNs: a traced export keeps only the experts its sample input reached; export with a loop over every expert
