"""Experiment tracking: a 2-rank run's events written by rank 0 to TensorBoard, an MLflow file
store and an offline Weights & Biases run, read back by each tool's own reader."""

import pytest

from hotswitch.backend.runtime.spawn import spawn_ranks
from hotswitch.backend.train.run.recipe import ENV_NOTEBOOK_DIR, check_spec

from .tracking_workers import failed_then_tracked, tracked_run

STEPS = 4
SPEC = {
    "steps": STEPS,
    "plan": "dp2",
    "max_len": 64,
    "batch_size": 4,
    "token_budget": 256,
    "eval_every": 2,
    "track": ["tensorboard:tb", "mlflow:mlruns", "wandb:wb"],
    "run_name": "lr-sweep-1",
}


@pytest.fixture(scope="module")
def tracked(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tracked")
    events = spawn_ranks(tracked_run, 2, SPEC, str(folder), timeout=600)[0]
    return folder, events


def test_tensorboard_reads_one_point_per_step(tracked):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    folder, events = tracked
    accumulator = EventAccumulator(str(folder / "tb"))
    accumulator.Reload()
    loss = accumulator.Scalars("train/loss")
    steps = [e for e in events if e["type"] == "step"]
    assert [p.step for p in loss] == list(range(1, STEPS + 1))
    assert [p.value for p in loss] == pytest.approx([e["loss"] for e in steps], rel=1e-6)
    assert [p.step for p in accumulator.Scalars("eval/loss")] == [2, 4]
    assert {"train/lr", "train/tokens_per_s", "time/switch_s"} <= set(accumulator.Tags()["scalars"])


def test_mlflow_local_store_holds_the_run_metrics(tracked):
    import mlflow

    folder, events = tracked
    client = mlflow.tracking.MlflowClient(tracking_uri=f"sqlite:///{folder / 'mlruns' / 'mlflow.db'}")
    runs = client.search_runs(experiment_ids=[e.experiment_id for e in client.search_experiments()])
    assert len(runs) == 1 and runs[0].info.status == "FINISHED"
    assert runs[0].info.run_name == "lr-sweep-1"  # the run's own name, not the job's
    assert runs[0].info.artifact_uri.startswith((folder / "mlruns" / "artifacts").as_uri())  # not the job's folder
    assert (runs[0].data.params["steps"], runs[0].data.params["plan"]) == (str(STEPS), "dp2")  # the run's settings
    history = client.get_metric_history(runs[0].info.run_id, "train/loss")
    assert sorted(m.step for m in history) == list(range(1, STEPS + 1))
    evals = [e["loss"] for e in events if e["type"] == "eval"]
    assert [
        m.value for m in sorted(client.get_metric_history(runs[0].info.run_id, "eval/loss"), key=lambda m: m.step)
    ] == pytest.approx(evals)


def test_wandb_writes_an_offline_run(tracked):
    folder, _ = tracked
    runs = list((folder / "wb" / "wandb").glob("offline-run-*"))
    assert len(runs) == 1
    assert list(runs[0].glob("*.wandb")), "the offline run's data file"


def test_a_run_that_raised_is_closed_failed_and_the_next_one_in_its_process_starts(tmp_path):
    import mlflow

    spec = {**SPEC, "plan": "dp1", "eval_every": None, "track": ["mlflow:sqlite:///stores/ml.db"]}
    spawn_ranks(failed_then_tracked, 1, spec, str(tmp_path), timeout=600)
    client = mlflow.tracking.MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'stores' / 'ml.db'}")  # relative: there
    runs = client.search_runs([client.get_experiment_by_name("hotswitch").experiment_id], order_by=["start_time"])
    assert [r.info.status for r in runs] == ["FAILED", "FINISHED"]


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.parametrize(
    ("track", "fragment"),
    [
        (["neptune:x"], "give tensorboard:DIR, mlflow:URI or wandb"),
        (["tensorboard"], "needs a place: tensorboard:DIR"),
        (["mlflow"], "needs a place: mlflow:URI"),
        (["mlflow:file:///tmp/runs"], "MLflow 3 keeps its plain-file store for old runs only; give a folder"),
        ("tensorboard:x", "give a list like"),
        (["tensorboard:/proc/1/tb"], "/proc/1 is not writable"),
        (["mlflow:/proc/1/ml"], "/proc/1 is not writable"),
        (["mlflow:http://127.0.0.1:{closed}"], "the MLflow server did not answer within 5 s"),
    ],
)
def test_a_bad_tracking_target_is_refused_before_launch(track, fragment, tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_NOTEBOOK_DIR, str(tmp_path))
    if isinstance(track, list):
        track = [t.format(closed=closed_port()) for t in track]
    with pytest.raises(ValueError) as error:
        check_spec({"track": track})
    assert fragment in str(error.value)
