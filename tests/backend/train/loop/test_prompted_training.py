"""Supervised fine-tuning on 4 hot-switching ranks against one device (fp32): records of a prompt
and its completion, only the completion training, through tensor-, data- and pipeline-parallel
buckets, padded rows and packed ones; each step's loss (the mean over the completions' targets)
and each held-out loss on a validation file of such records equal one device's."""

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


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sft")
    write_records(folder / "train.jsonl", 96, seed=1)
    write_records(folder / "val.jsonl", 12, seed=2)
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
    events, _ = spawn_ranks(train_events, 4, spec, str(records), timeout=1200)[0]
    losses, _, evals = one_device(spec)
    steps = [e for e in events if e["type"] == "step"]
    trained_under = {name for e in steps for name, share in e["strategies"].items() if share["tokens"]}
    assert len(steps) == 3 and len(trained_under) >= 2, trained_under  # hot switched between them
    for e, loss in zip(steps, losses, strict=True):
        assert abs(e["loss"] - loss) / loss <= TOLERANCE, (e["step"], e["loss"], loss)
    reported = {e["step"]: e["loss"] for e in events if e["type"] == "eval"}
    assert sorted(reported) == sorted(evals) == [2]
    assert abs(reported[2] - evals[2]) / evals[2] <= TOLERANCE
    said = next(e for e in events if e["type"] == "data")
    assert said["source"] == "96 documents from 1 file(s), each a prompt and its completion"
