"""What ``--launcher kubeflow`` creates on Kubernetes, built with the Kubeflow SDK's own models:
a TrainJob on a PyTorch runtime (``--runtime``) whose command is the SDK's embedding of
``hotswitch_rank`` (a ``CustomTrainer``), one torchrun per node with ``numProcPerNode`` ranks;
the job's files in a ConfigMap (the body, pushed values) and the channel's key in a Secret,
both mounted read-only into every node's container by a runtime patch. Pure: nothing here talks
to a cluster, so the manifests can be checked against the TrainJob schema offline."""

from __future__ import annotations

import base64
import re

from hotswitch.kernel.channel.secrets import SECRET_FILE
from hotswitch.kernel.launch.kubeflow.rank import hotswitch_rank
from hotswitch.kernel.launch.launcher import LaunchSpec
from hotswitch.kernel.worker.entry import ENV_SECRET_FILE
from hotswitch.kernel.worker.rank_log import ENV_LOG_DIR

GROUP = "trainer.kubeflow.org"
VERSION = "v1alpha1"
PLURAL = "trainjobs"
CONTAINER = "node"  # its trainer container (and replicated job)
JOB_MOUNT = "/hotswitch/job"
SECRET_MOUNT = "/hotswitch/secret"
POD_LOG_DIR = "/tmp/hotswitch-logs"
PATCH_MANAGER = "hotswitch"
# Kubernetes refuses a ConfigMap over 1 MiB; keep room for its metadata.
CONFIGMAP_LIMIT = 1_000_000


def job_name(job_dir_name: str, suffix: str) -> str:
    """A TrainJob name from the job's: a DNS label short enough for the pods named after it."""
    stem = re.sub(r"[^a-z0-9-]+", "-", job_dir_name.lower()).strip("-")[:24].strip("-") or "job"
    return f"hs-{stem}-{suffix}"


def parse_resources(text: str | None) -> dict | None:
    """``--resources cpu=8,memory=32Gi,gpu=4`` as the SDK's ``resources_per_node``."""
    if not text:
        return None
    resources = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise ValueError(f"--resources takes NAME=AMOUNT,... (e.g. cpu=8,memory=32Gi,gpu=4), got {text!r}")
        resources[key.strip()] = value.strip()
    return resources


def torch_runtime(name: str):
    """The SDK's view of the ClusterTrainingRuntime ``name``: a custom trainer started by torchrun."""
    from kubeflow.trainer.constants import constants
    from kubeflow.trainer.types import types

    trainer = types.RuntimeTrainer(trainer_type=types.TrainerType.CUSTOM_TRAINER, framework="torch", image="")
    trainer.set_command(constants.TORCH_COMMAND)
    return types.Runtime(name=name, trainer=trainer, kind=types.RuntimeKind.CLUSTER_TRAINING_RUNTIME)


def pod_env(spec: LaunchSpec) -> dict[str, str]:
    """The ranks' environment in the pods: the kernel's for them, with the key and logs where
    the pod has them."""
    return {
        **spec.env,
        ENV_SECRET_FILE: f"{SECRET_MOUNT}/{SECRET_FILE}",
        ENV_LOG_DIR: POD_LOG_DIR,
        "PYTHONUNBUFFERED": "1",
    }


def volumes_patch(name: str) -> dict:
    """The runtime patch mounting the job's ConfigMap and Secret into every node's container."""
    pod = {
        "volumes": [
            {"name": "hotswitch-job", "configMap": {"name": name}},
            {"name": "hotswitch-secret", "secret": {"secretName": name, "defaultMode": 0o444}},
        ],
        "containers": [
            {
                "name": CONTAINER,
                "volumeMounts": [
                    {"name": "hotswitch-job", "mountPath": JOB_MOUNT, "readOnly": True},
                    {"name": "hotswitch-secret", "mountPath": SECRET_MOUNT, "readOnly": True},
                ],
            }
        ],
    }
    node = {"name": CONTAINER, "template": {"spec": {"template": {"spec": pod}}}}
    return {"manager": PATCH_MANAGER, "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [node]}}}}


def trainjob(name: str, spec: LaunchSpec, image: str, resources: dict | None = None, *, runtime: str) -> dict:
    """The TrainJob for ``spec`` on the ClusterTrainingRuntime ``runtime``: ``spec.nodes`` pods
    of ``image``, ``spec.nproc`` ranks each."""
    from kubeflow.trainer.backends.kubernetes import utils
    from kubeflow.trainer.constants import constants
    from kubeflow.trainer.types import types
    from kubeflow_trainer_api import models

    trainer = types.CustomTrainer(
        func=hotswitch_rank,
        func_args={"body": f"{JOB_MOUNT}/body.py"},
        image=image,
        num_nodes=spec.nodes,
        resources_per_node=resources,
        env=pod_env(spec),
    )
    trainer_cr = utils.get_trainer_cr_from_custom_trainer(torch_runtime(runtime), trainer)
    trainer_cr.num_proc_per_node = spec.nproc  # the SDK leaves it to the runtime ("auto": one per GPU)
    job = models.TrainerV1alpha1TrainJob(
        apiVersion=constants.API_VERSION,
        kind=constants.TRAINJOB_KIND,
        metadata=models.IoK8sApimachineryPkgApisMetaV1ObjectMeta(
            name=name, labels={"app.kubernetes.io/name": "hotswitch"}
        ),
        spec=models.TrainerV1alpha1TrainJobSpec(
            runtimeRef=models.TrainerV1alpha1RuntimeRef(
                name=runtime, kind=types.RuntimeKind.CLUSTER_TRAINING_RUNTIME.value
            ),
            trainer=trainer_cr,
            runtimePatches=[models.TrainerV1alpha1RuntimePatch.from_dict(volumes_patch(name))],
        ),
    )
    return job.to_dict()


def file_objects(name: str, files: dict[str, bytes]) -> tuple[dict, dict]:
    """The ConfigMap (every job file but the key) and the Secret (the key) named ``name``."""
    data = {key: base64.b64encode(value).decode() for key, value in files.items() if key != SECRET_FILE}
    size = sum(len(value) for value in data.values())
    if size > CONFIGMAP_LIMIT:
        raise ValueError(
            f"the job's files take {size / 1e6:.1f} MB encoded; a ConfigMap holds at most 1 MB: push less with "
            "--push, or load big values from storage the pods reach"
        )
    metadata = {"name": name, "labels": {"app.kubernetes.io/name": "hotswitch"}}
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "binaryData": data}
    secret_data = {SECRET_FILE: base64.b64encode(files[SECRET_FILE]).decode()}
    secret = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": metadata, "data": secret_data}
    return configmap, secret
