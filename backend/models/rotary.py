"""Rotary embedding tables of the one decoder: the frequencies of each family's ``rope_type``
(``default``, ``linear``, ``llama3``, ``yarn``), partial rotary embedding, and the sliding-window
layers' own base (Gemma 3).

The frequencies follow transformers' ``modeling_rope_utils`` formula by formula (the forward
tests hold every family equal to its transformers class), without importing it. Tables are
fp32 ``[max_seq_len, rotary_dim / 2]``; yarn's attention factor scales cos and sin, as
transformers scales them.
"""

from __future__ import annotations

import math

import torch

from hotswitch.backend.models.config import ModelConfig, RopeScaling

# the model's buffers: the full-attention layers' tables, and the sliding-window layers' where
# they have a base of their own
TABLES = ("rope_cos", "rope_sin")
LOCAL_TABLES = ("rope_local_cos", "rope_local_sin")


def inverse_frequencies(rotary_dim: int, theta: float, scaling: RopeScaling, device=None) -> torch.Tensor:
    """The ``rotary_dim / 2`` angular frequencies of one head's rotated channels."""
    exponents = torch.arange(0, rotary_dim, 2, dtype=torch.int64, device=device).float() / rotary_dim
    base = 1.0 / theta**exponents
    if scaling.kind == "linear":
        return base / scaling.factor
    if scaling.kind == "llama3":
        return _llama3(base, scaling)
    if scaling.kind == "yarn":
        return _yarn(rotary_dim, theta, scaling, device)
    return base


def _llama3(base: torch.Tensor, s: RopeScaling) -> torch.Tensor:
    """Llama 3.1's scaling: long wavelengths divided by ``factor``, short ones kept, the band
    between blended."""
    low_wavelength = s.original_max_positions / s.low_freq_factor
    high_wavelength = s.original_max_positions / s.high_freq_factor
    wavelength = 2 * math.pi / base
    scaled = torch.where(wavelength > low_wavelength, base / s.factor, base)
    smooth = (s.original_max_positions / wavelength - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor)
    blended = (1 - smooth) * scaled / s.factor + smooth * scaled
    middle = ~(wavelength < high_wavelength) * ~(wavelength > low_wavelength)
    return torch.where(middle, blended, scaled)


def _yarn(rotary_dim: int, theta: float, s: RopeScaling, device) -> torch.Tensor:
    """YaRN: extrapolated frequencies above ``beta_fast`` rotations over the original context,
    interpolated ones below ``beta_slow``, a linear ramp between."""

    def correction(rotations: float) -> float:
        return rotary_dim * math.log(s.original_max_positions / (rotations * 2 * math.pi)) / (2 * math.log(theta))

    low = correction(s.beta_fast)
    high = correction(s.beta_slow)
    if s.truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, rotary_dim - 1)
    if low == high:
        high += 0.001  # as transformers: no division by zero
    positions = theta ** (torch.arange(0, rotary_dim, 2, device=device).float() / rotary_dim)
    ramp = ((torch.arange(rotary_dim // 2, dtype=torch.float32, device=device) - low) / (high - low)).clamp(0, 1)
    extrapolated = 1 - ramp
    return (1.0 / (s.factor * positions)) * (1 - extrapolated) + (1.0 / positions) * extrapolated


def rotary_tables(
    config: ModelConfig, device: torch.device | str | None = None, local: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """(cos, sin) ``[max_seq_len, rotary_dim / 2]`` of the full-attention layers, or with
    ``local`` of the sliding-window layers (their own base, no scaling)."""
    half = config.rotary_dim // 2
    if torch.device(device or "cpu").type == "meta":  # shapes only (meta arithmetic would import torch._dynamo)
        table = torch.empty(config.max_seq_len, half, device="meta")
        return table, torch.empty_like(table)
    if local:
        assert config.local_rope_theta is not None  # only asked of configs with local layers' own base
        freqs = inverse_frequencies(config.rotary_dim, config.local_rope_theta, RopeScaling(), device)
        factor = 1.0
    else:
        freqs = inverse_frequencies(config.rotary_dim, config.rope_theta, config.rope_scaling, device)
        factor = config.rope_scaling.attention_factor
    angles = torch.outer(torch.arange(config.max_seq_len, dtype=torch.float32, device=device), freqs)
    return angles.cos() * factor, angles.sin() * factor


def rotary_buffers(config: ModelConfig, device: torch.device | str | None = None) -> dict[str, torch.Tensor]:
    """Every rotary table the model of ``config`` holds, by buffer name."""
    buffers = dict(zip(TABLES, rotary_tables(config, device)))
    if config.local_rope_theta is not None:
        buffers.update(zip(LOCAL_TABLES, rotary_tables(config, device, local=True)))
    return buffers
