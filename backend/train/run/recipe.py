"""A whole training run, for the command line and notebooks: ``run(spec, sink, control)`` on every
rank (inside torchrun or a ``%%train`` body) checks the run configuration (``backend.train.config``;
``spec`` a flat dict, a ``RunConfig`` or a TOML path: ``run.spec``), builds the trainer and trains.
The helpers below take the configuration whole (a flat dict is converted at the edge).
"""

from __future__ import annotations

import os
from typing import cast

import torch.distributed as dist

from hotswitch.backend.data import (
    BatchStream,
    DocumentSource,
    FileDocuments,
    JoinedDocuments,
    SyntheticDocuments,
    stdlib_documents,
)
from hotswitch.backend.data.chat import ChatDocuments
from hotswitch.backend.data.files import DATASET_SUFFIXES, data_files, format_suffix
from hotswitch.backend.data.hf_data import DatasetDocuments
from hotswitch.backend.data.prompted import PromptedDocuments
from hotswitch.backend.data.split import holdout
from hotswitch.backend.models.config import ModelConfig
from hotswitch.backend.models.hf import hf_initializer
from hotswitch.backend.runtime.devices import local_device
from hotswitch.backend.runtime.process_groups import init_from_env
from hotswitch.backend.train.config.inputs import (  # noqa: F401  (the recipe's API)
    HF,
    check_chat_template,
    check_data,
    check_tokenizer,
    model_config,
)
from hotswitch.backend.train.config.paths import ENV_NOTEBOOK_DIR, notebook_dir, resolve  # noqa: F401
from hotswitch.backend.train.config.run_config import RunConfig
from hotswitch.backend.train.loop.evaluation import Evaluation
from hotswitch.backend.train.loop.events import Sink, discard, event
from hotswitch.backend.train.loop.trainer import Control, Trainer
from hotswitch.backend.train.run.export import export_hf
from hotswitch.backend.train.run.spec import DEFAULTS, Spec, check_run, check_spec, precision_of  # noqa: F401
from hotswitch.backend.train.state.optim import OptimizerConfig
from hotswitch.backend.train.tracking.fanout import TrackedSink
from hotswitch.backend.train.tracking.trackers import open_tracker


def documents(
    data, text_field: str = "text", prompt_field: str | None = None, chat_field: str | None = None
) -> DocumentSource:
    """The documents ``data`` names (files, folders, patterns: ``backend.data.files``): Parquet
    and Arrow files through ``datasets`` (one source per kind), text and JSONL files directly;
    several kinds joined one after another. With ``prompt_field``, each record's prompt and its
    completion (``text_field``) are one document whose prompt does not train; with
    ``chat_field``, each record's conversation is one, whose assistant's turns alone train (after
    its ``prompt_field`` messages, where given, which do not)."""
    if chat_field is not None:
        prompts = _files(data, prompt_field, "prompt_field", chat=True) if prompt_field is not None else None
        return ChatDocuments(_files(data, chat_field, "chat_field", chat=True), prompts)
    if prompt_field is not None:
        return PromptedDocuments(_files(data, prompt_field, "prompt_field"), documents(data, text_field))
    if data == "stdlib":
        return stdlib_documents()
    if isinstance(data, str) and data.startswith("synthetic:"):
        return SyntheticDocuments(data.split(":", 1)[1])
    return _files(data, text_field)


def _files(data, field: str, setting: str = "text_field", chat: bool = False) -> DocumentSource:
    """The documents of the files ``data`` names, each kind read by its reader (``field``, the
    ``setting`` setting's, named in an error)."""
    entries = [data] if isinstance(data, str) else data
    paths = list(dict.fromkeys(path for entry in entries for path in data_files(entry)))  # each file once
    kinds: dict[str | None, list] = {}
    for path in paths:
        kinds.setdefault(DATASET_SUFFIXES.get(format_suffix(path)), []).append(path)
    parts = [
        FileDocuments(files, field, setting) if kind is None else DatasetDocuments(files, field, chat)
        for kind, files in sorted(kinds.items(), key=lambda item: item[0] or "")
    ]
    return parts[0] if len(parts) == 1 else JoinedDocuments(parts)


def read_documents(
    data,
    text_field: str,
    tokenizer: str,
    model: ModelConfig,
    prompt_field: str | None = None,
    chat_field: str | None = None,
) -> DocumentSource:
    """The documents ``data`` names, checked as a run's are before launch (its tokenizer against
    ``model``'s vocabulary, its records' ``prompt_field`` or ``chat_field``) and tokenised: what
    ``hotswitch data`` and ``simulate --data`` read."""
    checked = check_data(data, text_field, prompt_field=prompt_field, chat_field=chat_field)
    tokenizer = check_tokenizer(tokenizer, model)
    check_chat_template(chat_field, tokenizer)
    return documents(checked, text_field, prompt_field, chat_field).use_tokenizer(tokenizer)


def sources(run: RunConfig | dict, model: ModelConfig) -> tuple[DocumentSource, DocumentSource | None]:
    """(training documents, held-out documents or None) of a checked ``run``, tokenised as it
    says: with ``eval_every`` set, the documents of ``eval_data`` (tokenised as the training
    ones: a BPE is trained on those alone), else ``eval_fraction`` of the data's, which never train."""
    run = RunConfig.of(run)
    data = run.data
    fields = (data.text_field, data.prompt_field, data.chat_field)
    source = documents(data.source, *fields).use_tokenizer(cast("str", data.tokenizer))  # checked: filled in
    if source.tokenizer.vocab_size > model.vocab_size:
        raise ValueError(
            f"the {data.tokenizer} tokenizer has {source.tokenizer.vocab_size} tokens, more than {model.name}'s "
            f"vocabulary of {model.vocab_size}; choose a smaller one"
        )
    evaluating = run.evaluation
    if evaluating.eval_every is None:
        return source, None
    if evaluating.eval_data is not None:  # a validation split of its own: every training document trains
        return source, documents(evaluating.eval_data, *fields).tokenised_as(source)
    return holdout(source, evaluating.eval_fraction, run.seed)


def batches(run: RunConfig | dict, model: ModelConfig) -> BatchStream:
    """The global batches a checked ``run`` trains on."""
    run = RunConfig.of(run)
    return _stream(run, sources(run, model)[0], run.seed)


def evaluation(run: RunConfig | dict, model: ModelConfig, held_out: DocumentSource | None = None) -> Evaluation | None:
    """The held-out evaluation a checked ``run`` asks for, or None; on ``held_out``, the
    documents ``sources`` set aside, where the caller has them already."""
    run = RunConfig.of(run)
    if run.evaluation.eval_every is None:  # documents are held out only where ``eval_every`` is set
        return None
    held_out = held_out if held_out is not None else sources(run, model)[1]
    if held_out is None:
        return None
    return Evaluation(_stream(run, held_out, run.seed + 1), run.evaluation.eval_every, run.evaluation.eval_batches)


def _stream(run: RunConfig, source: DocumentSource, seed: int) -> BatchStream:
    data = run.data
    return BatchStream(source, data.batch_size, data.max_len, seed, split=data.splits)


def optimizer(run: RunConfig | dict) -> OptimizerConfig:
    """AdamW and the learning-rate schedule of a checked ``run``."""
    run = RunConfig.of(run)
    return run.optimizer.adamw(run.steps)


def build(spec: Spec, sink: Sink = discard, control: Control | None = None) -> tuple[Trainer, RunConfig]:
    """The trainer ``spec`` describes (checked first, before any distributed work) and the
    checked run configuration (``run["steps"]`` reads it by key too)."""
    checked = check_run(spec)
    run = checked.config
    model = checked.model
    training, held = sources(run, model)  # the documents read once, for training and evaluation
    stream = _stream(run, training, run.seed)
    device = local_device(run.parallelism.device)
    init_from_env(device)
    run.check_world(model, dist.get_world_size())
    if run.tracking.track and dist.get_rank() == 0:
        run_name = run.tracking.run_name or os.environ.get("HOTSWITCH_JOB_NAME", "hotswitch")
        trackers = [open_tracker(t, run_name, run.as_spec(), notebook_dir()) for t in run.tracking.track]
        sink = TrackedSink(sink, trackers)
    try:
        name = run.model.name
        initial = hf_initializer(name[len(HF) :]) if name.startswith(HF) else None
        held_out = evaluation(run, model, held)
        if dist.get_rank() == 0:
            separate = run.evaluation.eval_data is not None  # held: None where the run does not evaluate
            sink(data_event(training, None if separate else held, held if separate else None))
        trainer = Trainer(
            model, stream, run, sink=sink, control=control, resume=checked.resume, evaluation=held_out, initial=initial
        )
    except BaseException:
        _failed(sink)
        raise
    return trainer, run


def _failed(sink: Sink) -> None:
    """A run that raised (or was interrupted) closes its trackers now, marked failed: a warm
    pool's rank runs the next cell's run in the same process, where an MLflow run left active
    would refuse it."""
    if isinstance(sink, TrackedSink):
        sink.close(failed=True)


def data_event(
    training: DocumentSource, held_out: DocumentSource | None, evaluated_on: DocumentSource | None = None
) -> dict:
    """The ``data`` event: what a run trains on, how many of the documents it holds out, and
    the documents of its own it evaluates on (``eval_data``), where it does."""
    return event(
        "data",
        documents=len(training),
        source=training.describe(),
        tokenizer=training.tokenizer.name,
        held_out=None if held_out is None else len(held_out),
        evaluated_on=None if evaluated_on is None else evaluated_on.describe(),
    )


def run(spec: Spec, sink: Sink = discard, control: Control | None = None) -> dict:
    """Train as ``spec`` says (a flat dict, a ``RunConfig`` or a TOML path); returns the ``done`` event."""
    trainer, config = build(spec, sink, control)
    try:
        done = trainer.train(config.steps)
        if config.checkpoints.final:
            trainer.save(config.checkpoints.final)
        if config.checkpoints.export_hf:
            export_hf(trainer, config)
    except BaseException:
        _failed(trainer.sink)
        raise
    return done
