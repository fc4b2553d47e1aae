"""One node of a Slurm job: ``python -m hotswitch.kernel.launch.slurm.node FOLDER``, run by
``srun`` once per node. It becomes torchrun for this node (exec: ``scancel`` signals it
directly), with the job's settings from ``FOLDER/launch.json``, the node's index from Slurm,
and the rendezvous on the job's first node."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from hotswitch.kernel.channel.secrets import SECRET_FILE
from hotswitch.kernel.launch.job_files import read_launch
from hotswitch.kernel.launch.launcher import LaunchSpec
from hotswitch.kernel.launch.local.torchrun import agent_env, torchrun_argv
from hotswitch.kernel.worker.entry import ENV_NODE, ENV_SECRET_FILE
from hotswitch.kernel.worker.rank_log import ENV_LOG_DIR


def node_spec(folder: Path, environ: dict) -> LaunchSpec:
    """This node's share of the job described in ``folder``."""
    record, env = read_launch(folder)
    env = {
        **env,
        ENV_SECRET_FILE: str(folder / SECRET_FILE),
        ENV_LOG_DIR: record["log_dir"],
        ENV_NODE: environ.get("SLURMD_NODENAME", ""),
    }
    return LaunchSpec.from_record(
        record,
        job_dir=folder,
        node_rank=int(environ["SLURM_NODEID"]),
        rdzv_endpoint=environ["HOTSWITCH_RDZV_ENDPOINT"],
        rdzv_id=f"slurm-{environ['SLURM_JOB_ID']}",
        env=env,
    )


def main(argv: list[str]) -> None:
    if len(argv) != 1:
        raise SystemExit("usage: python -m hotswitch.kernel.launch.slurm.node FOLDER")
    spec = node_spec(Path(argv[0]), dict(os.environ))
    argv = torchrun_argv(spec)
    os.chdir(spec.job_dir)
    os.execve(argv[0], argv, agent_env(spec))


if __name__ == "__main__":
    main(sys.argv[1:])
