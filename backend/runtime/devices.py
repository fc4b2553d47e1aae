"""Which device a rank trains on; importing this module does not import torch (the kernel
reads ``ENV_DEVICE`` while a notebook waits)."""

from __future__ import annotations

import os
import time
from typing import Any

ENV_DEVICE = "HOTSWITCH_DEVICE"  # "cpu" or "cuda", set by ``%%train --device`` and ``hotswitch train --device``
DEVICE_KINDS = ("cpu", "cuda")


def local_device(kind: str | None = None) -> str:
    """This rank's device: "cpu", or "cuda:LOCAL_RANK" (one GPU per local rank) for
    ``kind`` "cuda"; ``kind`` defaults to $HOTSWITCH_DEVICE, else "cpu"."""
    kind = kind or os.environ.get(ENV_DEVICE) or "cpu"
    if kind not in DEVICE_KINDS:
        raise ValueError(f"device must be one of {DEVICE_KINDS}, not {kind!r}")
    if kind == "cpu":
        return "cpu"
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("training on cuda was asked for, but this PyTorch sees no GPU: use cpu, or a CUDA build")
    return f"cuda:{os.environ.get('LOCAL_RANK', '0')}"


def local_gpus_problem(ranks: int) -> str | None:
    """Why ``ranks`` ranks on this machine cannot each train on a GPU of their own (rank i on
    ``cuda:i``), with what to do; None where they can. Checked before launch: past it, the
    ranks beyond the GPUs fail one by one."""
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count >= ranks:
        return None
    if count == 0:
        return "this PyTorch sees no GPU (a CPU build, or none visible): use --device cpu, or a CUDA build of PyTorch"
    return f"{ranks} ranks on this machine need a GPU each and PyTorch sees {count}: give -n {count} or fewer"


def synchronize(device) -> None:
    """Let ``device`` finish its queued work, so that a clock read after it counts that work
    (a GPU runs kernels after the host has queued them; a CPU runs them as they are called)."""
    import torch  # here: importing this module must not import torch

    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def device_clock(device) -> float:
    """``time.perf_counter()`` once ``device`` has finished its queued work: phases timed
    between two readings count their own kernels, not those queued before them."""
    synchronize(device)
    return time.perf_counter()


Mark = Any  # a point in a device's queued work: a CUDA event, or the clock on a CPU
Span = tuple[Mark, Mark]  # the marks before and after some work


class DeviceMarks:
    """Points in ``device``'s queued work, for timing a step's phases without stopping the device
    between them: on a GPU each mark is a CUDA event recorded in the current stream, and reading
    the seconds between two waits for the later one only (``device_clock`` at every phase
    boundary left the GPU idle while the host queued the next phase's first kernels); on a CPU,
    whose kernels run as they are called, a mark is the clock."""

    def __init__(self, device):
        import torch  # here: importing this module must not import torch

        self.device = torch.device(device)
        self.cuda = self.device.type == "cuda"

    def mark(self) -> Mark:
        if not self.cuda:
            return time.perf_counter()
        import torch

        event = torch.cuda.Event(enable_timing=True)
        event.record(torch.cuda.current_stream(self.device))
        return event

    def seconds(self, first: Mark, last: Mark) -> float:
        """Seconds from mark ``first`` to mark ``last``, once the device has reached ``last``."""
        if not self.cuda:
            return last - first
        last.synchronize()
        return first.elapsed_time(last) / 1000.0
