"""The mixture of experts' two kernels: grouped matmuls over the tokens sorted by expert, and one
expert after another, give the same outputs and gradients (the loop is the grouped kernel's
twin where torch._grouped_mm does not run), equal to transformers' own Qwen3-MoE block; the
engine runs the one measured faster unless a run names one."""

from dataclasses import astuple

import pytest
import torch

from hotswitch.backend.models.config import Experts
from hotswitch.backend.models.experts import (
    IN_FORCE,
    KERNELS,
    Gate,
    choose_experts,
    grouped_experts,
    loop_experts,
    route,
    routed_experts,
    use_experts,
)

EXPERTS = Experts(count=8, per_token=2, ffn_dim=24, normalize=True)
DIM = 32


def weights(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    router = torch.randn(EXPERTS.count, DIM, generator=g)
    w1 = torch.randn(EXPERTS.count, EXPERTS.ffn_dim, DIM, generator=g) * 0.1
    w2 = torch.randn(EXPERTS.count, DIM, EXPERTS.ffn_dim, generator=g) * 0.1
    w3 = torch.randn(EXPERTS.count, EXPERTS.ffn_dim, DIM, generator=g) * 0.1
    return [t.requires_grad_() for t in (router, w1, w2, w3)]


def run(kernel: str, x: torch.Tensor, params: list) -> tuple[torch.Tensor, list]:
    use_experts(kernel)
    try:
        out = routed_experts(x, *params, astuple(Gate.of(EXPERTS)))
        grads = torch.autograd.grad((out * torch.linspace(-1, 1, out.numel()).view_as(out)).sum(), [x, *params])
    finally:
        use_experts("loop")
    return out, list(grads)


def test_the_grouped_and_the_loop_kernels_give_the_same_outputs_and_gradients():
    x = torch.randn(3, 40, DIM, generator=torch.Generator().manual_seed(1)).requires_grad_()
    params = weights()
    grouped, grouped_grads = run("grouped", x, params)
    loop, loop_grads = run("loop", x, params)
    assert torch.allclose(grouped, loop, atol=1e-6, rtol=1e-5)
    for a, b in zip(grouped_grads, loop_grads, strict=True):  # x, the router and the three experts
        assert torch.allclose(a, b, atol=1e-6, rtol=1e-5)
    assert loop_grads[1].abs().sum() > 0  # the router learns through the picked weights


def test_an_expert_no_token_picks_gets_a_zero_gradient_in_both_kernels():
    tokens = torch.randn(6, DIM)
    picked = torch.tensor([[0, 1]] * 6)  # experts 2-7 idle
    gates = torch.full((6, 2), 0.5)
    _, w1, w2, w3 = weights()
    for kernel in (grouped_experts, loop_experts):
        out = kernel(tokens, picked, gates, w1, w2, w3)
        (grad,) = torch.autograd.grad(out.sum(), [w1])
        assert grad[2:].abs().sum() == 0 and grad[:2].abs().sum() > 0


def test_the_mixture_equals_transformers_qwen3_moe_block():
    import transformers
    from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeSparseMoeBlock

    config = transformers.Qwen3MoeConfig(
        hidden_size=DIM, moe_intermediate_size=EXPERTS.ffn_dim, num_experts=EXPERTS.count, num_experts_per_tok=2
    )
    config.norm_topk_prob = True
    block = Qwen3MoeSparseMoeBlock(config)
    router, w1, w2, w3 = weights()
    with torch.no_grad():
        block.gate.weight.copy_(router)
        block.experts.gate_up_proj.copy_(torch.cat([w1, w3], dim=1))
        block.experts.down_proj.copy_(w2)
    x = torch.randn(2, 30, DIM, generator=torch.Generator().manual_seed(2))
    expected = block(x)
    for kernel in KERNELS:
        use_experts(kernel)
        try:
            ours = routed_experts(x, router, w1, w2, w3, astuple(Gate(2, True)))
        finally:
            use_experts("loop")
        assert torch.allclose(ours, expected, atol=1e-6, rtol=1e-5), kernel


def in_every_kernel(ours, x: torch.Tensor, expected: torch.Tensor) -> None:
    """``ours(x)`` is ``expected`` under each experts kernel."""
    for kernel in KERNELS:
        use_experts(kernel)
        try:
            got = ours(x)
        finally:
            use_experts("loop")
        assert torch.allclose(got, expected, atol=1e-6, rtol=1e-5), kernel


def test_a_mixture_with_a_gated_shared_expert_equals_transformers_qwen2_moe_block():
    """Routed experts plus the shared expert scaled by sigmoid(gate(x)), in transformers' order."""
    import transformers
    from transformers.models.qwen2_moe.modeling_qwen2_moe import Qwen2MoeSparseMoeBlock

    from hotswitch.backend.models.experts import MixtureOfExperts

    config = transformers.Qwen2MoeConfig(
        hidden_size=DIM,
        moe_intermediate_size=EXPERTS.ffn_dim,
        shared_expert_intermediate_size=40,
        num_experts=EXPERTS.count,
        num_experts_per_tok=2,
        norm_topk_prob=False,
    )
    torch.manual_seed(3)
    block = Qwen2MoeSparseMoeBlock(config)
    ours = MixtureOfExperts(Experts(EXPERTS.count, 2, EXPERTS.ffn_dim, shared_ffn_dim=40, shared_gate=True), DIM)
    with torch.no_grad():
        for param in block.parameters():
            param.normal_(0, 0.1)
        ours.router.weight.copy_(block.gate.weight)
        w1, w3 = block.experts.gate_up_proj.chunk(2, dim=1)
        ours.experts.w1.copy_(w1), ours.experts.w3.copy_(w3), ours.experts.w2.copy_(block.experts.down_proj)
        ours.shared.w1.weight.copy_(block.shared_expert.gate_proj.weight)
        ours.shared.w2.weight.copy_(block.shared_expert.down_proj.weight)
        ours.shared.w3.weight.copy_(block.shared_expert.up_proj.weight)
        ours.shared_gate.weight.copy_(block.shared_expert_gate.weight)
    x = torch.randn(2, 30, DIM, generator=torch.Generator().manual_seed(2))
    expected = block(x)
    in_every_kernel(ours, x, expected)
    ungated = MixtureOfExperts(Experts(EXPERTS.count, 2, EXPERTS.ffn_dim, shared_ffn_dim=40), DIM)
    assert not hasattr(ungated, "shared_gate")  # DeepSeek's shared experts are added ungated


def test_a_sigmoid_router_with_groups_a_choice_bias_and_a_scale_equals_transformers_glm4_moe_block():
    """GLM-4.5's (and DeepSeek-V3's) router: sigmoid scores, the choice biased and limited to the
    best groups, the picked scores renormalised and scaled; an ungated shared expert beside."""
    import transformers
    from transformers.models.glm4_moe.modeling_glm4_moe import Glm4MoeMoE

    from hotswitch.backend.models.experts import MixtureOfExperts

    config = transformers.Glm4MoeConfig(
        hidden_size=DIM, moe_intermediate_size=EXPERTS.ffn_dim, n_routed_experts=EXPERTS.count,
        num_experts_per_tok=3, n_shared_experts=2, n_group=4, topk_group=2, routed_scaling_factor=2.5,
        norm_topk_prob=True,
    )  # fmt: skip
    torch.manual_seed(4)
    block = Glm4MoeMoE(config)
    mixture = Experts(
        EXPERTS.count, 3, EXPERTS.ffn_dim, True, shared_ffn_dim=2 * EXPERTS.ffn_dim,
        scoring="sigmoid", score_bias=True, groups=4, group_pick=2, scale=2.5,
    )  # fmt: skip
    ours = MixtureOfExperts(mixture, DIM)
    with torch.no_grad():
        for param in block.parameters():
            param.normal_(0, 0.1)
        block.gate.e_score_correction_bias.normal_(0, 0.3)  # big enough to change the choice
        ours.router.weight.copy_(block.gate.weight)
        ours.router.score_bias.copy_(block.gate.e_score_correction_bias)
        w1, w3 = block.experts.gate_up_proj.chunk(2, dim=1)
        ours.experts.w1.copy_(w1), ours.experts.w3.copy_(w3), ours.experts.w2.copy_(block.experts.down_proj)
        ours.shared.w1.weight.copy_(block.shared_experts.gate_proj.weight)
        ours.shared.w2.weight.copy_(block.shared_experts.down_proj.weight)
        ours.shared.w3.weight.copy_(block.shared_experts.up_proj.weight)
    x = torch.randn(2, 30, DIM, generator=torch.Generator().manual_seed(2))
    expected = block(x)
    unbiased = Gate(3, True, "sigmoid", 4, 2, 2.5)
    assert not torch.equal(
        route(x.reshape(-1, DIM), ours.router.weight, unbiased)[0].sort().values,
        route(x.reshape(-1, DIM), ours.router.weight, unbiased, bias=ours.router.score_bias)[0].sort().values,
    )  # the bias changes some token's experts
    in_every_kernel(ours, x, expected)
    assert not ours.router.score_bias.requires_grad


@pytest.mark.parametrize(
    "options, named",
    [
        ({"groups": 3}, "8 experts in 3 groups"),
        ({"groups": 4, "group_pick": 5}, "from the best 5 of 4 groups"),
        ({"groups": 4, "group_pick": 1, "per_token": 3}, "from the best 1 of 4 groups"),
        ({"scoring": "softplus"}, "router scoring 'softplus'"),
        ({"scoring": "sigmoid", "aux_loss_coef": 0.01}, "over sigmoid scores is not computed"),
    ],
)
def test_a_router_option_the_engine_does_not_compute_is_refused_naming_the_fix(options, named):
    from hotswitch.backend.models.config import CONFIGS

    mixture = Experts(**{**EXPERTS.__dict__, **options})
    with pytest.raises(ValueError, match=named):
        CONFIGS["tiny-moe"].with_(experts=mixture)


def test_the_choice_times_both_kernels_where_both_run_and_puts_none_in_force_itself():
    before = IN_FORCE["kernel"]
    choice = choose_experts(EXPERTS, DIM, 256, torch.device("cpu"), torch.float32)
    assert set(choice["seconds"]) == set(KERNELS) and choice["kernel"] in KERNELS
    assert choice["kernel"] == min(choice["seconds"], key=choice["seconds"].get)
    assert IN_FORCE["kernel"] == before
    with pytest.raises(ValueError, match="experts kernel 'fast': choose one of grouped, loop"):
        use_experts("fast")


@pytest.mark.parametrize(
    ("preset", "total", "active"),
    [
        ("qwen3-30b-a3b", 30.5e9, 3.3e9),
        ("olmoe-1b-7b", 6.9e9, 1.3e9),
        ("mixtral-8x7b", 46.7e9, 12.9e9),
        ("qwen1.5-moe-a2.7b", 14.3e9, 2.7e9),  # its shared expert passed through by every token
    ],
)
def test_the_released_mixtures_count_the_parameters_their_makers_publish(preset, total, active):
    """Total parameters, and those a token passes through (its picked experts, the embedding and
    the rest): what the simulator prices memory and compute by."""
    from hotswitch.backend.models.config import get_config
    from hotswitch.backend.models.flops import matmul_params

    config = get_config(preset)
    assert abs(config.n_params / total - 1) < 0.01, config.n_params
    passed = matmul_params(config) + config.vocab_size * config.dim  # the embedding's rows too
    assert abs(passed / active - 1) < 0.02, passed
