"""One node of a Slurm job: ``python -m hotswitch.kernel.launch.slurm.node FOLDER``, run by
``srun`` once per node. It becomes torchrun for this node (exec: ``scancel`` signals it
directly), with the job's settings from ``FOLDER/launch.json``, the node's index from Slurm,
and the rendezvous on the job's first node: that node holds a port free now until its torchrun
listens on it (``reserved_port``; exec keeps the socket), and writes where into the job's shared
folder, where the other nodes read it."""

from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path

from hotswitch.kernel.channel.secrets import SECRET_FILE
from hotswitch.kernel.launch.job_files import read_launch
from hotswitch.kernel.launch.launcher import LaunchSpec
from hotswitch.kernel.launch.local.reserved_port import handed_over, reserve
from hotswitch.kernel.launch.local.torchrun import agent_env, torchrun_argv
from hotswitch.kernel.worker.entry import ENV_NODE, ENV_SECRET_FILE
from hotswitch.kernel.worker.rank_log import ENV_LOG_DIR

ENDPOINT_FILE = "rdzv-endpoint"  # HOST:PORT of the job's rendezvous, in its shared folder
ENDPOINT_WAIT_S = 600.0  # generous: the first node's srun task may start well after the others
POLL_S = 0.2


def node_spec(folder: Path, environ: dict, endpoint: str, handed: dict[str, str]) -> LaunchSpec:
    """This node's share of the job described in ``folder``, meeting at ``endpoint``; ``handed``:
    the environment that hands its agent a reserved rendezvous socket (the first node's)."""
    record, env = read_launch(folder)
    env = {
        **env,
        ENV_SECRET_FILE: str(folder / SECRET_FILE),
        ENV_LOG_DIR: record["log_dir"],
        ENV_NODE: environ.get("SLURMD_NODENAME", ""),
        **handed,
    }
    return LaunchSpec.from_record(
        record,
        job_dir=folder,
        node_rank=int(environ["SLURM_NODEID"]),
        rdzv_endpoint=endpoint,
        rdzv_id=f"slurm-{environ['SLURM_JOB_ID']}",
        env=env,
    )


def rendezvous(folder: Path, environ: dict) -> tuple[str, socket.socket | None]:
    """The job's rendezvous endpoint, and on the first node the socket held for it (to stay open
    through exec): that node reserves a port on the head (``HOTSWITCH_RDZV_HOST``) and writes
    HOST:PORT into ``folder``; the others wait for it there."""
    path = folder / ENDPOINT_FILE
    if int(environ["SLURM_NODEID"]) == 0:
        host = environ["HOTSWITCH_RDZV_HOST"]
        listener = reserve(host)
        endpoint = f"{host}:{listener.getsockname()[1]}"
        part = path.with_name(f"{path.name}.{os.getpid()}.part")
        part.write_text(endpoint)
        os.replace(part, path)  # whole or not at all, for the nodes that read it
        return endpoint, listener
    deadline = time.monotonic() + ENDPOINT_WAIT_S
    while not path.is_file():
        if time.monotonic() > deadline:
            said = f"the job's first node wrote no rendezvous endpoint into {path} in {ENDPOINT_WAIT_S:.0f} s"
            raise SystemExit(said)
        time.sleep(POLL_S)
    return path.read_text().strip(), None


def main(argv: list[str]) -> None:
    if len(argv) != 1:
        raise SystemExit("usage: python -m hotswitch.kernel.launch.slurm.node FOLDER")
    folder = Path(argv[0])
    endpoint, listener = rendezvous(folder, dict(os.environ))
    spec = node_spec(folder, dict(os.environ), endpoint, handed_over(listener) if listener else {})
    argv = torchrun_argv(spec)
    os.chdir(spec.job_dir)
    os.execve(argv[0], argv, agent_env(spec))


if __name__ == "__main__":
    main(sys.argv[1:])
