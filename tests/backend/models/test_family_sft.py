"""Supervised fine-tuning on conversations, for every family, with a tokenizer whose chat
template is the family's own format: two hot-switching ranks train from the family's
checkpoint, the first step's loss is transformers' loss on the same conversations with TRL's
assistant-only labels (transformers' assistant mask), and the export loads in transformers as
the same family with its tokenizer and chat template beside it."""

import json

import pytest
import torch

from hotswitch.backend.runtime.spawn import spawn_ranks

from .chat_formats import FAMILY_FORMAT, chat_tokenizer
from .families import FAMILIES, make_family
from .family_workers import sft_runs

VOCAB = 320  # above the chat tokenizer's 300 ids
WORDS = ["alpha", "beta", "(x)", "return", "def", "  ", "héllo"]
COUNT = 8  # one batch holds every conversation


def conversations() -> list[list[dict]]:
    out = []
    for i in range(COUNT):
        said = [{"role": "system", "content": "be brief"}] if i % 3 == 0 else []
        for turn in range(1 + i % 2):
            said.append({"role": "user", "content": " ".join(WORDS[(i + turn + k) % 7] for k in range(3 + i))})
            said.append(
                {"role": "assistant", "content": f"{i}.{turn} " + " ".join(WORDS[(i * k) % 7] for k in range(6))}
            )
        out.append(said)
    return out


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    folder = tmp_path_factory.mktemp("family-sft")
    chats = folder / "chats.jsonl"
    chats.write_text("".join(json.dumps({"messages": c}) + "\n" for c in conversations()))
    specs = {}
    for name in FAMILIES:
        make_family(folder / f"ckpt-{name}", name, vocab_size=VOCAB, max_position_embeddings=256)
        chat_tokenizer(folder / f"tok-{name}", name)
        specs[name] = {
            "model": f"hf:ckpt-{name}",
            "tokenizer": f"hf:tok-{name}",
            "data": ["chats.jsonl"],
            "chat_field": "messages",
            "plan": [["tp2", 72], ["dp2", 0]],
            "steps": 2,
            "batch_size": COUNT,
            "max_len": 256,
            "token_budget": 512,
            "export_hf": f"out-{name}",
        }
    return folder, spawn_ranks(sft_runs, 2, specs, str(folder), timeout=1800)[0]


def transformers_sft_loss(folder, name: str) -> float:
    """transformers' mean loss over the assistant tokens of every conversation, TRL's way: the
    labels of every other token -100, from ``apply_chat_template``'s assistant mask."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder / f"tok-{name}")
    model = AutoModelForCausalLM.from_pretrained(folder / f"ckpt-{name}").eval()
    total, count = 0.0, 0
    for conversation in conversations():
        out = tokenizer.apply_chat_template(conversation, return_dict=True, return_assistant_tokens_mask=True)
        ids, mask = torch.tensor([out["input_ids"]]), torch.tensor([out["assistant_masks"]])
        labels = torch.where(mask.bool(), ids, -100)
        trained = int(mask[0, 1:].sum())
        with torch.no_grad():
            total += model(input_ids=ids, labels=labels).loss.item() * trained
        count += trained
    return total / count


@pytest.mark.slow
@pytest.mark.parametrize("name", list(FAMILIES))
def test_fine_tuning_on_the_family_format_is_transformers_assistant_only_loss(trained, name):
    folder, losses = trained
    assert len(losses[name]) == 2
    expected = transformers_sft_loss(folder, name)
    assert abs(losses[name][0] - expected) / expected <= 1e-5, (name, FAMILY_FORMAT[name], losses[name][0], expected)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(FAMILIES))
def test_the_export_loads_as_the_family_with_its_chat_template(trained, name):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, _ = trained
    out = folder / f"out-{name}"
    source = json.loads((folder / f"ckpt-{name}" / "config.json").read_text())
    assert json.loads((out / "config.json").read_text())["model_type"] == source["model_type"]
    model = AutoModelForCausalLM.from_pretrained(out)
    assert type(model).__name__ == FAMILIES[name][1]
    tokenizer = AutoTokenizer.from_pretrained(out)
    ours = AutoTokenizer.from_pretrained(folder / f"tok-{name}")
    conversation = conversations()[1]
    assert tokenizer.apply_chat_template(conversation) == ours.apply_chat_template(conversation)
    before = AutoModelForCausalLM.from_pretrained(folder / f"ckpt-{name}")
    moved = [(a - b).abs().max().item() for a, b in zip(model.parameters(), before.parameters(), strict=True)]
    assert max(moved) > 0, "the export holds the fine-tuned weights"
