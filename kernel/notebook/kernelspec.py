"""The ``hotswitch`` kernelspec: write it where Jupyter finds it, or remove it."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

KERNEL_NAME = "hotswitch"
DISPLAY_NAME = "Python 3 (hotswitch)"


def kernel_json(python: str = sys.executable) -> dict:
    """The kernel.json contents: this Python running ``python -m hotswitch.kernel``, with the
    message protocol version the kernel speaks (that of the ipykernel it is built on), as
    ipykernel's own kernelspec carries it."""
    from ipykernel.kernelspec import get_kernel_dict

    stock = get_kernel_dict()
    spec = {
        "argv": [python, "-m", "hotswitch.kernel", "-f", "{connection_file}"],
        "display_name": DISPLAY_NAME,
        "language": "python",
        "metadata": {"debugger": True},
    }
    if "kernel_protocol_version" in stock:
        spec["kernel_protocol_version"] = stock["kernel_protocol_version"]
    return spec


def install_kernelspec(user: bool = False, prefix: str | None = None) -> str:
    """Install (or replace) the kernelspec; return the directory it went to.

    ``user`` installs for this user, ``prefix`` under ``PREFIX/share/jupyter/kernels``; neither
    means the system-wide location (which may need root).
    """
    from jupyter_client.kernelspec import KernelSpecManager

    with tempfile.TemporaryDirectory() as source:
        (Path(source) / "kernel.json").write_text(json.dumps(kernel_json(), indent=1))
        return KernelSpecManager().install_kernel_spec(source, KERNEL_NAME, user=user, prefix=prefix)


def uninstall_kernelspec(prefix: str | None = None) -> str:
    """Remove the kernelspec Jupyter would use, or the one installed into ``prefix``; return the
    removed directory.

    Raises ValueError if none is installed there.
    """
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    specs = KernelSpecManager()
    if prefix is not None:
        specs = KernelSpecManager(kernel_dirs=[str(Path(prefix).expanduser() / "share" / "jupyter" / "kernels")])
    try:
        return specs.remove_kernel_spec(KERNEL_NAME)
    except (KeyError, NoSuchKernel):
        where = f" under --prefix {prefix}" if prefix is not None else ""
        raise ValueError(f"no {KERNEL_NAME!r} kernelspec is installed{where}; see `jupyter kernelspec list`") from None
