"""Every family that loads computes what transformers' own class for it computes: the same
loss on the same tokens, unpacked and packed, and an export that transformers reloads as the
same family with the same logits and the same greedy continuation."""

import json

import pytest
import torch

from hotswitch.backend.models.documents import row_positions
from hotswitch.backend.models.hf import config_from_hf, load_pretrained, save_pretrained
from hotswitch.backend.models.hf_config import FAMILIES as MODEL_TYPES

from .families import FAMILIES, VOCAB, load_family, make_family

SEQ = 24  # twice the sliding window: the band mask acts


@pytest.fixture(scope="module", params=list(FAMILIES))
def family(request, tmp_path_factory):
    directory = tmp_path_factory.mktemp(request.param)
    return request.param, directory, make_family(directory, request.param)


def ids(seed: int = 1, rows: int = 3) -> torch.Tensor:
    return torch.randint(0, VOCAB, (rows, SEQ + 1), generator=torch.Generator().manual_seed(seed))


def test_the_families_cover_every_model_type_that_loads():
    built = {json.loads(make_config_json(name))["model_type"] for name in FAMILIES}
    assert built == set(MODEL_TYPES)


def make_config_json(name: str) -> str:
    import transformers

    config_class, _, options = FAMILIES[name]
    return getattr(transformers, config_class)(num_hidden_layers=4, **options).to_json_string()


def test_the_loss_equals_transformers_on_the_same_tokens(family):
    name, directory, reference = family
    ours = load_pretrained(directory)
    batch = ids()
    with torch.no_grad():
        expected = reference(input_ids=batch, labels=batch).loss.item()
        got = (ours(batch[:, :-1], batch[:, 1:]) / batch[:, 1:].numel()).item()
    assert got == pytest.approx(expected, rel=1e-5), name


def test_a_packed_row_equals_transformers_on_each_document_alone(family):
    name, directory, reference = family
    ours = load_pretrained(directory)
    lengths = [[9, 15], [SEQ], [5, 7, 12]]
    batch = ids(seed=2)
    positions = torch.stack([row_positions(row) for row in lengths])
    expected = 0.0
    with torch.no_grad():
        for r, row in enumerate(lengths):
            start = 0
            for n in row:  # each document alone: its own next-token targets, none across a boundary
                doc = batch[r, start : start + n]
                logits = reference(input_ids=doc[None, :-1]).logits[0]
                expected += torch.nn.functional.cross_entropy(logits, doc[1:], reduction="sum").item()
                start += n
        targets = batch[:, 1:].clone()
        for r, row in enumerate(lengths):  # a document's last token predicts nothing
            for end in torch.tensor(row).cumsum(0).tolist():
                targets[r, end - 1] = -100
        got = ours(batch[:, :-1], targets, positions).item()
    assert got == pytest.approx(expected, rel=1e-5), name


def greedy(model, prompt: torch.Tensor, steps: int = 20) -> list[int]:
    tokens = prompt.clone()
    with torch.no_grad():
        for _ in range(steps):
            tokens = torch.cat([tokens, model.logits(tokens)[:, -1:].argmax(-1)], dim=1)
    return tokens[0, prompt.shape[1] :].tolist()


def test_the_export_reloads_in_transformers_as_itself_with_the_same_logits_and_tokens(family, tmp_path):
    name, directory, _ = family
    ours = load_pretrained(directory)
    with torch.no_grad():
        for param in ours.parameters():  # as if fine-tuned: the export must carry our weights
            param.add_(0.01 * torch.randn_like(param))
    save_pretrained(ours, tmp_path, max_shard_bytes=40_000, like=directory)
    assert (tmp_path / "model.safetensors.index.json").is_file(), "a sharded export"
    written = json.loads((tmp_path / "config.json").read_text())
    assert written["model_type"] == json.loads((directory / "config.json").read_text())["model_type"]
    reloaded = load_family(tmp_path)
    prompt = ids(seed=3, rows=1)[:, :8]
    with torch.no_grad():
        theirs = reloaded(input_ids=prompt).logits
        mine = ours.logits(prompt)
    assert ((theirs - mine).abs().max() / mine.abs().max()).item() <= 1e-5, name
    generated = reloaded.generate(prompt, max_new_tokens=20, do_sample=False, min_new_tokens=20)
    assert generated[0, 8:].tolist() == greedy(ours, prompt), name
    assert config_from_hf(tmp_path).with_(name=ours.config.name) == ours.config
