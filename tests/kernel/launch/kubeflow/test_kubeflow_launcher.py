"""``--launcher kubeflow`` against a stand-in Kubernetes API server on loopback (``kube_stub``):
the real client library makes the real REST calls; the stub plays the cluster. Submitting
creates the ConfigMap, the Secret and a schema-valid TrainJob on the runtime given that owns both;
a refused TrainJob leaves nothing behind; a finished, failed, stuck or cancelled job is deleted
with its logs kept; bad input (no namespace, no image, no cluster, a namespace or runtime that
does not exist, a channel the pods cannot reach, the SDK missing) is refused before anything is
created."""

import sys

import pytest

from hotswitch.kernel.channel.secrets import SECRET_FILE
from hotswitch.kernel.launch.kubeflow.launcher import KubeflowLauncher
from hotswitch.kernel.launch.launcher import LaunchGone, LaunchSpec
from hotswitch.kernel.launch.named import make_launcher
from tests.kernel.launch.kubeflow.kube_stub import KubeStub
from tests.kernel.launch.kubeflow.trainjob_schema import trainjob_errors

IMAGE = "team/hotswitch:0.1"


@pytest.fixture
def stub(tmp_path, monkeypatch):
    server = KubeStub(namespaces=("team",))
    monkeypatch.setenv("KUBECONFIG", str(server.kubeconfig(tmp_path)))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    yield server
    server.close()


def _spec(tmp_path, channel="tcp://10.1.2.3:5555"):
    job_dir = tmp_path / "job1"
    job_dir.mkdir()
    (job_dir / "body.py").write_text("print('hi')\n")
    (job_dir / SECRET_FILE).write_text('{"key": "k"}')
    env = {"HOTSWITCH_CHANNEL": channel}
    return LaunchSpec(job_dir=job_dir, body_path=job_dir / "body.py", nproc=2, nodes=2, env=env)


def _stuck_pod(name: str, reason: str) -> dict:
    waiting = {"reason": reason, "message": "Back-off pulling image"}
    status = {
        "containerStatuses": [
            {
                "name": "node",
                "ready": False,
                "restartCount": 0,
                "image": IMAGE,
                "imageID": "",
                "state": {"waiting": waiting},
            }
        ]
    }
    labels = {"jobset.sigs.k8s.io/jobset-name": name, "jobset.sigs.k8s.io/job-index": "0"}
    return {"metadata": {"name": f"{name}-node-0-0", "labels": labels}, "status": status}


def test_kubeflow_submit_creates_configmap_secret_and_an_owning_trainjob(stub, tmp_path):
    launcher = KubeflowLauncher("team", IMAGE, "cpu=4,memory=8Gi")
    handle = launcher.submit(_spec(tmp_path))
    name = handle.removeprefix("kubeflow:team/")
    (trainjob,) = stub.made("POST", "trainjobs")
    assert trainjob_errors(trainjob) == [] and trainjob["metadata"]["name"] == name
    assert trainjob["spec"]["trainer"]["resourcesPerNode"]["limits"] == {"cpu": "4", "memory": "8Gi"}
    (configmap,) = stub.made("POST", "configmaps")
    (secret,) = stub.made("POST", "secrets")
    assert "body.py" in configmap["binaryData"] and list(secret["data"]) == [SECRET_FILE]
    uid = stub.objects[("trainjobs", name)]["metadata"]["uid"]
    for kind in ("configmaps", "secrets"):
        (owner,) = stub.objects[(kind, name)]["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"], owner["uid"]) == ("TrainJob", name, uid)
    assert launcher.status(handle) is None  # no condition yet: running
    stub.objects[("trainjobs", name)]["status"] = {"conditions": [{"type": "Complete", "status": "True"}]}
    assert launcher.status(handle) == 0
    assert ("trainjobs", name) not in stub.objects  # deleted once over, with what it owns
    assert trainjob["spec"]["runtimeRef"]["name"] == "torch-distributed"  # the option's default
    settings = {"namespace": "team", "image": IMAGE, "resources": "cpu=4,memory=8Gi", "runtime": "torch-distributed"}
    assert launcher.settings() == settings


def test_kubeflow_trainjob_runs_on_the_runtime_given(stub, tmp_path):
    stub.objects[("clustertrainingruntimes", "torch-tuned")] = {"metadata": {"name": "torch-tuned"}}
    launcher = make_launcher("kubeflow", namespace="team", image=IMAGE, runtime="torch-tuned")
    launcher.submit(_spec(tmp_path))
    (trainjob,) = stub.made("POST", "trainjobs")
    assert trainjob_errors(trainjob) == []
    assert trainjob["spec"]["runtimeRef"] == {"kind": "ClusterTrainingRuntime", "name": "torch-tuned"}
    assert launcher.settings()["runtime"] == "torch-tuned"  # a detached job attached again keeps it
    assert make_launcher("kubeflow", **launcher.settings()).settings() == launcher.settings()


def test_kubeflow_runtime_the_cluster_lacks_is_refused_before_anything_is_created(stub, tmp_path):
    with pytest.raises(
        ValueError,
        match=r"--runtime torch-nope: no such ClusterTrainingRuntime on the cluster at http://127\.0\.0\.1:\d+; "
        r"give one that `kubectl get clustertrainingruntimes` lists",
    ):
        make_launcher("kubeflow", namespace="team", image=IMAGE, runtime="torch-nope")
    assert not stub.made("POST", "")
    stub.refuse["clustertrainingruntimes"] = (403, "forbidden")  # not allowed to look: the TrainJob will tell
    assert make_launcher("kubeflow", namespace="team", image=IMAGE, runtime="torch-nope").runtime == "torch-nope"


def test_kubeflow_refused_trainjob_leaves_nothing_behind(stub, tmp_path):
    stub.refuse["trainjobs"] = (422, 'admission webhook "validate.trainjob" denied the request: numNodes')
    launcher = KubeflowLauncher("team", IMAGE)
    with pytest.raises(ValueError, match=r"creating TrainJob team/hs-job1-\w+ failed: admission webhook .* denied"):
        launcher.submit(_spec(tmp_path))
    assert len(stub.made("DELETE", "configmaps")) == 1 and len(stub.made("DELETE", "secrets")) == 1
    assert not [key for key in stub.objects if key[0] in ("configmaps", "secrets")]


def test_kubeflow_pod_that_cannot_pull_its_image_fails_the_job(stub, tmp_path):
    launcher = KubeflowLauncher("team", "team/no-such-image:0")
    handle = launcher.submit(_spec(tmp_path))
    name = handle.rpartition("/")[2]
    stub.pods = [_stuck_pod(name, "ImagePullBackOff")]
    assert launcher.status(handle) == 1
    assert "ImagePullBackOff" in launcher.logs(handle) and f"log of {name}-node-0-0" in launcher.logs(handle, 1)
    assert ("trainjobs", name) not in stub.objects


def test_kubeflow_cancel_deletes_the_trainjob_and_adopt_sees_it_gone(stub, tmp_path):
    launcher = KubeflowLauncher("team", IMAGE)
    spec = _spec(tmp_path)
    handle = launcher.submit(spec)
    again = KubeflowLauncher("team", IMAGE)
    again.adopt(handle, spec)  # another kernel follows it
    assert again.status(handle) is None
    launcher.cancel(handle)
    assert launcher.status(handle) == -15 and again.status(handle) == 1
    with pytest.raises(LaunchGone, match=r"has ended"):
        KubeflowLauncher("team", IMAGE).adopt(handle, spec)


def test_kubeflow_loopback_channel_is_refused_before_anything_is_created(stub, tmp_path):
    with pytest.raises(
        ValueError, match=r"the pods cannot reach this kernel's channel on 127\.0\.0\.1; give --channel-host"
    ):
        KubeflowLauncher("team", IMAGE).submit(_spec(tmp_path, channel="tcp://127.0.0.1:5555"))
    assert not stub.made("POST", "")


def test_kubeflow_bad_input_is_refused_naming_what_to_give(stub, tmp_path, monkeypatch):
    with pytest.raises(ValueError, match=r"needs --namespace"):
        make_launcher("kubeflow", image=IMAGE)
    with pytest.raises(ValueError, match=r"needs --image: a container image with hotswitch and torch"):
        make_launcher("kubeflow", namespace="team")
    with pytest.raises(ValueError, match=r"namespace 'nobody' does not exist on the cluster at http://127\.0\.0\.1"):
        make_launcher("kubeflow", namespace="nobody", image=IMAGE)
    with pytest.raises(ValueError, match=r"--image: for pods on a cluster; the local backend runs on this machine"):
        make_launcher("kubeflow", image=IMAGE, kubeflow_backend="local")
    with pytest.raises(ValueError, match=r"--runtime: for pods on a cluster; the local backend runs on this machine"):
        make_launcher("kubeflow", runtime="torch-tuned", kubeflow_backend="local")
    with pytest.raises(ValueError, match=r"--runtime: for --launcher kubeflow, and --launcher slurm would ignore it"):
        make_launcher("slurm", runtime="torch-tuned")
    with pytest.raises(ValueError, match=r"--kubeflow-backend takes kubernetes or local"):
        make_launcher("kubeflow", kubeflow_backend="docker")
    with pytest.raises(ValueError, match=r"--nodes 2: the Kubeflow SDK's local backend runs one node"):
        make_launcher("kubeflow", kubeflow_backend="local").check(_spec(tmp_path))
    monkeypatch.setitem(sys.modules, "kubeflow.trainer", None)
    with pytest.raises(
        ValueError, match=r"needs the Kubeflow SDK on this machine: pip install 'hotswitch\[kubeflow\]'"
    ):
        make_launcher("kubeflow", namespace="team", image=IMAGE)


def test_kubeflow_without_a_cluster_says_so(tmp_path, monkeypatch):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    with pytest.raises(ValueError, match=r"no kube config found .*--kubeflow-backend local"):
        make_launcher("kubeflow", namespace="team", image=IMAGE)
    closed = KubeStub()
    path = closed.kubeconfig(tmp_path)
    closed.close()  # nothing listens there now
    monkeypatch.setenv("KUBECONFIG", str(path))
    with pytest.raises(
        ValueError,
        match=r"reaching the cluster failed: the Kubernetes API server at http://127\.0\.0\.1:\d+ does not answer",
    ):
        make_launcher("kubeflow", namespace="team", image=IMAGE)
