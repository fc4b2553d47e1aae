"""One submitted TrainJob as the kernel follows it: its state from the TrainJob's conditions and
its pods (a pod that cannot start its image fails the job instead of leaving it pending for
ever), its logs from the pods, and its end: once it has ended, its logs are kept and the TrainJob
deleted, with the pods, ConfigMap and Secret it owns, so nothing of it stays on the cluster."""

from __future__ import annotations

from kubernetes.client import ApiException

from hotswitch.kernel.launch.kubeflow.manifest import CONTAINER, GROUP, PLURAL, VERSION

REQUEST_TIMEOUT_S = 10.0
# Container states that do not get better by waiting.
STUCK = {"ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull", "CreateContainerConfigError"}
JOBSET_LABEL = "jobset.sigs.k8s.io/jobset-name"
INDEX_LABEL = "jobset.sigs.k8s.io/job-index"


class JobPods:
    """TrainJob ``name`` of ``launcher`` (its ``call``, ``core``, ``custom``, ``namespace``)."""

    def __init__(self, launcher, name: str, nproc: int):
        self.launcher = launcher
        self.name = name
        self.nproc = nproc
        self.code: int | None = None
        self.error: str | None = None
        self.deleted = False
        self.final_logs: list[str] | None = None

    def trainjob(self) -> dict | None:
        custom = self.launcher.custom
        try:
            return custom.get_namespaced_custom_object(
                GROUP, VERSION, self.launcher.namespace, PLURAL, self.name, _request_timeout=REQUEST_TIMEOUT_S
            )
        except ApiException as error:
            if error.status == 404:
                return None
            raise

    def pods(self) -> list:
        listed = self.launcher.call(
            f"listing the pods of {self.name}",
            self.launcher.core.list_namespaced_pod,
            self.launcher.namespace,
            label_selector=f"{JOBSET_LABEL}={self.name}",
        )
        return sorted(listed.items, key=lambda pod: int((pod.metadata.labels or {}).get(INDEX_LABEL, 0)))

    def stuck(self) -> str | None:
        """Why a pod of the job cannot start, if one cannot."""
        for pod in self.pods():
            for container in (pod.status.container_statuses or []) if pod.status else []:
                waiting = container.state.waiting if container.state else None
                if waiting is not None and waiting.reason in STUCK:
                    return f"pod {pod.metadata.name}: {waiting.reason}: {waiting.message or ''}".strip()
        return None

    def status(self) -> int | None:
        if self.code is not None:
            return self.code
        job = self.trainjob()
        if job is None:  # deleted, by us or by someone else
            return self.ended(-15 if self.deleted else 1, None if self.deleted else "the TrainJob was deleted")
        conditions = {
            c.get("type"): c for c in job.get("status", {}).get("conditions", []) if c.get("status") == "True"
        }
        if "Complete" in conditions:
            return self.ended(0)
        if "Failed" in conditions:
            return self.ended(1, conditions["Failed"].get("message") or "the TrainJob failed")
        stuck = self.stuck()
        return self.ended(1, stuck) if stuck else None

    def ended(self, code: int, error: str | None = None) -> int:
        self.error = error
        self.remove()
        self.code = code
        return code

    def remove(self, force: bool = False) -> None:
        """Keep the pods' logs, then delete the TrainJob (and so its pods, ConfigMap and Secret)."""
        if self.final_logs is None:
            self.final_logs = self.pod_logs()
        self.delete(force)

    def delete(self, force: bool = False) -> None:
        self.deleted = True
        try:
            self.launcher.custom.delete_namespaced_custom_object(
                GROUP,
                VERSION,
                self.launcher.namespace,
                PLURAL,
                self.name,
                grace_period_seconds=0 if force else None,
                propagation_policy="Background",
                _request_timeout=REQUEST_TIMEOUT_S,
            )
        except ApiException as error:
            if error.status != 404:
                raise

    def pod_logs(self) -> list[str]:
        texts = []
        for pod in self.pods():
            try:
                texts.append(
                    self.launcher.core.read_namespaced_pod_log(
                        pod.metadata.name,
                        self.launcher.namespace,
                        container=CONTAINER,
                        _request_timeout=REQUEST_TIMEOUT_S,
                    )
                )
            except ApiException:  # not started yet, or gone
                texts.append("")
        return texts

    def logs(self, rank: int | None) -> str:
        """With ``rank``, the log of the pod (node) it runs in, which holds every rank of that
        node; with None, every pod's, and why the job failed if the cluster said."""
        texts = self.final_logs if self.final_logs is not None else self.pod_logs()
        if rank is not None:
            node = rank // self.nproc
            return texts[node] if node < len(texts) else ""
        lines = [f"[node {k}]\n{text}" for k, text in enumerate(texts)]
        return "\n".join(([self.error] if self.error else []) + lines)
