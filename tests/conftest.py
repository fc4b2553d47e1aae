import atexit
import os
import shutil
import tempfile

from hypothesis import settings

# CI must not flake: the same examples every run (plus hypothesis' explicit database-free search).
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
settings.load_profile("ci")

# Run folders (events.jsonl of every job the tests start) go to a temporary folder, not the
# user's home; kernels and ranks the tests start inherit it.
if "HOTSWITCH_RUNS" not in os.environ:
    os.environ["HOTSWITCH_RUNS"] = tempfile.mkdtemp(prefix="hotswitch-test-runs-")
    atexit.register(shutil.rmtree, os.environ["HOTSWITCH_RUNS"], ignore_errors=True)
