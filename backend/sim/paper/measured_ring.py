"""Ring attention's compute on one NVIDIA H200, measured by this project: one rank's blocks
(``parallel.attention_blocks``: bf16 flash attention, fp32 merge, head_dim 128, batch 1)
forward and backward, against the same kernels on the whole sequence (``whole_s``); ``rank_s``
is the slower of the ring's first and last rank. The ring model's cost of splitting
(``sim.context_parallel.RING_STEP``) is fitted on them.

Measured on 2026-11-26 (PyTorch 2.11 with CUDA 13.0) with ``python -m benchmarks.ring_blocks
--device cuda --dtype bf16 --head-dim 128 --cp 2 4 8 --lengths 16384 32768 65536 131072
--heads H --kv-heads H``; each time the median of 3 runs after a warm-up.
"""

from __future__ import annotations

from dataclasses import dataclass

DEVICE = "NVIDIA H200"
HEAD_DIM = 128
COMMAND = "python -m benchmarks.ring_blocks --device cuda --dtype bf16 --head-dim 128 --json"


@dataclass(frozen=True)
class RingBlocks:
    """One measured split: ``heads`` heads of ``length`` tokens over a ring of ``cp``."""

    heads: int
    length: int
    cp: int
    whole_s: float
    rank_s: float

    @property
    def extra_s(self) -> float:
        """What the split costs one rank beyond its share of the whole attention."""
        return self.rank_s - self.whole_s / self.cp


POINTS = (
    RingBlocks(4, 16384, 2, 0.00384, 0.00247),
    RingBlocks(4, 16384, 4, 0.00384, 0.00213),
    RingBlocks(4, 16384, 8, 0.00384, 0.00281),
    RingBlocks(4, 32768, 2, 0.01315, 0.00713),
    RingBlocks(4, 32768, 4, 0.01315, 0.00444),
    RingBlocks(4, 32768, 8, 0.01315, 0.00471),
    RingBlocks(4, 65536, 2, 0.04845, 0.02584),
    RingBlocks(4, 65536, 4, 0.04845, 0.01363),
    RingBlocks(4, 65536, 8, 0.04845, 0.00819),
    RingBlocks(4, 131072, 2, 0.19264, 0.09725),
    RingBlocks(4, 131072, 4, 0.19264, 0.05024),
    RingBlocks(4, 131072, 8, 0.19264, 0.02671),
    RingBlocks(8, 16384, 2, 0.00698, 0.00421),
    RingBlocks(8, 16384, 4, 0.00698, 0.00263),
    RingBlocks(8, 16384, 8, 0.00698, 0.00492),
    RingBlocks(8, 32768, 2, 0.02516, 0.01361),
    RingBlocks(8, 32768, 4, 0.02516, 0.00796),
    RingBlocks(8, 32768, 8, 0.02516, 0.00562),
    RingBlocks(8, 65536, 2, 0.09604, 0.04998),
    RingBlocks(8, 65536, 4, 0.09604, 0.02638),
    RingBlocks(8, 65536, 8, 0.09604, 0.01496),
    RingBlocks(8, 131072, 2, 0.38382, 0.19387),
    RingBlocks(8, 131072, 4, 0.38382, 0.09953),
    RingBlocks(8, 131072, 8, 0.38382, 0.05247),
    RingBlocks(16, 16384, 2, 0.01352, 0.00773),
    RingBlocks(16, 16384, 4, 0.01352, 0.00470),
    RingBlocks(16, 16384, 8, 0.01352, 0.00337),
    RingBlocks(16, 32768, 2, 0.04935, 0.02634),
    RingBlocks(16, 32768, 4, 0.04935, 0.01482),
    RingBlocks(16, 32768, 8, 0.04935, 0.00898),
    RingBlocks(16, 65536, 2, 0.19221, 0.09912),
    RingBlocks(16, 65536, 4, 0.19221, 0.05207),
    RingBlocks(16, 65536, 8, 0.19221, 0.02897),
    RingBlocks(16, 131072, 2, 0.76496, 0.38621),
    RingBlocks(16, 131072, 4, 0.76496, 0.19791),
    RingBlocks(16, 131072, 8, 0.76496, 0.10344),
    RingBlocks(32, 16384, 2, 0.02600, 0.01473),
    RingBlocks(32, 16384, 4, 0.02600, 0.00876),
    RingBlocks(32, 16384, 8, 0.02600, 0.00595),
    RingBlocks(32, 32768, 2, 0.09820, 0.05333),
    RingBlocks(32, 32768, 4, 0.09820, 0.02908),
    RingBlocks(32, 32768, 8, 0.09820, 0.01711),
    RingBlocks(32, 65536, 2, 0.39008, 0.20000),
    RingBlocks(32, 65536, 4, 0.39008, 0.10444),
    RingBlocks(32, 65536, 8, 0.39008, 0.05689),
    RingBlocks(32, 131072, 2, 1.54856, 0.77471),
    RingBlocks(32, 131072, 4, 1.54856, 0.39827),
    RingBlocks(32, 131072, 8, 1.54856, 0.20835),
)
