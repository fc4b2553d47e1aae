import atexit
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


# The suite runs on two workers (pytest-xdist, ``-n 2 --dist loadgroup`` in pyproject.toml): each
# test file stays on one worker (its module fixtures, e.g. a spawned oracle run, start once), and
# the files that start clusters on loopback (Slurm, Ray, Kubeflow's local backend) or drive them
# from a notebook share one worker, so two never run at once. That group is the longest: it goes
# first, and the other worker takes the rest file by file meanwhile.
CLUSTERS = {
    "tests/kernel/launch/test_slurm_launcher.py",
    "tests/kernel/launch/test_ray_launcher.py",
    "tests/kernel/launch/test_kubeflow_local.py",
    "tests/notebooks/test_notebooks.py",
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            path = item.nodeid.split("::")[0]
            item.add_marker(pytest.mark.xdist_group("clusters" if path in CLUSTERS else path))
    items.sort(key=lambda item: item.nodeid.split("::")[0] not in CLUSTERS)  # stable: the rest keep their order
