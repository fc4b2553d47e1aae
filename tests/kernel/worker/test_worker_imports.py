"""A rank's side of the kernel package loads no Jupyter machinery (``hotswitch.kernel``'s rule)."""

import subprocess
import sys

JUPYTER = ("ipykernel", "ipywidgets", "IPython", "jupyter_client", "plotly")


def test_the_worker_entry_point_imports_no_jupyter_module():
    code = f"import sys, hotswitch.kernel.worker.entry; print(sorted(m for m in {JUPYTER!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
