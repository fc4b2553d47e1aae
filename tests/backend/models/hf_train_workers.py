"""A Hugging Face checkpoint, tokenizer and Parquet corpus made here, and the rank function that
trains from them through the recipe (importable by spawned processes)."""

from __future__ import annotations

import os
from pathlib import Path

from hotswitch.backend.train.run.recipe import ENV_NOTEBOOK_DIR, build, export_hf

from .hf_fixtures import make_checkpoint

VOCAB = 320
DOCS = [f"def f{i}(x):\n    return x * {i} + {'y' * (i % 7)}\n" * (1 + i % 5) for i in range(80)]


def make_tokenizer(directory: Path, vocab: int = 300) -> Path:
    """A byte-level BPE ``tokenizer.json`` trained on ``DOCS`` (``</s>`` ends documents)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    tokenizer.train_from_iterator(
        DOCS, trainers.BpeTrainer(vocab_size=vocab, special_tokens=["</s>"], initial_alphabet=alphabet)
    )
    directory.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(directory / "tokenizer.json"))
    return directory


def make_parquet(path: Path, field: str = "text") -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({field: DOCS, "id": list(range(len(DOCS)))}), path)
    return path


def make_inputs(folder: Path) -> dict:
    """Checkpoint, tokenizer and corpus in ``folder``; the spec's model, tokenizer and data."""
    make_checkpoint(folder / "ckpt", vocab_size=VOCAB)
    make_tokenizer(folder / "tok")
    make_parquet(folder / "docs.parquet")
    return {"model": "hf:ckpt", "tokenizer": "hf:tok", "data": ["docs.parquet"]}


def train_and_export(rank: int, world: int, spec: dict, folder: str):
    os.environ[ENV_NOTEBOOK_DIR] = folder
    events = []
    trainer, s = build(spec, events.append)
    trainer.train(s["steps"])
    export_hf(trainer, s)
    params = trainer.engine.master.global_params()
    if rank:
        return None
    return [e["loss"] for e in events if e["type"] == "step"], params, [e for e in events if e["type"] == "checkpoint"]
