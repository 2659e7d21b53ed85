//===- MoEOps.td - moe dialect ops -------------------------*- tablegen -*-===//
//
// Every op's description ends with a Constraints list that mirrors its
// verifier one for one; test/dialects/moe/IR/invalid.mlir has a case for each
// (test/dialects/moe/IR/invalid-sizes.mlir for the size bounds).
//
// Size bounds shared by every op (not repeated in each list): each operand
// and result (BoundedBuffers) has an element count and byte size that fit
// int64 and at most 2^40 bytes; E, where an op has experts, is at most
// 2^31 - 1 because expert ids are i32.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_DIALECT_MOE_IR_MOEOPS_TD
#define MOE_DIALECT_MOE_IR_MOEOPS_TD

include "dialects/Common/BufferBounds.td"
include "dialects/moe/IR/MoEBase.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/IR/CommonTypeConstraints.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

// Every op bounds its tensors (BoundedBuffers): each operand and result has
// an element count and byte size that fit int64 and at most 2^40 bytes.
class MoE_Op<string mnemonic, list<Trait> traits = []>
    : Op<MoE_Dialect, mnemonic, !listconcat(traits, [BoundedBuffers])>;

// A statically shaped tensor of one of `ranks` with elements in `elts`.
class MoE_Tensor<list<Type> elts, list<int> ranks>
    : Type<And<[TensorRankOf<elts, ranks>.predicate, HasStaticShapePred]>,
           "statically shaped " # TensorRankOf<elts, ranks>.summary,
           "::mlir::RankedTensorType">;

def MoE_FloatMatrix : MoE_Tensor<[AnyFloat], [2]>;
def MoE_FloatVector : MoE_Tensor<[AnyFloat], [1]>;
def MoE_FloatScalar : MoE_Tensor<[AnyFloat], [0]>;
def MoE_IdMatrix : MoE_Tensor<[I32], [2]>;
// Expert ids as a program computes them (ONNX's TopK gives i64).
def MoE_IndexMatrix : MoE_Tensor<[I32, I64], [2]>;
def MoE_CountVector : MoE_Tensor<[I32], [1]>;
// Expert rows: dropless [R, H] or capacity-padded [G, C, H].
def MoE_RowBuffer : MoE_Tensor<[AnyFloat], [2, 3]>;
def MoE_ExpertWeight : MoE_Tensor<[AnyFloat], [3]>;

// Attributes shared by moe.router and moe.layer (they route the same way).
defvar MoE_RoutingAttrs = (ins
  MoE_ScoringFunctionAttr:$scoring,
  MoE_SelectionMethodAttr:$selection,
  UnitAttr:$normalize,
  DefaultValuedAttr<F64Attr, "1.0">:$scaling_factor,
  OptionalAttr<I64Attr>:$num_groups,
  OptionalAttr<I64Attr>:$group_topk,
  OptionalAttr<MoE_GroupScoreAttr>:$group_score,
  OptionalAttr<F64Attr>:$masked_score,
  DefaultValuedAttr<F64Attr, "1.0e-4">:$sinkhorn_tolerance,
  DefaultValuedAttr<I64Attr, "10000">:$sinkhorn_max_iterations,
  DefaultValuedAttr<F64Attr, "0.01">:$jitter_eps
);

defvar MoE_RoutingDoc = [{
    Routing (shared by `moe.router` and `moe.layer`), on logits `l [T, E]`:

    * Scores `s = softmax(l)` over the E experts (max-subtracted), or
      `s = sigmoid(l)`.
    * `topk`: the k experts with the largest `s + bias` (the bias, as
      DeepSeek-V3's `e_score_correction_bias`, only steers selection); the
      weights are the unbiased `s` of the chosen experts.
    * `grouped_topk`: experts form `num_groups` contiguous equal groups; a
      group's score is the `max` of `s + bias` in it (DeepSeek-V2) or the sum
      of its two largest (`top2_sum`, DeepSeek-V3); only the `group_topk`
      best groups may be chosen, then as `topk` with the other groups'
      experts set to `masked_score`: -inf when absent (Megatron: they are
      never chosen), 0.0 for Hugging Face's DeepSeek (`masked_fill(..., 0.0)`,
      which picks them over kept experts whose biased score is negative).
    * `sinkhorn`: Megatron's `sinkhorn(l)`: with `c = exp(l)`, repeat
      `d0 = (1/T) / (c d1 + 1e-8)`, `d1 = (1/E) / (c^T d0 + 1e-8)` until the
      mean absolute change of `d1` is at most `sinkhorn_tolerance` (or for
      `sinkhorn_max_iterations` rounds); the top k of `d1 * c * d0` are
      chosen and weighted by `s` (Megatron uses `sigmoid` for k = 1 and
      `softmax` otherwise).
    * `expert_choice`: every expert takes the `capacity` tokens with the
      largest `s[:, e]`. Results are `[T, E]`: column `e` holds `e` for the
      tokens expert `e` took and `-1` elsewhere, with weight `s[t, e]` or 0.
    * `sparse_mixer`: Phi-3.5-MoE's inference sparsemixer (as ONNX Runtime's
      and Hugging Face's) on the raw logits `x` with `eps = jitter_eps`: the
      first expert `e1` is the argmax, `m1 = x[e1]`; expert e is masked when
      `(m1 - x[e]) > 2 * eps * max(|x[e]|, m1)` and `w1` is the softmax
      weight of `e1` over the unmasked experts. The second expert is the
      argmax over `e != e1`, with the same threshold around `m2` and `e1`
      masked too. Not renormalised.
    * `given`: the program's own ops (kept outside, before the block) chose
      the experts: `routed_ids [T, k]` are the ids and `routed_weights
      [T, k]` the combine weights, taken as they are. This is a router that
      no other selection names (a bias applied another way, a normalisation
      with a floor, an arg-max selection), raised from the MoE structure
      alone; moe-raise checks it against the original ops on sample tokens.
      `scoring` is not read (the logits are kept for the losses), and an id
      outside `[0, E)` stops the program with an error naming it.
    * Chosen experts are listed best first by the value that selects them
      (`s + bias`, the sinkhorn value; `e1, e2` for the sparse mixer).
    * `normalize` divides the chosen weights by their sum (plus 1e-20); then
      every weight, for every selection, is multiplied by `scaling_factor`.
    * Ties go to the lower index: of the expert, of the group, and for
      `expert_choice` of the token.
    * NaN values are never chosen: a slot left with no expert to choose
      (NaN logits) gets id -1 and weight 0, and an `expert_choice` expert
      with fewer than `capacity` tokens to choose from takes those it has.
    * f16 and bf16 logits (and bias) are routed in f32, and only the weights
      are rounded to the logits' type at the end: routers run in full
      precision (Switch Transformer's selective precision, Hugging Face's
      `softmax(..., dtype=torch.float)`), since ties in a narrow type would
      pick other experts.
}];

defvar MoE_RoutingConstraints = [{
    * E is at most 2^31 - 1 (ids are i32);
    * `bias` is only given to `topk` and `grouped_topk`, and has E elements;
    * `num_groups`, `group_topk` and `group_score` are given exactly for
      `grouped_topk`; `num_groups` is positive and divides E, with at
      least 2 experts per group for `top2_sum`,
      `1 <= group_topk <= num_groups`,
      and k is at most the experts in `group_topk` groups unless a finite
      `masked_score` makes every expert selectable;
    * `masked_score` is only given for `grouped_topk`, and is finite or
      -inf;
    * for `expert_choice`, `capacity` is given, `1 <= capacity <= T`, and
      k = E; otherwise `1 <= k <= E`;
    * `sparse_mixer` needs k = 2 and `softmax`;
    * `routed_ids` and `routed_weights` are given exactly for `given`, as
      `[T, k]` (the weights of the logits' element type); `given` takes no
      bias, groups or `normalize`, and `scaling_factor` 1;
    * `normalize` is not used with `expert_choice` or `sparse_mixer`;
    * `scaling_factor` and `sinkhorn_tolerance` are finite and positive,
      `sinkhorn_max_iterations` is at least 1, `jitter_eps` is finite and
      non-negative.
}];

//===----------------------------------------------------------------------===//
// moe.router
//===----------------------------------------------------------------------===//

def MoE_RouterOp : MoE_Op<"router", [Pure, AttrSizedOperandSegments]> {
  let summary = "select experts and weights for every token";
  let description = !strconcat([{
    Turns router logits `[T, E]` into the chosen expert ids `[T, k]` and their
    combine weights `[T, k]`. k is the result's column count.

  }], MoE_RoutingDoc, [{

    Example (Mixtral: softmax, top-2, renormalised):

    ```mlir
    %ids, %w = moe.router softmax topk %logits {normalize}
        : tensor<32x8xf32> -> tensor<32x2xi32>, tensor<32x2xf32>
    ```

    DeepSeek-V3 (sigmoid, group-limited top-8 with a selection bias):

    ```mlir
    %ids, %w = moe.router sigmoid grouped_topk %logits bias(%b)
        groups 8 top 4 by top2_sum {normalize, scaling_factor = 2.5}
        : tensor<16x256xf32>, tensor<256xf32> -> tensor<16x8xi32>, tensor<16x8xf32>
    ```

    **Constraints:**
    * `ids` and `weights` are `[T, k]` for logits `[T, E]`;
    * `weights` and `bias` have the element type of `logits`;
    * `capacity` is only given for `expert_choice`;
  }], MoE_RoutingConstraints);

  let arguments = !con((ins MoE_FloatMatrix:$logits,
                            Optional<MoE_FloatVector>:$bias,
                            Optional<MoE_IndexMatrix>:$routed_ids,
                            Optional<MoE_FloatMatrix>:$routed_weights,
                            OptionalAttr<I64Attr>:$capacity),
                       MoE_RoutingAttrs);
  let results = (outs MoE_IdMatrix:$ids, MoE_FloatMatrix:$weights);
  let assemblyFormat = [{
    $scoring $selection $logits (`bias` `(` $bias^ `)`)?
    (`routed` `(` $routed_ids^ `,` $routed_weights `)`)?
    (`groups` $num_groups^ `top` $group_topk `by` $group_score)?
    (`masked` `=` $masked_score^)?
    (`capacity` $capacity^)? attr-dict `:` type($logits) (`,` type($bias)^)?
    (`,` type($routed_ids)^ `,` type($routed_weights))? `->` type($ids) `,` type($weights)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// moe.aux_loss / moe.z_loss
//===----------------------------------------------------------------------===//

def MoE_AuxLossOp : MoE_Op<"aux_loss", [Pure]> {
  let summary = "Switch/Megatron load-balancing loss";
  let description = [{
    `coeff * E * sum_e f_e * P_e` over the T tokens, where
    `f_e = count_e / (T * k)` is the fraction of routed (token, slot) pairs
    that chose expert e (`-1` ids count for no expert) and `P_e` is the mean
    score of expert e: `softmax(l)`, or for `sigmoid` the per-token normalised
    `sigmoid(l) / sum(sigmoid(l))` (DeepSeek). This is Megatron's
    `switch_load_balancing_loss_func`; it is 1 * coeff at perfect balance.

    With `seq_len = L` the loss is computed per sequence of L consecutive
    tokens and averaged over the T / L sequences (Megatron `seq_aux_loss`,
    DeepSeek's sequence-wise loss).

    ```mlir
    %loss = moe.aux_loss softmax %logits, %ids {coeff = 1.0e-2}
        : tensor<32x8xf32>, tensor<32x2xi32> -> tensor<f32>
    ```

    **Constraints:**
    * `ids` has the T rows of `logits`;
    * E, the columns of `logits`, is at most 2^31 - 1;
    * the result has the element type of `logits`;
    * `coeff` is finite and non-negative;
    * `seq_len`, when given, is positive and divides T.
  }];
  let arguments = (ins MoE_ScoringFunctionAttr:$scoring,
                       MoE_FloatMatrix:$logits, MoE_IdMatrix:$ids,
                       F64Attr:$coeff, OptionalAttr<I64Attr>:$seq_len);
  let results = (outs MoE_FloatScalar:$loss);
  let assemblyFormat = [{
    $scoring $logits `,` $ids attr-dict `:` type($logits) `,` type($ids) `->` type($loss)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
}

def MoE_ZLossOp : MoE_Op<"z_loss", [Pure]> {
  let summary = "ST-MoE router z-loss";
  let description = [{
    `coeff * mean_t (logsumexp_e l[t, e])^2` (ST-MoE; Megatron `z_loss_func`).

    ```mlir
    %z = moe.z_loss %logits {coeff = 1.0e-3} : tensor<32x8xf32> -> tensor<f32>
    ```

    **Constraints:**
    * the result has the element type of `logits`;
    * `coeff` is finite and non-negative.
  }];
  let arguments = (ins MoE_FloatMatrix:$logits, F64Attr:$coeff);
  let results = (outs MoE_FloatScalar:$loss);
  let assemblyFormat = "$logits attr-dict `:` type($logits) `->` type($loss)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// moe.dispatch
//===----------------------------------------------------------------------===//

def MoE_DispatchOp : MoE_Op<"dispatch", [Pure, AttrSizedOperandSegments]> {
  let summary = "pack token rows per expert";
  let description = [{
    Copies every routed (token, slot) row of `input [T, H]` into a per-expert
    buffer and records where it went.

    * Capacity mode (`capacity = C`): `rows` is `[E, C, H]`; expert e keeps
      at most C of the pairs routed to it. Policy `position` keeps the first
      C pairs in token order (Megatron, Switch); `choice` the first C in
      choice order, every token's first choice before any second choice,
      each choice in token order (GShard, DeepSpeed's and fairseq's top-2
      gating); `probs` the C with the largest `weights` (ties: lower token).
      The rest are dropped and counted in `dropped`; unused slots are zero.
    * Dropless mode (no `capacity`): `rows` is `[T*k, H]`, every routed pair
      kept, grouped by expert in expert order and in token order within an
      expert; the rows after the last group are zero.

    When the tokens are one shard of a larger batch split over ranks,
    `after offsets [E]` says how many of its C slots expert e has left for
    this shard: a pair at position p among this shard's pairs for expert e
    (in the policy's order) is kept when `offsets[e] + p < C`. For
    `position` it is the pairs routed to e by the tokens before this shard
    (`moe.prefix_sum` of `moe.expert_counts`); for `choice`, C less the
    pairs this shard keeps (from the counts of each choice over all ranks),
    so that the kept set is the unsharded one either way. The buffer then
    needs only `B = min(C, T*k)` rows per expert: `rows` is `[E, B, H]`.

    Results: `slots [T, k]` holds the flat row index (`e * B + c` in capacity
    mode) of each pair, or -1 for dropped and unrouted pairs; `counts [E]` the
    rows each expert holds; `dropped` the pairs lost to capacity (always 0
    when dropless). Ids outside `[-1, E)` are treated as unrouted.

    ```mlir
    // Dropless.
    %rows, %slots, %counts, %dropped = moe.dispatch %x, %ids
        : (tensor<32x64xf32>, tensor<32x2xi32>)
       -> (tensor<64x64xf32>, tensor<32x2xi32>, tensor<8xi32>, tensor<i64>)
    // Capacity 8 per expert, keeping the most probable tokens.
    %rows, %slots, %counts, %dropped = moe.dispatch %x, %ids capacity 8 drop probs by %w
        : (tensor<32x64xf32>, tensor<32x2xi32>, tensor<32x2xf32>)
       -> (tensor<8x8x64xf32>, tensor<32x2xi32>, tensor<8xi32>, tensor<i64>)
    ```

    **Constraints:**
    * `ids` (and `weights`, `slots`) are `[T, k]` for `input [T, H]`;
    * `rows` and `weights` have the element type of `input`, and `rows` its
      row width H;
    * `counts` has E elements, 1 <= E <= 2^31 - 1;
    * with `capacity`: `drop_policy` is given, C >= 1, and `rows` is
      `[E, C, H]`, or `[E, min(C, T*k), H]` with `offsets`;
    * `rows` has at most 2^31 - 1 rows (`E x C`, `E x min(C, T*k)` or
      `T*k`), since `slots` index them as i32; computed without overflow;
    * `offsets` has the type of `counts` and needs the `position` or
      `choice` policy;
    * without `capacity`: no `drop_policy`, and `rows` is `[T*k, H]`;
    * `weights` is given exactly for the `probs` policy.
  }];
  let arguments = (ins MoE_FloatMatrix:$input, MoE_IdMatrix:$ids,
                       Optional<MoE_FloatMatrix>:$weights,
                       Optional<MoE_CountVector>:$offsets,
                       OptionalAttr<I64Attr>:$capacity,
                       OptionalAttr<MoE_DropPolicyAttr>:$drop_policy);
  let results = (outs MoE_RowBuffer:$rows, MoE_IdMatrix:$slots,
                      MoE_CountVector:$counts, MoE_Tensor<[I64], [0]>:$dropped);
  let assemblyFormat = [{
    $input `,` $ids (`capacity` $capacity^)? (`drop` $drop_policy^)? (`by` $weights^)?
    (`after` $offsets^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    bool isDropless() { return !getCapacity().has_value(); }
    int64_t getNumExperts() { return getCounts().getType().getDimSize(0); }
  }];
}

//===----------------------------------------------------------------------===//
// moe.experts / moe.shared_expert
//===----------------------------------------------------------------------===//

def MoE_ExpertsOp : MoE_Op<"experts", [Pure, AttrSizedOperandSegments,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "all expert FFNs as one grouped computation";
  let description = [{
    Runs expert e's FFN `act(x W1_e^T + b1_e) ... W2_e^T + b2_e` on the rows
    that belong to it (see `#moe.activation` for the activations, gating and
    SwiGLU layouts). Weights are `[E, out, in]`.

    Rows are split into G groups by `counts [G]`, G a multiple of E; group g
    belongs to expert `g mod E`, so rows received from several ranks
    (source-major, E local experts each) need no re-sorting.
    * Dropless rows `[R, H]`: group g is the `counts[g]` rows after groups
      0..g-1; rows after the last group give zeros.
    * Capacity rows `[G, C, H]`: group g is the first `counts[g]` rows of
      block g; the remaining (padding) rows give zeros.

    The fc2 bias is added per row, so combine weights scale it as in ONNX
    Runtime (`sum_k w_k * (y_k + b2)`).

    ```mlir
    %y = moe.experts %rows, %counts fc1(%w1) fc3(%w3) fc2(%w2) activation <swiglu>
        : (tensor<64x64xf32>, tensor<8xi32>, tensor<8x128x64xf32>,
           tensor<8x128x64xf32>, tensor<8x64x128xf32>) -> tensor<64x64xf32>
    ```

    **Constraints:**
    * the result has the shape of `rows` but the row width of fc2 (M), and
      the element type of `rows`; every weight and bias has that element type;
    * there is at least one expert and at most 2^31 - 1
      (1 <= E <= 2^31 - 1), `counts` has a multiple of E elements, and
      capacity rows have one block per group;
    * fc1 is `[E, F1, H]` with H the row width; fc2 is `[E, M, F]` where
      F1 = 2F for a fused SwiGLU and F1 = F otherwise; fc3 is `[E, F, H]`;
    * each bias is `[E, out]` of its projection;
    * fc3 is given for a `separate` SwiGLU and never for a fused one;
    * `fc3_bias` needs fc3.
  }];
  let arguments = (ins MoE_RowBuffer:$rows, MoE_CountVector:$counts,
                       MoE_ExpertWeight:$fc1_weight,
                       Optional<MoE_FloatMatrix>:$fc1_bias,
                       Optional<MoE_ExpertWeight>:$fc3_weight,
                       Optional<MoE_FloatMatrix>:$fc3_bias,
                       MoE_ExpertWeight:$fc2_weight,
                       Optional<MoE_FloatMatrix>:$fc2_bias,
                       MoE_ActivationAttr:$activation);
  let results = (outs MoE_RowBuffer:$output);
  let assemblyFormat = [{
    $rows `,` $counts
    `fc1` `(` $fc1_weight (`,` $fc1_bias^)? `)`
    (`fc3` `(` $fc3_weight^ `)`)? (`fc3_bias` `(` $fc3_bias^ `)`)?
    `fc2` `(` $fc2_weight (`,` $fc2_bias^)? `)`
    `activation` $activation attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    int64_t getNumExperts() {
      return getFc1Weight().getType().getDimSize(0);
    }
  }];
}

def MoE_ExpertsGradOp : MoE_Op<"experts_grad",
    [Pure, AttrSizedOperandSegments, AttrSizedResultSegments,
     DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "the vector-Jacobian product of moe.experts";
  let description = [{
    Given the operands of a `moe.experts` and the cotangent `d_output` of its
    result, returns the cotangents of its rows and of every weight and bias
    it has (the optional results are present exactly for the optional
    weights). What `moe-autodiff` emits: the forward keeps only the rows;
    each group's projections and activation are recomputed here (Megatron's
    activation recompute), then for expert e and its rows `X`:

    `dW2_e = dY^T a`, `db2_e = sum_rows dY`, `da = dY W2_e`,
    `dh = act'(h) * da`, `dW1_e = dh^T X`, `db1_e = sum_rows dh`,
    `dX = dh W1_e (+ dh3 W3_e)`. Rows outside every group get zero
    cotangents; an expert with no rows gets zero weight cotangents. Groups
    of the same expert (`g mod E`) add up, in group order. With
    `per_group` each group keeps its own weight cotangents instead (`[G,
    ...]` for G groups): what `moe.slot_grad_sum` adds up over replicas in
    the same order. The clamp of a limited SwiGLU
    passes the gradient where the value lies within the limit, bounds
    included (as `torch.clamp`).

    ```mlir
    %dx, %dw1, %dw3, %dw2 = moe.experts_grad %rows, %counts, %dy
        fc1(%w1) fc3(%w3) fc2(%w2) activation <swiglu>
        {resultSegmentSizes = array<i32: 1, 1, 0, 1, 0, 1, 0>}
        : (tensor<64x64xf32>, tensor<8xi32>, tensor<64x64xf32>,
           tensor<8x128x64xf32>, tensor<8x128x64xf32>, tensor<8x64x128xf32>)
       -> (tensor<64x64xf32>, tensor<8x128x64xf32>, tensor<8x128x64xf32>,
           tensor<8x64x128xf32>)
    ```

    **Constraints:**
    * the operands obey the constraints of `moe.experts`, and `d_output` has
      the type of that op's result;
    * `d_rows` has the type of `rows` and every weight cotangent the type of
      its weight, with G in place of E in dimension 0 for `per_group`;
    * a weight cotangent result is present exactly when its weight is
      (`resultSegmentSizes` says which are: d_rows, d_fc1, d_fc1_bias,
      d_fc3, d_fc3_bias, d_fc2, d_fc2_bias).
  }];
  let arguments = (ins MoE_RowBuffer:$rows, MoE_CountVector:$counts,
                       MoE_RowBuffer:$d_output,
                       MoE_ExpertWeight:$fc1_weight,
                       Optional<MoE_FloatMatrix>:$fc1_bias,
                       Optional<MoE_ExpertWeight>:$fc3_weight,
                       Optional<MoE_FloatMatrix>:$fc3_bias,
                       MoE_ExpertWeight:$fc2_weight,
                       Optional<MoE_FloatMatrix>:$fc2_bias,
                       MoE_ActivationAttr:$activation,
                       UnitAttr:$per_group);
  let results = (outs MoE_RowBuffer:$d_rows, MoE_ExpertWeight:$d_fc1_weight,
                      Optional<MoE_FloatMatrix>:$d_fc1_bias,
                      Optional<MoE_ExpertWeight>:$d_fc3_weight,
                      Optional<MoE_FloatMatrix>:$d_fc3_bias,
                      MoE_ExpertWeight:$d_fc2_weight,
                      Optional<MoE_FloatMatrix>:$d_fc2_bias);
  let assemblyFormat = [{
    $rows `,` $counts `,` $d_output
    `fc1` `(` $fc1_weight (`,` $fc1_bias^)? `)`
    (`fc3` `(` $fc3_weight^ `)`)? (`fc3_bias` `(` $fc3_bias^ `)`)?
    `fc2` `(` $fc2_weight (`,` $fc2_bias^)? `)`
    `activation` $activation (`per_group` $per_group^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    int64_t getNumExperts() {
      return getFc1Weight().getType().getDimSize(0);
    }
  }];
}

def MoE_SharedExpertOp : MoE_Op<"shared_expert",
    [Pure, AttrSizedOperandSegments,
     DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "an always-on expert FFN, optionally behind a sigmoid gate";
  let description = [{
    One FFN on every token (Qwen2-MoE and DeepSeek shared experts), with the
    projections and activation of `moe.experts` but no expert dimension:
    fc1 `[F1, H]`, fc3 `[F, H]`, fc2 `[M, F]`. With `gate [1, H]` (Qwen's
    `shared_expert_gate`) the output is `sigmoid(x g^T) * FFN(x)`.

    ```mlir
    %s = moe.shared_expert %x fc1(%sw1) fc3(%sw3) fc2(%sw2) gate(%g) activation <swiglu>
        : (tensor<32x64xf32>, tensor<96x64xf32>, tensor<96x64xf32>,
           tensor<64x96xf32>, tensor<1x64xf32>) -> tensor<32x64xf32>
    ```

    **Constraints:**
    * the result is `[T, M]` with the element type of `input`, as is every
      weight and bias;
    * fc1 is `[F1, H]` for `input [T, H]`; fc2 is `[M, F]` with F1 = 2F for a
      fused SwiGLU and F otherwise; fc3 is `[F, H]`; `gate` is `[1, H]`;
    * each bias has the out size of its projection;
    * fc3 is given for a `separate` SwiGLU and never for a fused one;
    * `fc3_bias` needs fc3.
  }];
  let arguments = (ins MoE_FloatMatrix:$input,
                       MoE_FloatMatrix:$fc1_weight,
                       Optional<MoE_FloatVector>:$fc1_bias,
                       Optional<MoE_FloatMatrix>:$fc3_weight,
                       Optional<MoE_FloatVector>:$fc3_bias,
                       MoE_FloatMatrix:$fc2_weight,
                       Optional<MoE_FloatVector>:$fc2_bias,
                       Optional<MoE_FloatMatrix>:$gate,
                       MoE_ActivationAttr:$activation);
  let results = (outs MoE_FloatMatrix:$output);
  let assemblyFormat = [{
    $input
    `fc1` `(` $fc1_weight (`,` $fc1_bias^)? `)`
    (`fc3` `(` $fc3_weight^ `)`)? (`fc3_bias` `(` $fc3_bias^ `)`)?
    `fc2` `(` $fc2_weight (`,` $fc2_bias^)? `)`
    (`gate` `(` $gate^ `)`)?
    `activation` $activation attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// moe.combine
//===----------------------------------------------------------------------===//

def MoE_CombineOp : MoE_Op<"combine", [Pure]> {
  let summary = "weighted sum of expert rows back into token order";
  let description = [{
    `output[t] = sum_j weights[t, j] * rows[slots[t, j]]` over the slots that
    are not -1, with `rows` read as a flat list of rows (`[G, C, M]` as
    `[G*C, M]`). Dropped and unrouted pairs contribute nothing (Switch: the
    residual carries a dropped token). Accumulates in the element type (the
    CUDA runtime sums f16 and bf16 in f32 and rounds once).

    ```mlir
    %out = moe.combine %y, %slots, %w
        : (tensor<64x64xf32>, tensor<32x2xi32>, tensor<32x2xf32>) -> tensor<32x64xf32>
    ```

    **Constraints:**
    * `weights` has the shape of `slots`, `[T, k]`;
    * the result is `[T, M]` for rows of width M, with their element type;
    * `weights` has the element type of `rows`.
  }];
  let arguments = (ins MoE_RowBuffer:$rows, MoE_IdMatrix:$slots,
                       MoE_FloatMatrix:$weights);
  let results = (outs MoE_FloatMatrix:$output);
  let assemblyFormat = [{
    $rows `,` $slots `,` $weights attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// moe.all_to_all
//===----------------------------------------------------------------------===//

def MoE_AllToAllOp : MoE_Op<"all_to_all", [Pure,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "exchange row blocks between the ranks of a grid axis group";
  let description = [{
    Every rank of the group spanned by `grid_axes` of `shard.grid @grid` (N
    ranks) sends a block of rows to every rank, itself included.

    * Uniform (no counts): `input` is N equal blocks along dimension 0; block
      i goes to group rank i, and block j of the result came from rank j. The
      result has the input's type (GShard's capacity-padded exchange).
    * Ragged (with `counts [N*L]`): the first rows of `input` are grouped by
      destination rank and, within it, into L groups (local experts) of
      `counts[i*L + l]` rows. The result holds the received groups
      source-major in the same way, `output_counts[j*L + l]` rows from rank j
      for group l, then zero rows. The receiver's buffer is a static upper
      bound; overflowing it is a runtime error. Counts travel before rows.

    The inverse exchange is the same op applied to the received rows and
    counts. A group of one rank copies its input.

    ```mlir
    shard.grid @grid(shape = 4)
    %a = moe.all_to_all %rows on @grid grid_axes = [0]
        : (tensor<8x16x64xf32>) -> tensor<8x16x64xf32>
    %b, %bc = moe.all_to_all %rows, %counts on @grid grid_axes = [0]
        : (tensor<64x64xf32>, tensor<8xi32>) -> (tensor<128x64xf32>, tensor<8xi32>)
    ```

    **Constraints:**
    * `grid` names a `shard.grid`; `grid_axes` are distinct axes of it, each
      of static, non-zero size, spanning at most 2^63 - 1 ranks;
    * uniform: no `output_counts`, the result type equals the input type and
      N divides dimension 0;
    * ragged: `input` and `output` are `[R, ...]` rows with the same trailing
      dimensions and element type, `output_counts` is given with the type of
      `counts`, and N divides the number of counts.
  }];
  let arguments = (ins MoE_Tensor<[AnyType], [2, 3]>:$input,
                       Optional<MoE_CountVector>:$counts,
                       FlatSymbolRefAttr:$grid,
                       DefaultValuedAttr<DenseI16ArrayAttr, "{}">:$grid_axes);
  let results = (outs MoE_Tensor<[AnyType], [2, 3]>:$output,
                      Optional<MoE_CountVector>:$output_counts);
  let assemblyFormat = [{
    $input (`,` $counts^)? `on` $grid `grid_axes` `=` $grid_axes
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let hasCanonicalizer = 1;
  let extraClassDeclaration = [{
    bool isRagged() { return getCounts() != nullptr; }
    /// Ranks in the exchange group: the product of the grid's sizes along
    /// `grid_axes`, or 0 when the grid cannot be found, an axis is out of
    /// range or dynamic, or the product overflows.
    int64_t getGroupSize();
  }];
}

//===----------------------------------------------------------------------===//
// moe.expert_counts / moe.prefix_sum / moe.gather_rows
//===----------------------------------------------------------------------===//

def MoE_ExpertCountsOp : MoE_Op<"expert_counts", [Pure]> {
  let summary = "the (token, slot) pairs routed to each expert";
  let description = [{
    `counts[e]` is the number of entries of `ids` equal to e; ids outside
    `[0, E)` (unrouted `-1`) count for no expert. With `moe.prefix_sum` it
    places a rank's tokens in the order of the whole batch for capacity
    dispatch.

    ```mlir
    %c = moe.expert_counts %ids : tensor<16x2xi32> -> tensor<8xi32>
    ```

    **Constraints:**
    * `counts` has E elements, 1 <= E <= 2^31 - 1.
  }];
  let arguments = (ins MoE_IdMatrix:$ids);
  let results = (outs MoE_CountVector:$counts);
  let assemblyFormat = "$ids attr-dict `:` type($ids) `->` type($counts)";
  let hasVerifier = 1;
}

def MoE_PrefixSumOp : MoE_Op<"prefix_sum", [Pure,
    AllTypesMatch<["input", "output"]>,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "exclusive prefix sum of counts over the ranks of a group";
  let description = [{
    On the rank with linear index r in the group spanned by `grid_axes` of
    `shard.grid @grid` (axes in the order given, the last fastest), the
    result is the elementwise sum of the inputs of ranks 0..r-1; zeros on
    rank 0 (MPI_Exscan). A group of one rank gives zeros.

    ```mlir
    %before = moe.prefix_sum %c on @world grid_axes = [1, 3] : tensor<8xi32>
    ```

    **Constraints:**
    * `grid` names a `shard.grid`; `grid_axes` are distinct axes of it, each
      of static, non-zero size.
  }];
  let arguments = (ins MoE_CountVector:$input, FlatSymbolRefAttr:$grid,
                       DefaultValuedAttr<DenseI16ArrayAttr, "{}">:$grid_axes);
  let results = (outs MoE_CountVector:$output);
  let assemblyFormat = [{
    $input `on` $grid `grid_axes` `=` $grid_axes attr-dict `:` type($input)
  }];
  let hasCanonicalizer = 1;
  let builders = [
    OpBuilder<(ins "Value":$input, "StringRef":$grid,
                   "ArrayRef<int16_t>":$axes), [{
      build($_builder, $_state, input.getType(), input,
            FlatSymbolRefAttr::get($_builder.getContext(), grid),
            $_builder.getDenseI16ArrayAttr(axes));
    }]>
  ];
}

def MoE_GatherRowsOp : MoE_Op<"gather_rows", [Pure]> {
  let summary = "rows of a matrix picked by index";
  let description = [{
    `output[i] = input[indices[i]]`; an index outside `[0, T)` gives a zero
    row. Token shuffling permutes rows with it and restores their order with
    the inverse permutation.

    ```mlir
    %y = moe.gather_rows %x[%perm] : (tensor<16x64xf32>, tensor<16xi32>) -> tensor<16x64xf32>
    ```

    **Constraints:**
    * the result is `[N, H]` for `indices [N]` and `input [T, H]`, with the
      element type of `input`.
  }];
  let arguments = (ins MoE_Tensor<[AnyType], [2]>:$input,
                       MoE_Tensor<[I32], [1]>:$indices);
  let results = (outs MoE_Tensor<[AnyType], [2]>:$output);
  let assemblyFormat = [{
    $input `[` $indices `]` attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Placement: experts on physical slots
//===----------------------------------------------------------------------===//

def MoE_SlotTableOp : MoE_Op<"slot_table", [Pure]> {
  let summary = "the runtime's slot -> expert table of one MoE layer";
  let description = [{
    Layer `layer`'s placement: `table[p]` is the expert that physical slot p
    holds, for P slots (P >= E; the P - E more are replicas of some
    experts). Slot p lives on EP rank `p / (P / ep)`. The runtime owns the
    table and may change it between calls of the program (re-placement),
    moving the slots' weights with it; shapes never change. `initial` is the
    placement the program starts with, written into its bundle.

    ```mlir
    %table = moe.slot_table layer 0 experts 8 initial [0, 1, 2, 3, 4, 5, 6, 7, 0, 1]
        : tensor<10xi32>
    ```

    **Constraints:**
    * `initial` has the P entries of the result, each an expert in
      `[0, experts)`, and names every expert at least once (so P >= E);
    * `layer >= 0` and `1 <= experts <= 2^31 - 1`.
  }];
  let arguments = (ins I64Attr:$layer, I64Attr:$experts,
                       DenseI32ArrayAttr:$initial);
  let results = (outs MoE_CountVector:$table);
  let assemblyFormat = [{
    `layer` $layer `experts` $experts `initial` $initial attr-dict `:` type($table)
  }];
  let hasVerifier = 1;
}

def MoE_PlaceOp : MoE_Op<"place", [Pure, AllTypesMatch<["ids", "slots"]>]> {
  let summary = "each routing choice's expert -> one of that expert's slots";
  let description = [{
    The replica rule, for the choices `ids` made on rank `source` of the
    `ranks` ranks that hold the `table`'s P slots (P / ranks consecutive
    slots each): every choice of expert e goes to
    1. the first of e's slots on rank `source`, if it holds one (a shadow
       expert: its tokens stay on their rank), else
    2. e's replica number `j mod c_e` of its `c_e` slots in ascending
       order, where `source` is the j-th rank holding no slot of e.

    A rank's choices of one expert never split between replicas, so each
    replica's weight gradient is a sum of whole per-source parts, which
    `moe.slot_grad_sum` adds in source order to the bits of one copy that
    served every rank. It is deterministic and keeps no state between calls.
    Replicas hold the same weights, so outputs never depend on the
    placement. Ids that no slot holds (unrouted -1, out of range) give -1.
    Without `source` the choices are those of one rank (`ranks` 1), and
    each expert's choices go to its first slot. With an identity table
    (`table[p] = p`) it is the identity and folds away.

    ```mlir
    %slots = moe.place %ids, %table : tensor<16x2xi32>, tensor<10xi32>
    %mine = moe.place %ids, %table source %rank ranks 2
        : tensor<16x2xi32>, tensor<10xi32>
    ```

    **Constraints:**
    * `ranks` >= 1 divides the number of slots;
    * `source` (this rank's position among them, in [0, ranks)) is given
      exactly when `ranks` > 1.
  }];
  let arguments = (ins MoE_IdMatrix:$ids, MoE_CountVector:$table,
                       Optional<Index>:$source,
                       DefaultValuedAttr<I64Attr, "1">:$ranks);
  let results = (outs MoE_IdMatrix:$slots);
  let assemblyFormat = [{
    $ids `,` $table (`source` $source^ `ranks` $ranks)? attr-dict `:`
    type($ids) `,` type($table)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
}

def MoE_SlotGradSumOp : MoE_Op<"slot_grad_sum", [Pure,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "each slot's weight gradient, summed over the source ranks";
  let description = [{
    The weight gradient of experts on slots, alike on every replica and
    independent of the placement. The group spanned by `grid_axes` of
    `shard.grid @grid` (N ranks; one without `grid`) holds the table's P
    slots, S = P / N per rank. `partials [N*S, ...]` is this rank's
    `moe.experts_grad ... per_group` result: row `s*S + j` is what the
    tokens of source rank s contributed to local slot j. Row j of the
    result, for the expert e in this rank's slot j, is

    `0 + part(e, 0) + part(e, 1) + ... + part(e, N-1)`, added in that order,

    where `part(e, s)` is row `s*S + j'` on the rank holding slot j', the
    slot that serves e's choices from rank s (`moe.place`'s rule). That is
    the order in which `moe.experts_grad` adds the groups of one expert
    when every source sends it rows, so the bits do not depend on which
    replicas there are or where. Collective over the group: the parts of
    replicated experts travel between the ranks that hold them.

    ```mlir
    %g = moe.slot_grad_sum %parts, %table on @grid grid_axes = [0]
        : (tensor<10x16x8xf32>, tensor<10xi32>) -> tensor<5x16x8xf32>
    ```

    **Constraints:**
    * `grid` names a `shard.grid` and `grid_axes` distinct axes of it of
      static size (N), or neither is given (N = 1);
    * N divides the number of slots P; `partials` has N * (P / N) rows and
      the result P / N, with the same trailing dimensions and element type.
  }];
  let arguments = (ins MoE_Tensor<[AnyFloat], [2, 3]>:$partials,
                       MoE_CountVector:$table,
                       OptionalAttr<FlatSymbolRefAttr>:$grid,
                       DefaultValuedAttr<DenseI16ArrayAttr, "{}">:$grid_axes);
  let results = (outs MoE_Tensor<[AnyFloat], [2, 3]>:$output);
  let assemblyFormat = [{
    $partials `,` $table (`on` $grid^ `grid_axes` `=` $grid_axes)?
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Ranks in the group: 1 without a grid; 0 when it cannot be told.
    int64_t getGroupSize();
  }];
}

def MoE_SlotWeightsOp : MoE_Op<"slot_weights", [Pure]> {
  let summary = "the per-expert weights of each slot";
  let description = [{
    `output[p] = input[table[p]]`: the weights of a layer's experts
    (`[E, ...]`) laid out by slot (`[P, ...]`). After `moe-partition` each
    rank holds its `P / ep` slots' rows, and `moe-externalize-weights` makes
    them a buffer the runtime fills and migrates when the table changes. An
    identity table of E slots folds away.

    ```mlir
    %w = moe.slot_weights %w1[%table] : (tensor<8x16x8xf32>, tensor<10xi32>) -> tensor<10x16x8xf32>
    ```

    **Constraints:**
    * `input` has rank >= 2; the result has its element type and shape but
      for the first dimension, which is the P of `table`.
  }];
  let arguments = (ins MoE_Tensor<[AnyFloat], [2, 3]>:$input,
                       MoE_CountVector:$table);
  let results = (outs MoE_Tensor<[AnyFloat], [2, 3]>:$output);
  let assemblyFormat = [{
    $input `[` $table `]` attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// moe.layer
//===----------------------------------------------------------------------===//

def MoE_LayerOp : MoE_Op<"layer", [Pure, AttrSizedOperandSegments,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "a whole MoE block: route, dispatch, experts, combine";
  let description = !strconcat([{
    The fused block that importers produce (and what ONNX Runtime's
    `com.microsoft.MoE` is): routes `logits [T, E]` with the attributes of
    `moe.router` and top `k`, dispatches `input [T, H]` (dropless, or with
    `capacity` and `drop_policy` as `moe.dispatch`), runs the experts as
    `moe.experts` and combines them. Optional shared-expert weights add
    `moe.shared_expert` (same activation) to the result. `moe-decompose`
    expands it into those ops. For `expert_choice`, `capacity` is the
    router's per-expert token count and k must be E.

  }], MoE_RoutingDoc, [{

    ```mlir
    %y = moe.layer softmax topk k 2 %x, %logits fc1(%w1) fc3(%w3) fc2(%w2)
        activation <swiglu> {normalize}
        : (tensor<32x64xf32>, tensor<32x8xf32>, tensor<8x128x64xf32>,
           tensor<8x128x64xf32>, tensor<8x64x128xf32>) -> tensor<32x64xf32>
    ```

    **Constraints:**
    * `logits` has the T rows of `input`; the result is `[T, M]`;
    * `logits`, `selection_bias` and the result have the element type of
      `input`;
    * the expert weights and biases obey the constraints of `moe.experts`
      with E the logits' columns;
    * `shared_fc2` is given exactly when `shared_fc1` is, and `shared_fc3`
      and `shared_gate` only with them;
    * the shared-expert weights obey those of `moe.shared_expert`, with the
      experts' output width M;
    * without `expert_choice`, `capacity` (tokens per expert, at least 1)
      and `drop_policy` are given together or not at all (dropless);
    * the row buffer that `moe-decompose` creates, `[E, C, H]` with a
      capacity and `[T*k, H]` without, has at most 2^31 - 1 rows (`slots`
      are i32), and it and the experts' output rows (`[..., M]`) hold at
      most 2^40 bytes each; computed without overflow;
    * with `expert_choice`, no `drop_policy` is given;
    * `selection_bias` is the router's `bias`, `routed_ids` and
      `routed_weights` its;
  }], MoE_RoutingConstraints);

  let arguments = !con((ins
      MoE_FloatMatrix:$input, MoE_FloatMatrix:$logits,
      MoE_ExpertWeight:$fc1_weight, Optional<MoE_FloatMatrix>:$fc1_bias,
      Optional<MoE_ExpertWeight>:$fc3_weight, Optional<MoE_FloatMatrix>:$fc3_bias,
      MoE_ExpertWeight:$fc2_weight, Optional<MoE_FloatMatrix>:$fc2_bias,
      Optional<MoE_FloatVector>:$selection_bias,
      Optional<MoE_IndexMatrix>:$routed_ids,
      Optional<MoE_FloatMatrix>:$routed_weights,
      Optional<MoE_FloatMatrix>:$shared_fc1, Optional<MoE_FloatMatrix>:$shared_fc3,
      Optional<MoE_FloatMatrix>:$shared_fc2, Optional<MoE_FloatMatrix>:$shared_gate,
      I64Attr:$k, MoE_ActivationAttr:$activation,
      OptionalAttr<I64Attr>:$capacity,
      OptionalAttr<MoE_DropPolicyAttr>:$drop_policy),
    MoE_RoutingAttrs);
  let results = (outs MoE_FloatMatrix:$output);
  let assemblyFormat = [{
    $scoring $selection `k` $k $input `,` $logits
    (`bias` `(` $selection_bias^ `)`)?
    (`routed` `(` $routed_ids^ `,` $routed_weights `)`)?
    (`groups` $num_groups^ `top` $group_topk `by` $group_score)?
    (`masked` `=` $masked_score^)?
    (`capacity` $capacity^)? (`drop` $drop_policy^)?
    `fc1` `(` $fc1_weight (`,` $fc1_bias^)? `)`
    (`fc3` `(` $fc3_weight^ `)`)? (`fc3_bias` `(` $fc3_bias^ `)`)?
    `fc2` `(` $fc2_weight (`,` $fc2_bias^)? `)`
    (`shared_fc1` `(` $shared_fc1^ `)`)? (`shared_fc3` `(` $shared_fc3^ `)`)?
    (`shared_fc2` `(` $shared_fc2^ `)`)? (`shared_gate` `(` $shared_gate^ `)`)?
    `activation` $activation attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

#endif // MOE_DIALECT_MOE_IR_MOEOPS_TD
