"""A real Slurm on loopback for the tests: a munge daemon, a controller (slurmctld) and one node
daemon (slurmd), Debian's slurm-wlm, configured in a temporary folder and bound to 127.0.0.1
(``CommunicationParameters=NoInAddrAny,NoCtldInAddrAny``)."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

DAEMONS = ("munged", "mungekey", "slurmctld", "slurmd", "sbatch", "scontrol", "scancel", "sinfo")
CONF = """\
ClusterName=hotswitchtest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={folder}/munge.sock
CredType=cred/munge
CommunicationParameters=NoInAddrAny,NoCtldInAddrAny
StateSaveLocation={folder}/state
SlurmdSpoolDir={folder}/spool
SlurmctldPidFile={folder}/slurmctld.pid
SlurmdPidFile={folder}/slurmd.pid
SlurmctldLogFile={folder}/slurmctld.log
SlurmdLogFile={folder}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
MinJobAge=600
KillWait=5
NodeName=localhost NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def missing() -> list[str]:
    return [name for name in DAEMONS if shutil.which(name) is None]


def _run(*argv: str, env: dict) -> None:
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    if done.returncode:
        raise RuntimeError(f"{' '.join(argv)} failed: {done.stderr or done.stdout}")


STARTS = 3  # tries, each on fresh ports: a port probed free can be taken before a daemon binds it
TAKEN = "Address already in use"


@contextlib.contextmanager
def slurm_on_loopback(folder: Path, cpus: int = 2) -> Iterator[Path]:
    """Start munge, slurmctld and slurmd; yield the slurm.conf path once the node is idle."""
    if missing():
        raise RuntimeError(f"Slurm is not installed ({', '.join(missing())} missing): apt-get install slurm-wlm munge")
    for sub in ("state", "spool"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    conf = folder / "slurm.conf"
    env = {**os.environ, "SLURM_CONF": str(conf)}
    munge = ["--socket", f"{folder}/munge.sock"]
    _run("mungekey", "--create", f"--keyfile={folder}/munge.key", env=env)
    _run("munged", "--force", *munge, f"--key-file={folder}/munge.key", f"--log-file={folder}/munged.log",
         f"--pid-file={folder}/munged.pid", f"--seed-file={folder}/munged.seed", env=env)  # fmt: skip
    try:
        _start_daemons(conf, folder, cpus, env)
        yield conf
    finally:
        subprocess.run(["scancel", "--full", "--signal=KILL", "--user=root"], env=env, capture_output=True)
        _stop_daemons(folder, env)
        _stop_pidfile(folder / "munged.pid")


def _start_daemons(conf: Path, folder: Path, cpus: int, env: dict) -> None:
    """slurmctld and slurmd on fresh ports, started again on others where one was taken first."""
    for attempt in range(STARTS):
        conf.write_text(CONF.format(folder=folder, ctld_port=free_port(), slurmd_port=free_port(), cpus=cpus))
        try:
            _run("slurmctld", "-i", env=env)
            _run("slurmd", "-N", "localhost", env=env)
            _wait_idle(env, folder)
            return
        except PortTaken:
            if attempt == STARTS - 1:
                raise
            _stop_daemons(folder, env)
            for log in ("slurmctld.log", "slurmd.log"):
                (folder / log).unlink(missing_ok=True)


class PortTaken(RuntimeError):
    """A daemon could not bind its port: another process took it after it was probed free."""


def _stop_daemons(folder: Path, env: dict) -> None:
    subprocess.run(["scontrol", "shutdown"], env=env, capture_output=True, timeout=60)
    for name in ("slurmd", "slurmctld"):
        _stop_pidfile(folder / f"{name}.pid")


def _wait_idle(env: dict, folder: Path, limit_s: float = 120.0) -> None:
    started = time.monotonic()
    while time.monotonic() - started < limit_s:
        out = subprocess.run(["sinfo", "-h", "-o", "%T"], env=env, capture_output=True, text=True).stdout
        if out.strip() == "idle":
            return
        for log in ("slurmctld.log", "slurmd.log"):
            if (folder / log).is_file() and TAKEN in (folder / log).read_text(errors="replace"):
                raise PortTaken(f"{log}: {TAKEN}")
        time.sleep(0.5)
    raise RuntimeError(f"the Slurm node never became idle; see {folder}/slurmctld.log and slurmd.log")


def _stop_pidfile(path: Path, limit_s: float = 30.0) -> None:
    try:
        pid = int(path.read_text())
    except (FileNotFoundError, ValueError):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, 15)
    started = time.monotonic()
    while time.monotonic() - started < limit_s:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, 9)
