import atexit
import compileall
import fcntl
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings

# Hundreds of processes the tests start (ranks, kernels, agents, command lines) import the
# project's modules afresh. Where PYTHONDONTWRITEBYTECODE is set, as on CI, an editable install's
# sources are compiled again by every one of them (about 0.5 s of CPU each); compiled once here
# (under a second), before pytest-xdist starts its workers, they are read by all.
if "PYTEST_XDIST_WORKER" not in os.environ:
    ROOT = Path(__file__).resolve().parents[1]
    for folder in ("backend", "kernel", "widgets", "tests", "benchmarks"):
        compileall.compile_dir(ROOT / folder, quiet=1, workers=0)

# Each worker computes on one thread, as each rank it starts does (``runtime.spawn``): two
# workers share two cores, where a second OpenMP thread waits for a busy core at every small
# operator, so the tiny models' one-device oracles ran several times slower on two threads than
# on one (their values bit for bit the same on either).
if "PYTEST_XDIST_WORKER" in os.environ:
    import torch

    torch.set_num_threads(1)

# CI must not flake: the same examples every run (plus hypothesis' explicit database-free search).
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
settings.load_profile("ci")

# Run folders (events.jsonl of every job the tests start) go to a temporary folder, not the
# user's home; kernels and ranks the tests start inherit it.
if "HOTSWITCH_RUNS" not in os.environ:
    os.environ["HOTSWITCH_RUNS"] = tempfile.mkdtemp(prefix="hotswitch-test-runs-")
    atexit.register(shutil.rmtree, os.environ["HOTSWITCH_RUNS"], ignore_errors=True)


# The suite runs on pytest-xdist workers (``-n`` in pyproject.toml) with the scheduler below:
# each test file runs whole on one worker, so its module fixtures (a spawned oracle run, a kernel, a
# cluster) start once; each tutorial notebook is a unit of its own. The tests that start clusters
# on loopback (Slurm, Ray, Kubeflow's local backend, notebook 4) form one unit, run first, one
# after another on one worker. Their daemons must start within their own deadlines (a Ray
# raylet's is 30 s), so the other worker meanwhile runs the units that start no ranks: the
# single-process files of QUIET, then every short file. Then the long units go out longest first
# (the durations measured on a 2-core machine, in LONGEST), so that no long unit starts last
# while the other worker idles.
CLUSTERS = (
    "tests/kernel/launch/slurm/test_slurm_launcher.py",
    "tests/kernel/launch/ray/test_ray_launcher.py",
    "tests/kernel/launch/kubeflow/test_kubeflow_local.py",
    "tests/notebooks/test_notebooks.py::test_notebook_runs_top_to_bottom[04-clusters]",
)
NOTEBOOK_RUNS = "tests/notebooks/test_notebooks.py::test_notebook_runs_top_to_bottom["
QUIET = ("tests/test_types.py", "tests/backend/switch/test_planner_properties.py")
LONGEST = (
    "tests/backend/train/loop/test_compiled_exact.py",
    "tests/benchmarks/test_benchmarks_smoke.py",
    "tests/backend/train/loop/test_packing_exact.py",
    "tests/kernel/notebook/cells/test_train_magic.py",
    "tests/backend/graph/test_compiled_regions.py",
    "tests/widgets/test_browser.py",
    "tests/benchmarks/test_moe_ranks.py",
    "tests/backend/train/loop/test_hot_switch_exact.py",
    "tests/kernel/cli/test_train_command.py",
    "tests/notebooks/test_notebooks.py::test_notebook_runs_top_to_bottom[05-your-own-model]",
    "tests/notebooks/test_notebooks.py::test_notebook_runs_top_to_bottom[01-quickstart]",
    "tests/backend/train/loop/test_mixed_precision.py",
    "tests/backend/models/test_expert_parallel.py",
    "tests/backend/train/state/test_distributed_optimizer.py",
    "tests/backend/train/loop/test_training_loop.py",
    "tests/kernel/notebook/test_kill_scenarios.py",
    "tests/notebooks/test_notebooks.py::test_notebook_runs_top_to_bottom[03-hot-switch-vs-static]",
    "tests/kernel/notebook/pools/test_warm_pool.py",
    "tests/backend/train/loop/test_gradient_oracle.py",
    "tests/kernel/notebook/jobs/test_detach_attach.py",
    "tests/notebooks/test_notebooks.py::test_notebook_runs_top_to_bottom[06-at-paper-scale]",
    "tests/notebooks/test_notebooks.py::test_notebook_runs_top_to_bottom[07-warm-ranks]",
    "tests/kernel/cli/test_demo_command.py",
    "tests/kernel/cli/test_simulate_command.py",
    "tests/backend/train/loop/test_prediction_watch.py",
    "tests/backend/models/test_families_distributed.py",
    "tests/backend/train/state/test_fused_update.py",
    "tests/kernel/notebook/cells/test_rank_debugger.py",
    "tests/kernel/notebook/jobs/test_bounded_jobs.py",
    "tests/backend/train/loop/test_activation_checkpointing.py",
    "tests/kernel/notebook/pools/test_warm_pool_exact.py",
    "tests/backend/train/tracking/test_tracking.py",
    "tests/kernel/notebook/cells/test_bad_inputs_magic.py",
    "tests/notebooks/test_notebooks.py::test_notebook_runs_top_to_bottom[02-inspect-plans]",
    "tests/backend/models/test_family_sft.py",
    "tests/backend/sim/test_context_parallel.py",
    "tests/kernel/launch/local/test_local_launcher.py",
    "tests/backend/train/state/test_frozen_weights.py",
    "tests/backend/models/test_chunked_loss.py",
    "tests/kernel/worker/test_heartbeat.py",
)


def _unit(nodeid: str) -> str:
    """The scheduling unit of a test: its file, or the notebook it runs."""
    return nodeid if nodeid.startswith(NOTEBOOK_RUNS) else nodeid.split("::")[0]


def pytest_collection_modifyitems(config, items):
    first = [_unit(test) for test in CLUSTERS] + list(QUIET)

    def rank(item) -> int:
        unit = _unit(item.nodeid)
        if unit in first:
            return first.index(unit)
        return len(first) + 1 + LONGEST.index(unit) if unit in LONGEST else len(first)

    items.sort(key=rank)  # stable: the rest keep their order


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """Refines ``--dist loadfile`` (pyproject.toml's); other modes keep xdist's schedulers."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class ClustersTogether(LoadFileScheduling):
        """Whole files in the collection's order (longest first: ``--no-loadscope-reorder``), each
        notebook alone, the cluster tests as one unit."""

        def _split_scope(self, nodeid: str) -> str:  # xdist's documented extension point
            if any(nodeid == test or nodeid.startswith(f"{test}::") for test in CLUSTERS):
                return "clusters"
            return nodeid if nodeid.startswith(NOTEBOOK_RUNS) else super()._split_scope(nodeid)

    return ClustersTogether(config, log)


@pytest.fixture(scope="module")
def one_cluster_at_a_time():
    """Holds a lock shared by every worker for the module's duration (the cluster files use it)."""
    path = os.path.join(tempfile.gettempdir(), f"hotswitch-test-clusters-{os.getuid()}.lock")
    with open(path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
