"""``hotswitch kernel install|uninstall``: manage the "Python 3 (hotswitch)" Jupyter kernel."""

from __future__ import annotations

import sys

from hotswitch.kernel.notebook.kernelspec import install_kernelspec, uninstall_kernelspec


def add_parser(sub) -> None:
    p = sub.add_parser("kernel", help="install or remove the hotswitch Jupyter kernel")
    actions = p.add_subparsers(dest="action", required=True)
    install = actions.add_parser("install", help="install the kernelspec 'hotswitch'")
    where = install.add_mutually_exclusive_group()
    where.add_argument("--user", action="store_true", help="for this user only")
    where.add_argument("--sys-prefix", action="store_true", help=f"into this Python's prefix ({sys.prefix})")
    where.add_argument("--prefix", default=None, help="into PREFIX/share/jupyter/kernels")
    uninstall = actions.add_parser("uninstall", help="remove the kernelspec 'hotswitch' (the one Jupyter would use)")
    uninstall.add_argument("--prefix", default=None, help="the one installed into PREFIX (install --prefix)")
    p.set_defaults(run=run)


def run(args) -> int:
    if args.action == "uninstall":
        print(f"removed {uninstall_kernelspec(args.prefix)}")
        return 0
    prefix = sys.prefix if args.sys_prefix else args.prefix
    try:
        where = install_kernelspec(user=args.user, prefix=prefix)
    except OSError as error:
        place = f"--prefix {prefix}" if prefix else "the kernelspec folder"
        raise ValueError(
            f"cannot install the kernel into {place}: {error.strerror or error} ({error.filename}); "
            "choose a folder you can write with --prefix, or use --user"
        ) from None
    print(f"installed {where}")
    return 0
