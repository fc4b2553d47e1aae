"""Where the tutorial notebooks are: the source checkout's ``notebooks/``, or the copies a wheel
installs under ``PREFIX/share/hotswitch/notebooks`` (pyproject's data-files)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import hotswitch.kernel

DEFAULT_FOLDER = "hotswitch-tutorials"


def checkout_tutorials() -> Path | None:
    """``notebooks/`` beside the package folders when running from a source checkout."""
    folder = Path(hotswitch.kernel.__file__).resolve().parents[1] / "notebooks"
    return folder if folder.is_dir() else None


def installed_tutorials(prefix: str | Path = sys.prefix) -> Path | None:
    folder = Path(prefix) / "share" / "hotswitch" / "notebooks"
    return folder if folder.is_dir() else None


def working_folder(requested: str | Path | None, prefix: str | Path = sys.prefix) -> tuple[Path, list[str]]:
    """The folder JupyterLab opens, and the tutorials copied into it now.

    A source checkout's notebooks are opened in place. Otherwise (or when a folder is asked
    for) the tutorials are copied into ``requested`` or ``./hotswitch-tutorials``; a notebook
    already there is never overwritten, so your edits stay."""
    checkout = checkout_tutorials()
    if requested is None and checkout is not None:
        return checkout, []
    source = checkout or installed_tutorials(prefix)
    if source is None and requested is None:
        raise ValueError(
            f"no tutorial notebooks found (no source checkout, nothing in {Path(prefix) / 'share' / 'hotswitch'}); "
            "reinstall hotswitch, or pass --dir to open a folder of your own"
        )
    target = Path(requested or DEFAULT_FOLDER).resolve()
    target.mkdir(parents=True, exist_ok=True)
    copied = []
    for notebook in sorted(source.glob("*.ipynb")) if source else []:
        if not (target / notebook.name).exists():
            shutil.copyfile(notebook, target / notebook.name)
            copied.append(notebook.name)
    return target, copied
