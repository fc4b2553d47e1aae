"""A trained run as a Hugging Face checkpoint that ``transformers`` loads and generates with as
it is: the weights and ``config.json`` (``models.hf.save_pretrained``), the tokenizer the run
trained with (``Tokenizer.save_hf``), and its special tokens' ids in ``config.json`` and
``generation_config.json``, so that ``generate`` stops at the end-of-document token training
appended. A run that started from a Hugging Face checkpoint keeps that checkpoint's
generation settings (sampling, lengths), with the ids of the tokenizer it trained with.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import torch
import torch.distributed as dist

from hotswitch.backend.data.hf_tokenizer_files import TokenIds
from hotswitch.backend.data.tokenizer import Tokenizer
from hotswitch.backend.models.config import ModelConfig
from hotswitch.backend.models.hf import save_pretrained
from hotswitch.backend.models.llama import Transformer
from hotswitch.backend.train.config.inputs import HF
from hotswitch.backend.train.config.run_config import RunConfig
from hotswitch.backend.train.loop.events import event
from hotswitch.backend.train.loop.trainer import Trainer

GENERATION = "generation_config.json"


def export_hf(trainer: Trainer, run: RunConfig) -> None:
    """Write ``run``'s ``export_hf`` folder (collective: every rank gathers the full model,
    rank 0 writes it and emits a ``checkpoint`` event of format ``hf``)."""
    path = run.checkpoints.export_hf
    if path is None:
        raise ValueError("the run has no export_hf folder to export into")
    params = trainer.engine.master.global_params()
    if dist.get_rank() == 0:
        source = Path(run.model.name[len(HF) :]) if run.model.name.startswith(HF) else None
        write_checkpoint(Path(path), trainer.config, params, trainer.data.source.tokenizer, source)
        trainer.sink(event("checkpoint", step=trainer.step_index, path=str(path), format="hf"))
    dist.barrier()


def write_checkpoint(
    out: Path, config: ModelConfig, params: dict[str, torch.Tensor], tokenizer: Tokenizer, source: Path | None
) -> None:
    """``params`` of a ``config`` model, with ``tokenizer``, into the new folder ``out``, whole or
    not at all: written beside it first (``.NAME.partial``), then renamed, so a run killed while
    exporting leaves no folder that looks like a checkpoint; ``source``: the Hugging Face
    checkpoint the run started from, or None."""
    staging = out.with_name(f".{out.name}.partial")
    shutil.rmtree(staging, ignore_errors=True)  # an earlier export's, killed midway
    with torch.device("meta"):
        model = Transformer(config)
    model.load_state_dict(params, assign=True)
    save_pretrained(model, staging, like=source)
    ids = tokenizer.save_hf(staging)
    _add_token_ids(staging / "config.json", ids)
    generation = source / GENERATION if source is not None else None
    settings = json.loads(generation.read_text()) if generation is not None and generation.is_file() else {}
    (staging / GENERATION).write_text(json.dumps({**settings, **ids}, indent=2) + "\n")
    os.replace(staging, out)


def _add_token_ids(path: Path, ids: TokenIds) -> None:
    config = json.loads(path.read_text())
    path.write_text(json.dumps({**config, **ids}, indent=2) + "\n")
