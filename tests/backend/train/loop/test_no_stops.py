"""On a GPU a step stops the device once, when the update reads the gradients' norm: compute,
the switches between strategies and the time split queue their work without waiting for the
device (``runtime.devices.DeviceMarks``; the loss stays on the device until the step's end),
so the GPU never idles while the host queues the next phase. Checked with PyTorch's sync debug
mode, which names every synchronising call."""

import pytest
import torch

from hotswitch.backend.runtime.spawn import spawn_ranks

from ..train_workers import stops_before_the_update

GPU = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")


@GPU
@pytest.mark.parametrize(
    "spec, compiled",
    [([("dp1", 0)], False), ([("dp1ckpt", 128), ("dp1", 0)], True)],  # the second: two strategies, switches between
    ids=["one-eager", "switching-compiled"],
)
def test_on_a_gpu_a_step_queues_its_work_until_the_update_reads_the_norm(spec, compiled):
    (stops,) = spawn_ranks(stops_before_the_update, 1, spec, compiled, backend="cpu:gloo,cuda:nccl")
    assert stops == [], stops
