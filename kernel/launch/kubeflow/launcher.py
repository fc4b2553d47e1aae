"""``--launcher kubeflow``: a job as one Kubeflow Trainer TrainJob on the Kubernetes cluster
this machine's kube config names (or, in a pod, the cluster it runs in), driven from the kernel.

``submit`` creates the job's ConfigMap (the body, pushed values) and Secret (the channel's key),
then the TrainJob (``kubeflow.manifest``), then makes the TrainJob the owner of both, so that
deleting it (``cancel``) deletes everything of the job; if the TrainJob cannot be created, the
two are deleted at once. The pods' ranks reach the kernel's channel over the network (encrypted:
give ``--channel-host``) and watch it by heartbeat. Handles are ``kubeflow:NAMESPACE/NAME``.
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid

from hotswitch.kernel.channel.secrets import leaves_loopback
from hotswitch.kernel.launch.job_files import job_files
from hotswitch.kernel.launch.kubeflow.manifest import (
    GROUP,
    PLURAL,
    VERSION,
    file_objects,
    job_name,
    parse_resources,
    trainjob,
)
from hotswitch.kernel.launch.kubeflow.pods import REQUEST_TIMEOUT_S, JobPods
from hotswitch.kernel.launch.launcher import Launcher, LaunchGone, LaunchSpec
from hotswitch.kernel.launch.options import OPTIONS
from hotswitch.kernel.worker.entry import ENV_ADDRESS

RUNTIMES = "clustertrainingruntimes"  # Kubeflow Trainer's cluster-wide runtimes (plural, for the API)


def api_client():
    """A Kubernetes API client from the kube config ($KUBECONFIG, ~/.kube/config) or, in a pod,
    the cluster's own; ValueError saying which is missing."""
    from kubernetes import client, config

    try:
        config.load_incluster_config()
    except config.ConfigException:
        try:
            config.load_kube_config(os.environ.get("KUBECONFIG") or None)  # read now, not at import
        except (config.ConfigException, OSError) as error:
            raise ValueError(
                f"--launcher kubeflow needs a Kubernetes cluster: no kube config found ({error}); set $KUBECONFIG, "
                "or use --kubeflow-backend local to try the job on this machine"
            ) from None
    configuration = client.Configuration.get_default_copy()
    configuration.retries = 1  # an unreachable API server is reported within seconds
    return client.ApiClient(configuration)


def api_error(error: Exception, what: str, host: str) -> ValueError:
    """A Kubernetes client error as one line saying what failed and why."""
    from kubernetes.client import ApiException
    from urllib3.exceptions import HTTPError

    if isinstance(error, ApiException):
        reason = error.reason
        with contextlib.suppress(ValueError):
            reason = json.loads(error.body or "{}").get("message") or reason
        return ValueError(f"{what} failed: {reason} ({error.status})")
    if isinstance(error, HTTPError):
        return ValueError(
            f"{what} failed: the Kubernetes API server at {host} does not answer ({type(error).__name__})"
        )
    return ValueError(f"{what} failed: {error}")


class KubeflowLauncher(Launcher):
    """Submits TrainJobs on ``runtime`` to ``namespace``, the pods running ``image`` with
    ``resources`` each; each argument is the launch option of its name (``launch/options.py``),
    ``runtime`` that option's default unless given."""

    name = "kubeflow"
    shares_files = False  # the nodes have folders of their own
    status_every_s = 2.0  # each status is an API call

    def __init__(
        self, namespace: str | None, image: str | None, resources: str | None = None, runtime: str | None = None
    ):
        if not namespace:
            raise ValueError("--launcher kubeflow needs --namespace: the Kubernetes namespace the TrainJob goes in")
        if not image:
            raise ValueError(
                "--launcher kubeflow needs --image: a container image with hotswitch and torch installed "
                "(the pods run the job's ranks in it)"
            )
        from kubernetes import client

        self.namespace = namespace
        self.image = image
        self.resources = resources
        self.runtime = runtime or OPTIONS["runtime"].default
        self.resources_per_node = parse_resources(resources)
        self.api = api_client()
        self.host = self.api.configuration.host
        self.core = client.CoreV1Api(self.api)
        self.custom = client.CustomObjectsApi(self.api)
        self.check_namespace()
        self.check_runtime()
        self.jobs: dict[str, JobPods] = {}

    def settings(self) -> dict:
        return {"namespace": self.namespace, "image": self.image, "resources": self.resources, "runtime": self.runtime}

    def call(self, what: str, method, *args, **kwargs):
        """``method(*args, **kwargs)`` against the API server, its errors as ValueError."""
        try:
            return method(*args, **kwargs, _request_timeout=REQUEST_TIMEOUT_S)
        except Exception as error:
            raise api_error(error, what, self.host) from None

    def check_namespace(self) -> None:
        from kubernetes.client import ApiException

        try:
            self.core.read_namespace(self.namespace, _request_timeout=REQUEST_TIMEOUT_S)
        except ApiException as error:
            if error.status == 404:
                raise ValueError(f"namespace {self.namespace!r} does not exist on the cluster at {self.host}") from None
            if error.status != 403:  # not allowed to read namespaces: creating in it will tell
                raise api_error(error, f"reading namespace {self.namespace!r}", self.host) from None
        except Exception as error:
            raise api_error(error, "reaching the cluster", self.host) from None

    def check_runtime(self) -> None:
        from kubernetes.client import ApiException

        try:
            self.custom.get_cluster_custom_object(
                GROUP, VERSION, RUNTIMES, self.runtime, _request_timeout=REQUEST_TIMEOUT_S
            )
        except ApiException as error:
            if error.status == 404:
                raise ValueError(
                    f"--runtime {self.runtime}: no such ClusterTrainingRuntime on the cluster at {self.host}; give "
                    f"one that `kubectl get {RUNTIMES}` lists, or install Kubeflow Trainer's runtimes"
                ) from None
            if error.status != 403:  # not allowed to read runtimes: creating the TrainJob will tell
                raise api_error(error, f"reading ClusterTrainingRuntime {self.runtime!r}", self.host) from None
        except Exception as error:
            raise api_error(error, "reaching the cluster", self.host) from None

    def check(self, spec: LaunchSpec) -> None:
        if spec.rdzv_endpoint:
            raise ValueError("--rdzv-endpoint: a TrainJob's nodes meet where Kubeflow Trainer says; drop it")

    def submit(self, spec: LaunchSpec) -> str:
        self.check(spec)
        host = spec.env.get(ENV_ADDRESS, "").removeprefix("tcp://").rpartition(":")[0]
        if not leaves_loopback(host):
            raise ValueError(
                f"the pods cannot reach this kernel's channel on {host}; give --channel-host with an address of this "
                "machine the cluster's pods reach (the channel is then encrypted)"
            )
        name = job_name(spec.job_dir.name, uuid.uuid4().hex[:6])
        configmap, secret = file_objects(name, job_files(spec.job_dir))
        manifest = trainjob(name, spec, self.image, self.resources_per_node, runtime=self.runtime)
        ns = self.namespace
        self.call(f"creating ConfigMap {ns}/{name}", self.core.create_namespaced_config_map, ns, configmap)
        try:
            self.call(f"creating Secret {ns}/{name}", self.core.create_namespaced_secret, ns, secret)
            created = self.call(
                f"creating TrainJob {ns}/{name}",
                self.custom.create_namespaced_custom_object,
                GROUP,
                VERSION,
                ns,
                PLURAL,
                manifest,
            )
        except ValueError:
            self.delete_files(name)
            raise
        owner = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "TrainJob",
            "name": name,
            "uid": created["metadata"]["uid"],
        }
        patch = {"metadata": {"ownerReferences": [owner]}}
        self.call("owning the ConfigMap", self.core.patch_namespaced_config_map, name, ns, patch)
        self.call("owning the Secret", self.core.patch_namespaced_secret, name, ns, patch)
        handle = f"kubeflow:{ns}/{name}"
        self.jobs[handle] = JobPods(self, name, spec.nproc)
        return handle

    def delete_files(self, name: str) -> None:
        for kind, delete in (
            ("ConfigMap", self.core.delete_namespaced_config_map),
            ("Secret", self.core.delete_namespaced_secret),
        ):
            try:
                delete(name, self.namespace, _request_timeout=REQUEST_TIMEOUT_S)
            except Exception as error:  # already failing: say what is left
                print(f"[hotswitch] {kind} {self.namespace}/{name} could not be deleted: {error}")

    def job(self, handle: str) -> JobPods:
        try:
            return self.jobs[handle]
        except KeyError:
            raise ValueError(f"no TrainJob {handle!r} was submitted by this launcher") from None

    def adopt(self, handle: str, spec: LaunchSpec) -> None:
        name = handle.rpartition("/")[2]
        self.jobs[handle] = JobPods(self, name, spec.nproc)
        if self.jobs[handle].status() is not None:
            raise LaunchGone(f"TrainJob {self.namespace}/{name} has ended")

    def status(self, handle: str) -> int | None:
        return self.job(handle).status()

    def cancel(self, handle: str, force: bool = False) -> None:
        self.job(handle).remove(force)

    def logs(self, handle: str, rank: int | None = None) -> str:
        return self.job(handle).logs(rank)
