"""The launchers by name (``--launcher NAME`` of ``%%train`` and ``hotswitch train``), each made
from its own options; ValueError saying what to give otherwise.

``local`` is torchrun on this machine (one node, or one node of a job whose other nodes run
their own kernels); ``ray`` starts every node of a job from this kernel on an existing Ray
cluster (``ray_address``, default ``$RAY_ADDRESS``); ``slurm`` submits it as one batch job
(``partition``, ``time``, ``gpus_per_node``) to the controller this machine's Slurm commands
reach."""

from __future__ import annotations

import os

from hotswitch.kernel.launch.launcher import Launcher

LAUNCHERS = ("local", "ray", "slurm")


def make_launcher(
    name: str,
    ray_address: str | None = None,
    partition: str | None = None,
    time: str | None = None,
    gpus_per_node: int | None = None,
) -> Launcher:
    if name == "local":
        from hotswitch.kernel.launch.torchrun import TorchrunLauncher

        return TorchrunLauncher()
    if name == "ray":
        address = ray_address or os.environ.get("RAY_ADDRESS")
        if not address:
            raise ValueError("--launcher ray needs the cluster's head: --ray-address HOST:PORT (or $RAY_ADDRESS)")
        from hotswitch.kernel.launch.ray_launcher import RayLauncher

        return RayLauncher(address)
    if name == "slurm":
        from hotswitch.kernel.launch.slurm_launcher import SlurmLauncher

        return SlurmLauncher(partition, time, gpus_per_node)
    raise ValueError(f"--launcher {name!r} is not available; choose one of {', '.join(LAUNCHERS)}")
