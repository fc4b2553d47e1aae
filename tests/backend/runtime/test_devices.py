"""Which device a rank trains on: from the argument, else $HOTSWITCH_DEVICE, else cpu; marks
that time a step's phases without stopping the device."""

import time

import pytest
import torch

from hotswitch.backend.runtime.devices import ENV_DEVICE, DeviceMarks, local_device

GPU = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")


def test_cpu_unless_asked_otherwise(monkeypatch):
    monkeypatch.delenv(ENV_DEVICE, raising=False)
    assert local_device() == "cpu"
    monkeypatch.setenv(ENV_DEVICE, "cpu")
    assert local_device() == "cpu"


def test_an_unknown_device_is_refused_by_name():
    with pytest.raises(ValueError, match="'tpu'"):
        local_device("tpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without a GPU")
def test_cuda_without_a_gpu_says_so(monkeypatch):
    monkeypatch.setenv(ENV_DEVICE, "cuda")
    with pytest.raises(RuntimeError, match="sees no GPU"):
        local_device()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_cuda_ranks_take_the_gpu_of_their_local_rank(monkeypatch):
    monkeypatch.setenv("LOCAL_RANK", "0")
    assert local_device("cuda") == "cuda:0"


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=GPU)])
def test_marks_time_the_work_between_them(device):
    """On the CPU a mark is the clock; on a GPU a CUDA event, taken without waiting for the
    device (the work queued before it is still running) and read once the device reached it."""
    marks = DeviceMarks(device)
    first = marks.mark()
    if device == "cpu":
        time.sleep(0.05)
    else:
        torch.cuda._sleep(200_000_000)  # some 0.1 s of one GPU thread spinning
    last = marks.mark()
    if device == "cuda":
        assert not last.query(), "taking a mark waited for the device"
    assert marks.seconds(first, last) >= (0.04 if device == "cpu" else 0.01)
    assert marks.seconds(last, marks.mark()) >= 0.0
