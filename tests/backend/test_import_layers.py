"""The backend's layers import downwards only: runtime (communication) below parallel below
switch below graph below train,
the engine never imports the notebook side (widgets, kernel), and the library never imports
the paper's experiment (``sim.paper``: baselines, measured logs, calibrations, grids), which
only the command line, benchmarks, notebooks and tests read."""

import ast
from pathlib import Path

import pytest

import hotswitch.backend

BACKEND = Path(hotswitch.backend.__file__).parent

PAPER = "hotswitch.backend.sim.paper"

# importer layer -> layers it must not import (a layer is a module and everything under it;
# a module inside a forbidden layer may import that layer, as the experiment imports itself)
FORBIDDEN = {
    "hotswitch.backend.runtime": (
        "hotswitch.backend.parallel",
        "hotswitch.backend.graph",
        "hotswitch.backend.switch",
        "hotswitch.backend.train",
    ),
    "hotswitch.backend.parallel": ("hotswitch.backend.graph", "hotswitch.backend.switch", "hotswitch.backend.train"),
    "hotswitch.backend.switch": ("hotswitch.backend.graph", "hotswitch.backend.train"),
    "hotswitch.backend.graph": ("hotswitch.backend.train",),
    "hotswitch.backend": ("hotswitch.kernel", "hotswitch.widgets", PAPER),
}


def module_name(path: Path) -> str:
    parts = path.relative_to(BACKEND).with_suffix("").parts
    return ".".join(("hotswitch", "backend", *(parts[:-1] if parts[-1] == "__init__" else parts)))


def lazy_exports(path: Path) -> dict[str, str]:
    """A package's ``_EXPORTS`` (name -> module), which ``from package import name`` reaches."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "_EXPORTS" for t in node.targets):
            return ast.literal_eval(node.value)
    return {}


def imported_modules(source: str, module: str, is_package: bool, exports: dict[str, dict[str, str]]) -> set[str]:
    """Every module ``source`` imports, anywhere in it (functions too), relative imports
    resolved; ``from package import name`` counts ``package.name`` and, for a lazy export,
    the module that defines ``name``."""
    package = module if is_package else module.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            target = ".".join(p for p in (base, node.module or "") if p)
            out.add(target)
            for alias in node.names:
                out.add(f"{target}.{alias.name}")
                if alias.name in exports.get(target, {}):
                    out.add(exports[target][alias.name])
    return out


def _within(name: str, layer: str) -> bool:
    return name == layer or name.startswith(layer + ".")


def violations(imports: dict[str, set[str]]) -> list[str]:
    return sorted(
        f"{module} imports {target}"
        for module, targets in imports.items()
        for layer, forbidden in FORBIDDEN.items()
        if _within(module, layer)
        for target in targets
        if any(_within(target, f) and not _within(module, f) for f in forbidden)
    )


def backend_imports() -> dict[str, set[str]]:
    paths = sorted(BACKEND.rglob("*.py"))
    exports = {module_name(p): lazy_exports(p) for p in paths if p.name == "__init__.py"}
    return {
        module_name(p): imported_modules(p.read_text(), module_name(p), p.name == "__init__.py", exports) for p in paths
    }


def test_backend_layers_import_downwards_only():
    imports = backend_imports()
    assert "hotswitch.backend.parallel.pipeline" in imports["hotswitch.backend.graph.compile"]  # the scan sees imports
    assert violations(imports) == []


def test_the_library_never_imports_the_papers_experiment():
    imports = backend_imports()
    experiment = {m for m in imports if _within(m, PAPER)}
    assert f"{PAPER}.baselines" in experiment and f"{PAPER}.compare" in experiment  # the scan reaches the subpackage
    assert "hotswitch.backend.sim.scenario" in imports[f"{PAPER}.compare"]  # the experiment reads the step model
    reaching = [line for line in violations(imports) if PAPER in line]
    assert reaching == [], "the library must not depend on the paper's experiment; move the import into sim.paper"


@pytest.mark.parametrize(
    ("module", "source", "offending"),
    [
        ("hotswitch.backend.runtime.x", "from hotswitch.backend.switch.needs import Need", "switch.needs"),
        ("hotswitch.backend.runtime.x", "def f():\n    import hotswitch.backend.graph.logical", "graph.logical"),
        ("hotswitch.backend.runtime.x", "from ..switch import plan", "switch.plan"),
        ("hotswitch.backend.runtime.x", "from hotswitch.backend import plan_switch", "switch.planner"),
        ("hotswitch.backend.switch.x", "from hotswitch.backend.train.loop import engine", "train"),
        ("hotswitch.backend.graph.x", "from hotswitch.backend.train.planning.cost import CostModel", "planning.cost"),
        ("hotswitch.backend.layout", "import hotswitch.widgets.graph.graph_view", "hotswitch.widgets"),
        ("hotswitch.backend.models.x", "from hotswitch.kernel import magics", "hotswitch.kernel"),
        (
            "hotswitch.backend.sim.scenario",
            "from hotswitch.backend.sim.paper.baselines import X",
            "sim.paper.baselines",
        ),
        ("hotswitch.backend.sim.step", "from .paper import compare", "sim.paper.compare"),
        ("hotswitch.backend.sim", "from hotswitch.backend.sim.paper import paper_grid", "sim.paper.grid"),
        ("hotswitch.backend.train.planning.x", "import hotswitch.backend.sim.paper.measured", "sim.paper.measured"),
    ],
)
def test_a_violation_is_reported(module, source, offending):
    exports = {
        "hotswitch.backend": lazy_exports(BACKEND / "__init__.py"),
        PAPER: lazy_exports(BACKEND / "sim" / "paper" / "__init__.py"),
    }
    found = violations({module: imported_modules(source, module, False, exports)})
    assert found and all(line.startswith(f"{module} imports ") for line in found)
    assert any(offending in line for line in found)


def test_allowed_directions_are_not_reported():
    allowed = {
        "hotswitch.backend.graph.compile": {"hotswitch.backend.parallel.pipeline", "hotswitch.backend.switch"},
        "hotswitch.backend.switch.executor": {"hotswitch.backend.runtime.flat_buffer"},
        "hotswitch.backend.train.loop.engine": {"hotswitch.backend.graph.compile"},
        "hotswitch.backend.runtime.flat_buffer": {
            "hotswitch.backend.layout",
            "hotswitch.backend.switchboard",
        },  # a name boundary,
        f"{PAPER}.grid": {f"{PAPER}.compare", "hotswitch.backend.sim.scenario"},  # the experiment reads the library
        "hotswitch.backend.sim.scenario": {"hotswitch.backend.sim.paperless"},  # a name boundary
    }
    assert violations(allowed) == []
