"""Training FLOPs of a LLaMA-style decoder, for model FLOPs utilisation (MFU) and simulation.

PaLM's convention (Chowdhery et al. 2022, appendix B): per token, 6 FLOPs per weight of every
matrix multiply (forward 2, backward 4), plus attention's score and value products,
12 * layers * dim * length (causal masking is not subtracted, so figures compare with published
MFU). The embedding lookup is not a matmul and is left out; the output head is counted.
"""

from __future__ import annotations

import functools

from hotswitch.backend.models.config import ModelConfig

# Dense bf16 tensor-core peaks per device (vendor data sheets, without sparsity).
BF16_PEAK_FLOPS = {
    "H100": 989.4e12,  # H100 SXM5
    "H200": 989.4e12,  # same compute as H100 SXM5
    "A100": 312e12,
    "A800": 312e12,  # A100's compute, NVLink capped
}


@functools.lru_cache(maxsize=64)  # the simulator asks for it thousands of times per configuration
def matmul_params(config: ModelConfig) -> int:
    """Weights that take part in a token's matrix multiplies: the matrices but the embedding
    table (a tied head multiplies by it all the same), and of each mixture of experts the picked
    ones (``per_token`` of its experts' stacked matrices); norms and biases do not."""
    matrices = sum(rows * cols for name, (rows, cols, *_) in _matrices(config) if name != "tok_embeddings.weight")
    picked = config.experts.per_token if config.experts else 0
    experts = sum(s[1] * s[2] * picked for s in config.param_shapes().values() if len(s) == 3)
    return matrices + experts + (config.vocab_size * config.dim if config.tie_embeddings else 0)


def _matrices(config: ModelConfig) -> list[tuple[str, tuple[int, ...]]]:
    return [(name, shape) for name, shape in config.param_shapes().items() if len(shape) == 2]


def attended_pairs(config: ModelConfig, length: int) -> float:
    """(query, key) pairs one sequence of ``length`` tokens scores over every layer, counted as
    length^2 / 2 for a full causal layer; a sliding-window layer scores at most ``window`` keys
    per query."""
    total = 0.0
    for layer in range(config.n_layers):
        window = config.window(layer)
        if window is None or length <= window:
            total += length * length / 2
        else:
            total += window * window / 2 + (length - window) * window
    return total


def train_flops(config: ModelConfig, length: int) -> float:
    """FLOPs to train one sequence of ``length`` tokens (forward and backward)."""
    return length * 6.0 * matmul_params(config) + 24.0 * config.q_dim * attended_pairs(config, length)


def peak_flops(device_name: str) -> float | None:
    """The dense bf16 peak of a device named like ``torch.cuda.get_device_name()``; None if unknown."""
    for key, peak in BF16_PEAK_FLOPS.items():
        if key in device_name.upper():
            return peak
    return None
