"""``recipe.build``: the trainer a run describes, its documents read once."""

from hotswitch.backend.runtime.spawn import spawn_ranks
from hotswitch.backend.train.run.recipe import build


def build_counting_reads(rank: int, world: int) -> tuple[int, int, bool, dict]:
    """Build a run with evaluation on, counting how often its documents are read (once: the
    training and held-out documents are one split of one read)."""
    from hotswitch.backend.train.run import recipe

    reads, events = [], []
    real = recipe.documents
    recipe.documents = lambda *args: reads.append(args) or real(*args)
    try:
        spec = {"steps": 1, "plan": "dp1", "max_len": 64, "batch_size": 4, "eval_every": 1}
        trainer, _ = build(spec, events.append)
    finally:
        recipe.documents = real
    return len(reads), len(trainer.data.source), trainer.evaluation is not None, events[0]


def test_a_run_reads_its_documents_once_for_training_and_evaluation_and_says_what_they_are():
    [(reads, training, evaluates, said)] = spawn_ranks(build_counting_reads, 1, timeout=600)
    assert reads == 1 and training > 0 and evaluates
    assert said["type"] == "data" and said["documents"] == training and said["tokenizer"] == "byte"
    assert said["source"].startswith(f"train: {training} of ") and said["held_out"] >= 1


def test_a_validation_split_of_its_own_is_tokenised_as_training_and_holds_nothing_back(tmp_path, monkeypatch):
    import json

    from hotswitch.backend.train.run.recipe import ENV_NOTEBOOK_DIR, check_spec, data_event, model_config, sources

    monkeypatch.setenv(ENV_NOTEBOOK_DIR, str(tmp_path))
    words = ["alpha", "beta", "gamma", "delta", "epsilon"]
    train = [" ".join(words[(i + j) % 5] for j in range(10 + i % 7)) for i in range(60)]
    val = [f"gamma delta {i} epsilon alpha" for i in range(9)]
    for name, texts in (("train.jsonl", train), ("val.jsonl", val)):
        (tmp_path / name).write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    spec = {"data": ["train.jsonl"], "eval_data": ["val.jsonl"], "eval_every": 2, "tokenizer": "bpe:300"}
    s = check_spec({**spec, "max_len": 64})
    assert s["eval_data"] == [str(tmp_path / "val.jsonl")]
    training, held = sources(s, model_config(s["model"]))
    assert len(training) == len(train) and len(held) == len(val)  # every training document trains
    assert held.tokenizer is training.tokenizer  # the BPE learnt on the training documents
    assert [held.tokens(i) for i in range(len(val))] == [training.tokenizer.encode(t) for t in val]
    said = data_event(training, None, held)
    assert said["held_out"] is None and said["evaluated_on"] == "9 documents from 1 file(s)"


def test_a_validation_split_needs_eval_every_and_its_files(tmp_path, monkeypatch):
    import pytest

    from hotswitch.backend.train.run.recipe import ENV_NOTEBOOK_DIR, check_spec

    monkeypatch.setenv(ENV_NOTEBOOK_DIR, str(tmp_path))
    (tmp_path / "val.txt").write_text("some text\n")
    with pytest.raises(ValueError, match=r"'eval_data' = .* eval_every is unset: set it"):
        check_spec({"eval_data": "val.txt"})
    with pytest.raises(ValueError, match=r"'eval_data' = \['gone.jsonl'\] is not valid: .*gone.jsonl is not a file"):
        check_spec({"eval_data": ["gone.jsonl"], "eval_every": 1})
