"""One typed run configuration: ``RunConfig``, the tree of sections (model, data, optimizer and
schedule, parallelism and plan, precision and memory, checkpoints, evaluation, tracking) plus the
run-wide ``steps`` and ``seed``. Each setting is declared once, as a section's field; its key
(``lr``, ``max_len``) names it in a flat spec dict, in TOML and as a ``hotswitch train`` flag.

``RunConfig.of`` builds the tree from a flat dict, a TOML file or a tree; ``check`` returns it
checked (defaults filled in, paths absolute), raising ValueError naming the setting, its value and
the fix; ``as_spec`` gives the flat dict back.
"""

from __future__ import annotations

import difflib
import os
import sys
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields, is_dataclass, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, get_type_hints

from hotswitch.backend.models.config import ModelConfig
from hotswitch.backend.train.config.checkpoints import CheckpointSettings
from hotswitch.backend.train.config.model_data import DataSettings, ModelSettings
from hotswitch.backend.train.config.optimizer import OptimizerSettings
from hotswitch.backend.train.config.parallelism import ParallelismSettings
from hotswitch.backend.train.config.paths import resolve
from hotswitch.backend.train.config.precision import PrecisionSettings
from hotswitch.backend.train.config.reporting import EvaluationSettings, TrackingSettings
from hotswitch.backend.train.config.setting import bad_setting, key_of, setting, whole

if sys.version_info >= (3, 11):
    import tomllib
else:  # the same parser, before it joined the standard library
    import tomli as tomllib


@dataclass(frozen=True)
class RunConfig:
    """A whole run: one section per component, each checking itself (``check``), plus the
    run-wide ``steps`` and ``seed``. Build one from a flat dict or TOML with ``RunConfig.of``."""

    model: ModelSettings = field(default_factory=ModelSettings)
    data: DataSettings = field(default_factory=DataSettings)
    steps: int = setting(20, "steps in all (a resumed run counts the checkpoint's)")
    seed: int = setting(0, "seeds the initial weights and the order of the batches")
    optimizer: OptimizerSettings = field(default_factory=OptimizerSettings)
    parallelism: ParallelismSettings = field(default_factory=ParallelismSettings)
    precision: PrecisionSettings = field(default_factory=PrecisionSettings)
    checkpoints: CheckpointSettings = field(default_factory=CheckpointSettings)
    evaluation: EvaluationSettings = field(default_factory=EvaluationSettings)
    tracking: TrackingSettings = field(default_factory=TrackingSettings)

    @classmethod
    def of(cls, spec: RunConfig | Mapping | str | os.PathLike) -> RunConfig:
        """``spec`` as a tree, unchecked: a ``RunConfig`` as it is, a flat dict of keys (those of
        ``KNOWN``), or the path of a ``.toml`` run configuration (relative: to the notebook's folder)."""
        if isinstance(spec, RunConfig):
            return spec
        if isinstance(spec, str | os.PathLike) and str(spec).endswith(".toml"):
            spec = load_toml(resolve(spec))
        if not isinstance(spec, Mapping):
            raise ValueError(
                "a training spec is a dict like {'model': 'tiny', 'steps': 20}, a RunConfig or a .toml file; "
                f"got {spec!r}"
            )
        unknown = set(spec) - set(KNOWN)
        if unknown:
            raise unknown_keys(unknown, "the spec")
        root: dict = {}  # the settings outside a section
        sections: dict[str, dict] = {}
        for key, value in spec.items():
            where = SETTINGS[key]
            (root if where.section is None else sections.setdefault(where.section, {}))[where.name] = value
        return cls(**root, **{name: SECTIONS[name](**values) for name, values in sections.items()})

    def check(self) -> RunConfig:
        """This configuration checked, defaults filled in and paths made absolute; ValueError
        naming the setting, its value and the fix. Reads the inputs' files, never a checkpoint's
        metadata (``CheckpointSettings.resume_point``) and nothing that needs the ranks."""
        model = self.model.check()
        architecture = model.architecture()
        data = self.data.check(architecture, model.name)
        run = replace(self, model=model, data=data).check_training(data.max_len)
        plan = run.parallelism.hot_switch_plan()
        if not isinstance(plan, str):  # a named plan, not "auto"
            run.precision.check_budget(architecture, plan, data.max_len)
        evaluation = self.evaluation.check(data.text_field, data.prompt_field, data.chat_field)
        if evaluation.eval_every is not None and evaluation.eval_every > run.steps:
            why = f"more than steps ({run.steps}): nothing would be evaluated, yet documents would be held out"
            raise bad_setting("eval_every", evaluation.eval_every, f"{why}; give at most {run.steps}, or leave it out")
        return replace(run, evaluation=evaluation, tracking=self.tracking.check())

    def check_world(self, model: ModelConfig, world_size: int) -> None:
        """What a checked configuration needs the world size for, before any work: the plan's
        strategies fit ``world_size`` devices; under ``auto`` a declared memory budget holds the
        model states of the strategy it would instantiate on (refused at once, not after
        profiling), as a named plan's budget is checked by ``check``."""
        from hotswitch.backend.strategy import Strategy
        from hotswitch.backend.train.planning.auto import auto_candidates
        from hotswitch.backend.train.planning.dispatch import HotSwitchPlan, instantiation_strategy

        parallelism = self.parallelism
        parallelism.check_world(world_size)
        if parallelism.plan != "auto":
            return
        if parallelism.instantiation is not None:
            chosen = Strategy.parse(parallelism.instantiation)
        else:
            chosen = instantiation_strategy(
                auto_candidates(model, world_size, self.data.max_len, parallelism.context_parallel)
            )
        self.precision.check_budget(model, HotSwitchPlan.of(chosen), self.data.max_len)

    def check_training(self, max_len: int) -> RunConfig:
        """The sections a trainer reads (steps and seed, optimizer, parallelism, precision,
        checkpoints) checked for a stream of sequences of up to ``max_len`` tokens, defaults filled
        in; the model and data sections are left as they are (a trainer is given them built)."""
        whole("steps", self.steps, 1)
        whole("seed", self.seed, 0)
        parallelism = self.parallelism.check()
        return replace(
            self,
            optimizer=self.optimizer.check(),
            parallelism=parallelism,
            precision=self.precision.check(max_len, parallelism.device_kind()),
            checkpoints=self.checkpoints.check(),
        )

    def as_spec(self) -> dict:
        """The flat dict of every setting, by key."""
        return {key: self[key] for key in KNOWN}

    def __getitem__(self, key: str) -> Any:
        """The setting ``key`` names (``run["max_len"]`` is ``run.data.max_len``): the flat
        spec's view, for callers that read a checked spec by key."""
        if key not in SETTINGS:
            raise KeyError(f"unknown training setting {key!r}; known: {', '.join(KNOWN)}")
        where = SETTINGS[key]
        holder = self if where.section is None else getattr(self, where.section)
        return getattr(holder, where.name)


def engine_run(token_budget: int, **settings: Any) -> RunConfig:
    """A run checked for training in micro-batches of ``token_budget`` tokens, with ``settings``
    by key (``seed``, ``precision``, ``packing``, ``compile``, ``pipeline_schedule``, ...) and
    every other setting at the run's default: what an ``Engine`` built by hand (a test, a
    benchmark) takes."""
    return RunConfig.of({"token_budget": token_budget, **settings}).check_training(token_budget)


@dataclass(frozen=True)
class Setting:
    """One setting as the flags and the flat dict see it: ``key`` is ``section.name``'s outside name."""

    key: str
    section: str | None
    name: str
    default: Any
    hint: Any
    help: str
    choices: tuple | None
    many: str | int | None
    parse: Any


def _settings() -> dict[str, Setting]:
    """Every setting of the tree by key, in declaration order; a key declared twice is refused."""
    out = {}
    for top in fields(RunConfig):
        holder = top.default_factory if top.default_factory is not MISSING else None
        owner, section = (holder, top.name) if is_dataclass(holder) else (RunConfig, None)
        hints = get_type_hints(owner)
        for f in fields(owner) if section else [top]:
            key = key_of(f)
            if key in out:
                raise TypeError(f"two settings are called {key!r}: give one of them another key")
            meta = f.metadata
            described = (meta["help"], meta["choices"], meta["many"], meta["parse"])
            out[key] = Setting(key, section, f.name, f.default, hints[f.name], *described)
    return out


SETTINGS: Mapping[str, Setting] = MappingProxyType(_settings())
KNOWN = tuple(SETTINGS)
SECTIONS = MappingProxyType({f.name: f.default_factory for f in fields(RunConfig) if f.default_factory is not MISSING})


def unknown_keys(keys, where: str) -> ValueError:
    """The refusal of settings nobody declared, naming the known key each may have meant."""
    meant = {key: difflib.get_close_matches(str(key), KNOWN, n=1) for key in sorted(keys, key=str)}
    guesses = [f"{key!r}: did you mean {close[0]!r}?" for key, close in meant.items() if close]
    hint = f" ({'; '.join(guesses)})" if guesses else ""
    return ValueError(f"unknown training settings {sorted(keys, key=str)} in {where}{hint}; known: {', '.join(KNOWN)}")


def _table(path: Path, name: str, table: dict) -> dict:
    """The settings of TOML table ``[name]``: it must be a section, and each of its keys a
    setting of that section; ValueError naming the table (dotted, as written) and the fix."""
    if name not in SECTIONS:
        close = difflib.get_close_matches(name, list(SECTIONS), n=1)
        meant = f"; did you mean [{close[0]}]?" if close else ""
        raise ValueError(f"{path}: [{name}] is not a section{meant} The sections: {', '.join(SECTIONS)}")
    for key, value in table.items():
        if isinstance(value, dict):
            raise ValueError(f"{path}: [{name}.{key}] is not a section; the settings of [{name}] are plain keys")
        setting = SETTINGS.get(key)
        if setting is not None and setting.section != name:
            home = f"[{setting.section}]" if setting.section else "the top of the file, before any table"
            raise ValueError(f"{path}: {key!r} is not a setting of [{name}]; it goes under {home}")
    return table


def load_toml(path: str | os.PathLike) -> dict:
    """The settings a TOML run configuration gives, by key: a table is a section (``[optimizer]``
    with ``lr = 3e-4``) holding that section's settings, the run's own (``steps``, ``seed``)
    before any table. A setting left out takes
    its default; ``None`` is written by leaving it out. ValueError naming a key that is not a
    setting (with the known ones), one given twice, or where the file cannot be parsed."""
    path = Path(path)
    try:
        document = tomllib.loads(path.read_text())
    except OSError as error:
        raise ValueError(f"cannot read the run configuration {path}: {error.strerror or error}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{path} is not valid TOML: {error}") from None
    settings: dict = {}
    for key, value in document.items():
        table = _table(path, key, value) if isinstance(value, dict) else {key: value}
        for name, given in table.items():
            if name in settings:
                raise ValueError(f"{path}: training setting {name!r} is given twice")
            settings[name] = given
    unknown = set(settings) - set(KNOWN)
    if unknown:
        raise unknown_keys(unknown, str(path))
    for key, value in settings.items():  # TOML has arrays only: a tuple setting's becomes one
        if isinstance(SETTINGS[key].default, tuple) and isinstance(value, list):
            settings[key] = tuple(value)
    return anchored(settings, path.resolve().parent)


# the settings that name files or folders (where a prefix, "hf:" or "tensorboard:", leads the path)
FOLDER_KEYS = ("checkpoint", "resume_from", "export_hf")
PREFIXED = {"model": "hf:", "tokenizer": "hf:", "track": "tensorboard:"}
NOT_PATHS = ("stdlib", "synthetic:")  # data that names no file


def anchored(settings: dict, folder: Path) -> dict:
    """``settings`` of a TOML file with each relative path in them made absolute against the
    file's ``folder``, as a user reads the file (not against the notebook's folder)."""

    def anchor(text: str, prefix: str = "") -> str:
        if not text.startswith(prefix) or text.startswith(NOT_PATHS):
            return text
        rest = text[len(prefix) :]
        return text if Path(rest).expanduser().is_absolute() else prefix + str(folder / rest)

    def each(value, prefix: str = ""):
        if isinstance(value, str):
            return anchor(value, prefix)
        return type(value)(anchor(v, prefix) if isinstance(v, str) else v for v in value)

    out = dict(settings)
    for key in ("data", "eval_data", *FOLDER_KEYS, *PREFIXED):
        if out.get(key) is not None:
            out[key] = each(out[key], PREFIXED.get(key, ""))
    return out
