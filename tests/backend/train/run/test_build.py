"""``recipe.build``: the trainer a run describes, its documents read once."""

from hotswitch.backend.runtime.spawn import spawn_ranks
from hotswitch.backend.train.run.recipe import build


def build_counting_reads(rank: int, world: int) -> tuple[int, int, bool]:
    """Build a run with evaluation on, counting how often its documents are read (once: the
    training and held-out documents are one split of one read)."""
    from hotswitch.backend.train.run import recipe

    reads = []
    real = recipe.documents
    recipe.documents = lambda *args: reads.append(args) or real(*args)
    try:
        trainer, _ = build({"steps": 1, "plan": "dp1", "max_len": 64, "batch_size": 4, "eval_every": 1})
    finally:
        recipe.documents = real
    return len(reads), len(trainer.data.source), trainer.evaluation is not None


def test_a_run_reads_its_documents_once_for_training_and_evaluation():
    [(reads, training, evaluates)] = spawn_ranks(build_counting_reads, 1, timeout=600)
    assert reads == 1 and training > 0 and evaluates
