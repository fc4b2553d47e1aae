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
