"""The training spec: one plain dict describing a whole run, checked before anything starts.

::

    {"model": "tiny", "data": "stdlib" | ["file.txt", "docs.jsonl"] | "synthetic:github",
     "tokenizer": "byte" | "bpe:512",
     "steps": 20, "batch_size": 16, "max_len": 256, "plan": "auto" | "dp4" | [["tp4", 128], ["dp4", 0]],
     "memory_budget": 8e6, "token_budget": 1024, "seed": 0,
     "lr": 1e-3, "lr_schedule": "constant" | "cosine", "warmup_steps": 0, "min_lr": 0.0,
     "weight_decay": 0.1, "betas": [0.9, 0.95], "max_grad_norm": 1.0, "shard_optimizer": None | True | False,
     "context_parallel": None | True | False,
     "checkpoint": "path/written/at/the/end" | None, "resume_from": "path" | None,
     "checkpoint_every": None | 100, "keep_checkpoints": None | 3,
     "eval_every": None | 50, "eval_batches": 1, "eval_fraction": 0.05,
     "device": "cpu" | "cuda" | None, "precision": "fp32" | "bf16", "grad_dtype": None | "fp32" | "bf16"}

``tokenizer`` "bpe:<size>" trains a byte-level BPE of that many tokens on the documents
(once per corpus, cached); the model's vocabulary must hold it.
``device`` None takes $HOTSWITCH_DEVICE (what ``%%train --device`` sets), else cpu; cuda
trains each rank on GPU LOCAL_RANK with NCCL, and the memory budget defaults to the GPU's
memory less what the instantiation strategy always holds (master weights, gradients, moments).
``precision`` "bf16" computes with bf16 copies of fp32 master weights (see ``backend.precision``);
``grad_dtype`` (bf16 only) is what gradients accumulate and switch in, fp32 by default.
``shard_optimizer`` shards the master weights and AdamW's moments over the instantiation
strategy's data parallelism (a distributed optimizer); None (the default) does wherever it has
more than one replica, True where it has one is a no-op with a notice, False keeps them whole.
``context_parallel``: whether ``plan = "auto"`` also weighs context-parallel layouts (cp{N},
ul{N}); None (the default) does where ``max_len`` reaches 4,096 tokens.
(The spec is flat: TOML tables are only headings, so ``[optimizer]`` with ``shard_optimizer =
false`` reads the same.)
``lr_schedule`` "cosine" warms up linearly over ``warmup_steps`` and decays to ``min_lr`` by the
last of ``steps``. ``checkpoint_every`` writes ``checkpoints/step-N`` (keeping the newest
``keep_checkpoints``); ``eval_every`` holds ``eval_fraction`` of the documents out of training
and reports their loss (``eval_batches`` global batches) as an ``eval`` event.

``check_spec(spec)`` validates every setting before anything starts (the command line calls it
before launching, ``build`` on every rank); a ``memory_budget`` at or below what the model states
of a fixed plan's strategy alone take is refused there (``check_budget``; "auto" needs the world
size: the command line checks what it would instantiate). Relative ``data``, ``checkpoint`` and
``resume_from`` paths resolve against $HOTSWITCH_NOTEBOOK_DIR (the notebook's folder, set by the
launcher), else the working directory; checkpoint commands without a path write under its
``checkpoints/``.
"""

from __future__ import annotations

import os
from numbers import Real

from hotswitch.backend.models.config import ModelConfig
from hotswitch.backend.precision import DTYPES, Precision, check_supported
from hotswitch.backend.runtime.devices import DEVICE_KINDS, ENV_DEVICE
from hotswitch.backend.train.planning.dispatch import HotSwitchPlan
from hotswitch.backend.train.planning.memory import check_budget_holds_states
from hotswitch.backend.train.run.run_config import RunConfig, load_toml, unknown_keys
from hotswitch.backend.train.run.spec_inputs import bad_setting as _bad
from hotswitch.backend.train.run.spec_inputs import (
    check_data,
    check_model,
    check_tokenizer,
    model_config,
    resolve,
)
from hotswitch.backend.train.state import checkpoint
from hotswitch.backend.train.tracking.trackers import check_track

SCHEDULES = ("constant", "cosine")

DEFAULTS = RunConfig().as_spec()


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


def _check_precision(s: dict) -> None:
    for key in ("precision", "grad_dtype"):
        if s[key] is not None and s[key] not in DTYPES:
            raise _bad(key, s[key], f"choose one of {', '.join(DTYPES)}" + (" or None" if key == "grad_dtype" else ""))
    if s["precision"] is None:
        raise _bad("precision", None, f"choose one of {', '.join(DTYPES)}")
    if s["grad_dtype"] not in (None, "fp32") and s["precision"] == "fp32":
        raise _bad("grad_dtype", s["grad_dtype"], "gradients accumulate in fp32 under precision 'fp32'; drop it")
    try:
        check_supported(precision_of(s), s["device"] or os.environ.get(ENV_DEVICE) or "cpu")
    except ValueError as error:
        raise _bad("precision", s["precision"], str(error)) from None


def _check_loop(s: dict) -> None:
    """The optimiser, schedule, periodic checkpoint and evaluation settings."""
    if s["lr_schedule"] not in SCHEDULES:
        raise _bad("lr_schedule", s["lr_schedule"], f"choose one of {', '.join(SCHEDULES)}")
    _whole(s, "warmup_steps", 0)
    _whole(s, "eval_batches", 1)
    for key in ("checkpoint_every", "keep_checkpoints", "eval_every"):
        if s[key] is not None:
            _whole(s, key, 1, " (or None)")
    _positive(s, "max_grad_norm")
    if not (s["shard_optimizer"] is None or isinstance(s["shard_optimizer"], bool)):
        raise _bad("shard_optimizer", s["shard_optimizer"], "give true, false or leave it out (shard where dp > 1)")
    if not (s["context_parallel"] is None or isinstance(s["context_parallel"], bool)):
        why = "give true, false or leave it out (auto weighs cp from 4,096 tokens)"
        raise _bad("context_parallel", s["context_parallel"], why)
    for key, top in (("min_lr", s["lr"]), ("weight_decay", None), ("eval_fraction", 1)):
        value = s[key]
        if isinstance(value, bool) or not isinstance(value, Real) or value < 0 or (top is not None and value >= top):
            bound = f"at least 0 and below {top}" if top is not None else "at least 0"
            raise _bad(key, value, f"give a number {bound}")
    betas = s["betas"]
    if not isinstance(betas, list | tuple) or len(betas) != 2 or not all(_fraction(b) for b in betas):
        raise _bad("betas", betas, "give two numbers in [0, 1), e.g. [0.9, 0.95]")
    if s["keep_checkpoints"] is not None and s["checkpoint_every"] is None:
        raise _bad("keep_checkpoints", s["keep_checkpoints"], "it keeps periodic checkpoints: set checkpoint_every too")
    if s["eval_every"] is not None and not s["eval_fraction"] > 0:
        raise _bad("eval_fraction", s["eval_fraction"], "evaluation needs held-out documents: give e.g. 0.05")


def _fraction(value) -> bool:
    return not isinstance(value, bool) and isinstance(value, Real) and 0 <= value < 1


def check_budget(s: dict, config: ModelConfig, plan: HotSwitchPlan) -> None:
    """A declared ``memory_budget`` of a checked spec ``s`` must exceed the model states of each
    strategy of ``plan``, each sent sequences up to its bucket's upper bound
    (``planning.memory.check_budget_holds_states``); None declares no budget."""
    if s["memory_budget"] is None:
        return
    longest, upper = {}, s["max_len"]
    for bucket in plan.buckets:
        longest[bucket.strategy], upper = upper, bucket.above
    try:
        check_budget_holds_states(config, longest, s["memory_budget"], precision_of(s))
    except ValueError as error:
        raise _bad("memory_budget", s["memory_budget"], str(error)) from None


def run_config(spec) -> RunConfig:
    """``spec`` (a dict, a RunConfig or a TOML path) checked, as a typed ``RunConfig``."""
    return RunConfig(**check_spec(spec))


def precision_of(s: dict) -> Precision:
    """The ``Precision`` a checked spec trains in."""
    return Precision.of(s["precision"], s["grad_dtype"])


def _new_folder(s: dict, key: str, fix: str) -> None:
    """``s[key]``, a folder to be written (or None), made absolute; it must not exist yet."""
    if s[key] is None:
        return
    if not isinstance(s[key], str | os.PathLike):
        raise _bad(key, s[key], "give a folder path (a string) or None")
    path = resolve(s[key])
    if path.exists():
        raise _bad(key, s[key], f"{path} already exists; {fix}")
    s[key] = str(path)


def _check_paths(s: dict, config: ModelConfig) -> None:
    _new_folder(s, "checkpoint", "choose a new checkpoint path")
    _new_folder(s, "export_hf", "choose a new folder to export into")
    if s["resume_from"] is not None:
        if not isinstance(s["resume_from"], str | os.PathLike):
            raise _bad("resume_from", s["resume_from"], "give the folder of a checkpoint (a string) or None")
        path = resolve(s["resume_from"])
        if not path.is_dir():
            raise _bad("resume_from", s["resume_from"], f"{path} is not a folder; give a checkpoint folder")
        checkpoint.read_meta(path, config)
        s["resume_from"] = str(path)


def check_spec(spec: dict | RunConfig | str | os.PathLike) -> dict:
    """The full spec (defaults filled in, paths absolute) after checking every setting; raises
    ValueError naming the setting, its value and the fix. Checks nothing that needs the ranks.
    ``spec`` may also be a ``RunConfig`` or the path of a ``.toml`` run configuration."""
    if isinstance(spec, RunConfig):
        spec = spec.as_spec()
    elif isinstance(spec, str | os.PathLike) and str(spec).endswith(".toml"):
        spec = load_toml(resolve(spec))
    if not isinstance(spec, dict):
        raise ValueError(
            "a training spec is a dict like {'model': 'tiny', 'steps': 20}, a RunConfig or a .toml file; "
            f"got {spec!r}"
        )
    unknown = set(spec) - set(DEFAULTS)
    if unknown:
        raise unknown_keys(unknown, "the spec")
    s = {**DEFAULTS, **spec}
    s["model"] = check_model(s["model"])
    config = model_config(s["model"])
    for key, least in (("steps", 1), ("batch_size", 1), ("max_len", 2), ("seed", 0)):
        _whole(s, key, least)
    if s["max_len"] > config.max_seq_len:
        raise _bad("max_len", s["max_len"], f"{config.name} holds at most {config.max_seq_len} tokens per sequence")
    if "token_budget" not in spec:  # the default always holds one sequence of max_len
        s["token_budget"] = max(DEFAULTS["token_budget"], s["max_len"])
    _whole(s, "token_budget", s["max_len"], " (max_len): a micro-batch holds at least one whole sequence")
    _positive(s, "lr")
    _positive(s, "memory_budget", optional=True)
    s["tokenizer"] = check_tokenizer(s["tokenizer"], config)
    if s["device"] is not None and s["device"] not in DEVICE_KINDS:
        raise _bad("device", s["device"], f"choose one of {', '.join(DEVICE_KINDS)} or None")
    if s["plan"] != "auto":
        try:
            HotSwitchPlan.of(s["plan"])
        except (ValueError, TypeError) as error:
            raise _bad("plan", s["plan"], f"{error} (or give 'auto')") from None
    _check_precision(s)
    if s["plan"] != "auto":
        check_budget(s, config, HotSwitchPlan.of(s["plan"]))
    _check_loop(s)
    if not isinstance(s["track"], list | tuple):
        raise _bad("track", s["track"], "give a list like ['tensorboard:runs/tb', 'mlflow:mlruns', 'wandb']")
    try:
        s["track"] = tuple(check_track(t, resolve) for t in s["track"])
    except ValueError as error:
        raise _bad("track", s["track"], str(error)) from None
    if not isinstance(s["text_field"], str) or not s["text_field"]:
        raise _bad("text_field", s["text_field"], "give the name of the field that holds each document's text")
    s["data"] = check_data(s["data"], s["text_field"])
    _check_paths(s, config)
    return s
