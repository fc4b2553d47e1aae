"""``--launcher kubeflow --kubeflow-backend local``: a job through the Kubeflow SDK's local
backend (``LocalProcessBackend``), one node on this machine: how a TrainJob's code is tried
without a cluster. The SDK runs in an agent process of its own (``kubeflow.local_agent``), which
this launcher starts and follows like local torchrun's agent: every descendant tracked, torn
down together, adopted again by a kernel that attaches to a detached job. The job's virtual
environment (torch alone is about 1 GB) never outlives it."""

from __future__ import annotations

import shutil
import sys

from hotswitch.kernel.launch.job_files import write_launch
from hotswitch.kernel.launch.kubeflow.local_agent import VENVS
from hotswitch.kernel.launch.launcher import LaunchSpec
from hotswitch.kernel.launch.local.torchrun import TorchrunLauncher

AGENT = "hotswitch.kernel.launch.kubeflow.local_agent"


class KubeflowLocalLauncher(TorchrunLauncher):
    name = "kubeflow"
    agent_module = AGENT

    def check(self, spec: LaunchSpec) -> None:
        if spec.nodes > 1:
            raise ValueError(
                f"--nodes {spec.nodes}: the Kubeflow SDK's local backend runs one node; give --namespace and "
                "--image (and drop --kubeflow-backend local) to run on a Kubernetes cluster"
            )

    def settings(self) -> dict:
        return {"kubeflow_backend": "local"}

    def submit(self, spec: LaunchSpec) -> str:
        write_launch(spec.job_dir, spec)  # what the agent runs
        return super().submit(spec)

    def agent_argv(self, spec: LaunchSpec) -> list[str]:
        return [sys.executable, "-m", AGENT, str(spec.body_path)]

    def handle_of(self, spec: LaunchSpec) -> str:
        return f"kubeflow-local:{spec.job_dir}"

    def status(self, handle: str) -> int | None:
        code = super().status(handle)
        if code is not None:  # the agent removes the environment itself, unless it was killed first
            shutil.rmtree(self.launch(handle).spec.job_dir / VENVS, ignore_errors=True)
        return code
