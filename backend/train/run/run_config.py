"""One typed run configuration: what the recipe's spec dict, ``hotswitch train`` (its flags and
``--config run.toml``) and a ``%%train`` body all describe. ``spec.check_spec`` checks values;
this module names the settings, their types and defaults, and reads TOML.

A TOML file holds the same keys as the spec, flat (``steps = 100``), or grouped in tables for
reading (``[optim]`` with ``lr = 3e-4``: a table's keys are the spec's own keys, the table name is
only a heading). A setting left out takes its default; ``None`` is written by leaving it out.
"""

from __future__ import annotations

import os
import sys
from dataclasses import asdict, dataclass, fields
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # the same parser, before it joined the standard library
    import tomli as tomllib


@dataclass(frozen=True)
class RunConfig:
    model: str = "tiny"
    data: str | list[str] = "stdlib"
    text_field: str = "text"
    tokenizer: str = "byte"
    steps: int = 20
    batch_size: int = 16
    max_len: int = 256
    plan: str | list = "auto"
    memory_budget: float | None = None
    token_budget: int = 1024
    seed: int = 0
    lr: float = 1e-3
    lr_schedule: str = "constant"
    warmup_steps: int = 0
    min_lr: float = 0.0
    weight_decay: float = 0.1
    betas: tuple[float, float] = (0.9, 0.95)
    max_grad_norm: float = 1.0
    shard_optimizer: bool | None = None
    context_parallel: bool | None = None
    checkpoint: str | None = None
    resume_from: str | None = None
    export_hf: str | None = None
    checkpoint_every: int | None = None
    keep_checkpoints: int | None = None
    eval_every: int | None = None
    eval_batches: int = 1
    eval_fraction: float = 0.05
    device: str | None = None
    precision: str = "fp32"
    grad_dtype: str | None = None
    track: tuple[str, ...] = ()

    def as_spec(self) -> dict:
        return asdict(self)


KNOWN = tuple(f.name for f in fields(RunConfig))


def unknown_keys(keys, where: str) -> ValueError:
    return ValueError(f"unknown training settings {sorted(keys)} in {where}; known: {', '.join(KNOWN)}")


def load_toml(path: str | os.PathLike) -> dict:
    """The settings a TOML run configuration gives (tables flattened); raises ValueError naming
    a key that is not a setting, with the known ones, or the place the file cannot be parsed."""
    path = Path(path)
    try:
        document = tomllib.loads(path.read_text())
    except OSError as error:
        raise ValueError(f"cannot read the run configuration {path}: {error.strerror or error}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{path} is not valid TOML: {error}") from None
    settings: dict = {}
    for key, value in document.items():
        table = value if isinstance(value, dict) else {key: value}
        for name, setting in table.items():
            if name in settings:
                raise ValueError(f"{path}: training setting {name!r} is given twice")
            settings[name] = setting
    unknown = set(settings) - set(KNOWN)
    if unknown:
        raise unknown_keys(unknown, str(path))
    if isinstance(settings.get("betas"), list):
        settings["betas"] = tuple(settings["betas"])
    return settings
