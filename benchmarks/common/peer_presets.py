"""What ``benchmarks/peers.py`` runs: the models and rows of each preset (``--device cuda``,
``--device cpu``, ``--smoke``) and the seeded batches of random tokens every side trains on."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, replace

import torch

from hotswitch.backend.data.stream import Sequence
from hotswitch.backend.models.config import ModelConfig, get_config
from hotswitch.backend.sim.datasets import batch_lengths


@dataclass(frozen=True)
class Shape:
    rows: int
    tokens: int

    @property
    def label(self) -> str:
        return f"{self.rows}x{self.tokens}"


@dataclass(frozen=True)
class Documents:
    """``batches`` batches of ``count`` RefinedWeb-like documents, each cut at ``cap`` tokens,
    in micro-batches of at most ``budget`` tokens; each batch timed ``passes`` times."""

    count: int
    cap: int
    budget: int
    batches: int
    passes: int = 1

    @property
    def label(self) -> str:
        return f"refinedweb {self.batches}x{self.count} docs <={self.cap}, budget {self.budget}"


@dataclass(frozen=True)
class Model:
    label: str
    config: ModelConfig
    rows: tuple[Shape | Documents, ...]


@dataclass(frozen=True)
class Preset:
    """``compiled``: (model label, row label) pairs the compiled peer runs, most wanted first;
    ``timed`` timed steps a row, ``long_timed`` where its rows reach ``long_tokens``."""

    name: str
    device: str
    models: tuple[Model, ...]
    compiled: tuple[tuple[str, str], ...]
    warmups: int
    timed: int
    long_timed: int
    long_tokens: int
    budget_s: float
    engine_compile: bool | None = None  # the engine's runs compiled; None: as a run would (on cuda)
    compiled_first: int = 1  # compiled rows run before the eager sides (the budget keeps them)

    @property
    def engine_compiled(self) -> bool:
        """Whether the engine compiles its runs: as ``--[no-]compile`` says, else as a run would."""
        return self.device == "cuda" if self.engine_compile is None else self.engine_compile


def model(label: str, config: ModelConfig, rows: tuple[Shape | Documents, ...]) -> Model:
    longest = max(r.tokens if isinstance(r, Shape) else r.cap for r in rows)
    return Model(label, config.with_(name=label, max_seq_len=longest), rows)


SEVEN_B_8 = "7b-shape-8-layers"
DOCS_1B = Documents(count=96, cap=8192, budget=16384, batches=4)
CUDA = Preset(
    "cuda",
    "cuda",
    (
        model("1b", get_config("1b"), (Shape(16, 1024), Shape(8, 2048), Shape(2, 8192), Shape(1, 32768), DOCS_1B)),
        model(SEVEN_B_8, get_config("7b").with_(n_layers=8), (Shape(4, 2048), Shape(1, 8192), Shape(1, 32768))),
    ),
    compiled=(
        ("1b", "8x2048"),
        ("1b", "16x1024"),
        ("1b", "2x8192"),
        (SEVEN_B_8, "4x2048"),
        (SEVEN_B_8, "1x8192"),
        (SEVEN_B_8, "1x32768"),
        ("1b", "1x32768"),
        ("1b", DOCS_1B.label),
    ),
    warmups=2,
    timed=5,
    long_timed=3,
    long_tokens=16384,
    budget_s=250.0,
)
CI_MODEL = get_config("tiny").with_(vocab_size=2048, dim=128, n_layers=2, n_heads=8, n_kv_heads=4, ffn_dim=352)
CPU = Preset(
    "cpu",
    "cpu",
    (model("ci", CI_MODEL, (Shape(8, 128), Shape(2, 512), Shape(1, 1024), Documents(24, 512, 1024, 2))),),
    compiled=(("ci", "8x128"),),
    warmups=2,
    timed=5,
    long_timed=3,
    long_tokens=1024,
    budget_s=240.0,
)
SMOKE = Preset(
    "smoke",
    "cpu",
    (model("tiny", get_config("tiny"), (Shape(2, 64), Documents(8, 64, 128, 2))),),
    compiled=(),
    warmups=1,
    timed=1,
    long_timed=1,
    long_tokens=64,
    budget_s=60.0,
)


def only_rows(preset: Preset, texts: list[str]) -> Preset:
    """``preset`` with only the rows whose "model shape" holds one of ``texts`` (a short GPU
    lease's one question), its models without such rows left out, and the compiled peer's rows
    after the eager sides (a first compilation must not take the time they were asked for)."""

    def kept(model: str, row: str) -> bool:
        return any(text in f"{model} {row}" for text in texts)

    models = tuple(replace(m, rows=tuple(r for r in m.rows if kept(m.label, r.label))) for m in preset.models)
    models = tuple(m for m in models if m.rows)
    if not models:
        raise SystemExit(f"--rows {' '.join(texts)}: no row of the {preset.name} preset matches")
    compiled = tuple(key for key in preset.compiled if kept(*key))
    return replace(preset, models=models, compiled=compiled, compiled_first=0)


def row_batches(config: ModelConfig, row: Shape | Documents) -> tuple[list[list[Sequence]], int]:
    """The row's batches of random tokens (seeded: every side gets the same) and token budget."""
    if isinstance(row, Shape):
        lengths, budget = [[row.tokens] * row.rows], row.rows * row.tokens
    else:
        lengths = [batch_lengths("commoncrawl", row.cap, row.count, seed=b) for b in range(row.batches)]
        budget = row.budget
    generator = torch.Generator().manual_seed(0)
    batches = [
        [
            Sequence(doc, tuple(torch.randint(0, config.vocab_size, (n + 1,), generator=generator).tolist()))
            for doc, n in enumerate(batch)
        ]
        for batch in lengths
    ]
    return batches, budget


def timed_steps(preset: Preset, row: Shape | Documents) -> int:
    if isinstance(row, Documents):
        return row.passes
    return preset.long_timed if row.tokens >= preset.long_tokens else preset.timed


def add_preset_arguments(parser: argparse.ArgumentParser) -> None:
    """The options that choose a preset and narrow it (``preset_of``)."""
    parser.add_argument("--device", choices=("cpu", "cuda"), help="the preset (default: cuda where torch sees one)")
    parser.add_argument("--smoke", action="store_true", help="the tiniest CPU run, seconds, no compilation")
    parser.add_argument(
        "--compile", action=argparse.BooleanOptionalAction, help="compile the engine's runs (default: on cuda)"
    )
    parser.add_argument("--rows", nargs="+", metavar="TEXT", help="only the rows whose 'model shape' holds a TEXT")
    parser.add_argument("--json", action="store_true", help="print JSON only")


def preset_of(parser: argparse.ArgumentParser, args: argparse.Namespace, rows: dict | None = None) -> Preset:
    """The preset the options chose, narrowed to ``--rows`` (else to ``rows[device]`` if given)."""
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not args.smoke and not torch.cuda.is_available():
        parser.error("--device cuda: torch sees no CUDA device here; run it on a GPU machine, or pass --device cpu")
    preset = SMOKE if args.smoke else {"cpu": CPU, "cuda": CUDA}[device]
    preset = replace(preset, engine_compile=args.compile)
    texts = args.rows or (rows or {}).get(device)
    return only_rows(preset, texts) if texts and not args.smoke else preset
