"""One job on the Kubeflow SDK's local backend: ``python -m
hotswitch.kernel.launch.kubeflow.local_agent BODY``, started by ``KubeflowLocalLauncher``.

It runs apart from the kernel because the SDK's ``LocalProcessBackend`` changes the working
directory of the process it runs in for as long as a job runs, and on cancel ends only the shell
it started; here it is a process the launcher tracks with every descendant (shell, torchrun,
ranks) and ends together. The backend makes a fresh virtual environment per job (from the
``python`` on PATH: the kernel's, put first), points it at the kernel's torch for its torchrun
(``kubeflow.torch_pointer``: a wheel of a few files, not a copy of torch), and runs
``hotswitch_rank`` on ``nproc`` ranks; the ranks import hotswitch from the kernel's environment.
The environment is made in the job folder and removed when the job ends, however it ends short
of SIGKILL. Output: the backend's (environment, install, torchrun), line
by line; exit status 0 when the TrainJob completes, 1 when it fails, also written to
``$HOTSWITCH_AGENT_EXIT`` for a kernel that attaches later."""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from hotswitch.kernel.launch.job_files import read_launch
from hotswitch.kernel.launch.kubeflow.rank import hotswitch_rank
from hotswitch.kernel.launch.kubeflow.torch_pointer import pointer_wheel
from hotswitch.kernel.launch.launcher import LaunchSpec
from hotswitch.kernel.launch.local.loopback_agent import ENV_AGENT_EXIT
from hotswitch.kernel.launch.local.torchrun import torchrun_log_dir

POLL_S = 0.2
VENVS = "kubeflow-venv"  # where the backend makes the job's virtual environment


def local_trainer(spec: LaunchSpec, venvs: Path):
    """The SDK's ``CustomTrainer`` for ``spec`` on this machine: ``nproc`` ranks by torchrun's
    own environment variables (a standalone rendezvous on a free port), torch the kernel's."""
    from kubeflow.trainer import CustomTrainer

    env = {**os.environ, **spec.env, "PET_NPROC_PER_NODE": str(spec.nproc), "PET_STANDALONE": "1"}
    env["PET_LOG_DIR"] = str(torchrun_log_dir(spec))  # torchrun's --log-dir
    index = os.environ.get("PIP_INDEX_URL")  # else the SDK's default index (pip.conf still applies)
    indexes: dict[str, Any] = {"pip_index_urls": [index]} if index else {}
    return CustomTrainer(
        func=hotswitch_rank,
        func_args={"body": str(spec.body_path), "path": [p for p in sys.path if p and os.path.isdir(p)]},
        packages_to_install=[f"torch @ {pointer_wheel(venvs / 'wheels').as_uri()}"],
        env=env,
        **indexes,
    )


def run_job(spec: LaunchSpec, venvs: Path) -> int:
    """Train ``spec`` with the SDK's local backend, echoing its output; the exit status."""
    from kubeflow.trainer import LocalProcessBackendConfig, TrainerClient
    from kubeflow.trainer.constants import constants
    from kubeflow.trainer.options import Name

    venvs.mkdir(mode=0o700, exist_ok=True)
    tempfile.tempdir = str(venvs)  # where the backend makes the job's virtual environment
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    client = TrainerClient(backend_config=LocalProcessBackendConfig(cleanup_venv=True))
    runtime = constants.DEFAULT_TRAINING_RUNTIME  # the local backend's one runtime (a cluster's: --runtime)
    name = client.train(runtime=runtime, trainer=local_trainer(spec, venvs), options=[Name(name=spec.job_dir.name)])
    shown = 0
    status = None
    while status not in (constants.TRAINJOB_COMPLETE, constants.TRAINJOB_FAILED):
        time.sleep(POLL_S)
        status = client.get_job(name).status
        lines = list(client.get_job_logs(name))
        for line in lines[shown:]:
            print(line, flush=True)
        shown = len(lines)
    return 0 if status == constants.TRAINJOB_COMPLETE else 1


def stop(signum, frame):
    signal.signal(signum, signal.SIG_IGN)  # the launcher signals the group and each process: once is enough
    raise SystemExit(128 + signum)


def main(argv: list[str]) -> None:
    if len(argv) != 1:
        raise SystemExit(f"usage: python -m {__spec__.name} BODY")
    record, env = read_launch(Path(argv[0]).parent)
    spec = LaunchSpec.from_record(record, env=env)
    signal.signal(signal.SIGTERM, stop)
    venvs = spec.job_dir / VENVS
    status = 1
    try:
        status = run_job(spec, venvs)
    except SystemExit as ended:
        status = ended.code if isinstance(ended.code, int) else 1
    except Exception as error:  # the SDK's own failure: say it where the kernel looks
        print(f"the Kubeflow SDK's local backend failed: {error!r}", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(venvs, ignore_errors=True)
        if os.environ.get(ENV_AGENT_EXIT):
            Path(os.environ[ENV_AGENT_EXIT]).write_text(str(status))
    sys.stdout.flush()
    os._exit(status)  # the backend's job thread is not a daemon: do not wait on it


if __name__ == "__main__":
    main(sys.argv[1:])
