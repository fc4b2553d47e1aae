"""A whole training run described by one plain dict, for the command line and notebooks.

``run(spec, sink, control)`` on every rank (inside torchrun or a ``%%train`` body)::

    {"model": "tiny", "data": "stdlib" | ["file.txt", "docs.jsonl"] | "synthetic:github",
     "tokenizer": "byte" | "bpe:512",
     "steps": 20, "batch_size": 16, "max_len": 256, "plan": "auto" | "dp4" | [["tp4", 128], ["dp4", 0]],
     "memory_budget": 8e6, "token_budget": 1024, "seed": 0, "lr": 1e-3,
     "checkpoint": "path/written/at/the/end" | None, "resume_from": "path" | None,
     "device": "cpu" | "cuda" | None}

``tokenizer`` "bpe:<size>" trains a byte-level BPE of that many tokens on the documents
(once per corpus, cached); the model's vocabulary must hold it.
``device`` None takes $HOTSWITCH_DEVICE (what ``%%train --device`` sets), else cpu; cuda
trains each rank on GPU LOCAL_RANK with NCCL, and the memory budget defaults to the GPU's
memory less what the instantiation strategy always holds (master weights, gradients, moments).
"""

from __future__ import annotations

from hotswitch.backend.data import BatchStream, FileDocuments, SyntheticDocuments, stdlib_documents
from hotswitch.backend.models.config import ModelConfig, get_config
from hotswitch.backend.runtime.devices import local_device
from hotswitch.backend.runtime.process_groups import init_from_env
from hotswitch.backend.train.dispatch import HotSwitchPlan
from hotswitch.backend.train.events import Sink, discard
from hotswitch.backend.train.reference import OptimizerConfig
from hotswitch.backend.train.trainer import Control, Trainer

DEFAULTS = {
    "model": "tiny",
    "data": "stdlib",
    "tokenizer": "byte",
    "steps": 20,
    "batch_size": 16,
    "max_len": 256,
    "plan": "auto",
    "memory_budget": None,
    "token_budget": 1024,
    "seed": 0,
    "lr": 1e-3,
    "checkpoint": None,
    "resume_from": None,
    "device": None,
}


def documents(data):
    if data == "stdlib":
        return stdlib_documents()
    if isinstance(data, str) and data.startswith("synthetic:"):
        return SyntheticDocuments(data.split(":", 1)[1])
    return FileDocuments([data] if isinstance(data, str) else data)


def batches(s: dict, config: ModelConfig) -> BatchStream:
    """The global batches a full spec ``s`` trains on, tokenised as it says."""
    source = documents(s["data"]).use_tokenizer(s["tokenizer"])
    if source.tokenizer.vocab_size > config.vocab_size:
        raise ValueError(
            f"the {s['tokenizer']} tokenizer has {source.tokenizer.vocab_size} tokens, more than {config.name}'s "
            f"vocabulary of {config.vocab_size}; choose a smaller one"
        )
    return BatchStream(source, s["batch_size"], s["max_len"], seed=s["seed"])


def build(spec: dict, sink: Sink = discard, control: Control | None = None) -> tuple[Trainer, dict]:
    unknown = set(spec) - set(DEFAULTS)
    if unknown:
        raise ValueError(f"unknown training settings {sorted(unknown)}; known: {', '.join(DEFAULTS)}")
    s = {**DEFAULTS, **spec}
    config = get_config(s["model"])
    if s["max_len"] > config.max_seq_len:
        raise ValueError(f"max_len {s['max_len']} exceeds {config.name}'s max_seq_len {config.max_seq_len}")
    stream = batches(s, config)
    device = local_device(s["device"])
    init_from_env(device)
    plan = s["plan"] if s["plan"] == "auto" else HotSwitchPlan.of(s["plan"])
    trainer = Trainer(
        config,
        stream,
        plan,
        OptimizerConfig(lr=s["lr"]),
        seed=s["seed"],
        token_budget=s["token_budget"],
        sink=sink,
        control=control,
        resume_from=s["resume_from"],
        memory_budget=s["memory_budget"],
        device=device,
    )
    return trainer, s


def run(spec: dict, sink: Sink = discard, control: Control | None = None) -> dict:
    """Train as ``spec`` says; returns the ``done`` event."""
    trainer, s = build(spec, sink, control)
    done = trainer.train(s["steps"])
    if s["checkpoint"]:
        trainer.save(s["checkpoint"])
    return done
