"""The type checker (mypy, configured in pyproject.toml, the bodies of untyped functions checked
too) is clean on backend/, kernel/ and widgets/.

The folders are the packages `hotswitch.backend` and `hotswitch.kernel` only through setuptools'
package-dir, which mypy cannot follow through the editable install's import hook; so the test links
them under a `hotswitch/` folder inside mypy's cache and checks the packages by their real names.
"""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("backend", "kernel", "widgets")


def package_tree(cache: Path) -> Path:
    """A folder holding `hotswitch/<package>` links to the repository's package folders."""
    tree = cache / "package_tree"
    namespace = tree / "hotswitch"
    namespace.mkdir(parents=True, exist_ok=True)
    for name in PACKAGES:
        link = namespace / name
        if link.is_symlink() and link.resolve() != (ROOT / name).resolve():  # a moved checkout's
            link.unlink()
        if not link.is_symlink():
            link.symlink_to(ROOT / name, target_is_directory=True)
    return tree


def test_mypy_is_clean_on_backend_kernel_and_widgets():
    cache = ROOT / ".mypy_cache"  # mypy writes a .gitignore there, so the links stay out of git
    tree = package_tree(cache)
    command = [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml")]
    command += ["--cache-dir", str(cache)] + [arg for name in PACKAGES for arg in ("-p", f"hotswitch.{name}")]
    env = {**os.environ, "MYPYPATH": str(tree)}
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=540)
    assert result.returncode == 0, f"mypy found errors:\n{result.stdout}{result.stderr}"
    assert "Success: no issues found" in result.stdout
