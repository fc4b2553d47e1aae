"""The devices a simulated cluster is made of: bf16 peak, memory, HBM and link bandwidths, and
the fraction of peak a training step reaches.

None of these figures was measured by this project (no GPU was available to it): each is a
vendor data sheet or a published training report, named beside it, and none is tuned to the
HotSPa paper's figures. The efficiency is an *assumption* until a GPU run calibrates it.
"""

from __future__ import annotations

from dataclasses import dataclass

from hotswitch.backend.cluster import GB, GIB, Cluster
from hotswitch.backend.models.flops import BF16_PEAK_FLOPS


@dataclass(frozen=True)
class DeviceSpec:
    """One accelerator kind and the servers it usually comes in."""

    name: str
    peak_flops: float  # dense bf16, per device
    memory: int  # bytes per device
    hbm_bw: float  # bytes/s of device memory (bounds the optimizer update)
    intra_bw: float  # bytes/s one device sends to peers on its server (NVLink, each way)
    inter_bw: float  # bytes/s of one server's network, shared by its devices
    max_mfu: float  # fraction of peak a large micro-batch reaches (see PRESETS)
    half_work: float  # tokens x hidden / tp per device at which half of ``max_mfu`` is reached
    latency_s: float = 10e-6  # per collective step (NCCL's small-message latency, nccl-tests order)
    reserved: int = 6 * GIB  # CUDA context, NCCL buffers, allocator fragmentation: never usable

    def efficiency(self, tokens: int, dim: int, tp: int) -> float:
        """Fraction of peak for a micro-batch of ``tokens`` whose matrix multiplies each device
        sees as ``tokens x dim / tp``: small multiplies leave the tensor cores idle. A saturating
        curve ``max_mfu * w / (w + half_work)``: its shape is an assumption, not a fit."""
        work = tokens * dim / tp
        return self.max_mfu * work / (work + self.half_work)

    def cluster(self, gpus: int, per_server: int = 8) -> Cluster:
        """``gpus`` devices in servers of ``per_server`` (one partial server when fewer)."""
        if gpus < 1:
            raise ValueError(f"a cluster needs at least one GPU, got {gpus}")
        if gpus > per_server and gpus % per_server:
            raise ValueError(f"{gpus} GPUs do not fill whole {per_server}-GPU servers; use a multiple of {per_server}")
        nodes, per_node = (1, gpus) if gpus <= per_server else (gpus // per_server, per_server)
        return Cluster(nodes, per_node, self.name, self.memory, self.intra_bw, self.inter_bw)


# max_mfu: A100/A800 -- LLaMA-1 (Touvron et al. 2023, section 2.4) trained 65B at about 380
# tokens/s/GPU on A100-80GB: 6 x 65.2e9 x 380 / 312e12 = 0.48 of peak (PaLM's FLOPs convention).
# H100/H200 -- LLaMA-3 (Dubey et al. 2024, table 4) reports 38-43% bf16 MFU on H100; 0.43 taken.
# half_work: 256 tokens x 4096 hidden per device, an assumption (matrix multiplies of a few hundred
# rows are known to run far below peak); uncalibrated.
# Links: A800 as in the paper (NVLink 400 GB/s, InfiniBand 200 GB/s per server); H100/H200 SXM
# NVLink 900 GB/s both ways (450 each way) and 8 x 400 Gb/s NICs (400 GB/s per server).
PRESETS: dict[str, DeviceSpec] = {
    "A800": DeviceSpec("A800-80G", BF16_PEAK_FLOPS["A800"], 80 * GIB, 2.039e12, 400 * GB, 200 * GB, 0.48, 256 * 4096),
    "H100": DeviceSpec("H100-80G", BF16_PEAK_FLOPS["H100"], 80 * GIB, 3.35e12, 450 * GB, 400 * GB, 0.43, 256 * 4096),
    "H200": DeviceSpec("H200-141G", BF16_PEAK_FLOPS["H200"], 141 * GB, 4.8e12, 450 * GB, 400 * GB, 0.43, 256 * 4096),
}


def device_spec(name: str) -> DeviceSpec:
    """The preset named ``name`` (``"a800"``, ``"H100-80G"``...)."""
    for key, spec in PRESETS.items():
        if key in name.upper():
            return spec
    raise ValueError(f"unknown device {name!r}; choose one of {', '.join(PRESETS)}")
