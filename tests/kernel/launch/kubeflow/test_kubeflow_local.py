"""``--launcher kubeflow --kubeflow-backend local``: real jobs through the Kubeflow SDK's local
backend (a fresh virtual environment per job pointed at the kernel's torch, its torchrun, the ranks
running ``hotswitch_rank``). Headless training through it equals local torchrun's to the bit; in
a notebook, a failing rank fails the job with its traceback, the other rank is torn down, and
neither a process nor the job's virtual environment is left."""

import pytest

from tests.kernel.kernel_session import (
    CAP_S,
    hotswitch_json,
    hotswitch_kernel,
    wait_none_mentioning,
)

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_cluster_at_a_time")]  # tests/conftest.py

AGENT = "hotswitch.kernel.launch.kubeflow.local_agent"
FAILING = """
import os
import time
import torch
job.emit({"type": "step", "step": 0, "loss": float(job.rank)})
print(f"rank {job.rank} of {job.world_size} runs torch from {os.path.realpath(torch.__file__)}")
if job.rank == 1:
    time.sleep(1.0)
    raise RuntimeError("rank 1 gives up")
while True:
    time.sleep(0.1)
"""
TRAIN = ["train", "-n", "2", "--plan", "dp2", "--steps", "3", "--batch-size", "4", "--max-len", "64"]


def _nothing_left(what: str) -> None:
    wait_none_mentioning(AGENT, what)


def test_kubeflow_local_training_equals_local_torchrun(tmp_path):
    through_sdk = hotswitch_json([*TRAIN, "--launcher", "kubeflow", "--kubeflow-backend", "local"], tmp_path, CAP_S)
    local = hotswitch_json(TRAIN, tmp_path, CAP_S)
    assert through_sdk["status"] == local["status"] == "succeeded"
    assert (through_sdk["first_loss"], through_sdk["last_loss"]) == (local["first_loss"], local["last_loss"])
    _nothing_left("the SDK's job ending")


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    session = hotswitch_kernel(tmp_path_factory)
    yield session
    session.shutdown()


def test_kubeflow_local_failing_rank_fails_the_job_and_ends_the_other(kernel):
    cell = f"%%train --launcher kubeflow --kubeflow-backend local -n 2 --wait --name kfail\n{FAILING}"
    msg_id, reply = kernel.execute(cell, timeout=CAP_S)
    assert reply["status"] == "ok", kernel.text(msg_id)
    text = kernel.text(msg_id)
    assert kernel.value("jobs['kfail'].status") == "failed", text
    assert "RuntimeError: rank 1 gives up" in text and "[stdout:0] rank 0 of 2 runs" in text
    kernel_torch = kernel.value("__import__('os').path.realpath(__import__('torch').__file__)")
    assert f"rank 0 of 2 runs torch from {kernel_torch}" in text, "the job's environment imports the kernel's torch"
    assert "rank 1" in kernel.value("jobs['kfail'].exit_reason")
    assert kernel.value("jobs['kfail'].handle").startswith("kubeflow-local:")
    assert "rank 0 of 2 runs" in kernel.value("jobs['kfail'].launcher.logs(jobs['kfail'].handle, 0)")
    assert kernel.value("(jobs['kfail'].spec.job_dir / 'kubeflow-venv').exists()") is False
    _nothing_left("rank 0 and the SDK's torchrun ending after rank 1 failed")
