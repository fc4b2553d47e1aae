"""Context-parallel attention (ring and Ulysses) on zig-zag shards equals one device's causal
attention, forward and backward, for 2 and 4 ranks and an odd length padded per chunk; and on
packed rows (documents back to back, straddling the chunks) one device's attention document by
document."""

import itertools

import pytest
import torch

from hotswitch.backend import Strategy, get_config
from hotswitch.backend.layout import context_flavour
from hotswitch.backend.models.documents import unpacked_positions
from hotswitch.backend.models.lean_ops import RotaryFunction
from hotswitch.backend.models.llama import fused_causal_attention
from hotswitch.backend.parallel.zigzag import (
    shard_micro_batch,
    zigzag_positions,
    zigzag_rotary,
    zigzag_shard,
    zigzag_unshard,
)
from hotswitch.backend.runtime.spawn import spawn_ranks

from .context_parallel_workers import DOCUMENTS, LENGTH, attention_shards, inputs


@pytest.fixture(scope="module")
def shards():
    return spawn_ranks(attention_shards, 4)


def reference(cp: int, packed: bool) -> tuple[torch.Tensor, ...]:
    """One device: causal attention over each row's real tokens, or over each of its documents
    apart (one ``scaled_dot_product_attention`` per document)."""
    q, k, v, grad = (x.clone() for x in inputs(cp))
    q, k, v = (x.requires_grad_() for x in (q, k, v))
    rows = []
    for row, lengths in enumerate(DOCUMENTS if packed else ([LENGTH],) * len(DOCUMENTS)):
        cuts = [sum(lengths[:i]) for i in range(len(lengths) + 1)]
        one = [x[row : row + 1] for x in (q, k, v)]
        documents = [fused_causal_attention(*(x[:, a:b] for x in one)) for a, b in itertools.pairwise(cuts)]
        rows.append(torch.cat(documents, dim=1))
    y = torch.cat(rows)
    y.backward(grad[:, :LENGTH])
    return y.detach(), q.grad, k.grad, v.grad


@pytest.mark.parametrize("packed", [False, True], ids=["rows", "packed"])
@pytest.mark.parametrize("flavour", ["RingAttention", "UlyssesAttention"])
@pytest.mark.parametrize("cp", [2, 4])
def test_attention_of_zigzag_shards_equals_one_devices_forward_and_backward(shards, flavour, cp, packed):
    expected = reference(cp, packed)
    for first in range(0, 4, cp):  # every cp group of the 4 ranks
        parts = [shards[r][flavour, cp, packed] for r in range(first, first + cp)]
        got = [zigzag_unshard([part[i] for part in parts]) for i in range(4)]
        assert torch.allclose(got[0][:, :LENGTH], expected[0], atol=1e-6), f"{flavour} cp{cp}: output"
        for name, g, e in zip("qkv", got[1:], expected[1:]):
            assert torch.allclose(g, e, atol=1e-6), f"{flavour} cp{cp}: d{name}"


def test_zigzag_layout_deals_two_chunks_per_rank_and_rotary_sees_true_positions():
    assert zigzag_positions(1, 4, 4).tolist() == [2, 3, 12, 13]
    row = torch.arange(7)[None]
    tokens, targets = shard_micro_batch(row, row, 0, 2)  # 7 -> 8: the pad lands at the end
    assert tokens.tolist() == [[0, 1, 6, 0]] and targets.tolist() == [[0, 1, 6, -100]]
    x, cos, sin = torch.randn(2, 16, 3, 8), torch.randn(32, 4), torch.randn(32, 4)
    whole = RotaryFunction.apply(x, cos[:16], sin[:16])
    positions = unpacked_positions(2, 16)
    parts = [zigzag_rotary(zigzag_shard(x, i, 4), cos, sin, positions, i, 4) for i in range(4)]
    assert torch.equal(zigzag_unshard(parts), whole)


def test_ulysses_falls_back_to_ring_with_a_warning_where_heads_do_not_split():
    config = get_config("tiny").with_(dim=96, n_heads=6, n_kv_heads=2)
    assert context_flavour(config, Strategy.parse("ul2")) == "ulysses"
    with pytest.warns(UserWarning, match="runs ring attention instead"):
        assert context_flavour(config, Strategy.parse("ul4")) == "ring"
    assert context_flavour(config, Strategy.parse("cp4")) == "ring" and context_flavour(config, Strategy()) is None


def test_a_cp_degree_that_does_not_divide_the_devices_is_refused_by_name():
    with pytest.raises(ValueError, match="cp=3 does not divide the 4 devices"):
        Strategy.parse("cp3").check_fits(4)
