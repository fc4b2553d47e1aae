"""Training FLOPs of a LLaMA-style decoder, for model FLOPs utilisation (MFU) and simulation.

PaLM's convention (Chowdhery et al. 2022, appendix B): per token, 6 FLOPs per weight of every
matrix multiply (forward 2, backward 4), plus attention's score and value products,
12 * layers * dim * length (causal masking is not subtracted, so figures compare with published
MFU). The embedding lookup is not a matmul and is left out; the output head is counted.
"""

from __future__ import annotations

from hotswitch.backend.models.config import ModelConfig

# Dense bf16 tensor-core peaks per device (vendor data sheets, without sparsity).
BF16_PEAK_FLOPS = {
    "H100": 989.4e12,  # H100 SXM5
    "H200": 989.4e12,  # same compute as H100 SXM5
    "A100": 312e12,
    "A800": 312e12,  # A100's compute, NVLink capped
}


def matmul_params(config: ModelConfig) -> int:
    """Weights that take part in matrix multiplies: all but the embedding table and the norms."""
    norms = (2 * config.n_layers + 1) * config.dim
    return config.n_params - config.vocab_size * config.dim - norms


def train_flops(config: ModelConfig, length: int) -> float:
    """FLOPs to train one sequence of ``length`` tokens (forward and backward)."""
    return length * (6.0 * matmul_params(config) + 12.0 * config.n_layers * config.dim * length)


def peak_flops(device_name: str) -> float | None:
    """The dense bf16 peak of a device named like ``torch.cuda.get_device_name()``; None if unknown."""
    for key, peak in BF16_PEAK_FLOPS.items():
        if key in device_name.upper():
            return peak
    return None
