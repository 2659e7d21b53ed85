"""PyTorch MoE modules for the importer test corpus.

Each module is written the way Hugging Face transformers writes the block it
mirrors (the class is named in the docstring), at toy sizes, so that
`torch.onnx.export` and `torch.jit.trace` see the same Python code that real
users export.  Deviations from the HF code are the ones the task asks for and
are marked `# CORPUS:`.

Used by make_corpus.py; needs torch (Debian's /usr/bin/python3 has 1.13).
"""

import math

import torch
import torch.nn.functional as F
from torch import nn


# --------------------------------------------------------------------------
# Mixtral
# --------------------------------------------------------------------------


class MixtralBlockSparseTop2MLP(nn.Module):
    """transformers MixtralBlockSparseTop2MLP (modeling_mixtral.py, v4.36-v4.53):
    w2(act(w1 x) * w3 x), all Linear without bias, act = silu."""

    def __init__(self, hidden_dim, ffn_dim):
        super().__init__()
        self.w1 = nn.Linear(hidden_dim, ffn_dim, bias=False)
        self.w2 = nn.Linear(ffn_dim, hidden_dim, bias=False)
        self.w3 = nn.Linear(hidden_dim, ffn_dim, bias=False)
        self.act_fn = nn.SiLU()

    def forward(self, hidden_states):
        current_hidden_states = self.act_fn(self.w1(hidden_states)) * self.w3(hidden_states)
        current_hidden_states = self.w2(current_hidden_states)
        return current_hidden_states


class MixtralSparseMoeBlock(nn.Module):
    """transformers MixtralSparseMoeBlock (modeling_mixtral.py).

    `static_loop=True` is the export-friendly loop `for expert_idx in
    range(self.num_experts)` (the form of transformers v4.40-v4.47, after
    PR #29858 removed `.tolist()`, and of the torch.export fixes PR #40114 /
    #46929 for issue #38518): every expert is in the traced graph.

    `static_loop=False` is the loop over `expert_hit` (transformers v4.48+):
    `torch.jit.trace` unrolls it over the experts that the *sample input* hits
    and bakes their indices in, so experts not hit by the sample are silently
    lost from the graph.
    """

    def __init__(self, hidden_dim=16, ffn_dim=32, num_experts=4, top_k=2, static_loop=True):
        super().__init__()
        self.hidden_dim = hidden_dim
        self.ffn_dim = ffn_dim
        self.num_experts = num_experts
        self.top_k = top_k
        self.static_loop = static_loop
        # gating
        self.gate = nn.Linear(self.hidden_dim, self.num_experts, bias=False)
        self.experts = nn.ModuleList(
            [MixtralBlockSparseTop2MLP(hidden_dim, ffn_dim) for _ in range(self.num_experts)]
        )

    def forward(self, hidden_states):
        batch_size, sequence_length, hidden_dim = hidden_states.shape
        hidden_states = hidden_states.view(-1, hidden_dim)
        # router_logits: (batch * sequence_length, n_experts)
        router_logits = self.gate(hidden_states)

        routing_weights = F.softmax(router_logits, dim=1, dtype=torch.float)
        routing_weights, selected_experts = torch.topk(routing_weights, self.top_k, dim=-1)
        routing_weights /= routing_weights.sum(dim=-1, keepdim=True)
        # we cast back to the input dtype
        routing_weights = routing_weights.to(hidden_states.dtype)

        final_hidden_states = torch.zeros(
            (batch_size * sequence_length, hidden_dim), dtype=hidden_states.dtype, device=hidden_states.device
        )

        # One hot encode the selected experts to create an expert mask
        # this will be used to easily index which expert is going to be sollicitated
        expert_mask = torch.nn.functional.one_hot(selected_experts, num_classes=self.num_experts).permute(2, 1, 0)

        if self.static_loop:
            # CORPUS: transformers v4.40-v4.47 loop (no data-dependent trip count).
            for expert_idx in range(self.num_experts):
                expert_layer = self.experts[expert_idx]
                idx, top_x = torch.where(expert_mask[expert_idx])

                # Index the correct hidden states and compute the expert hidden state for
                # the current expert. We need to make sure to multiply the output hidden
                # states by `routing_weights` on the corresponding tokens (top-1 and top-2)
                current_state = hidden_states[None, top_x].reshape(-1, hidden_dim)
                current_hidden_states = expert_layer(current_state) * routing_weights[top_x, idx, None]

                # However `index_add_` only support torch tensors for indexing so we'll use
                # the `top_x` tensor here.
                final_hidden_states.index_add_(0, top_x, current_hidden_states.to(hidden_states.dtype))
        else:
            # transformers v4.48+ loop: only over the experts hit by this input.
            expert_hit = torch.greater(expert_mask.sum(dim=(-1, -2)), 0).nonzero()
            for expert_idx in expert_hit:
                expert_layer = self.experts[expert_idx]
                idx, top_x = torch.where(expert_mask[expert_idx].squeeze(0))

                current_state = hidden_states[None, top_x].reshape(-1, hidden_dim)
                current_hidden_states = expert_layer(current_state) * routing_weights[top_x, idx, None]

                final_hidden_states.index_add_(0, top_x, current_hidden_states.to(hidden_states.dtype))
        final_hidden_states = final_hidden_states.reshape(batch_size, sequence_length, hidden_dim)
        # CORPUS: HF returns (final_hidden_states, router_logits); the corpus keeps
        # the one output that inference uses.
        return final_hidden_states


# --------------------------------------------------------------------------
# Qwen2-MoE
# --------------------------------------------------------------------------


class Qwen2MoeMLP(nn.Module):
    """transformers Qwen2MoeMLP: down(act(gate(x)) * up(x)), no bias, silu."""

    def __init__(self, hidden_size, intermediate_size):
        super().__init__()
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.gate_proj = nn.Linear(self.hidden_size, self.intermediate_size, bias=False)
        self.up_proj = nn.Linear(self.hidden_size, self.intermediate_size, bias=False)
        self.down_proj = nn.Linear(self.intermediate_size, self.hidden_size, bias=False)
        self.act_fn = nn.SiLU()

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class Qwen2MoeSparseMoeBlock(nn.Module):
    """transformers Qwen2MoeSparseMoeBlock (modeling_qwen2_moe.py, v4.40-v4.47
    static expert loop): softmax, top-k, optional renormalisation
    (norm_topk_prob, default False), plus a shared expert gated by
    sigmoid(shared_expert_gate(x))."""

    def __init__(self, hidden_size=16, moe_intermediate_size=32, shared_expert_intermediate_size=48,
                 num_experts=8, num_experts_per_tok=4, norm_topk_prob=False):
        super().__init__()
        self.num_experts = num_experts
        self.top_k = num_experts_per_tok
        self.norm_topk_prob = norm_topk_prob

        # gating
        self.gate = nn.Linear(hidden_size, num_experts, bias=False)
        self.experts = nn.ModuleList(
            [Qwen2MoeMLP(hidden_size, moe_intermediate_size) for _ in range(self.num_experts)]
        )

        self.shared_expert = Qwen2MoeMLP(hidden_size, shared_expert_intermediate_size)
        self.shared_expert_gate = torch.nn.Linear(hidden_size, 1, bias=False)

    def forward(self, hidden_states):
        batch_size, sequence_length, hidden_dim = hidden_states.shape
        hidden_states = hidden_states.view(-1, hidden_dim)
        # router_logits: (batch * sequence_length, n_experts)
        router_logits = self.gate(hidden_states)

        routing_weights = F.softmax(router_logits, dim=1, dtype=torch.float)
        routing_weights, selected_experts = torch.topk(routing_weights, self.top_k, dim=-1)
        if self.norm_topk_prob:
            routing_weights /= routing_weights.sum(dim=-1, keepdim=True)
        # we cast back to the input dtype
        routing_weights = routing_weights.to(hidden_states.dtype)

        final_hidden_states = torch.zeros(
            (batch_size * sequence_length, hidden_dim), dtype=hidden_states.dtype, device=hidden_states.device
        )

        # One hot encode the selected experts to create an expert mask
        # this will be used to easily index which expert is going to be sollicitated
        expert_mask = torch.nn.functional.one_hot(selected_experts, num_classes=self.num_experts).permute(2, 1, 0)

        # Loop over all available experts in the model and perform the computation on each expert
        for expert_idx in range(self.num_experts):
            expert_layer = self.experts[expert_idx]
            idx, top_x = torch.where(expert_mask[expert_idx])

            # Index the correct hidden states and compute the expert hidden state for
            # the current expert. We need to make sure to multiply the output hidden
            # states by `routing_weights` on the corresponding tokens (top-1 and top-2)
            current_state = hidden_states[None, top_x].reshape(-1, hidden_dim)
            current_hidden_states = expert_layer(current_state) * routing_weights[top_x, idx, None]

            # However `index_add_` only support torch tensors for indexing so we'll use
            # the `top_x` tensor here.
            final_hidden_states.index_add_(0, top_x, current_hidden_states.to(hidden_states.dtype))

        shared_expert_output = self.shared_expert(hidden_states)
        shared_expert_output = F.sigmoid(self.shared_expert_gate(hidden_states)) * shared_expert_output

        final_hidden_states = final_hidden_states + shared_expert_output

        final_hidden_states = final_hidden_states.reshape(batch_size, sequence_length, hidden_dim)
        # CORPUS: HF returns (final_hidden_states, router_logits).
        return final_hidden_states


# --------------------------------------------------------------------------
# Switch Transformer, GShard/Switch einsum form with capacity
# --------------------------------------------------------------------------


@torch.jit.script
def expert_capacity(hidden_states: torch.Tensor, num_experts: int, capacity_factor: float) -> torch.Tensor:
    """Switch paper / Megatron `get_capacity`: ceil(tokens / E * capacity_factor).

    Scripted so that the formula (not its value for the sample input) is what
    the tracer and the ONNX exporter record.  It returns a 0-d int64 tensor:
    the tracer cannot carry a Python int out of a scripted function
    ("Tracer cannot set value trace for type Int"); a 0-d tensor passed as
    `num_classes` is recorded as `aten::Int(%capacity)`, so it stays symbolic.
    The ONNX export keeps the formula only when the token dimension is
    dynamic (dynamic_axes); with a static input shape the exporter's shape
    inference folds Shape/Gather/Div/Mul into a constant."""
    num_tokens = hidden_states.size(0)
    capacity = int(math.ceil(num_tokens / num_experts * capacity_factor))
    return torch.tensor(capacity)


class SwitchTransformersDenseActDense(nn.Module):
    """transformers SwitchTransformersDenseActDense (T5 DenseActDense): wo(relu(wi x)),
    no bias, dropout omitted (eval)."""

    def __init__(self, d_model, d_ff):
        super().__init__()
        self.wi = nn.Linear(d_model, d_ff, bias=False)
        self.wo = nn.Linear(d_ff, d_model, bias=False)
        self.act = nn.ReLU()

    def forward(self, hidden_states):
        # Unused by SwitchCapacityMoE, which applies the stacked weights by einsum.
        return self.wo(self.act(self.wi(hidden_states)))


class SwitchCapacityMoE(nn.Module):
    """Switch Transformer top-1 MoE layer with expert capacity, in the
    GShard/Switch (Mesh-TensorFlow) einsum form: dispatch [T, E, C],
    per-expert FFN on [E, C, H], combine [T, E, C].

    The router is transformers SwitchTransformersTop1Router (classifier Linear
    without bias, router_dtype float32, softmax, argmax, one_hot, cumsum
    `token_priority`, `token_priority <= expert_capacity`); the dispatch and
    combine tensors follow the Switch paper's Mesh-TensorFlow `router()`
    pseudo-code (Fedus et al. 2021) and GShard's Algorithm 2.  The experts are
    the HF SwitchTransformersSparseMLP's SwitchTransformersDenseActDense; the
    forward applies them through einsums over their stacked weights, as the
    GShard `EGCM,EMH->EGCH` formulation does.  Dropped tokens get 0 (HF
    behaviour since v4.3x; the residual would carry them).
    Tokens form one group: input [T, H]."""

    def __init__(self, d_model=16, d_ff=32, num_experts=4, capacity_factor=1.0):
        super().__init__()
        self.num_experts = num_experts
        self.capacity_factor = capacity_factor
        self.classifier = nn.Linear(d_model, num_experts, bias=False)
        self.experts = nn.ModuleList([SwitchTransformersDenseActDense(d_model, d_ff) for _ in range(num_experts)])

    def _compute_router_probabilities(self, hidden_states):
        # SwitchTransformersTop1Router: router in float32 ("selective precision").
        hidden_states = hidden_states.to(torch.float32)
        router_logits = self.classifier(hidden_states)
        router_probs = nn.functional.softmax(router_logits, dim=-1, dtype=torch.float32)
        return router_probs, router_logits

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        router_probs, router_logits = self._compute_router_probabilities(hidden_states)

        expert_index = torch.argmax(router_probs, dim=-1)
        expert_index = torch.nn.functional.one_hot(expert_index, num_classes=self.num_experts)  # [T, E]

        # Mask tokens outside expert capacity. Sum over the tokens of the group.
        capacity = expert_capacity(hidden_states, self.num_experts, self.capacity_factor)
        token_priority = torch.cumsum(expert_index, dim=-2)  # 1-based position where selected
        # mask if the token routed to the expert will overflow
        expert_capacity_mask = token_priority <= capacity
        expert_index = expert_index * expert_capacity_mask  # [T, E], 0 for dropped tokens

        router_probs = torch.max(router_probs, dim=-1).values.unsqueeze(-1)  # [T, 1]

        # Switch paper router(): position_in_expert one-hot over the capacity.
        position_in_expert = (token_priority - 1) * expert_index  # 0-based, 0 where unused
        dispatch_mask = torch.nn.functional.one_hot(position_in_expert, num_classes=capacity)  # [T, E, C]
        dispatch_mask = (dispatch_mask * expert_index.unsqueeze(-1)).to(input_dtype)
        combine_weights = router_probs.unsqueeze(-1) * dispatch_mask  # [T, E, C]

        wi = torch.stack([expert.wi.weight for expert in self.experts])  # [E, F, H]
        wo = torch.stack([expert.wo.weight for expert in self.experts])  # [E, H, F]
        expert_inputs = torch.einsum('tec,th->ech', dispatch_mask, hidden_states)  # [E, C, H]
        h = self.experts[0].act(torch.einsum('ech,efh->ecf', expert_inputs, wi))  # [E, C, F]
        expert_outputs = torch.einsum('ecf,ehf->ech', h, wo)  # [E, C, H]
        output = torch.einsum('tec,ech->th', combine_weights, expert_outputs)  # [T, H]
        return output


# --------------------------------------------------------------------------
# GShard top-2 with capacity, as DeepSpeed-MoE and fairseq write it
# --------------------------------------------------------------------------


@torch.jit.script
def top2_capacity(gates: torch.Tensor, capacity_factor: float, min_capacity: int) -> torch.Tensor:
    """DeepSpeed's scripted `_capacity`: ceil(S / E * capacity_factor), at
    least min_capacity, as a 0-d int64 tensor (see expert_capacity)."""
    num_tokens = gates.shape[0]
    num_experts = gates.shape[1]
    capacity = torch.ceil(torch.tensor(num_tokens / num_experts * capacity_factor)).to(torch.int64)
    if capacity < min_capacity:
        capacity = torch.tensor(min_capacity, dtype=torch.int64)
    return capacity


@torch.jit.script
def one_hot_to_float(x: torch.Tensor, num_classes: int) -> torch.Tensor:
    """DeepSpeed's scripted `_one_hot_to_float`."""
    return F.one_hot(x, num_classes=num_classes).float()


class GShardTop2MoE(nn.Module):
    """GShard's top-2 gating with expert capacity (Lepikhin et al. 2020,
    Algorithm 2) as DeepSpeed-MoE's `top2gating` writes it (after fairseq's
    and fairscale's): softmax gates, arg-max first expert, second expert the
    arg-max of the logits with the first masked to -inf, locations by cumsum
    with every first choice placed before any second choice
    (`locations2 += sum(mask1)`), capacity ceil(2 S / E * factor) from a
    scripted function, the gates of the kept choices renormalised after the
    drops (a token whose second choice is dropped keeps its first with
    weight 1), combine [S, E, C] from one-hot locations, dispatch mask =
    combine.bool().  The MOELayer einsums dispatch and combine; the experts
    (relu FFNs) are applied by einsum to their stacked weights, as GShard
    writes them.  Evaluation mode: no second-expert sampling noise.
    Tokens form one group: input [S, M]."""

    def __init__(self, d_model=16, d_ff=32, num_experts=4, capacity_factor=1.0, min_capacity=4):
        super().__init__()
        self.num_experts = num_experts
        self.capacity_factor = capacity_factor
        self.min_capacity = min_capacity
        self.wg = nn.Linear(d_model, num_experts, bias=False)
        self.wi = nn.Parameter(torch.empty(num_experts, d_ff, d_model))
        self.wo = nn.Parameter(torch.empty(num_experts, d_model, d_ff))

    def top2gating(self, logits):
        gates = F.softmax(logits, dim=1)
        capacity = top2_capacity(gates, self.capacity_factor * 2, self.min_capacity)
        indices1_s = torch.argmax(gates, dim=1)
        num_experts = int(gates.shape[1])
        mask1 = F.one_hot(indices1_s, num_classes=num_experts)
        logits_except1 = logits.masked_fill(mask1.bool(), float("-inf"))
        indices2_s = torch.argmax(logits_except1, dim=1)
        mask2 = F.one_hot(indices2_s, num_classes=num_experts)
        locations1 = torch.cumsum(mask1, dim=0) - 1
        locations2 = torch.cumsum(mask2, dim=0) - 1
        locations2 += torch.sum(mask1, dim=0, keepdim=True)
        mask1 = mask1 * torch.lt(locations1, capacity)
        mask2 = mask2 * torch.lt(locations2, capacity)
        locations1_s = torch.sum(locations1 * mask1, dim=1)
        locations2_s = torch.sum(locations2 * mask2, dim=1)
        mask1_float = mask1.float()
        mask2_float = mask2.float()
        gates1_s = torch.einsum("se,se->s", gates, mask1_float)
        gates2_s = torch.einsum("se,se->s", gates, mask2_float)
        denom_s = gates1_s + gates2_s
        denom_s = torch.clamp(denom_s, min=torch.finfo(denom_s.dtype).eps)
        gates1_s = gates1_s / denom_s
        gates2_s = gates2_s / denom_s
        gates1 = torch.einsum("s,se->se", gates1_s, mask1_float)
        gates2 = torch.einsum("s,se->se", gates2_s, mask2_float)
        locations1_sc = one_hot_to_float(locations1_s, int(capacity))
        locations2_sc = one_hot_to_float(locations2_s, int(capacity))
        combine1_sec = torch.einsum("se,sc->sec", gates1, locations1_sc)
        combine2_sec = torch.einsum("se,sc->sec", gates2, locations2_sc)
        combine_weights = combine1_sec + combine2_sec
        dispatch_mask = combine_weights.bool()
        return combine_weights, dispatch_mask

    def forward(self, hidden_states):
        combine_weights, dispatch_mask = self.top2gating(self.wg(hidden_states))
        dispatched = torch.einsum("sec,sm->ecm", dispatch_mask.type_as(hidden_states), hidden_states)
        h = F.relu(torch.einsum("ecm,efm->ecf", dispatched, self.wi))
        expert_output = torch.einsum("ecf,emf->ecm", h, self.wo)
        return torch.einsum("sec,ecm->sm", combine_weights.type_as(hidden_states), expert_output)


# --------------------------------------------------------------------------
# DeepSeek-V3
# --------------------------------------------------------------------------


class DeepseekV3MLP(nn.Module):
    """transformers DeepseekV3MLP: down(silu(gate(x)) * up(x)), no bias."""

    def __init__(self, hidden_size, intermediate_size):
        super().__init__()
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.gate_proj = nn.Linear(self.hidden_size, self.intermediate_size, bias=False)
        self.up_proj = nn.Linear(self.hidden_size, self.intermediate_size, bias=False)
        self.down_proj = nn.Linear(self.intermediate_size, self.hidden_size, bias=False)
        self.act_fn = nn.SiLU()

    def forward(self, x):
        down_proj = self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))
        return down_proj


class DeepseekV3TopkRouter(nn.Module):
    """transformers DeepseekV3TopkRouter (modeling_deepseek_v3.py, v4.51+):
    sigmoid scores, e_score_correction_bias for selection only, group-limited
    top-k (group score = sum of the top-2 in the group, other groups masked with
    0.0), weights from the unbiased scores, normalised (sum + 1e-20), times
    routed_scaling_factor."""

    def __init__(self, hidden_size=16, n_routed_experts=8, num_experts_per_tok=2, n_group=4, topk_group=2,
                 routed_scaling_factor=2.5, norm_topk_prob=True):
        super().__init__()
        self.hidden_size = hidden_size
        self.top_k = num_experts_per_tok
        self.n_routed_experts = n_routed_experts
        self.routed_scaling_factor = routed_scaling_factor
        self.n_group = n_group
        self.topk_group = topk_group
        self.norm_topk_prob = norm_topk_prob

        self.weight = nn.Parameter(torch.empty((self.n_routed_experts, hidden_size)))
        self.register_buffer("e_score_correction_bias", torch.zeros((self.n_routed_experts)))

    @torch.no_grad()
    def get_topk_indices(self, scores):
        scores_for_choice = scores.view(-1, self.n_routed_experts) + self.e_score_correction_bias.unsqueeze(0)
        group_scores = (
            scores_for_choice.view(-1, self.n_group, self.n_routed_experts // self.n_group)
            .topk(2, dim=-1)[0]
            .sum(dim=-1)
        )
        group_idx = torch.topk(group_scores, k=self.topk_group, dim=-1, sorted=False)[1]
        group_mask = torch.zeros_like(group_scores)
        group_mask.scatter_(1, group_idx, 1)
        score_mask = (
            group_mask.unsqueeze(-1)
            .expand(-1, self.n_group, self.n_routed_experts // self.n_group)
            .reshape(-1, self.n_routed_experts)
        )
        scores_for_choice = scores_for_choice.masked_fill(~score_mask.bool(), 0.0)
        topk_indices = torch.topk(scores_for_choice, k=self.top_k, dim=-1, sorted=False)[1]
        return topk_indices

    def forward(self, hidden_states):
        hidden_states = hidden_states.view(-1, self.hidden_size)
        router_logits = F.linear(hidden_states.type(torch.float32), self.weight.type(torch.float32))
        scores = router_logits.sigmoid()
        topk_indices = self.get_topk_indices(scores)
        topk_weights = scores.gather(1, topk_indices)
        if self.norm_topk_prob:
            denominator = topk_weights.sum(dim=-1, keepdim=True) + 1e-20
            topk_weights /= denominator
        topk_weights = topk_weights * self.routed_scaling_factor
        return topk_indices, topk_weights


class DeepseekV3MoE(nn.Module):
    """transformers DeepseekV3MoE with the experts in the dense-fallback form
    (mobius MoELayer / onnxruntime-genai pre-QMoE): every expert runs on every
    token, weighted by its routing weight gathered per token; plus one ungated
    shared expert (n_shared_experts = 1)."""

    def __init__(self, hidden_size=16, moe_intermediate_size=32, n_routed_experts=8, n_shared_experts=1, **router):
        super().__init__()
        self.experts = nn.ModuleList(
            [DeepseekV3MLP(hidden_size, moe_intermediate_size) for _ in range(n_routed_experts)]
        )
        self.gate = DeepseekV3TopkRouter(hidden_size, n_routed_experts, **router)
        self.shared_experts = DeepseekV3MLP(hidden_size, moe_intermediate_size * n_shared_experts)

    def moe(self, hidden_states, topk_indices, topk_weights):
        # CORPUS: dense fallback instead of HF's per-expert torch.where/index_add_.
        final_hidden_states = torch.zeros_like(hidden_states, dtype=topk_weights.dtype)
        for expert_idx in range(len(self.experts)):
            expert = self.experts[expert_idx]
            weight = (topk_weights * (topk_indices == expert_idx)).sum(dim=-1)  # [T]
            final_hidden_states = final_hidden_states + weight[:, None] * expert(hidden_states)
        return final_hidden_states.type(hidden_states.dtype)

    def forward(self, hidden_states):
        residuals = hidden_states
        orig_shape = hidden_states.shape
        topk_indices, topk_weights = self.gate(hidden_states)
        hidden_states = hidden_states.view(-1, hidden_states.shape[-1])
        hidden_states = self.moe(hidden_states, topk_indices, topk_weights).view(*orig_shape)
        hidden_states = hidden_states + self.shared_experts(residuals)
        return hidden_states


# --------------------------------------------------------------------------
# DeepSeek-V3, as its own reference code writes it (no transformers)
# --------------------------------------------------------------------------


class DeepseekReferenceGate(nn.Module):
    """DeepSeek-V3's inference/model.py `Gate`: sigmoid scores, a selection
    bias, groups ranked by the sum of their top two, the selection weights
    from the unbiased scores, renormalised and scaled by `route_scale`."""

    def __init__(self, dim, n_routed_experts, topk, n_groups, topk_groups, route_scale):
        super().__init__()
        self.topk, self.n_groups, self.topk_groups = topk, n_groups, topk_groups
        self.route_scale = route_scale
        self.weight = nn.Parameter(torch.empty(n_routed_experts, dim))
        self.bias = nn.Parameter(torch.empty(n_routed_experts))

    def forward(self, x):
        scores = F.linear(x, self.weight).sigmoid()
        original_scores = scores
        scores = scores + self.bias
        scores = scores.view(x.size(0), self.n_groups, -1)
        group_scores = scores.topk(2, dim=-1)[0].sum(dim=-1)
        indices = group_scores.topk(self.topk_groups, dim=-1)[1]
        # CORPUS: the reference's `new_ones(..., dtype=bool).scatter_(1,
        # indices, False)` does not trace (a bool scatter value); its older
        # float mask does.
        mask = torch.zeros_like(scores[..., 0]).scatter_(1, indices, 1.0)
        scores = (scores * mask.unsqueeze(-1)).flatten(1)
        indices = torch.topk(scores, self.topk, dim=-1)[1]
        weights = original_scores.gather(1, indices)
        weights /= weights.sum(dim=-1, keepdim=True)
        weights *= self.route_scale
        return weights.type_as(x), indices


class DeepseekReferenceExpert(nn.Module):
    """inference/model.py `Expert` (and `MLP`): w2(silu(w1 x) * w3 x)."""

    def __init__(self, dim, inter_dim):
        super().__init__()
        self.w1 = nn.Linear(dim, inter_dim, bias=False)
        self.w2 = nn.Linear(inter_dim, dim, bias=False)
        self.w3 = nn.Linear(dim, inter_dim, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class DeepseekReferenceMoE(nn.Module):
    """inference/model.py `MoE` on one rank: a loop over the experts'
    `torch.where(indices == i)`, plus the shared experts."""

    def __init__(self, dim=16, moe_inter_dim=32, n_routed_experts=8, n_shared_experts=1, topk=2, n_groups=4,
                 topk_groups=2, route_scale=2.5):
        super().__init__()
        self.dim = dim
        self.n_routed_experts = n_routed_experts
        self.gate = DeepseekReferenceGate(dim, n_routed_experts, topk, n_groups, topk_groups, route_scale)
        self.experts = nn.ModuleList([DeepseekReferenceExpert(dim, moe_inter_dim) for _ in range(n_routed_experts)])
        self.shared_experts = DeepseekReferenceExpert(dim, n_shared_experts * moe_inter_dim)

    def forward(self, hidden_states):
        # CORPUS: the input is named as the other corpus blocks name it.
        x = hidden_states
        shape = x.size()
        x = x.view(-1, self.dim)
        weights, indices = self.gate(x)
        y = torch.zeros_like(x)
        for i in range(self.n_routed_experts):
            expert = self.experts[i]
            idx, top = torch.where(indices == i)
            # CORPUS: the reference's `y[idx] += ...` traces with the sample's
            # row count fixed in a Reshape (the graph fails on other inputs);
            # index_add_ is the same sum and exports for any routing.
            y.index_add_(0, idx, expert(x[idx]) * weights[idx, top, None])
        z = self.shared_experts(x)
        return (y + z).view(shape)


# --------------------------------------------------------------------------
# A tiny Mixtral decoder layer
# --------------------------------------------------------------------------


class MixtralRMSNorm(nn.Module):
    """transformers MixtralRMSNorm."""

    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


def _make_causal_mask(bsz, tgt_len, dtype, device):
    """transformers `_make_causal_mask` (modeling_attn_mask_utils.py, v4.3x):
    0 on and below the diagonal, finfo.min above, shape [bsz, 1, tgt, tgt]."""
    mask = torch.full((tgt_len, tgt_len), torch.finfo(dtype).min, device=device)
    mask_cond = torch.arange(mask.size(-1), device=device)
    mask.masked_fill_(mask_cond < (mask_cond + 1).view(mask.size(-1), 1), 0)
    mask = mask.to(dtype)
    return mask[None, None, :, :].expand(bsz, 1, tgt_len, tgt_len)


class MixtralAttention(nn.Module):
    """transformers MixtralAttention + eager_attention_forward (v4.48+ layout),
    without rotary embeddings, KV cache or dropout (CORPUS)."""

    def __init__(self, hidden_size=16, num_heads=4, head_dim=4):
        super().__init__()
        self.head_dim = head_dim
        self.scaling = self.head_dim ** -0.5
        self.q_proj = nn.Linear(hidden_size, num_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(hidden_size, num_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(hidden_size, num_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(num_heads * self.head_dim, hidden_size, bias=False)

    def forward(self, hidden_states, attention_mask):
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.head_dim)

        query_states = self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        key_states = self.k_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        value_states = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)

        # eager_attention_forward (num_key_value_groups = 1: no repeat_kv)
        attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) * self.scaling
        causal_mask = attention_mask[:, :, :, : key_states.shape[-2]]
        attn_weights = attn_weights + causal_mask
        attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query_states.dtype)
        attn_output = torch.matmul(attn_weights, value_states)
        attn_output = attn_output.transpose(1, 2).contiguous()

        attn_output = attn_output.reshape(*input_shape, -1).contiguous()
        attn_output = self.o_proj(attn_output)
        return attn_output


class MixtralDecoderLayer(nn.Module):
    """transformers MixtralDecoderLayer: pre-norm attention and pre-norm sparse
    MoE, each with a residual.  CORPUS: the layer builds its causal mask
    itself (HF builds it once in MixtralModel)."""

    def __init__(self, hidden_size=16, num_heads=4, head_dim=4, ffn_dim=32, num_experts=4, top_k=2, eps=1e-6):
        super().__init__()
        self.hidden_size = hidden_size
        self.self_attn = MixtralAttention(hidden_size, num_heads, head_dim)
        self.block_sparse_moe = MixtralSparseMoeBlock(hidden_size, ffn_dim, num_experts, top_k)
        self.input_layernorm = MixtralRMSNorm(hidden_size, eps=eps)
        self.post_attention_layernorm = MixtralRMSNorm(hidden_size, eps=eps)

    def forward(self, hidden_states):
        bsz, seq_len, _ = hidden_states.shape
        attention_mask = _make_causal_mask(bsz, seq_len, hidden_states.dtype, hidden_states.device)

        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)

        # Self Attention
        hidden_states = self.self_attn(hidden_states, attention_mask)
        hidden_states = residual + hidden_states

        # Fully Connected
        residual = hidden_states
        hidden_states = self.post_attention_layernorm(hidden_states)
        hidden_states = self.block_sparse_moe(hidden_states)
        hidden_states = residual + hidden_states
        return hidden_states
