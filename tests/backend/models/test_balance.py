"""The load-balancing auxiliary loss (``models.balance``) is transformers' own for each mixture
of experts' family: on a batch of one sequence the same loss, auxiliary loss and gradients as
the family's transformers class with ``output_router_logits``; on a batch of several (padded
rows, a packed row) the mean of transformers' per-sequence auxiliary losses, the padding left
out; off outside a training step; refused, naming the fix, under strategies that split a
sequence's routing over ranks."""

import dataclasses

import pytest
import torch

from hotswitch.backend.data.stream import Sequence
from hotswitch.backend.models.balance import BALANCE
from hotswitch.backend.models.hf import load_pretrained
from hotswitch.backend.models.llama import Transformer
from hotswitch.backend.train.planning.batching import collate, collate_rows

from .families import VOCAB, make_family

COEF = 0.3  # large, so that a wrong auxiliary loss shows in the loss and every gradient
MOE = ("qwen3-moe", "olmoe", "mixtral")


@pytest.fixture(scope="module", params=MOE)
def family(request, tmp_path_factory):
    directory = tmp_path_factory.mktemp(request.param)
    reference = make_family(directory, request.param)
    reference.config.output_router_logits = True
    reference.config.router_aux_loss_coef = reference.router_aux_loss_coef = COEF
    return request.param, reference, with_aux(load_pretrained(directory))


def with_aux(model: Transformer) -> Transformer:
    experts = dataclasses.replace(model.config.experts, aux_loss_coef=COEF)
    model.config = dataclasses.replace(model.config, experts=experts)
    return model


def sequences(lengths: list[int], seed: int = 3) -> list[Sequence]:
    g = torch.Generator().manual_seed(seed)
    return [Sequence(i, tuple(torch.randint(0, VOCAB, (n + 1,), generator=g).tolist())) for i, n in enumerate(lengths)]


def router_and_embedding_grads(model, prefix: str) -> dict[str, torch.Tensor]:
    """Each routed layer's router gradient, by layer, and the embedding's."""
    out = {}
    for name, param in model.named_parameters():
        parts = name.split(".")
        if name.endswith("embed_tokens.weight") or name == "tok_embeddings.weight":
            out["embedding"] = param.grad.clone()
        elif parts[-2] in ("gate", "router") and parts[-1] == "weight" and "layers" in parts:
            out[parts[parts.index("layers") + 1]] = param.grad.clone()
    return out


def transformers_objective(reference, seqs: list[Sequence]) -> tuple[float, float]:
    """transformers on each sequence alone, combined as a step trains them: the token loss's
    mean over every trained token plus COEF times the mean of their auxiliary losses; the
    gradients accumulate into ``reference``. Returns (that loss, the mean auxiliary loss).
    Each sequence's inputs are its tokens but the last, its targets the next ones (the last
    input predicts nothing here, as transformers' shift leaves it)."""
    total = sum(s.length - 1 for s in seqs)
    loss = aux = 0.0
    for s in seqs:
        ids = torch.tensor([s.tokens[:-1]])
        out = reference(input_ids=ids, labels=ids, output_router_logits=True)
        token_mean = out.loss - COEF * out.aux_loss
        part = token_mean * (s.length - 1) / total + COEF * out.aux_loss / len(seqs)
        part.backward()
        loss, aux = loss + part.item(), aux + out.aux_loss.item() / len(seqs)
    return loss, aux


def our_objective(model: Transformer, micro_batch, seqs: list[Sequence]) -> tuple[float, float]:
    """Our model on ``micro_batch`` (of ``seqs``) in a training step: the same loss and mean
    auxiliary loss, gradients accumulated. Each sequence's last target is ignored, as
    transformers' shift drops it."""
    experts = model.config.experts
    BALANCE.start_step(COEF, experts.routed_layers(model.config.n_layers), len(seqs))
    targets = micro_batch.targets.clone()
    seq = micro_batch.sequences
    following = torch.cat([seq[:, 1:], torch.full_like(seq[:, :1], -1)], dim=1)
    targets[(seq != following) & (seq >= 0)] = -100
    try:
        BALANCE.begin(micro_batch.sequences)
        total = int((targets != -100).sum())
        token_sum = model(micro_batch.tokens, targets, micro_batch.positions)
        (token_sum / total).backward()
        aux = BALANCE.weighted_since(0, torch.device("cpu")).item()
    finally:
        BALANCE.close()
    return token_sum.item() / total + aux, aux / COEF


def compare(family, micro_batch_of, lengths):
    name, reference, ours = family
    reference.zero_grad()
    ours.zero_grad()
    seqs = sequences(lengths)
    expected, expected_aux = transformers_objective(reference, seqs)
    got, got_aux = our_objective(ours, micro_batch_of(seqs), seqs)
    assert got_aux == pytest.approx(expected_aux, rel=1e-5), name
    assert got == pytest.approx(expected, rel=1e-5), name
    theirs, mine = router_and_embedding_grads(reference, "model."), router_and_embedding_grads(ours, "")
    assert theirs.keys() == mine.keys()
    for key, grad in theirs.items():
        error = ((mine[key] - grad).norm() / grad.norm()).item()
        assert error <= 1e-5, f"{name}: the {key} gradient is off by {error:.1e}"


def test_one_sequence_gets_transformers_loss_auxiliary_loss_and_gradients(family):
    compare(family, collate, [24])


def test_padded_rows_get_the_mean_of_transformers_per_sequence_auxiliary_losses(family):
    compare(family, collate, [24, 9, 15])  # two rows padded: their padding routes, and counts nothing


def test_a_packed_row_gets_the_mean_of_transformers_per_sequence_auxiliary_losses(family):
    compare(family, lambda seqs: collate_rows([seqs]), [9, 15, 6])


def test_a_micro_batch_names_each_tokens_sequence_and_marks_padding():
    micro = collate_rows([sequences([3, 2]), sequences([4]), [Sequence(-1, (0, 0))]])
    assert micro.sequences.tolist() == [[0, 0, 0, 1, 1], [2, 2, 2, 2, -1], [-1, -1, -1, -1, -1]]


def test_the_loss_changes_gradients_only_inside_a_training_step(family):
    _, _, ours = family
    micro = collate(sequences([12]))
    grads, token_sums = [], []
    for in_step in (False, True):
        ours.zero_grad()
        if in_step:
            BALANCE.start_step(COEF, ours.config.experts.routed_layers(ours.config.n_layers), 1)
            BALANCE.begin(micro.sequences)
        try:
            token_sum = ours(micro.tokens, micro.targets)
            token_sum.backward()
        finally:
            BALANCE.close()
        token_sums.append(token_sum.item())
        grads.append({n: p.grad.clone() for n, p in ours.named_parameters()})
    assert token_sums[0] == token_sums[1]  # the routing itself is the same
    routers = [n for n in grads[0] if n.endswith("router.weight")]
    assert routers and all(not torch.equal(grads[0][n], grads[1][n]) for n in routers)
    assert BALANCE.routing is None  # closed again


def test_a_checkpoint_with_output_router_logits_loads_and_exports_its_auxiliary_loss(family):
    from hotswitch.backend.models.hf_config import config_from_dict
    from hotswitch.backend.models.hf_config_out import config_to_dict

    name, reference, _ = family
    raw = reference.config.to_dict()
    assert config_from_dict({**raw, "output_router_logits": False}).experts.aux_loss_coef == 0.0
    loaded = config_from_dict(raw)  # output_router_logits and router_aux_loss_coef=COEF, set above
    assert loaded.experts.aux_loss_coef == COEF, name
    out = config_to_dict(loaded)
    assert out["output_router_logits"] is True and out["router_aux_loss_coef"] == COEF
    assert config_from_dict(out) == loaded
    del raw["router_aux_loss_coef"]  # transformers' default for the family then
    assert config_from_dict(raw).experts.aux_loss_coef == (0.01 if name == "olmoe" else 0.001)


@pytest.mark.slow
def test_a_run_with_the_auxiliary_loss_set_trains_as_one_device(tmp_path):
    """``router_aux_loss_coef`` set for a preset that has none on: hot-switched between expert
    layouts on 2 ranks, each step's loss (the auxiliary loss in it) equals one device's."""
    from hotswitch.backend.runtime.spawn import spawn_ranks

    from ..train.loop.loop_workers import loop_spec, one_device, train_events

    spec = loop_spec(model="tiny-moe", router_aux_loss_coef=0.05, plan=[["ep2", 40], ["dp2", 0]], steps=2)
    events, _ = spawn_ranks(train_events, 2, spec, str(tmp_path), timeout=1200)[0]
    losses, _, _ = one_device(spec)
    plain, _, _ = one_device({**spec, "router_aux_loss_coef": 0.0})
    steps = [e["loss"] for e in events if e["type"] == "step"]
    assert steps == pytest.approx(losses, rel=1e-5)
    assert all(a > b for a, b in zip(losses, plain, strict=True))  # the auxiliary loss counted
