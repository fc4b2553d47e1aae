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

``check_spec(spec)`` validates every setting before anything starts (the command line calls it
before launching, ``build`` on every rank). Relative ``data``, ``checkpoint`` and ``resume_from``
paths resolve against $HOTSWITCH_NOTEBOOK_DIR (the notebook's folder, set by the launcher), else
the working directory; checkpoint commands without a path write under its ``checkpoints/``.
"""

from __future__ import annotations

import os
from numbers import Real
from pathlib import Path

from hotswitch.backend.data import BatchStream, FileDocuments, SyntheticDocuments, stdlib_documents
from hotswitch.backend.data.sources import SYNTHETIC
from hotswitch.backend.data.tokenizer import parse_tokenizer
from hotswitch.backend.models.config import ModelConfig, get_config
from hotswitch.backend.runtime.devices import DEVICE_KINDS, local_device
from hotswitch.backend.runtime.process_groups import init_from_env
from hotswitch.backend.train import checkpoint
from hotswitch.backend.train.dispatch import HotSwitchPlan
from hotswitch.backend.train.events import Sink, discard
from hotswitch.backend.train.reference import OptimizerConfig
from hotswitch.backend.train.trainer import Control, Trainer

# The notebook's folder; set by hotswitch.kernel's launcher (the ranks run in a job folder).
ENV_NOTEBOOK_DIR = "HOTSWITCH_NOTEBOOK_DIR"

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


def notebook_dir() -> Path:
    """Where relative paths of a spec resolve: $HOTSWITCH_NOTEBOOK_DIR, else the working directory."""
    return Path(os.environ.get(ENV_NOTEBOOK_DIR) or os.getcwd())


def resolve(path: str | os.PathLike) -> Path:
    """``path`` made absolute against ``notebook_dir()``."""
    return (notebook_dir() / Path(path).expanduser()).resolve()


def _bad(key: str, value, fix: str) -> ValueError:
    return ValueError(f"training setting {key!r} = {value!r} is not valid: {fix}")


def _whole(s: dict, key: str, least: int, why: str = "") -> None:
    value = s[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise _bad(key, value, f"give a whole number of at least {least}{why}")


def _positive(s: dict, key: str, optional: bool = False) -> None:
    value = s[key]
    if optional and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, Real) or not value > 0:
        none = " (or None)" if optional else ""
        raise _bad(key, value, f"give a number above 0{none}, e.g. {DEFAULTS[key] or 8e6}")


def _check_data(data) -> str | list[str]:
    if data == "stdlib":
        return data
    if isinstance(data, str) and data.startswith("synthetic:"):
        if data.split(":", 1)[1] not in SYNTHETIC:
            raise _bad("data", data, f"choose one of {', '.join('synthetic:' + k for k in SYNTHETIC)}")
        return data
    paths = [data] if isinstance(data, str | os.PathLike) else data
    if not isinstance(paths, list | tuple) or not paths or not all(isinstance(p, str | os.PathLike) for p in paths):
        raise _bad("data", data, "give 'stdlib', 'synthetic:github' or a list of text/JSONL file paths")
    files = [resolve(p) for p in paths]
    for path in files:
        if not path.is_file():
            raise _bad("data", data, f"{path} is not a file; give existing text or JSONL files")
    return [str(p) for p in files]


def _check_paths(s: dict, config: ModelConfig) -> None:
    if s["checkpoint"] is not None:
        if not isinstance(s["checkpoint"], str | os.PathLike):
            raise _bad("checkpoint", s["checkpoint"], "give a folder path (a string) or None")
        path = resolve(s["checkpoint"])
        if path.exists():
            raise _bad("checkpoint", s["checkpoint"], f"{path} already exists; choose a new checkpoint path")
        s["checkpoint"] = str(path)
    if s["resume_from"] is not None:
        if not isinstance(s["resume_from"], str | os.PathLike):
            raise _bad("resume_from", s["resume_from"], "give the folder of a checkpoint (a string) or None")
        path = resolve(s["resume_from"])
        if not path.is_dir():
            raise _bad("resume_from", s["resume_from"], f"{path} is not a folder; give a checkpoint folder")
        checkpoint.read_meta(path, config)
        s["resume_from"] = str(path)


def check_spec(spec: dict) -> dict:
    """The full spec (defaults filled in, paths absolute) after checking every setting; raises
    ValueError naming the setting, its value and the fix. Checks nothing that needs the ranks."""
    if not isinstance(spec, dict):
        raise ValueError(f"a training spec is a dict like {{'model': 'tiny', 'steps': 20}}; got {spec!r}")
    unknown = set(spec) - set(DEFAULTS)
    if unknown:
        raise ValueError(f"unknown training settings {sorted(unknown)}; known: {', '.join(DEFAULTS)}")
    s = {**DEFAULTS, **spec}
    if not isinstance(s["model"], str):
        raise _bad("model", s["model"], "give a model name such as 'tiny'")
    config = get_config(s["model"])
    for key, least in (("steps", 1), ("batch_size", 1), ("max_len", 2), ("seed", 0)):
        _whole(s, key, least)
    if s["max_len"] > config.max_seq_len:
        raise _bad("max_len", s["max_len"], f"{config.name} holds at most {config.max_seq_len} tokens per sequence")
    if "token_budget" not in spec:  # the default always holds one sequence of max_len
        s["token_budget"] = max(DEFAULTS["token_budget"], s["max_len"])
    _whole(s, "token_budget", s["max_len"], " (max_len): a micro-batch holds at least one whole sequence")
    _positive(s, "lr")
    _positive(s, "memory_budget", optional=True)
    if not isinstance(s["tokenizer"], str):
        raise _bad("tokenizer", s["tokenizer"], "give 'byte' or 'bpe:<vocabulary size>'")
    parse_tokenizer(s["tokenizer"])
    if s["device"] is not None and s["device"] not in DEVICE_KINDS:
        raise _bad("device", s["device"], f"choose one of {', '.join(DEVICE_KINDS)} or None")
    if s["plan"] != "auto":
        try:
            HotSwitchPlan.of(s["plan"])
        except (ValueError, TypeError) as error:
            raise _bad("plan", s["plan"], f"{error} (or give 'auto')") from None
    s["data"] = _check_data(s["data"])
    _check_paths(s, config)
    return s


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
    s = check_spec(spec)
    config = get_config(s["model"])
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
        checkpoint_dir=notebook_dir() / "checkpoints",
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
