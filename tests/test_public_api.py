"""The public API (``backend/api.py``): every exported name resolves, and the notebooks, the
README and the docs import nothing but those names, so that a module can move behind them
without breaking what users copied from them."""

import ast
import importlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hotswitch.backend.api import PUBLIC

ROOT = Path(__file__).resolve().parent.parent
FENCE = re.compile(r"```(?:python|py|\{code-cell\}[^\n]*)\n(.*?)```", re.S)


@pytest.mark.parametrize("package", PUBLIC)
def test_every_public_name_resolves(package):
    module = importlib.import_module(package)
    assert module.__all__, package
    for name in module.__all__:
        assert getattr(module, name) is not None, f"{package}.{name}"


def code_of_notebook(path: Path) -> list[str]:
    cells = json.loads(path.read_text())["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]


def code_of_markdown(path: Path) -> list[str]:
    return FENCE.findall(path.read_text())


def python_of(cell: str) -> str:
    """A cell's Python: its magic lines (``%%train ...``, ``%jobs``) left out."""
    return "\n".join("" if line.lstrip().startswith("%") else line for line in cell.splitlines())


def imports_outside_the_api(code: str) -> list[str]:
    """Each ``from hotswitch... import name`` or ``import hotswitch...`` that is not public."""
    bad = []
    for node in ast.walk(ast.parse(python_of(code))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("hotswitch"):
            module = node.module or ""
            exported = set(importlib.import_module(module).__all__) if module in PUBLIC else set()
            bad += [f"{module}.{a.name}" for a in node.names if a.name not in exported]
        elif isinstance(node, ast.Import):
            bad += [a.name for a in node.names if a.name.startswith("hotswitch") and a.name not in PUBLIC]
    return bad


def documents() -> list[Path]:
    return [
        *sorted(ROOT.glob("notebooks/*.ipynb")),
        ROOT / "README.md",
        *sorted(p for p in (ROOT / "docs").rglob("*.md") if not {"_build", "reference"} & set(p.parts)),
    ]


@pytest.mark.parametrize("path", documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_what_users_read_imports_only_the_public_api(path):
    cells = code_of_notebook(path) if path.suffix == ".ipynb" else code_of_markdown(path)
    bad = [name for cell in cells for name in imports_outside_the_api(cell)]
    assert bad == [], f"{path.name} imports {bad}; export them from one of {PUBLIC} (backend/api.py)"


def test_the_public_packages_import_without_torch():
    code = (
        "import sys, hotswitch.backend, hotswitch.backend.sim, hotswitch.widgets, hotswitch.kernel; "
        "print(sorted(m for m in ('torch', 'IPython', 'plotly') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
