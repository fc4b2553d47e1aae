"""A whole training run described by one plain dict (the spec, ``backend.train.run.spec``), for the
command line and notebooks: ``run(spec, sink, control)`` on every rank (inside torchrun or a
``%%train`` body) checks it, builds the trainer and trains.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
import torch.distributed as dist

from hotswitch.backend.data import BatchStream, DocumentSource, FileDocuments, SyntheticDocuments, stdlib_documents
from hotswitch.backend.data.hf_data import DATASET_SUFFIXES, DatasetDocuments
from hotswitch.backend.data.split import holdout
from hotswitch.backend.models.config import ModelConfig
from hotswitch.backend.models.hf import hf_initializer, save_pretrained
from hotswitch.backend.models.llama import Transformer
from hotswitch.backend.runtime.devices import local_device
from hotswitch.backend.runtime.process_groups import init_from_env
from hotswitch.backend.train.loop.evaluation import Evaluation
from hotswitch.backend.train.loop.events import Sink, discard
from hotswitch.backend.train.loop.trainer import Control, Trainer
from hotswitch.backend.train.planning.dispatch import HotSwitchPlan
from hotswitch.backend.train.run.spec import DEFAULTS, check_spec, precision_of  # noqa: F401  (the recipe's API)
from hotswitch.backend.train.run.spec_inputs import ENV_NOTEBOOK_DIR, HF, model_config, notebook_dir, resolve  # noqa: F401
from hotswitch.backend.train.state.optim import OptimizerConfig
from hotswitch.backend.train.tracking.fanout import TrackedSink
from hotswitch.backend.train.tracking.trackers import open_tracker


def documents(data, text_field: str = "text") -> DocumentSource:
    """The documents ``data`` names: Parquet and Arrow files through ``datasets``, text and
    JSONL files directly."""
    if data == "stdlib":
        return stdlib_documents()
    if isinstance(data, str) and data.startswith("synthetic:"):
        return SyntheticDocuments(data.split(":", 1)[1])
    paths = [data] if isinstance(data, str) else data
    if any(Path(p).suffix in DATASET_SUFFIXES for p in paths):
        return DatasetDocuments(paths, text_field)
    return FileDocuments(paths, text_field)


def sources(s: dict, config: ModelConfig) -> tuple[DocumentSource, DocumentSource | None]:
    """(training documents, held-out documents or None) of a full spec ``s``, tokenised as it
    says: with ``eval_every`` set, ``eval_fraction`` of the documents never train."""
    source = documents(s["data"], s["text_field"]).use_tokenizer(s["tokenizer"])
    if source.tokenizer.vocab_size > config.vocab_size:
        raise ValueError(
            f"the {s['tokenizer']} tokenizer has {source.tokenizer.vocab_size} tokens, more than {config.name}'s "
            f"vocabulary of {config.vocab_size}; choose a smaller one"
        )
    if s["eval_every"] is None:
        return source, None
    return holdout(source, s["eval_fraction"], s["seed"])


def batches(s: dict, config: ModelConfig) -> BatchStream:
    """The global batches a full spec ``s`` trains on."""
    return BatchStream(sources(s, config)[0], s["batch_size"], s["max_len"], seed=s["seed"])


def evaluation(s: dict, config: ModelConfig) -> Evaluation | None:
    """The held-out evaluation a full spec ``s`` asks for, or None."""
    held_out = sources(s, config)[1]
    if held_out is None:
        return None
    stream = BatchStream(held_out, s["batch_size"], s["max_len"], seed=s["seed"] + 1)
    return Evaluation(stream, s["eval_every"], s["eval_batches"])


def optimizer(s: dict) -> OptimizerConfig:
    """AdamW and the learning-rate schedule of a full spec ``s``."""
    cosine = s["lr_schedule"] == "cosine"
    return OptimizerConfig(
        lr=s["lr"],
        betas=tuple(s["betas"]),
        weight_decay=s["weight_decay"],
        max_grad_norm=s["max_grad_norm"],
        warmup_steps=s["warmup_steps"],
        decay_steps=max(1, s["steps"] - s["warmup_steps"]) if cosine else None,
        min_lr=s["min_lr"],
    )


def build(spec: dict, sink: Sink = discard, control: Control | None = None) -> tuple[Trainer, dict]:
    s = check_spec(spec)
    config = model_config(s["model"])
    stream = batches(s, config)
    device = local_device(s["device"])
    init_from_env(device)
    if s["track"] and dist.get_rank() == 0:
        run_name = os.environ.get("HOTSWITCH_JOB_NAME", "hotswitch")
        trackers = [open_tracker(t, run_name, s, notebook_dir()) for t in s["track"]]
        sink = TrackedSink(sink, trackers)
    plan = s["plan"] if s["plan"] == "auto" else HotSwitchPlan.of(s["plan"])
    trainer = Trainer(
        config,
        stream,
        plan,
        optimizer(s),
        seed=s["seed"],
        token_budget=s["token_budget"],
        sink=sink,
        control=control,
        resume_from=s["resume_from"],
        memory_budget=s["memory_budget"],
        checkpoint_dir=notebook_dir() / "checkpoints",
        device=device,
        precision=precision_of(s),
        checkpoint_every=s["checkpoint_every"],
        keep_checkpoints=s["keep_checkpoints"],
        evaluation=evaluation(s, config),
        initial=hf_initializer(s["model"][len(HF) :]) if s["model"].startswith(HF) else None,
        shard_optimizer=s["shard_optimizer"],
        context_parallel=s["context_parallel"],
    )
    return trainer, s


def export_hf(trainer: Trainer, path: str) -> None:
    """Write the trained weights as a Hugging Face LLaMA checkpoint (collective: every rank
    gathers the full model, rank 0 writes)."""
    params = trainer.engine.master.global_params()
    if dist.get_rank() == 0:
        with torch.device("meta"):
            model = Transformer(trainer.config)
        model.load_state_dict(params, assign=True)
        save_pretrained(model, path)
    dist.barrier()


def run(spec: dict, sink: Sink = discard, control: Control | None = None) -> dict:
    """Train as ``spec`` says; returns the ``done`` event."""
    trainer, s = build(spec, sink, control)
    done = trainer.train(s["steps"])
    if s["checkpoint"]:
        trainer.save(s["checkpoint"])
    if s["export_hf"]:
        export_hf(trainer, s["export_hf"])
    return done
