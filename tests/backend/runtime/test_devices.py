"""Which device a rank trains on: from the argument, else $HOTSWITCH_DEVICE, else cpu."""

import pytest
import torch

from hotswitch.backend.runtime.devices import ENV_DEVICE, local_device


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
