"""The launcher interface on local torchrun: a job is a string handle; ``status`` follows it to
its exit status, ``logs`` gives each rank's own output and traceback and torchrun's report,
``cancel`` ends every process; handles and ranks it does not know are refused by name."""

import signal

import pytest

from hotswitch.kernel.launch.launcher import LaunchSpec
from hotswitch.kernel.launch.torchrun import TorchrunLauncher
from hotswitch.kernel.notebook.cells.cell_output import ConsoleOutput
from hotswitch.kernel.notebook.jobs.job import Job
from tests.kernel.kernel_session import CAP_S, cpu_seconds, processes_mentioning, wait_progressing

pytestmark = pytest.mark.slow

# Rank 1 fails only once both ranks have printed (the barrier): torchrun tears rank 0 down when
# rank 1 fails, and on a loaded machine rank 0 may not have reached its body by then; the job
# never promised lines a rank had no time to write.
FAILING = """
import sys
print(f"hello from rank {job.rank}")
print(f"a warning from rank {job.rank}", file=sys.stderr)
torch.distributed.init_process_group("gloo")
torch.distributed.barrier()
if job.rank == 1:
    raise RuntimeError("rank 1 gives up")
"""
KILLED = """
import os, signal
print(f"last words from rank {job.rank}")
if job.rank == 1:
    os.kill(os.getpid(), signal.SIGKILL)
"""
FOREVER = """
import time
print("training", flush=True)
while True:
    time.sleep(0.1)
"""


def _job(tmp_path, body: str, name: str) -> tuple[Job, TorchrunLauncher]:
    (tmp_path / "body.py").write_text(body)
    launcher = TorchrunLauncher()
    spec = LaunchSpec(tmp_path, tmp_path / "body.py", nproc=2, log_dir=tmp_path / "run" / "logs")
    return Job(name, spec, launcher, ConsoleOutput(all_to_stderr=True)), launcher


def _progress(tmp_path):
    left = processes_mentioning(str(tmp_path))
    return len(left), cpu_seconds(left)


def test_status_and_logs_follow_a_failing_job_by_its_handle(tmp_path):
    job, launcher = _job(tmp_path, FAILING, "failing")
    assert isinstance(job.handle, str) and str(tmp_path) in job.handle
    wait_progressing(lambda: launcher.status(job.handle) is not None, lambda: _progress(tmp_path), "the job ending")
    assert launcher.status(job.handle) != 0
    zero, one = launcher.logs(job.handle, 0), launcher.logs(job.handle, 1)
    assert "hello from rank 0" in zero and "a warning from rank 0" in zero and "rank 1" not in zero
    assert "hello from rank 1" in one and "RuntimeError: rank 1 gives up" in one and "Traceback" in one
    assert (tmp_path / "run" / "logs" / "rank-1.log").stat().st_mode & 0o077 == 0  # the owner's only
    assert "torch/distributed/run.py" in launcher.logs(job.handle)  # torchrun's own report (here: torn down)
    assert job.wait(CAP_S) == "failed"
    with pytest.raises(ValueError, match=r"rank 2 does not run on this node \(ranks 0-1\)"):
        launcher.logs(job.handle, 2)
    with pytest.raises(ValueError, match="no local launch 'local:0:/nowhere' was submitted"):
        launcher.status("local:0:/nowhere")


def test_a_killed_rank_keeps_the_lines_it_printed(tmp_path):
    """Each line is written through as it is printed, to the rank's log and to the agent's output,
    so a rank that dies at once (SIGKILL, nothing flushed) still leaves its last line behind."""
    job, launcher = _job(tmp_path, KILLED, "killed")
    wait_progressing(lambda: launcher.status(job.handle) is not None, lambda: _progress(tmp_path), "the job ending")
    assert job.wait(CAP_S) == "failed"
    assert "last words from rank 1" in launcher.logs(job.handle, 1)
    assert "last words from rank 1" in launcher.logs(job.handle)  # torchrun's agent log: the rank's own stdout


@pytest.mark.parametrize("force", [False, True], ids=["terminate", "kill"])
def test_cancel_ends_every_process_of_the_launch(tmp_path, force):
    job, launcher = _job(tmp_path, FOREVER, "forever")
    try:
        wait_progressing(lambda: "training" in launcher.logs(job.handle, 1), lambda: _progress(tmp_path), "rank 1")
        assert len(launcher.processes(job.handle)) == 3  # the agent and two ranks
        launcher.cancel(job.handle, force=force)
        wait_progressing(lambda: launcher.status(job.handle) is not None, lambda: _progress(tmp_path), "the end")
        assert launcher.processes(job.handle) == [] and processes_mentioning(str(tmp_path)) == []
        if force:
            assert launcher.status(job.handle) == -signal.SIGKILL
    finally:
        job.stop(grace=1.0)
