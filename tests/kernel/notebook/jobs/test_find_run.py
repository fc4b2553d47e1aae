"""``%train_attach NAME`` finds the newest run of the job named exactly NAME."""

import json
import os

import pytest

from hotswitch.kernel.notebook.jobs.attach import find_run


def _run(root, folder, name, started_at):
    (root / folder).mkdir()
    (root / folder / "job.json").write_text(json.dumps({"name": name, "started_at": started_at}))
    return root / folder


def test_a_name_is_not_the_prefix_of_another_jobs_name(tmp_path):
    run = _run(tmp_path, "run-20261129-145700", "run", 100.0)
    _run(tmp_path, "run-2-20261129-145712", "run-2", 112.0)  # newer, another job
    _run(tmp_path, "run-lr3e-4-20261129-145720-1", "run-lr3e-4", 120.0)
    assert find_run("run", tmp_path) == run
    assert find_run("run-2", tmp_path).name == "run-2-20261129-145712"
    assert find_run("run-lr3e-4", tmp_path).name == "run-lr3e-4-20261129-145720-1"


def test_the_newest_run_is_the_last_started_not_the_last_ended(tmp_path):
    older = _run(tmp_path, "sft-20261129-100000", "sft", 100.0)
    newer = _run(tmp_path, "sft-20261129-110000", "sft", 200.0)
    os.utime(newer / "job.json", (1, 1))  # job.json is rewritten when a run ends
    os.utime(older / "job.json", (10**10, 10**10))
    assert find_run("sft", tmp_path) == newer


def test_a_name_with_no_run_is_refused_naming_where_it_looked(tmp_path):
    _run(tmp_path, "run-2-20261129-145712", "run-2", 112.0)
    with pytest.raises(ValueError, match="no run of a job named 'run'"):
        find_run("run", tmp_path)
