"""What every rank of a job finds in its environment: where the kernel's channel is, the file
holding the channel's key (never the key itself), the message limit, the job's name, where to
keep its log, and how it knows the kernel lives (its pid, or for a detached job nothing)."""

from __future__ import annotations

import os

from hotswitch.kernel.channel.secrets import SECRET_FILE, KernelSecret
from hotswitch.kernel.launch.launcher import LaunchSpec
from hotswitch.kernel.worker.deadline import ENV_DEADLINE
from hotswitch.kernel.worker.debugger import ENV_DETACHED
from hotswitch.kernel.worker.entry import ENV_ADDRESS, ENV_JOB_NAME, ENV_KERNEL_PID, ENV_MAX_BYTES, ENV_SECRET_FILE
from hotswitch.kernel.worker.heartbeat import ENV_HEARTBEAT_TIMEOUT
from hotswitch.kernel.worker.rank_log import ENV_LOG_DIR


def rank_env(
    spec: LaunchSpec,
    name: str,
    address: str,
    secret: KernelSecret,
    max_bytes: int,
    ranks_here: bool,
    deadline: float | None = None,
) -> dict[str, str]:
    """The job's own variables over ``spec.env`` (no --env overrides them); writes the ranks'
    share of ``secret`` into the job folder, owner-only. Ranks ``ranks_here`` (on this machine)
    also watch the kernel's pid; elsewhere the heartbeat alone tells them it lives. A detached
    job's ``deadline`` (its --timeout's end) is kept by its ranks while no kernel follows it."""
    env = {
        **spec.env,
        ENV_ADDRESS: address,
        ENV_SECRET_FILE: str(secret.for_workers().write(spec.job_dir / SECRET_FILE)),
        ENV_MAX_BYTES: str(max_bytes),
        ENV_JOB_NAME: name,
        ENV_LOG_DIR: str(spec.log_dir or spec.job_dir / "logs"),
    }
    if spec.detach:  # outlives this kernel: no kernel pid to watch, no heartbeat to miss, no one at a breakpoint
        env[ENV_HEARTBEAT_TIMEOUT] = "0"
        env[ENV_DETACHED] = "1"
        if deadline is not None:
            env[ENV_DEADLINE] = repr(deadline)
    elif ranks_here:
        env[ENV_KERNEL_PID] = str(os.getpid())
    return env
