"""``hotswitch lab``: JupyterLab on the tutorial notebooks, with the hotswitch kernel installed."""

from __future__ import annotations

import importlib.util
import json
import os
import secrets
import socket
import sys
from pathlib import Path

from hotswitch.kernel.cli.tutorials import working_folder
from hotswitch.kernel.notebook.kernelspec import KERNEL_NAME, install_kernelspec

FIRST_PORT = 8888


def add_parser(sub) -> None:
    p = sub.add_parser("lab", help="start JupyterLab on the tutorials (installs the hotswitch kernel if missing)")
    p.add_argument(
        "--dir",
        default=None,
        help="folder to open; tutorials it lacks are copied in (default: the source checkout's notebooks/, "
        "or ./hotswitch-tutorials for an installed package)",
    )
    p.add_argument("--ip", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=None, help=f"port (default: the first free one from {FIRST_PORT})")
    p.add_argument("--token", default=None, help="access token (default: a new random one)")
    p.add_argument("--no-browser", action="store_true", help="do not open a browser")
    p.add_argument("--allow-root", action="store_true", help="let JupyterLab run as root (containers)")
    p.set_defaults(run=run)


def ensure_kernelspec(specs=None, prefix: str | None = None) -> tuple[str, bool]:
    """The folder of the 'hotswitch' kernelspec that ``specs`` (a ``KernelSpecManager``, by
    default Jupyter's search path) finds, and whether it was installed now: into ``prefix``,
    by default this virtual environment's, or for this user outside one."""
    from jupyter_client.kernelspec import KernelSpecManager

    found = (specs or KernelSpecManager()).find_kernel_specs().get(KERNEL_NAME)
    if found:
        return found, False
    if prefix is None and sys.prefix != sys.base_prefix:
        prefix = sys.prefix
    return install_kernelspec(user=prefix is None, prefix=prefix), True


def free_port(host: str, first: int = FIRST_PORT) -> int:
    """The first port from ``first`` that nothing listens on at ``host``."""
    for port in range(first, first + 100):
        with socket.socket() as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
            return port
    raise ValueError(f"no free port in {first}..{first + 99} on {host}; pass --port")


def lab_argv(root: str, ip: str, port: int, no_browser: bool, allow_root: bool) -> list[str]:
    argv = [
        sys.executable,
        "-m",
        "jupyterlab",
        f"--ServerApp.ip={ip}",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",  # the printed URL stays right: a taken port is an error
        f"--ServerApp.root_dir={root}",
    ]
    return argv + ["--no-browser"] * no_browser + ["--allow-root"] * allow_root


CHECKOUT = Path(__file__).resolve().parents[2]  # the source checkout's root, for an editable install


def docs_line(checkout: Path = CHECKOUT) -> str:
    """Where the docs are: the built site of a source checkout, how to build it, or the pages."""
    site = checkout / "docs" / "_build" / "html" / "index.html"
    if site.is_file():
        return f"the docs: {site.as_uri()}"
    if (checkout / "docs" / "conf.py").is_file():
        return f"the docs: {checkout / 'docs'} (build the site: python -m sphinx -b html docs docs/_build/html)"
    return "the docs: the docs/ folder of hotswitch's source (Markdown pages, built by Sphinx)"


def run(args) -> int:
    if importlib.util.find_spec("jupyterlab") is None:
        raise ValueError("JupyterLab is not installed in this environment; install it: pip install 'hotswitch[lab]'")
    root, copied = working_folder(args.dir)
    for name in copied:
        print(f"copied {name} into {root}")
    spec_dir, installed = ensure_kernelspec()
    print(f"{'installed' if installed else 'using'} the {KERNEL_NAME!r} kernel: {spec_dir}")
    python = json.loads((Path(spec_dir) / "kernel.json").read_text())["argv"][0]
    if os.path.abspath(python) != os.path.abspath(sys.executable):
        print(
            f"note: that kernel runs {python}, not this environment's {sys.executable}; "
            "`hotswitch kernel uninstall` it and run `hotswitch lab` again to use this one"
        )
    port = args.port or free_port(args.ip)
    token = args.token or secrets.token_urlsafe(24)
    host = socket.gethostname() if args.ip in ("0.0.0.0", "::", "") else args.ip
    host = f"[{host}]" if ":" in host else host
    if args.ip not in ("127.0.0.1", "localhost", "::1"):
        print(f"listening on {args.ip}: anyone who can reach this port and has the token can run code here")
    print(docs_line())
    print(f"JupyterLab on {root}: http://{host}:{port}/lab?token={token}", flush=True)
    # The token travels in the environment, not on the command line other users can read.
    os.execve(
        sys.executable,
        lab_argv(str(root), args.ip, port, args.no_browser, args.allow_root),
        {**os.environ, "JUPYTER_TOKEN": token},
    )
