"""How a model's rotary frequencies are stretched for long contexts: one option of
``ModelConfig`` (``rope_scaling``), torch-free, as the rest of the config is; ``models.rotary``
computes the tables from it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

RopeKind = Literal["default", "linear", "llama3", "yarn"]


@dataclass(frozen=True)
class RopeScaling:
    """How rotary frequencies are stretched for long contexts (Hugging Face's ``rope_type``):
    ``linear`` divides every frequency by ``factor``; ``llama3`` divides the low frequencies and
    blends the middle band (``low_freq_factor``, ``high_freq_factor`` over
    ``original_max_positions``); ``yarn`` blends interpolated and extrapolated frequencies
    between ``beta_fast`` and ``beta_slow`` rotations and scales cos/sin by
    ``attention_factor``."""

    kind: RopeKind = "default"
    factor: float = 1.0
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_max_positions: int = 0
    attention_factor: float = 1.0
    beta_fast: float = 32.0
    beta_slow: float = 1.0
    truncate: bool = True
