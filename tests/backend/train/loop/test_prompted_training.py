"""Supervised fine-tuning on 4 hot-switching ranks against one device (fp32): records of a prompt
and its completion, only the completion training, through tensor-, data- and pipeline-parallel
buckets, padded rows and packed ones; each step's loss (the mean over the completions' targets)
and each held-out loss on a validation file of such records equal one device's. Conversations
too: several assistant turns each, only those training, split across sequences."""

import json
import random

import pytest

from hotswitch.backend.runtime.spawn import spawn_ranks

from .loop_workers import loop_spec, one_device, train_events

TOLERANCE = 1e-5


def write_records(path, count: int, seed: int) -> None:
    """Prompts of 10 to 300 bytes (some longer than ``max_len``: cut, they train nothing, and
    split, their completion trains), completions of 5 to 120."""
    rng = random.Random(seed)
    words = ["alpha", "beta", "gamma", "delta", "(x)", "return", "\n", "  "]
    with path.open("w") as f:
        for i in range(count):
            prompt = "".join(rng.choice(words) for _ in range(rng.randint(2, 60)))
            completion = f"answer {i}: " + "".join(rng.choice(words) for _ in range(rng.randint(1, 20)))
            f.write(json.dumps({"prompt": f"Q: {prompt}\nA:", "completion": completion}) + "\n")


def write_chats(path, count: int, seed: int) -> None:
    """Conversations of 1 to 3 exchanges, a system turn in some, the last turn the user's in some."""
    rng = random.Random(seed)
    words = ["alpha", "beta", "gamma", "(x)", "return", "\n", "  "]
    with path.open("w") as f:
        for i in range(count):
            said = [{"role": "system", "content": "be brief"}] if i % 3 == 0 else []
            for turn in range(rng.randint(1, 3)):
                said.append({"role": "user", "content": "".join(rng.choice(words) for _ in range(rng.randint(1, 30)))})
                said.append({"role": "assistant", "content": f"{i}.{turn} " + " ".join(rng.choices(words, k=9))})
            said += [{"role": "user", "content": "thanks"}] if i % 4 == 0 else []
            f.write(json.dumps({"messages": said}) + "\n")


CHATML = (
    "{% for m in messages %}{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    from tests.backend.data.test_hf_tokenizer_files import hf_folder

    folder = tmp_path_factory.mktemp("sft")
    write_records(folder / "train.jsonl", 96, seed=1)
    write_records(folder / "val.jsonl", 12, seed=2)
    write_chats(folder / "chats.jsonl", 64, seed=3)
    write_chats(folder / "val-chats.jsonl", 12, seed=4)
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|im_end|>"}
    hf_folder(folder / "chat-tokenizer", config, specials=("<s>", "</s>", "<|im_start|>", "<|im_end|>"))
    (folder / "chat-tokenizer" / "chat_template.jinja").write_text(CHATML)
    return folder


@pytest.mark.parametrize(("packing", "long_documents"), [(False, "cut"), (True, "split")], ids=["padded", "packed"])
def test_prompted_training_equals_one_device(records, packing, long_documents):
    spec = loop_spec(
        data=[str(records / "train.jsonl")],
        eval_data=[str(records / "val.jsonl")],
        prompt_field="prompt",
        text_field="completion",
        max_len=192,
        steps=3,
        packing=packing,
        long_documents=long_documents,
    )
    steps, said = trains_as_one_device(spec, records)
    trained_under = {name for e in steps for name, share in e["strategies"].items() if share["tokens"]}
    assert len(trained_under) >= 2, trained_under  # hot switched between them
    assert said == "96 documents from 1 file(s), each a prompt and its completion"


def trains_as_one_device(spec: dict, folder) -> tuple[list[dict], str]:
    """``spec`` on 4 ranks: each step's loss and the held-out loss at step 2 equal one device's;
    its step events and the source it said it read."""
    events, _ = spawn_ranks(train_events, 4, spec, str(folder), timeout=1200)[0]
    losses, _, evals = one_device(spec)
    steps = [e for e in events if e["type"] == "step"]
    assert len(steps) == 3
    for e, loss in zip(steps, losses, strict=True):
        assert abs(e["loss"] - loss) / loss <= TOLERANCE, (e["step"], e["loss"], loss)
    reported = {e["step"]: e["loss"] for e in events if e["type"] == "eval"}
    assert sorted(reported) == sorted(evals) == [2]
    assert abs(reported[2] - evals[2]) / evals[2] <= TOLERANCE
    return steps, next(e for e in events if e["type"] == "data")["source"]


def test_chat_training_equals_one_device(records):
    spec = loop_spec(
        data=[str(records / "chats.jsonl")],
        eval_data=[str(records / "val-chats.jsonl")],
        chat_field="messages",
        tokenizer=f"hf:{records / 'chat-tokenizer'}",
        max_len=96,
        steps=3,
        packing=True,
        long_documents="split",
    )
    _, said = trains_as_one_device(spec, records)
    assert said == "64 documents from 1 file(s), each a conversation"
