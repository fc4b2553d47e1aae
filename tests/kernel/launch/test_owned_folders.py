"""A temp folder names the process that owns it (a kernel's job folder, a pool rank's task
folder, a Ray node's), and making the next one removes those whose owners are gone (ended,
killed, left a zombie), never a live owner's, another host's or pid namespace's, or a folder
without a whole owner file. Real processes, each owning a folder as a kernel would."""

import json
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from hotswitch.kernel.launch import owned_folders
from hotswitch.kernel.notebook.jobs.registry import JOBS_PREFIX, JobRegistry

# A process that makes its job folder as a kernel would, says where, then waits for a line.
MAKES_A_ROOT = textwrap.dedent("""
    import sys
    from hotswitch.kernel.launch.owned_folders import owned_folder
    from hotswitch.kernel.notebook.jobs.registry import JOBS_PREFIX
    print(owned_folder(JOBS_PREFIX), flush=True)
    sys.stdin.readline()
""")


@pytest.fixture
def temp(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def _kernel() -> tuple[subprocess.Popen, Path]:
    """A process holding a job folder; its folder."""
    process = subprocess.Popen(
        [sys.executable, "-c", MAKES_A_ROOT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    return process, Path(process.stdout.readline().strip())


def _end(process: subprocess.Popen, reap: bool = True) -> None:
    """Let ``process`` exit; unless ``reap``, leave it a zombie (exited, never waited for)."""
    assert process.stdin is not None
    process.stdin.close()
    if reap:
        process.wait(timeout=120)
        return
    deadline = time.monotonic() + 120
    while psutil.Process(process.pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "the process never exited"
        time.sleep(0.05)


def test_the_folders_of_ended_and_zombie_kernels_go_live_ones_stay(temp):
    (ended, ended_root), (zombie, zombie_root), (live, live_root) = _kernel(), _kernel(), _kernel()
    try:
        _end(ended)
        _end(zombie, reap=False)
        assert {ended_root, zombie_root, live_root} == set(temp.iterdir())
        registry = JobRegistry()
        mine = registry.new_job_dir("first").parent
        assert set(temp.iterdir()) == {mine, live_root}
        assert json.loads((mine / owned_folders.OWNER).read_text())["pid"] == psutil.Process().pid
        registry.close()
        assert set(temp.iterdir()) == {live_root}
    finally:
        for process in (zombie, live):
            process.kill()
            process.wait(timeout=120)


def test_folders_it_cannot_judge_stay(temp):
    process, root = _kernel()
    _end(process)
    owner = json.loads((root / owned_folders.OWNER).read_text())
    unjudged = {
        "elsewhere": {**owner, "host": owner["host"] + "-other"},
        "another-namespace": {**owner, "namespace": -1},
        "half-written": None,
        "no-owner": "absent",
    }
    for name, text in unjudged.items():
        folder = temp / f"{JOBS_PREFIX}{name}"
        folder.mkdir()
        if text is None:
            (folder / owned_folders.OWNER).write_text(json.dumps(owner)[:20])
        elif text != "absent":
            (folder / owned_folders.OWNER).write_text(json.dumps(text))
    removed = owned_folders.sweep(temp, JOBS_PREFIX)
    assert removed == [root]
    assert sorted(p.name for p in temp.iterdir()) == sorted(f"{JOBS_PREFIX}{name}" for name in unjudged)


def test_a_pid_now_another_process_s_is_gone(temp):
    process, folder = _kernel()
    owner = json.loads((folder / owned_folders.OWNER).read_text())
    try:
        (folder / owned_folders.OWNER).write_text(json.dumps({**owner, "created": owner["created"] - 3600}))
        assert owned_folders.sweep(temp, JOBS_PREFIX) == [folder]
    finally:
        _end(process)


def test_another_kind_of_folder_is_not_swept(temp):
    process, jobs = _kernel()
    _end(process)
    task = owned_folders.owned_folder("hotswitch-pool-task-")
    assert set(temp.iterdir()) == {jobs, task}  # the dead kernel's job folder is another kind's
    assert owned_folders.sweep(temp, JOBS_PREFIX) == [jobs]


class Killed(BaseException):
    """The process ends here, as under SIGKILL: nothing after it runs."""


def test_a_removal_cut_short_leaves_the_owner_named_and_the_folder_swept(temp, monkeypatch):
    """A kernel killed while removing its job folder (it outlasted its shutdown's wait) left a
    folder without its owner file, which no sweep would judge: the owner file now goes last."""
    folder = owned_folders.owned_folder(JOBS_PREFIX)
    for name in ("a-job", "z-job", ".hidden-job"):  # before and after the owner file, in any order
        (folder / name).mkdir()
        (folder / name / "channel.secret").write_text("secret")
    real, removed = shutil.rmtree, []

    def killed_after_the_first(path, *args, **kwargs):
        if removed:
            raise Killed
        real(path, *args, **kwargs)
        removed.append(path)

    monkeypatch.setattr(shutil, "rmtree", killed_after_the_first)
    with pytest.raises(Killed):
        owned_folders.remove_owned(folder)
    monkeypatch.setattr(shutil, "rmtree", real)
    assert len(removed) == 1 and removed[0].parent == folder and (folder / owned_folders.OWNER).exists()
    process, its_root = _kernel()  # the owner, as if it were the killed kernel
    _end(process)
    (folder / owned_folders.OWNER).write_text((its_root / owned_folders.OWNER).read_text())
    assert sorted(owned_folders.sweep(temp, JOBS_PREFIX)) == sorted([folder, its_root])
    assert not folder.exists()
