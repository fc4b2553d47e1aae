"""The launchers by name (``--launcher NAME`` of ``%%train`` and ``hotswitch train``), each made
from its own options; ValueError saying what to give otherwise.

``local`` is torchrun on this machine (one node, or one node of a job whose other nodes run
their own kernels); ``ray`` starts every node of a job from this kernel on an existing Ray
cluster (``ray_address``, default ``$RAY_ADDRESS``); ``slurm`` submits it as one batch job
(``partition``, ``time``, ``gpus_per_node``, ``account``, ``qos``, and ``slurm_args`` for any
other sbatch option) to the controller this machine's Slurm commands reach; ``kubeflow`` creates
a Kubeflow Trainer TrainJob (``namespace``, ``image``, ``resources``, ``runtime``) on the
Kubernetes cluster the kube config names, or with ``kubeflow_backend`` "local" runs it through
the Kubeflow SDK's local backend on this machine."""

from __future__ import annotations

import os

from hotswitch.kernel.launch.launcher import Launcher

LAUNCHERS = ("local", "ray", "slurm", "kubeflow")
# The options each launcher takes; the others would do nothing there, so they are refused.
OWN_OPTIONS = {
    "ray": ("ray_address",),
    "slurm": ("partition", "time", "gpus_per_node", "account", "qos", "slurm_args"),
    "kubeflow": ("namespace", "image", "resources", "runtime", "kubeflow_backend"),
}
# Every launcher option, as ``%%train`` and ``hotswitch train`` name their flags (dashes for
# underscores); a launcher's ``settings()`` gives back the ones it was made with.
OPTIONS = tuple(key for keys in OWN_OPTIONS.values() for key in keys)
KUBEFLOW_BACKENDS = ("kubernetes", "local")
# Kubeflow's options for pods on a cluster; the SDK's local backend has no use for them.
CLUSTER_ONLY = ("namespace", "image", "resources", "runtime")
KUBEFLOW_EXTRA = "pip install 'hotswitch[kubeflow]'"


def launcher_options(args) -> dict:
    """The launcher options among parsed command-line ``args``."""
    return {key: getattr(args, key, None) for key in OPTIONS}


def foreign_options(name: str, options: dict) -> tuple[str, list[str]] | None:
    """The launcher whose options among ``options`` (those not None) ``--launcher name`` would
    silently ignore, and those options as flags (``--partition`` without ``--launcher slurm``
    would train here); None where every option given is this launcher's."""
    for owner, keys in OWN_OPTIONS.items():
        flags = [f"--{key.replace('_', '-')}" for key in keys if options.get(key) is not None]
        if flags and owner != name:
            return owner, flags
    return None


def make_launcher(name: str, **options) -> Launcher:
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise ValueError(f"unknown launcher options: {', '.join(unknown)}")
    given = {key: value for key, value in options.items() if value is not None}
    if name in LAUNCHERS and (foreign := foreign_options(name, given)):
        owner, flags = foreign
        raise ValueError(
            f"{' '.join(flags)}: for --launcher {owner}, and --launcher {name} would ignore it; "
            f"give --launcher {owner}, or leave {' '.join(flags)} out"
        )
    if name == "local":
        from hotswitch.kernel.launch.local.torchrun import TorchrunLauncher

        return TorchrunLauncher()
    if name == "ray":
        address = given.get("ray_address") or os.environ.get("RAY_ADDRESS")
        if not address:
            raise ValueError("--launcher ray needs the cluster's head: --ray-address HOST:PORT (or $RAY_ADDRESS)")
        from hotswitch.kernel.launch.ray.launcher import RayLauncher

        return RayLauncher(address)
    if name == "slurm":
        from hotswitch.kernel.launch.slurm.launcher import SlurmLauncher

        return SlurmLauncher(**{key: given.get(key) for key in OWN_OPTIONS["slurm"]})
    if name == "kubeflow":
        return kubeflow_launcher(given)
    raise ValueError(f"--launcher {name!r} is not available; choose one of {', '.join(LAUNCHERS)}")


def kubeflow_launcher(options: dict) -> Launcher:
    backend = options.get("kubeflow_backend", "kubernetes")
    if backend not in KUBEFLOW_BACKENDS:
        raise ValueError(f"--kubeflow-backend takes {' or '.join(KUBEFLOW_BACKENDS)}, got {backend!r}")
    try:
        import kubeflow.trainer  # noqa: F401
        import kubernetes  # noqa: F401
    except ImportError:
        raise ValueError(f"--launcher kubeflow needs the Kubeflow SDK on this machine: {KUBEFLOW_EXTRA}") from None
    if backend == "kubernetes":
        from hotswitch.kernel.launch.kubeflow.launcher import KubeflowLauncher

        return KubeflowLauncher(**{key: options.get(key) for key in CLUSTER_ONLY})
    cluster_only = [key for key in CLUSTER_ONLY if options.get(key)]
    if cluster_only:
        raise ValueError(
            f"--{', --'.join(cluster_only)}: for pods on a cluster; the local backend runs on this machine with "
            "this kernel's environment"
        )
    from hotswitch.kernel.launch.kubeflow.local_backend import KubeflowLocalLauncher

    return KubeflowLocalLauncher()
