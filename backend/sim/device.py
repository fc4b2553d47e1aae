"""The devices a simulated cluster is made of: bf16 peak, memory, HBM and link bandwidths, the
fraction of peak a training step reaches and the fixed cost every micro-batch pays.

Peaks, memories and links are vendor data sheets, named beside them. The efficiency curve and the
fixed cost are CALIBRATED (``sim.paper.calibrate``) on the HotSPa authors' own Megatron-LM step times
(``sim.paper.measured.FIT``: public repository ``Sakura-gh/Megatron-LM``, branch ``sync_files``,
``benchmark/logs/gpus8/7b/{4k,8k,16k}_packing_gbs512.log`` and ``4k_padding_gbs512.log``; 8 x
H800) and checked on points not fitted on (``sim.paper.measured.HELD_OUT``: 13B, two servers, padding
at 8K and 16K). Nothing is tuned to the HotSPa paper's speedups. The fitted curve is read as a
fraction of peak and carried to the A800 and H100 presets (an assumption: the same software
stack on a device of another peak). The H200 preset is fitted instead on this project's own
one-GPU runs of the engine on an H200 (``sim.paper.calibrate_h200``, ``sim.paper.measured_h200``): on its
held-out points it is far closer than the carried curve, whose attention efficiency is
Megatron-LM's on an H800 (``python -m benchmarks.paper --json``'s ``calibration_h200`` gives both errors).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, TypedDict

from hotswitch.backend.cluster import GB, GIB, Cluster
from hotswitch.backend.models.flops import BF16_PEAK_FLOPS

if TYPE_CHECKING:
    from typing_extensions import Unpack


class Figures(TypedDict, total=False):
    """The CALIBRATED figures of a ``DeviceSpec`` (``calibrated``'s keywords)."""

    max_mfu: float
    half_work: float
    attention_mfu: float
    layer_overhead_s: float


@dataclass(frozen=True)
class DeviceSpec:
    """One accelerator kind and the servers it usually comes in."""

    name: str
    peak_flops: float  # dense bf16, per device
    memory: int  # bytes per device
    hbm_bw: float  # bytes/s of device memory (bounds the optimizer update)
    intra_bw: float  # bytes/s one device sends to peers on its server (NVLink, each way)
    inter_bw: float  # bytes/s of one server's network, shared by its devices
    max_mfu: float = 0.0  # fraction of peak a large micro-batch reaches (CALIBRATED)
    half_work: float = 0.0  # tokens x hidden / tp per device at which half of ``max_mfu`` is reached
    attention_mfu: float = 0.0  # fraction of peak the fused attention kernels reach (CALIBRATED)
    layer_overhead_s: float = 0.0  # per layer a micro-batch passes, forward and backward (CALIBRATED)
    attention_kernel: str = ""  # whose attention ``attention_mfu`` was measured from
    latency_s: float = 10e-6  # per collective step (NCCL's small-message latency, nccl-tests order)
    reserved: int = 6 * GIB  # CUDA context, NCCL buffers, allocator fragmentation: never usable

    def efficiency(self, tokens: float, dim: int, tp: int) -> float:
        """Fraction of peak for a micro-batch of ``tokens`` whose matrix multiplies each device
        sees as ``tokens x dim / tp``: small multiplies leave the tensor cores idle. A saturating
        curve ``max_mfu * w / (w + half_work)``: its shape is an assumption, its two figures fitted."""
        work = tokens * dim / tp
        return self.max_mfu * work / (work + self.half_work)

    def calibrated(self, **figures: Unpack[Figures]) -> DeviceSpec:
        """This device with the fitted figures (``max_mfu``, ``half_work``, ``attention_mfu``,
        ``layer_overhead_s``)."""
        return replace(self, **figures)

    def cluster(self, gpus: int, per_server: int = 8) -> Cluster:
        """``gpus`` devices in servers of ``per_server`` (one partial server when fewer)."""
        if gpus < 1:
            raise ValueError(f"a cluster needs at least one GPU, got {gpus}")
        if gpus > per_server and gpus % per_server:
            raise ValueError(f"{gpus} GPUs do not fill whole {per_server}-GPU servers; use a multiple of {per_server}")
        nodes, per_node = (1, gpus) if gpus <= per_server else (gpus // per_server, per_server)
        return Cluster(nodes, per_node, self.name, self.memory, self.intra_bw, self.inter_bw)


# Fitted by ``sim.paper.calibrate.fit()`` on ``sim.paper.measured.FIT`` (rerun it after changing the cost
# model; ``tests/backend/sim/paper/test_baselines.py`` checks these figures against the measurements).
CALIBRATION = {"max_mfu": 0.9185, "half_work": 5.662e6, "attention_mfu": 0.2045, "layer_overhead_s": 3.459e-3}
# Fitted by ``sim.paper.calibrate_h200.fit()`` on ``sim.paper.measured_h200.FIT`` (the engine on one H200;
# ``tests/backend/sim/paper/test_calibrate_h200.py`` checks they are what the fit finds).
CALIBRATION_H200 = {"max_mfu": 0.4699, "half_work": 1.982e6, "attention_mfu": 0.4093, "layer_overhead_s": 3.008e-3}

# Links: A800 as in the paper (NVLink 400 GB/s, InfiniBand 200 GB/s per server); H800 SXM has
# H100's compute with NVLink cut to 400 GB/s, its servers' network is not given in the logs:
# the paper's 200 GB/s per server is assumed; H100/H200 SXM NVLink 900 GB/s both ways (450
# each way) and 8 x 400 Gb/s NICs (400 GB/s per server).
_UNCALIBRATED = {
    "A800": DeviceSpec("A800-80G", BF16_PEAK_FLOPS["A800"], 80 * GIB, 2.039e12, 400 * GB, 200 * GB),
    "H800": DeviceSpec("H800-80G", BF16_PEAK_FLOPS["H100"], 80 * GIB, 3.35e12, 400 * GB, 200 * GB),
    "H100": DeviceSpec("H100-80G", BF16_PEAK_FLOPS["H100"], 80 * GIB, 3.35e12, 450 * GB, 400 * GB),
    "H200": DeviceSpec("H200-141G", BF16_PEAK_FLOPS["H200"], int(141 * GB), 4.8e12, 450 * GB, 400 * GB),
}
# The simulator runs no kernels: its attention is as fast as the kernel its calibration timed.
ATTENTION_MEASURED = "flash-attn in Megatron-LM on 8 x H800 (the authors' logs)"
ATTENTION_MEASURED_H200 = "cuDNN through PyTorch's scaled_dot_product_attention (the engine on one H200)"
_FITS = {"H200": (CALIBRATION_H200, ATTENTION_MEASURED_H200)}  # every other preset: the H800 logs' fit


def _fitted(name: str, spec: DeviceSpec) -> DeviceSpec:
    figures, kernel = _FITS.get(name, (CALIBRATION, ATTENTION_MEASURED))
    return replace(spec, attention_kernel=kernel).calibrated(**figures)


PRESETS: dict[str, DeviceSpec] = {k: _fitted(k, v) for k, v in _UNCALIBRATED.items()}


def uncalibrated(name: str) -> DeviceSpec:
    """The preset's data-sheet figures alone (what ``sim.paper.calibrate`` fits from)."""
    return _UNCALIBRATED[device_spec(name).name.split("-")[0]]


def device_spec(name: str) -> DeviceSpec:
    """The preset named ``name`` (``"a800"``, ``"H100-80G"``...)."""
    for key, spec in PRESETS.items():
        if key in name.upper():
            return spec
    raise ValueError(f"unknown device {name!r}; choose one of {', '.join(PRESETS)}")
