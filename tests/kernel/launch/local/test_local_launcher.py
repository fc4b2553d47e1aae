"""The launcher interface on local torchrun: a job is a string handle; ``status`` follows it to
its exit status, ``logs`` gives each rank's own output and traceback and torchrun's report,
``cancel`` ends every process; handles and ranks it does not know are refused by name."""

import json
import signal

import pytest

from hotswitch.kernel.launch.launcher import LaunchSpec
from hotswitch.kernel.launch.local.forked_ranks import RANK_PROCESS_NAME
from hotswitch.kernel.launch.local.torchrun import TorchrunLauncher
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


def test_torchrun_keeps_its_run_folders_in_the_job_folder(tmp_path):
    """torchrun's default is a fresh ``torchelastic_*`` folder in the temp directory per run,
    never removed; a job's go into its folder, removed with it."""
    temp = tmp_path / "temp"
    temp.mkdir()
    (tmp_path / "body.py").write_text("print(f'rank {job.rank} ran')\n")
    spec = LaunchSpec(tmp_path, tmp_path / "body.py", nproc=2, env={"TMPDIR": str(temp)})
    job = Job("quick", spec, TorchrunLauncher(), ConsoleOutput(all_to_stderr=True))
    assert job.wait(CAP_S) == "succeeded"
    assert list(temp.glob("torchelastic_*")) == []
    assert len(list((tmp_path / "torchrun").iterdir())) == 1  # this run's


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


# What a rank sees of itself. It is forked from the agent (kernel/launch/local/forked_ranks.py), and must
# be what `python -u -m hotswitch.kernel.worker BODY` would be: torchrun's environment for its rank,
# its own session, the worker's argv, default signal handlers, one thread per rank as torchrun sets.
FACTS = """
import json, os, signal, sys
import psutil
me = psutil.Process()
facts = {
    "name": me.name(), "agent": " ".join(me.parent().cmdline()), "own_session": os.getsid(0) == os.getpid(),
    "rank": os.environ["RANK"], "local_rank": os.environ["LOCAL_RANK"], "world": os.environ["WORLD_SIZE"],
    "argv": sys.argv[1:], "threads": torch.get_num_threads(),
    "sigterm": signal.getsignal(signal.SIGTERM) == signal.SIG_DFL,
    "sigint": signal.getsignal(signal.SIGINT) is signal.default_int_handler,
}
with open(f"{os.path.dirname(sys.argv[1])}/facts-{job.rank}.json", "w") as out:
    json.dump(facts, out)
sys.exit(3 if job.rank == 1 else 0)
"""


def test_a_forked_rank_is_what_a_rank_started_afresh_would_be(tmp_path):
    job, launcher = _job(tmp_path, FACTS, "facts")
    wait_progressing(lambda: launcher.status(job.handle) is not None, lambda: _progress(tmp_path), "the job ending")
    assert job.wait(CAP_S) == "failed"
    assert "exitcode  : 3" in launcher.logs(job.handle)  # torchrun's report: rank 1's sys.exit(3)
    for rank in (0, 1):
        facts = json.loads((tmp_path / f"facts-{rank}.json").read_text())
        assert facts["name"] == RANK_PROCESS_NAME and "hotswitch.kernel.launch.local.loopback_agent" in facts["agent"]
        assert facts["own_session"] and facts["sigterm"] and facts["sigint"]
        assert (facts["rank"], facts["local_rank"], facts["world"]) == (str(rank), str(rank), "2")
        assert facts["argv"] == [str(tmp_path / "body.py")] and facts["threads"] == 1


def test_a_rendezvous_port_held_from_its_choice_is_the_one_the_job_meets_on(tmp_path):
    """The first node of a Ray or Slurm job holds its rendezvous port from the moment it tells the
    others, and its torchrun listens on that very socket: held here all along (so that no other
    process could have bound it), the job meets on it."""
    import socket

    from hotswitch.kernel.launch.local.reserved_port import handed_over, reserve

    held = reserve("127.0.0.1")
    port = held.getsockname()[1]
    with pytest.raises(OSError), socket.socket() as other:
        other.bind(("127.0.0.1", port))  # what a busy machine's other processes cannot do now
    (tmp_path / "body.py").write_text(MEETS)
    spec = LaunchSpec(tmp_path, tmp_path / "body.py", nproc=2, rdzv_endpoint=f"127.0.0.1:{port}", env=handed_over(held))
    job = Job("held", spec, TorchrunLauncher(), ConsoleOutput(all_to_stderr=True))
    try:
        assert job.wait(CAP_S) == "succeeded", job.launcher.logs(job.handle)
    finally:
        held.close()
    assert "rank 1 met rank 0" in job.launcher.logs(job.handle, 1)


MEETS = """
torch.distributed.init_process_group("gloo")
seen = torch.tensor([job.rank])
torch.distributed.broadcast(seen, 0)
print(f"rank {job.rank} met rank {seen.item()}")
"""
