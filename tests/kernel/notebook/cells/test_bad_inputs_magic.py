"""The notebook's bad-input catalogue, in ONE real kernel: every ``%%train`` cell that can be
checked before launch fails (the execute reply is an error, so Run All stops) with a message
naming the problem and the fix, and starts nothing; bad calls on a live job and on an ended
one fail the same way; afterwards the kernel still runs cells and no process is left."""

import re
import subprocess

import pytest

from tests.kernel.kernel_session import hotswitch_kernel, processes_mentioning, wait_until

pytestmark = pytest.mark.slow

# (the %%train line's options, the body, fragments of the cell's error)
PRE_LAUNCH = [
    ("", "", ["the cell body is empty"]),  # IPython refuses it before %%train runs
    ("-n 2", "# only a comment\n", ["has no body", "write the code every rank runs"]),
    ("-n 2", "   \n\n", ["has no body"]),
    ("", "def broken(:\n    pass\n", ["SyntaxError"]),
    ("", "x = (1,\n", ["SyntaxError"]),
    ("-n 0", "pass", ["--nproc must be at least 1, got 0"]),
    ("-n -2", "pass", ["--nproc must be at least 1, got -2"]),
    ("-n two", "pass", ["invalid int value: 'two'"]),
    ("--nodes 0", "pass", ["--nodes must be at least 1, got 0"]),
    ("--nodes 2", "pass", ["--nodes 2 with --launcher local needs --rdzv-endpoint HOST:PORT"]),
    ("--nodes 2 --node-rank 2 --rdzv-endpoint 127.0.0.1:29555", "pass", ["--node-rank must be in 0..1"]),
    ("--rdzv-endpoint nohost", "pass", ["--rdzv-endpoint takes HOST:PORT", "'nohost'"]),
    ("--rdzv-endpoint 127.0.0.1:99999", "pass", ["--rdzv-endpoint takes HOST:PORT", "99999"]),
    ("--device tpu", "pass", ["invalid choice: 'tpu'"]),
    ("--device cuda -n 64", "pass", ["--device cuda: ", "GPU"]),
    ("--launcher ray", "pass", ["--launcher ray needs the cluster's head: --ray-address HOST:PORT"]),
    (
        "--partition gpu",
        "pass",
        ["--partition: for --launcher slurm", "give --launcher slurm, or leave --partition out"],
    ),
    ("--launcher ray --ray-address 127.0.0.1:1 --namespace t", "pass", ["--namespace: for --launcher kubeflow"]),
    ("--launcher k8s", "pass", ["--launcher 'k8s' is not available", "choose one of local, ray, slurm"]),
    ("--channel-host 8.8.8.8", "pass", ["--channel-host 8.8.8.8: cannot listen there", "give an address of this"]),
    ("--name a/b", "pass", ["--name 'a/b' is not a valid job name", "letters, digits"]),
    ("--name .hidden", "pass", ["--name '.hidden' is not a valid job name"]),
    ("--name a:b", "pass", ["--name 'a:b' is not a valid job name"]),
    ("--env FOO", "pass", ["--env takes KEY=VALUE", "'FOO'"]),
    ("--env =1", "pass", ["--env takes KEY=VALUE", "'=1'"]),
    ("--env 1BAD=x", "pass", ["--env takes KEY=VALUE with KEY a variable name"]),
    ("--env HOTSWITCH_KEY=00", "pass", ["--env HOTSWITCH_KEY is refused", "set by hotswitch itself"]),
    ("--env HOTSWITCH_CHANNEL=tcp://1.2.3.4:1", "pass", ["--env HOTSWITCH_CHANNEL is refused"]),
    ("--env hotswitch_device=cuda", "pass", ["--env hotswitch_device is refused", "--device"]),
    ("--env HOTSWITCH_NOTEBOOK_DIR=/tmp", "pass", ["--env HOTSWITCH_NOTEBOOK_DIR is refused"]),
    ("--env HOTSWITCH_MAX_MESSAGE_BYTES=1", "pass", ["is refused", "--max-message-bytes"]),
    ("--timeout 0", "pass", ["--timeout 0 is not a duration", "above 0"]),
    ("--timeout -5", "pass", ["--timeout -5 is not a duration"]),
    ("--timeout soon", "pass", ["invalid float value: 'soon'"]),
    ("--max-message-bytes 10", "pass", ["--max-message-bytes 10 is too small", "at least 1024"]),
    ("--max-message-bytes 0", "pass", ["--max-message-bytes 0 is too small"]),
    ("--no-such-option", "pass", ["unrecognized arguments: --no-such-option"]),
    ("--push undefined_name", "pass", ["--push: 'undefined_name' not defined in the notebook", "run its cell first"]),
    ("--push job", "pass", ["--push: 'job' is bound in the body already", "rename it"]),
    ("--push 1x", "pass", ["--push: '1x' is not a variable name"]),
    ("--push ,", "pass", ["--push takes variable names separated by commas"]),
    ("--push a_generator", "pass", ["--push: 'a_generator' (generator) cannot be sent to the ranks", "plain data"]),
    ("--run-dir /dev/null/runs", "pass", ["--run-dir /dev/null/runs: not a folder run folders can be made in"]),
    ("--run-dir a-file", "pass", ["--run-dir a-file: not a folder run folders can be made in"]),
    (
        "--channel-host 0.0.0.0 --env HOTSWITCH_KEY=00",
        "pass",
        ["--channel-host 0.0.0.0 listens beyond this machine", "--env HOTSWITCH_KEY is refused"],
    ),
]

LIVE_BODY = r"""
import os, sys, time
from hotswitch.backend.train.run.recipe import notebook_dir
job.emit({"type": "where", "notebook_dir": str(notebook_dir()), "cwd": os.getcwd()})
sys.stdout.buffer.write("bytes through the buffer: \u00e9\n".encode())
sys.stdout.flush()
deadline = time.time() + 300
while job.rank == 0 and time.time() < deadline:
    for control in job.control():
        job.emit({"type": "echo", "control": control})
    time.sleep(0.05)
time.sleep(300)
"""

# (code run while the job "live" (2 ranks) runs, fragments of the cell's error)
ON_LIVE_JOB = [
    ("jobs[99]", ["jobs[99]: there are", "give a position in"]),
    ("jobs['nope']", ["no job named 'nope'", "the jobs are"]),
    ("jobs[1.5]", ["index jobs by position (jobs[-1]) or name"]),
    ("live.logs(99)", ["rank 99 is not one of this job's ranks; give 0..1"]),
    ("live.logs(-1)", ["rank -1 is not one of this job's ranks"]),
    ("live.logs('0')", ["rank '0' is not one of this job's ranks"]),
    ("live.checkpoint('existing')", ["already exists; choose a new one"]),
    ("live.checkpoint('a-file/ck')", ["a-file is not a folder", "choose a path under a folder"]),
    ("live.checkpoint('/proc/1/ck')", ["/proc/1 is not writable", "choose a folder you can write"]),
    ("live.checkpoint(5)", ["checkpoint takes a folder path (a string), got 5"]),
    ("live.checkpoint('  ')", ["checkpoint takes a folder path"]),
    ("live.switch('dp3x')", ["cannot switch to 'dp3x'", "cannot parse strategy"]),
    ("live.switch('tp8')", ["uses 8 ranks but the job has 2", "dp x tp x pp is 2"]),
    ("live.switch(42)", ["switch takes", "got 42"]),
    ("%train_stop", ["%train_stop takes a job name"]),
    ("%train_stop nope", ["no job named 'nope'"]),
    ("%%train --name live\npass", ["a job named 'live' is running; %train_stop live first, or pick another --name"]),
]

ON_ENDED_JOB = [
    ("live.pause()", ["job 'live' has already ended (stopped)", "start a new one with %%train"]),
    ("live.switch('dp2')", ["has already ended"]),
    ("live.checkpoint('fresh')", ["has already ended"]),
]


@pytest.fixture(scope="module")
def notebook_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("notebook")
    (folder / "existing").mkdir()
    (folder / "a-file").write_text("a file, not a folder")
    return folder


@pytest.fixture(scope="module")
def kernel(tmp_path_factory, notebook_dir):
    session = hotswitch_kernel(tmp_path_factory)
    _, reply = session.execute(f"import os; os.chdir({str(notebook_dir)!r}); a_generator = (i for i in range(3))")
    assert reply["status"] == "ok"
    yield session
    session.shutdown()


def _fails(kernel, code: str, fragments: list[str]) -> str:
    msg_id, reply = kernel.execute(code, timeout=120)
    text = kernel.text(msg_id)
    assert reply["status"] == "error", text
    for fragment in fragments:
        assert fragment in text, text
    return text


def _case_id(case) -> str:
    return (case[0] or "<no options>")[:40] + ("" if case[1].strip() else " <empty body>")


@pytest.mark.parametrize(("options", "body", "fragments"), PRE_LAUNCH, ids=[_case_id(c) for c in PRE_LAUNCH])
def test_a_bad_cell_fails_before_launch_and_starts_nothing(kernel, options, body, fragments):
    _fails(kernel, f"%%train {options}\n{body}", fragments)
    assert kernel.value("len(jobs)") == 0
    assert kernel.descendants() == []


@pytest.fixture(scope="module")
def live(kernel):
    msg_id, reply = kernel.execute(f"%%train -n 2 --name live\n{LIVE_BODY}")
    assert reply["status"] == "ok", kernel.text(msg_id)
    kernel.execute("live = jobs['live']")
    assert wait_until(lambda: kernel.value("live.status") == "running", timeout=180, every=0.5)
    assert wait_until(lambda: "bytes through the buffer" in kernel.value("live.logs(0)"), timeout=60, every=0.5)
    return msg_id


def _listening(pids: set[int]) -> list[str]:
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if {int(p) for p in re.findall(r"pid=(\d+)", line)} & pids]


def test_a_live_job_listens_on_loopback_only_and_takes_bytes_on_stdout(kernel, live):
    pids = {p.pid for p in kernel.descendants()}
    lines = _listening(pids)
    assert lines, "the job's stores and ranks listen somewhere"
    for line in lines:
        local = line.split()[3]
        assert local.startswith(("127.0.0.1:", "[::1]:")), line
    assert "[stdout:0] bytes through the buffer: \u00e9" in kernel.value("live.logs(0)")


def test_the_ranks_know_the_notebook_folder(kernel, live, notebook_dir):
    where = kernel.value("live.events_of('where')[0]")
    assert where["notebook_dir"] == str(notebook_dir)
    assert where["cwd"] != str(notebook_dir)  # the ranks run in the job folder; paths resolve anyway


@pytest.mark.parametrize(("code", "fragments"), ON_LIVE_JOB, ids=[c[0] for c in ON_LIVE_JOB])
def test_a_bad_call_on_a_live_job_fails_in_the_cell(kernel, live, code, fragments):
    _fails(kernel, code, fragments)
    assert kernel.value("live.status") == "running"


def test_a_relative_checkpoint_path_resolves_against_the_notebook_folder(kernel, live, notebook_dir):
    mark = kernel.value("len(live.events)")
    kernel.execute("live.checkpoint('runs/ckpt')")
    assert wait_until(lambda: kernel.value(f"live.events_of('echo', {mark})"), timeout=60, every=0.5)
    echo = kernel.value(f"live.events_of('echo', {mark})[0]['control']")
    assert echo == {"type": "control", "command": "checkpoint", "path": str(notebook_dir / "runs" / "ckpt")}


def test_a_stopped_job_refuses_control(kernel, live):
    kernel.execute("live.stop()", timeout=60)
    assert kernel.value("live.status") == "stopped"
    for code, fragments in ON_ENDED_JOB:
        _fails(kernel, code, fragments)


def test_a_body_that_calls_sys_exit_reports_its_own_status(kernel):
    msg_id, reply = kernel.execute("%%train -n 2 --wait --name exits\nimport sys\nsys.exit(3)\n", timeout=300)
    assert reply["status"] == "ok", kernel.text(msg_id)
    assert kernel.value("jobs['exits'].status") == "failed"
    reason = kernel.value("jobs['exits'].exit_reason")
    assert "sys.exit(3)" in reason and "exit status 3" in reason, reason
    assert "SIGTERM" not in reason


def test_a_cell_run_again_replaces_its_ended_job(kernel):
    msg_id, reply = kernel.execute("%%train -n 1 --wait --name exits\nprint('again')\n", timeout=300)
    assert reply["status"] == "ok", kernel.text(msg_id)
    assert kernel.value("[job.status for job in jobs if job.name == 'exits']") == ["succeeded"]


def test_a_refused_detached_cell_keeps_no_run_folder(kernel, notebook_dir):
    runs = notebook_dir / "detached-runs"
    _fails(kernel, f"%%train --detach --nodes 2 --run-dir {runs}\npass", ["--nodes 2 with --launcher local"])
    assert runs.is_dir() and list(runs.iterdir()) == []


def test_the_kernel_still_runs_cells_and_no_process_is_left(kernel):
    assert kernel.value("1 + 1") == 2
    assert wait_until(lambda: kernel.descendants() == [], timeout=60)
    jobs_root = kernel.value("str(jobs['live'].job_dir.parent)")
    assert wait_until(lambda: processes_mentioning(jobs_root) == [], timeout=60)
