"""The kernel's torch for a Kubeflow local job's virtual environment, without installing a copy.

The SDK's local backend makes a fresh virtual environment per job and pip-installs its
packages there, torch always among them (its runtime's own list), so that the environment's
``torchrun`` starts the ranks. A copy of torch is about 700 MB and took about a minute per job
on a 2-core machine. Instead the job installs ``pointer_wheel``: a wheel named ``torch``, of the
kernel's torch version, holding only a ``.pth`` file that puts the kernel's site-packages on the
environment's path and torch's ``torchrun`` entry point. The environment then imports the
kernel's very torch (the ranks import hotswitch from the kernel's environment already), and the
install takes seconds, offline.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import importlib.util
import zipfile
from pathlib import Path

NAME = "torch"
PTH = "hotswitch_kernel_torch.pth"


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def pointer_wheel(folder: Path) -> Path:
    """Write the pointer wheel into ``folder`` (made if missing) and return its path."""
    version = importlib.metadata.version(NAME)
    spec = importlib.util.find_spec(NAME)  # found, not imported: importing torch takes seconds
    if spec is None or spec.origin is None:
        raise RuntimeError("torch is not installed in the kernel's environment; install it there first")
    site = Path(spec.origin).resolve().parent.parent  # the folder holding the kernel's torch
    info = f"{NAME}-{version}.dist-info"
    files = {
        PTH: f"{site}\n".encode(),
        f"{info}/METADATA": (
            f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {version}\n"
            "Summary: the Jupyter kernel's torch, pointed at by a .pth file (hotswitch's Kubeflow local jobs)\n"
        ).encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: hotswitch\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{info}/entry_points.txt": b"[console_scripts]\ntorchrun = torch.distributed.run:main\n",
    }
    record = "\n".join([*(_record_line(n, d) for n, d in files.items()), f"{info}/RECORD,,"]) + "\n"
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / f"{NAME}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
        archive.writestr(f"{info}/RECORD", record)
    return wheel
