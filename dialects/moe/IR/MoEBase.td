//===- MoEBase.td - moe dialect, enums and attributes ------*- tablegen -*-===//
//
// The dialect record, its enums and its attributes. Ops live in MoEOps.td.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_DIALECT_MOE_IR_MOEBASE_TD
#define MOE_DIALECT_MOE_IR_MOEBASE_TD

include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/OpBase.td"

def MoE_Dialect : Dialect {
  let name = "moe";
  let cppNamespace = "::mlir::moe";
  let summary = "Mixture-of-Experts routing, dispatch, expert compute and exchange";
  let description = [{
    The `moe` dialect keeps the semantics of a Mixture-of-Experts block that
    generic tensor IR loses: which experts a token is routed to and with what
    weight (`moe.router`), how tokens are packed per expert and which are
    dropped (`moe.dispatch`), the expert FFNs as one grouped computation
    (`moe.experts`), the weighted return to token order (`moe.combine`), the
    load-balancing losses, and explicit exchanges between ranks
    (`moe.all_to_all`). `moe.layer` is the fused block that importers produce;
    `moe-decompose` expands it.

    Conventions shared by every op:
    * Tokens are rows: activations are `[T, H]`.
    * Expert ids are `i32` in `[0, E)`; `-1` marks an unrouted (token, slot).
    * Expert weights use the `nn.Linear` layout `[E, out, in]`.
    * Ties in every selection go to the lower index.
  }];
  let useDefaultAttributePrinterParser = 1;
  let hasConstantMaterializer = 1;
  // The materializer builds arith.constant (folded zero-coefficient losses).
  let dependentDialects = ["::mlir::arith::ArithDialect"];
}

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def MoE_ScoringFunctionAttr : I32EnumAttr<"ScoringFunction",
    "how router logits become expert scores", [
      I32EnumAttrCase<"Softmax", 0, "softmax">,
      I32EnumAttrCase<"Sigmoid", 1, "sigmoid">
    ]> {
  let cppNamespace = "::mlir::moe";
}

def MoE_SelectionMethodAttr : I32EnumAttr<"SelectionMethod",
    "how a router selects experts", [
      I32EnumAttrCase<"TopK", 0, "topk">,
      I32EnumAttrCase<"GroupedTopK", 1, "grouped_topk">,
      I32EnumAttrCase<"Sinkhorn", 2, "sinkhorn">,
      I32EnumAttrCase<"ExpertChoice", 3, "expert_choice">,
      I32EnumAttrCase<"SparseMixer", 4, "sparse_mixer">,
      I32EnumAttrCase<"Given", 5, "given">
    ]> {
  let cppNamespace = "::mlir::moe";
}

def MoE_GroupScoreAttr : I32EnumAttr<"GroupScore",
    "how group-limited routing scores a group of experts", [
      I32EnumAttrCase<"Max", 0, "max">,
      I32EnumAttrCase<"Top2Sum", 1, "top2_sum">
    ]> {
  let cppNamespace = "::mlir::moe";
}

def MoE_DropPolicyAttr : I32EnumAttr<"DropPolicy",
    "which routed tokens a full expert keeps", [
      I32EnumAttrCase<"Position", 0, "position">,
      I32EnumAttrCase<"Probs", 1, "probs">,
      I32EnumAttrCase<"Choice", 2, "choice">
    ]> {
  let cppNamespace = "::mlir::moe";
}

def MoE_ActivationKind : I32EnumAttr<"ActivationKind",
    "expert FFN activation", [
      I32EnumAttrCase<"Identity", 0, "identity">,
      I32EnumAttrCase<"Relu", 1, "relu">,
      I32EnumAttrCase<"Gelu", 2, "gelu">,
      I32EnumAttrCase<"GeluTanh", 3, "gelu_tanh">,
      I32EnumAttrCase<"Silu", 4, "silu">,
      I32EnumAttrCase<"SwiGLU", 5, "swiglu">,
      I32EnumAttrCase<"Custom", 6, "custom">
    ]> {
  let cppNamespace = "::mlir::moe";
}

def MoE_SwiGLULayout : I32EnumAttr<"SwiGLULayout",
    "where the gate and linear halves of a SwiGLU live", [
      I32EnumAttrCase<"Separate", 0, "separate">,
      I32EnumAttrCase<"Interleaved", 1, "interleaved">,
      I32EnumAttrCase<"Concatenated", 2, "concatenated">
    ]> {
  let cppNamespace = "::mlir::moe";
}

def MoE_LoadBalancingAttr : I32EnumAttr<"LoadBalancing",
    "router load balancing in training (SageMaker moe_load_balancing)", [
      I32EnumAttrCase<"Sinkhorn", 0, "sinkhorn">,
      I32EnumAttrCase<"AuxLoss", 1, "aux_loss">,
      I32EnumAttrCase<"Balanced", 2, "balanced">,
      I32EnumAttrCase<"None", 3, "none">
    ]> {
  let cppNamespace = "::mlir::moe";
}

def MoE_TokenDispatcherAttr : I32EnumAttr<"TokenDispatcher",
    "how tokens reach the ranks that hold their experts", [
      I32EnumAttrCase<"AllToAll", 0, "all_to_all">,
      I32EnumAttrCase<"AllGather", 1, "all_gather">
    ]> {
  let cppNamespace = "::mlir::moe";
}

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

def MoE_ActivationAttr : AttrDef<MoE_Dialect, "Activation"> {
  let mnemonic = "activation";
  let summary = "an expert FFN activation and its parameters";
  let description = [{
    The activation between an FFN's first and second projection.

    * `identity`, `relu`, `gelu` (erf form), `gelu_tanh` (tanh approximation),
      `silu`: applied to `h1 = x W1^T + b1`. When an `fc3` projection is
      present the FFN is gated: `act(h1) * (x W3^T + b3)` (ONNX Runtime's FC3).
    * `swiglu`: `G * sigmoid(alpha * G) * (L + beta)` where
      `G = min(g, limit)` and `L = clamp(l, -limit, limit)` (no clamp without
      `limit`). The gate `g` and linear `l` halves come from:
      `separate`: `g` from fc1, `l` from fc3 (Mixtral's w1 and w3);
      `interleaved`: fc1 is `2F` wide, `g = h1[2i]`, `l = h1[2i+1]`
      (ONNX Runtime `swiglu_fusion = 1`, GPT-OSS);
      `concatenated`: fc1 is `2F` wide, `g = h1[:F]`, `l = h1[F:]`
      (`swiglu_fusion = 2`, Hugging Face `gate_up_proj`).
      The defaults `alpha = 1, beta = 0` give the standard `silu(g) * l`;
      GPT-OSS uses `alpha = 1.702, beta = 1, limit = 7`.
    * `custom @f`: an elementwise activation no kind names (Nemotron-H's
      squared ReLU, a clamped or shifted form), applied to `h1` (and gated
      by fc3 as above). `@f` is a `func.func` of the module that maps one
      element to one, `(T) -> T` with T the FFN's element type, in one
      block of pure `arith` and `math` ops (the ones listed by
      `isActivationBodyOp`, each of which the backward differentiates).
      It is a symbol rather than a region so that every op that carries the
      activation (`moe.layer`, `moe.experts`, `moe.experts_grad`,
      `moe.shared_expert`) shares one body; the lowerings inline it where
      the named kinds build their scalar code, so both targets run it.

    Syntax: `<kind (, layout)? (, alpha = f)? (, beta = f)? (, limit = f)?>`
    or `<custom @f>`, each part at most once. Example: `<silu>`,
    `<swiglu, interleaved, alpha = 1.702, beta = 1.0, limit = 7.0>`,
    `<custom @moe_activation_0>`.

    **Constraints:**
    * the layout, `alpha`, `beta` and `limit` are only given for `swiglu`;
    * `alpha` and `beta` are finite;
    * `limit`, when given, is finite and positive (no limit: leave it out);
    * `custom`, and only `custom`, names a body; the ops that carry it check
      the body (verifySymbolUses).
  }];
  let parameters = (ins
    "ActivationKind":$kind,
    DefaultValuedParameter<"SwiGLULayout", "SwiGLULayout::Separate">:$layout,
    DefaultValuedParameter<"::llvm::APFloat", "::llvm::APFloat(1.0)">:$alpha,
    DefaultValuedParameter<"::llvm::APFloat", "::llvm::APFloat(0.0)">:$beta,
    OptionalParameter<"std::optional<::llvm::APFloat>">:$limit,
    OptionalParameter<"::mlir::FlatSymbolRefAttr">:$body
  );
  let builders = [
    AttrBuilder<(ins "ActivationKind":$kind), [{
      return $_get($_ctxt, kind, SwiGLULayout::Separate, ::llvm::APFloat(1.0),
                   ::llvm::APFloat(0.0), std::nullopt, ::mlir::FlatSymbolRefAttr());
    }]>,
    AttrBuilder<(ins "ActivationKind":$kind, "SwiGLULayout":$layout,
                     "::llvm::APFloat":$alpha, "::llvm::APFloat":$beta,
                     "std::optional<::llvm::APFloat>":$limit), [{
      return $_get($_ctxt, kind, layout, alpha, beta, limit,
                   ::mlir::FlatSymbolRefAttr());
    }]>,
    AttrBuilder<(ins "::mlir::FlatSymbolRefAttr":$body), [{
      return $_get($_ctxt, ActivationKind::Custom, SwiGLULayout::Separate,
                   ::llvm::APFloat(1.0), ::llvm::APFloat(0.0), std::nullopt,
                   body);
    }]>
  ];
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Whether fc1 holds both SwiGLU halves (so it is twice as wide).
    bool isFusedSwiGLU() const {
      return getKind() == ActivationKind::SwiGLU &&
             getLayout() != SwiGLULayout::Separate;
    }
  }];
}

def MoE_PlanAttr : AttrDef<MoE_Dialect, "Plan"> {
  let mnemonic = "plan";
  let summary = "a parallel plan: grid axis sizes and expert-parallel options";
  let description = [{
    Carried on the module as `moe.plan`; `moe-partition` rewrites the program
    into what each rank of the plan runs. The world has `pp x dp x ep x tp`
    ranks. The grid it creates,
    `shard.grid @world(shape = pp x (dp / dp_shard) x dp_shard x ep x tp)`,
    has one axis per degree, the last varying fastest between neighbouring
    ranks:

    * `pp`: pipeline stages;
    * `dp`: data parallelism; tokens are split over `dp x ep`. The expert
      weights are sharded over groups of `dp_shard` data-parallel ranks and
      gathered before use (FSDP's hybrid sharding); `dp_shard = 1` keeps a
      whole copy on every rank;
    * `ep`: experts, exchanged tokens;
    * `tp`: tensor parallelism inside experts and shared experts.

    The rest are SageMaker MoEConfig fields: `dispatcher` (its
    `moe_all_to_all_dispatcher`), `token_shuffle` (`global_token_shuffle`),
    `load_balancing`, `aux_loss_coeff`, `z_loss_coeff` and `seed`
    (`random_seed`, to which each EP rank adds its index).

    Syntax: `<key = value, ...>` with each key at most once, in any order;
    missing keys take their defaults (degrees 1, SageMaker's MoEConfig
    defaults otherwise). Example:
    `#moe.plan<dp = 2, ep = 4, dispatcher = all_to_all, token_shuffle = true>`.

    **Constraints:**
    * every degree is at least 1, and `dp_shard` divides `dp`;
    * the world size `pp x dp x ep x tp` is at most 2^31 - 1 (an MPI rank
      is an `int`), computed without overflow;
    * the coefficients are finite and not negative.
  }];
  let parameters = (ins "int64_t":$pp, "int64_t":$dp, "int64_t":$dp_shard,
                        "int64_t":$ep, "int64_t":$tp,
                        "TokenDispatcher":$dispatcher, "bool":$token_shuffle,
                        "LoadBalancing":$load_balancing,
                        "::llvm::APFloat":$aux_loss_coeff,
                        "::llvm::APFloat":$z_loss_coeff, "int64_t":$seed);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The most ranks a plan may have: MPI numbers ranks with an `int`.
    static constexpr int64_t kMaxWorldSize = 2147483647;
    /// Ranks in the plan: the product of its degrees (verified not to
    /// overflow).
    int64_t getWorldSize() const {
      return getPp() * getDp() * getEp() * getTp();
    }
    /// The attribute with every field at its default.
    static PlanAttr getDefault(::mlir::MLIRContext *context);
  }];
}

#endif // MOE_DIALECT_MOE_IR_MOEBASE_TD
