"""This project's own measurements on one NVIDIA H200, which the H200 preset is calibrated on:
one training step of the engine (bf16 compute, fp32 master weights and gradients, AdamW looped
per tensor as it then was), ``documents`` sequences of ``length`` tokens in one micro-batch,
for presets cut to fewer layers where the optimizer would not fit one GPU.

Measured on 2026-11-26 (PyTorch 2.11 with CUDA 13.0, driver 580.159) with
``python -m benchmarks.precision --device cuda --gpu-only --json --preset P [--layers N]
[--per-step D] --lengths ...``: each step time the median of 5 steps after a warm-up step, each
peak ``torch.cuda.max_memory_allocated()`` over them. Attention ran PyTorch's default choice
then, cuDNN's (the engine now times the kernels the device offers and runs the fastest,
``models.attention.kernels``). The 1b points are fitted on; the 7B and 13B shapes (other widths, heads and
vocabulary) are held out. Nothing here was tuned.
"""

from __future__ import annotations

from dataclasses import dataclass

DEVICE = "NVIDIA H200"
COMMAND = "python -m benchmarks.precision --device cuda --gpu-only --json"


@dataclass(frozen=True)
class EngineStep:
    """One measured step: the preset (with ``layers`` of its blocks, None: all of them)."""

    preset: str
    layers: int | None
    documents: int
    length: int
    step_s: float
    peak_bytes: int

    @property
    def name(self) -> str:
        shape = self.preset + (f" ({self.layers} layers)" if self.layers else "")
        return f"{shape} {self.documents} x {self.length} tokens"


FIT = (
    EngineStep("1b", None, 1, 1024, 0.0833, 17038649856),
    EngineStep("1b", None, 1, 2048, 0.0877, 18578110976),
    EngineStep("1b", None, 1, 4096, 0.1078, 21734627840),
    EngineStep("1b", None, 1, 8192, 0.1754, 28047661568),
    EngineStep("1b", None, 1, 16384, 0.3779, 40673729024),
    EngineStep("1b", None, 1, 32768, 1.0093, 65925863936),
    EngineStep("1b", None, 8, 512, 0.0955, 21727287808),
    EngineStep("1b", None, 8, 1024, 0.1454, 28040321536),
    EngineStep("1b", None, 8, 2048, 0.2595, 40666388992),
    EngineStep("1b", None, 8, 4096, 0.5156, 65918523904),
)
HELD_OUT = (
    EngineStep("13b", 6, 1, 4096, 0.1869, 46307770880),
    EngineStep("13b", 6, 1, 16384, 0.5840, 65277084160),
    EngineStep("13b", 6, 1, 32768, 1.2685, 90568278528),
    EngineStep("7b", 8, 1, 2048, 0.1193, 37075937792),
    EngineStep("7b", 8, 1, 8192, 0.2737, 46955088384),
    EngineStep("7b", 8, 1, 32768, 1.2383, 86605908480),
    EngineStep("7b", 8, 4, 2048, 0.2521, 46942505472),
    EngineStep("7b", 8, 4, 8192, 0.8992, 86593325568),
)
