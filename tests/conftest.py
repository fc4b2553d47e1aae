import atexit
import fcntl
import os
import shutil
import tempfile

import pytest
from hypothesis import settings

# CI must not flake: the same examples every run (plus hypothesis' explicit database-free search).
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
settings.load_profile("ci")

# Run folders (events.jsonl of every job the tests start) go to a temporary folder, not the
# user's home; kernels and ranks the tests start inherit it.
if "HOTSWITCH_RUNS" not in os.environ:
    os.environ["HOTSWITCH_RUNS"] = tempfile.mkdtemp(prefix="hotswitch-test-runs-")
    atexit.register(shutil.rmtree, os.environ["HOTSWITCH_RUNS"], ignore_errors=True)


# The suite runs on two workers (pytest-xdist, ``-n 2 --dist loadfile`` in pyproject.toml): each test
# file on one worker, so its module fixtures (a spawned oracle run, a kernel, a cluster) start once.
# The files that start clusters on loopback (Slurm, Ray, Kubeflow's local backend) or drive them from
# a notebook take turns (``one_cluster_at_a_time``); they go first, each beside a long file of the
# rest, so that the other worker has work meanwhile.
CLUSTERS = (
    "tests/kernel/launch/test_slurm_launcher.py",
    "tests/kernel/launch/test_ray_launcher.py",
    "tests/kernel/launch/test_kubeflow_local.py",
    "tests/notebooks/test_notebooks.py",
)
LONG = (
    "tests/backend/train/loop/test_gradient_oracle.py",
    "tests/backend/train/loop/test_hot_switch_exact.py",
    "tests/benchmarks/test_benchmarks_smoke.py",
    "tests/kernel/notebook/test_train_magic.py",
)
FIRST = [path for pair in zip(CLUSTERS, LONG, strict=True) for path in pair]


def pytest_collection_modifyitems(config, items):
    def rank(item) -> int:
        path = item.nodeid.split("::")[0]
        return FIRST.index(path) if path in FIRST else len(FIRST)

    items.sort(key=rank)  # stable: the rest keep their order


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
