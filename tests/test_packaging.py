"""The distribution maps the top-level folders into the ``hotswitch`` namespace."""

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = {"backend": "hotswitch.backend", "widgets": "hotswitch.widgets", "kernel": "hotswitch.kernel"}


def test_every_package_folder_is_listed_in_pyproject():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    on_disk = {
        ".".join([FOLDERS[init.parent.relative_to(ROOT).parts[0]], *init.parent.relative_to(ROOT).parts[1:]])
        for folder in FOLDERS
        for init in (ROOT / folder).rglob("__init__.py")
    }
    assert listed == on_disk


def test_no_package_folder_holds_more_than_twenty_modules():
    """A folder is a concept: one that grows past 20 modules is split into subfolders."""
    crowded = {
        init.parent.relative_to(ROOT).as_posix(): count
        for folder in FOLDERS
        for init in (ROOT / folder).rglob("__init__.py")
        if (count := len([m for m in init.parent.glob("*.py") if m.name != "__init__.py"])) > 20
    }
    assert not crowded, f"split these folders by concept: {crowded}"


@pytest.mark.slow
def test_wheel_installs_and_imports(tmp_path):
    source = tmp_path / "source"  # a copy, so that the build leaves nothing in the work tree
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".venv", ".git", "build", "*.egg-info", "__pycache__"))
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp_path), str(source)],
        check=True,
        capture_output=True,
    )
    wheel = next(tmp_path.glob("hotswitch-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "hotswitch/backend/switch/planner.py" in names and "hotswitch/kernel/cli/main.py" in names
    shipped = {Path(n).name for n in names if ".data/data/share/hotswitch/notebooks/" in n}
    assert shipped == {p.name for p in (ROOT / "notebooks").glob("*.ipynb")}, "`hotswitch lab` copies these"
    target = tmp_path / "site"
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(target)
    code = "import hotswitch.backend, hotswitch.kernel.cli, hotswitch.widgets; print(hotswitch.backend.__file__)"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env={"PYTHONPATH": str(target)}, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().startswith(str(target))


def test_console_script_plans_a_switch():
    out = subprocess.run(
        [sys.executable, "-m", "hotswitch.kernel.cli", "plan-switch", "dp2tp2pp2", "dp8", "--model", "7b", "--json"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    import json

    summary = json.loads(out.stdout)
    assert set(summary) == {"balanced", "greedy", "naive", "bound"}
    assert summary["balanced"]["time_s"] >= summary["bound"]["time_s"] * (1 - 1e-9)
    assert summary["balanced"]["bytes_moved"] == summary["naive"]["bytes_moved"] > 0


def test_console_script_reports_bad_strategies():
    out = subprocess.run(
        [sys.executable, "-m", "hotswitch.kernel.cli", "plan-switch", "dp3", "tp3", "--model", "7b"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2
    assert "tp=3 does not divide 7b's n_heads=32" in out.stderr


def test_console_script_piped_into_a_reader_that_left_ends_quietly():
    """``hotswitch ... | head -1``: what is printed after the reader has gone has no reader, and
    no traceback says so; the exit status is a SIGPIPE death's, as a shell reports it."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader has gone before the first line
    command = [sys.executable, "-m", "hotswitch.kernel.cli", "plan-switch", "dp2", "tp2", "--model", "tiny"]
    try:
        out = subprocess.run(command, stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write_end)
    assert "Traceback" not in out.stderr and "BrokenPipeError" not in out.stderr, out.stderr
    assert out.returncode == 141, out
