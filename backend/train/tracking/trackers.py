"""``--track`` targets: ``tensorboard:DIR``, ``mlflow:URI`` (a tracking URI, or a folder for a
local SQLite store: MLflow 3 keeps its plain-file store only for old runs) and ``wandb[:DIR]``
(offline unless the user's environment sets WANDB_MODE). Each is a sink taking events;
``close()`` flushes it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol

from hotswitch.backend.train.tracking.scalars import scalars

KINDS = ("tensorboard", "mlflow", "wandb")
EXPERIMENT = "hotswitch"  # the MLflow experiment runs are logged to
PARAM_CHARS = 500  # the longest parameter value every MLflow store takes


class Tracker(Protocol):
    def __call__(self, event: dict) -> None: ...

    def close(self, failed: bool = False) -> None: ...


def _require(module: str, extra: str = "tracking"):
    try:
        return __import__(module, fromlist=["_"])
    except ImportError:
        raise ImportError(f"--track needs {module.split('.')[0]!r}: pip install 'hotswitch[{extra}]'") from None


class TensorBoardTracker:
    def __init__(self, directory: str):
        writer = _require("torch.utils.tensorboard").SummaryWriter
        self.writer = writer(log_dir=directory)

    def __call__(self, event: dict) -> None:
        found = scalars(event)
        if found:
            step, values = found
            for name, value in values.items():
                self.writer.add_scalar(name, value, step, walltime=event.get("time"))

    def close(self, failed: bool = False) -> None:
        self.writer.close()


class MLflowTracker:
    """A run of the ``hotswitch`` experiment; in a local SQLite store its artifacts go beside the
    database (MLflow's default, ``./mlruns``, would be the rank's job folder, removed after)."""

    def __init__(self, uri: str, run_name: str, config: dict):
        os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")  # nothing leaves the machine unasked
        self.mlflow = _require("mlflow")
        artifacts = None
        if uri.startswith("sqlite:///"):
            store = Path(uri.removeprefix("sqlite:///")).parent
            store.mkdir(parents=True, exist_ok=True)
            artifacts = (store / "artifacts").as_uri()
        self.mlflow.set_tracking_uri(uri)
        experiment = self.mlflow.get_experiment_by_name(EXPERIMENT)
        found = experiment.experiment_id if experiment else self.mlflow.create_experiment(EXPERIMENT, artifacts)
        self.run = self.mlflow.start_run(run_name=run_name, experiment_id=found)
        self.mlflow.log_params({key: str(value)[:PARAM_CHARS] for key, value in config.items()})  # the run's settings

    def __call__(self, event: dict) -> None:
        found = scalars(event)
        if found:
            step, values = found
            self.mlflow.log_metrics(values, step=step)

    def close(self, failed: bool = False) -> None:
        self.mlflow.end_run(status="FAILED" if failed else "FINISHED")


class WandbTracker:
    def __init__(self, directory: str, run_name: str, config: dict):
        wandb = _require("wandb")
        mode = os.environ.get("WANDB_MODE", "offline")  # online only when the user's environment asks
        self.run = wandb.init(dir=directory, name=run_name, config=config, mode=mode, reinit="finish_previous")

    def __call__(self, event: dict) -> None:
        found = scalars(event)
        if found:
            step, values = found
            self.run.log(values, step=step)

    def close(self, failed: bool = False) -> None:
        self.run.finish(exit_code=1 if failed else 0)


def check_track(target, resolve) -> str:
    """``target`` checked, its folder made absolute by ``resolve``; ValueError naming the fix
    for one that is not ``tensorboard:DIR``, ``mlflow:URI`` or ``wandb[:DIR]``."""
    kind, _, where = target.partition(":") if isinstance(target, str) else ("", "", "")
    if kind not in KINDS:
        raise ValueError(f"cannot track to {target!r}: give tensorboard:DIR, mlflow:URI or wandb")
    if kind != "wandb" and not where:
        raise ValueError(f"--track {kind} needs a place: {kind}:{'DIR' if kind == 'tensorboard' else 'URI'}")
    if kind == "mlflow" and ":" not in where:  # a folder: a local SQLite store in it
        where = f"sqlite:///{resolve(where) / 'mlflow.db'}"
    elif kind == "mlflow" and where.startswith("sqlite:///"):  # a relative database: the ranks' folder is not yours
        where = f"sqlite:///{resolve(where.removeprefix('sqlite:///'))}"
    elif kind == "mlflow" and where.startswith("file:"):
        raise ValueError(
            f"--track {target}: MLflow 3 keeps its plain-file store for old runs only; give a folder "
            "(mlflow:DIR, a SQLite store in it) or a server's http(s):// URI"
        )
    elif kind != "mlflow" and where:
        where = str(resolve(where))
    problem = unreachable(kind, where)
    if problem:
        raise ValueError(f"--track {target}: {problem}")
    return f"{kind}:{where}" if where else kind


SERVER_WAIT_S = 5.0  # how long a tracking server may take to answer before the run is refused


def unreachable(kind: str, where: str) -> str | None:
    """Why rank 0 could not write to the tracker (a folder that cannot be made, a server that
    does not answer within ``SERVER_WAIT_S``); None where it can."""
    from hotswitch.backend.train.config.paths import unwritable

    folder = where  # tensorboard's or wandb's folder (none: wandb's default)
    if kind == "mlflow":
        if where.startswith(("http://", "https://")):
            return server_silent(where)
        if not where.startswith("sqlite:///"):
            return None  # another store (a database server): its own client says what is wrong
        folder = str(Path(where.removeprefix("sqlite:///")).parent)
    problem = unwritable(folder) if folder else None
    return f"{problem}; choose a folder you can write" if problem else None


def server_silent(uri: str) -> str | None:
    """Why the MLflow server at ``uri`` cannot be reached (any HTTP answer, an error status
    too, means it can)."""
    import urllib.error
    import urllib.request

    try:
        urllib.request.urlopen(f"{uri.rstrip('/')}/health", timeout=SERVER_WAIT_S).close()
    except urllib.error.HTTPError:
        return None
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", error)
        return (
            f"the MLflow server did not answer within {SERVER_WAIT_S:g} s ({reason}); start it "
            "(mlflow server --host 127.0.0.1 --port 5000) or give another URI"
        )
    return None


def open_tracker(target: str, run_name: str, config: dict, workdir: Path) -> Tracker:
    """The tracker ``target`` names (checked by ``check_track``)."""
    kind, _, where = target.partition(":")
    if kind == "tensorboard":
        return TensorBoardTracker(where)
    if kind == "mlflow":
        return MLflowTracker(where, run_name, config)
    return WandbTracker(where or str(workdir), run_name, config)
