"""What ``--launcher kubeflow`` would create on a cluster, checked offline: the TrainJob against
Kubeflow Trainer v2.3.0's schema (strict: a misspelled field fails), the key only in the Secret,
the body only in the ConfigMap, both mounted where the ranks look, and the rank function the SDK
pastes into the node's shell command arriving there unchanged."""

import base64
import json
import os
import subprocess
import textwrap
from inspect import getsource
from pathlib import Path

import pytest

from hotswitch.kernel.channel.secrets import SECRET_FILE
from hotswitch.kernel.launch.kubeflow import manifest
from hotswitch.kernel.launch.kubeflow.rank import hotswitch_rank
from hotswitch.kernel.launch.launcher import LaunchSpec
from hotswitch.kernel.launch.options import OPTIONS
from tests.kernel.launch.kubeflow.trainjob_schema import trainjob_errors

KEY = b'{"key": "c2VjcmV0LWtleS1ieXRlcw=="}'
RUNTIME = OPTIONS["runtime"].default


def _spec(tmp_path, nodes=2, nproc=3):
    (tmp_path / "body.py").write_text("print('hello')\n")
    (tmp_path / SECRET_FILE).write_bytes(KEY)
    env = {"HOTSWITCH_CHANNEL": "tcp://10.0.0.1:5555", "HOTSWITCH_SECRET_FILE": str(tmp_path / SECRET_FILE)}
    return LaunchSpec(job_dir=tmp_path, body_path=tmp_path / "body.py", nproc=nproc, nodes=nodes, env=env)


def _pod_spec(job: dict) -> dict:
    replicated = job["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    return replicated[0]["template"]["spec"]["template"]["spec"]


def test_kubeflow_trainjob_fits_the_schema_and_carries_no_key(tmp_path):
    resources = {"cpu": "8", "gpu": "4"}
    job = manifest.trainjob("hs-job1-0a1b2c", _spec(tmp_path), "team/hotswitch:0.1", resources, runtime=RUNTIME)
    assert trainjob_errors(job) == []
    assert job["spec"]["runtimeRef"] == {"kind": "ClusterTrainingRuntime", "name": "torch-distributed"}
    trainer = job["spec"]["trainer"]
    assert (trainer["numNodes"], trainer["numProcPerNode"], trainer["image"]) == (2, 3, "team/hotswitch:0.1")
    assert trainer["resourcesPerNode"]["limits"] == {"cpu": "8", "nvidia.com/gpu": "4"}
    env = {e["name"]: e["value"] for e in trainer["env"]}
    assert env["HOTSWITCH_SECRET_FILE"] == f"{manifest.SECRET_MOUNT}/{SECRET_FILE}"  # the pod's path, not ours
    assert env["HOTSWITCH_CHANNEL"] == "tcp://10.0.0.1:5555"
    assert "c2VjcmV0LWtleS1ieXRlcw" not in json.dumps(job)
    pod = _pod_spec(job)
    assert {v["name"]: v.get("configMap", v.get("secret")) for v in pod["volumes"]} == {
        "hotswitch-job": {"name": "hs-job1-0a1b2c"},
        "hotswitch-secret": {"secretName": "hs-job1-0a1b2c", "defaultMode": 0o444},
    }
    mounts = {m["mountPath"] for m in pod["containers"][0]["volumeMounts"]}
    assert mounts == {manifest.JOB_MOUNT, manifest.SECRET_MOUNT} and pod["containers"][0]["name"] == "node"


def test_kubeflow_trainjob_refers_to_the_runtime_given(tmp_path):
    job = manifest.trainjob("hs-job1-0a1b2c", _spec(tmp_path), "team/hotswitch:0.1", runtime="torch-tuned")
    assert trainjob_errors(job) == []
    assert job["spec"]["runtimeRef"] == {"kind": "ClusterTrainingRuntime", "name": "torch-tuned"}


def test_kubeflow_schema_check_fails_a_misspelled_field(tmp_path):
    job = manifest.trainjob("hs-job1-0a1b2c", _spec(tmp_path), "team/hotswitch:0.1", runtime=RUNTIME)
    job["spec"]["trainer"]["numProcsPerNode"] = 3
    _pod_spec(job)["volumes"][0]["configMap"]["nam"] = "x"
    errors = trainjob_errors(job)
    assert len(errors) == 2 and "'numProcsPerNode' was unexpected" in " ".join(errors)


def test_kubeflow_key_goes_in_the_secret_and_the_body_in_the_configmap(tmp_path):
    spec = _spec(tmp_path)
    configmap, secret = manifest.file_objects("hs-x-1", {p.name: p.read_bytes() for p in tmp_path.iterdir()})
    assert base64.b64decode(secret["data"][SECRET_FILE]) == KEY and list(secret["data"]) == [SECRET_FILE]
    assert base64.b64decode(configmap["binaryData"]["body.py"]) == spec.body_path.read_bytes()
    assert SECRET_FILE not in configmap["binaryData"]
    with pytest.raises(ValueError, match=r"a ConfigMap holds at most 1 MB: push less"):
        manifest.file_objects("hs-x-1", {SECRET_FILE: KEY, "pushed.pt": os.urandom(800_000)})


def test_kubeflow_rank_function_reaches_the_pod_unchanged(tmp_path):
    """Run the node container's command with a torchrun that only shows the script it was given."""
    job = manifest.trainjob("hs-job1-0a1b2c", _spec(tmp_path), "team/hotswitch:0.1", runtime=RUNTIME)
    (tmp_path / "bin").mkdir()
    fake = tmp_path / "bin" / "torchrun"
    fake.write_text('#!/bin/sh\ncat "$1"\n')
    fake.chmod(0o755)
    command = job["spec"]["trainer"]["command"]
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"}
    shown = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, check=True).stdout
    expected = textwrap.dedent(getsource(hotswitch_rank)) + "\nhotswitch_rank(**{'body': '/hotswitch/job/body.py'})"
    assert shown.strip() == expected.strip()


def test_kubeflow_names_and_resources(tmp_path):
    assert manifest.job_name("My_Job.7", "abc123") == "hs-my-job-7-abc123"
    assert manifest.parse_resources("cpu=8, memory=32Gi,gpu=4") == {"cpu": "8", "memory": "32Gi", "gpu": "4"}
    assert manifest.parse_resources(None) is None
    with pytest.raises(ValueError, match=r"--resources takes NAME=AMOUNT"):
        manifest.parse_resources("cpu8")


def test_kubeflow_rank_takes_the_key_from_a_private_copy_of_the_mounted_secret(tmp_path, monkeypatch):
    """In a pod the Secret's file is root's and readable by any user there (mode 0444); the
    worker refuses such a file, so the rank hands it a copy only its own user can read."""
    mounted = tmp_path / SECRET_FILE
    mounted.write_bytes(KEY)
    mounted.chmod(0o444)
    seen = {}

    def worker_main(argv):
        path = os.environ["HOTSWITCH_SECRET_FILE"]
        info = os.stat(path)
        seen.update(argv=argv, path=path, mode=info.st_mode & 0o777, uid=info.st_uid, key=Path(path).read_bytes())
        return 0

    monkeypatch.setattr("hotswitch.kernel.worker.entry.main", worker_main)
    monkeypatch.setenv("HOTSWITCH_SECRET_FILE", str(mounted))
    hotswitch_rank(body="/hotswitch/job/body.py")
    assert seen["argv"] == ["/hotswitch/job/body.py"] and seen["path"] != str(mounted)
    assert (seen["mode"], seen["uid"], seen["key"]) == (0o600, os.getuid(), KEY)
    os.unlink(seen["path"])
    private = tmp_path / "private.secret"  # the local backend's key: the kernel's own, owner-only
    private.write_bytes(KEY)
    private.chmod(0o600)
    monkeypatch.setenv("HOTSWITCH_SECRET_FILE", str(private))
    hotswitch_rank({"body": "/job/body.py"})
    assert seen["path"] == str(private)
