"""Training a Hugging Face checkpoint as users have it: its tokenizer.json, a Parquet corpus
through ``datasets``, 4 hot-switching ranks from its weights equal to one device step by step
(fp32), and an export that ``transformers`` loads with the trained weights."""

from pathlib import Path

import pytest
import torch

from hotswitch.backend.models.hf import load_pretrained
from hotswitch.backend.runtime.spawn import spawn_ranks
from hotswitch.backend.train.loop.reference import ReferenceTrainer
from hotswitch.backend.train.run.recipe import ENV_NOTEBOOK_DIR, batches, check_spec, model_config, optimizer

from .hf_fixtures import load_with_transformers, our_loss, tokens, transformers_loss
from .hf_train_workers import DOCS, make_inputs, train_and_export

PLAN = [["tp4", 40], ["dp2tp2", 24], ["dp4", 0]]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hf-train")
    inputs = make_inputs(folder)
    spec = {**inputs, "plan": PLAN, "steps": 4, "batch_size": 8, "max_len": 48, "token_budget": 192, "export_hf": "out"}
    losses, params, saved = spawn_ranks(train_and_export, 4, spec, str(folder), timeout=1200)[0]
    return folder, spec, losses, params, saved


def one_device(folder, spec, monkeypatch) -> list[float]:
    monkeypatch.setenv(ENV_NOTEBOOK_DIR, str(folder))
    s = check_spec({**spec, "export_hf": None})
    config = model_config(s["model"])
    reference = ReferenceTrainer(config, optimizer(s), s["seed"], s["token_budget"])
    loaded = load_pretrained(folder / "ckpt")
    reference.model.load_state_dict(loaded.state_dict())
    stream = batches(s, config)
    return [reference.step(stream.next_batch()) for _ in range(s["steps"])]


def test_hot_switched_training_from_a_checkpoint_equals_one_device(trained, monkeypatch):
    folder, spec, losses, _, _ = trained
    reference = one_device(folder, spec, monkeypatch)
    assert len(losses) == 4
    for step, (loss, ref) in enumerate(zip(losses, reference, strict=True), 1):
        assert abs(loss - ref) / ref <= 1e-5, (step, loss, ref)


def test_the_export_loads_in_transformers_with_the_trained_weights(trained):
    folder, _, _, params, _ = trained
    exported = load_pretrained(folder / "out")
    for name, value in exported.named_parameters():
        assert torch.equal(value.detach(), params[name]), name
    ids = tokens()
    theirs = transformers_loss(load_with_transformers(folder / "out"), ids)
    assert abs(our_loss(exported, ids) - theirs) / theirs <= 1e-5
    before = our_loss(load_pretrained(folder / "ckpt"), ids)
    assert abs(our_loss(exported, ids) - before) > 1e-6  # the export is the trained model, not the input


def test_the_documents_and_tokens_are_the_files_own(trained, monkeypatch):
    folder, spec, _, _, _ = trained
    monkeypatch.setenv(ENV_NOTEBOOK_DIR, str(folder))
    s = check_spec({**spec, "export_hf": None})
    batch = batches(s, model_config(s["model"])).next_batch()
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(folder / "tok" / "tokenizer.json"))
    eos = tokenizer.token_to_id("</s>")
    for sequence in batch:
        assert max(sequence.tokens) < 300
        text = tokenizer.decode([t for t in sequence.tokens if t != eos])
        assert text and text in "".join(DOCS)


def test_the_export_holds_the_tokenizer_and_ends_generation_where_documents_ended(trained, monkeypatch):
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    folder, spec, _, _, saved = trained
    assert [(e["format"], e["step"], Path(e["path"])) for e in saved] == [("hf", 4, folder / "out")]
    tokenizer = AutoTokenizer.from_pretrained(folder / "out")
    monkeypatch.setenv(ENV_NOTEBOOK_DIR, str(folder))
    s = check_spec({**spec, "export_hf": None})
    batch = batches(s, model_config(s["model"])).next_batch()
    eos = tokenizer.convert_tokens_to_ids("</s>")
    ended = [q.tokens for q in batch if q.tokens[-1] == eos]  # documents short enough to end in the batch
    assert ended
    for ids in ended:
        assert tokenizer(tokenizer.decode(ids[:-1])).input_ids == list(ids[:-1])
    assert tokenizer.eos_token_id == eos
    assert GenerationConfig.from_pretrained(folder / "out").eos_token_id == eos
    assert AutoModelForCausalLM.from_pretrained(folder / "out").config.eos_token_id == eos
