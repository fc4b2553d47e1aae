"""Every tutorial notebook runs top to bottom on the hotswitch kernel, and what it showed backs
its claims (``claims.py`` reads the executed outputs). A reader sees prose, code and results: an
``assert`` lives only in a cell tagged ``hidden-check``. The kernelspec goes into a temporary
prefix: the user's Jupyter is untouched."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import psutil
import pytest
from nbclient import NotebookClient

from hotswitch.kernel.notebook.kernelspec import KERNEL_NAME, install_kernelspec
from hotswitch.widgets.dashboard import PHASE_COLORS
from tests.kernel.kernel_session import SocketFileKernelManager
from tests.notebooks.claims import CLAIMS

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
# Seconds for the whole notebook on a busy 2-core CI machine (about 3x what an idle one needs).
BUDGET_S = {
    "01-quickstart": 300,
    "02-inspect-plans": 180,
    "03-hot-switch-vs-static": 420,
    "04-clusters": 300,
    "05-your-own-model": 420,
    "06-at-paper-scale": 120,
    "07-warm-ranks": 300,
}
CELL_TIMEOUT_S = 240
# What each cell tagged raises-exception shows, in order: the refusal the notebook demonstrates.
REFUSALS = {"07-warm-ranks": ["UsageError: pool 'warm' has 2 ranks and this cell asks for 4"]}
# notebooks that start clusters on loopback, and so take turns with the cluster tests (tests/conftest.py)
STARTS_CLUSTERS = {"04-clusters"}
# the trace names of a Dashboard's two figures
LIVE_DASHBOARD = [{"tokens/s", "loss", "plan change", "held-out loss"}, set(PHASE_COLORS)]
# a check that needs objects the notebook does not show; JupyterLab hides cells with this tag
HIDDEN_CHECK = "hidden-check"
ASSERT = re.compile(r"^\s*assert\b", re.MULTILINE)


@pytest.fixture(scope="module")
def jupyter_path(tmp_path_factory):
    prefix = tmp_path_factory.mktemp("jupyter-prefix")
    install_kernelspec(prefix=str(prefix))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("JUPYTER_PATH", str(prefix / "share" / "jupyter"))
        yield prefix


def test_there_is_a_budget_and_claims_for_every_notebook():
    assert {path.stem for path in NOTEBOOKS} == set(BUDGET_S) == set(CLAIMS)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebooks_are_committed_clean_for_the_hotswitch_kernel(path):
    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    assert notebook.metadata["kernelspec"]["name"] == KERNEL_NAME
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert all(not cell.outputs and cell.execution_count is None for cell in code), "clear the outputs"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_reader_sees_no_assert(path):
    code = [cell for cell in nbformat.read(path, as_version=4).cells if cell.cell_type == "code"]
    seen = [
        cell.id for cell in code if ASSERT.search(cell.source) and HIDDEN_CHECK not in cell.metadata.get("tags", [])
    ]
    assert seen == [], f"show the value and check it in tests/notebooks/claims.py, or tag the cell {HIDDEN_CHECK!r}"
    hidden = [cell for cell in code if HIDDEN_CHECK in cell.metadata.get("tags", [])]
    assert all(cell.metadata.get("jupyter", {}).get("source_hidden") for cell in hidden), "collapse a hidden check"


@pytest.mark.slow
@pytest.mark.parametrize(
    "path", [pytest.param(p, marks=pytest.mark.timeout(BUDGET_S.get(p.stem, 1)), id=p.stem) for p in NOTEBOOKS]
)
def test_notebook_runs_top_to_bottom(path, jupyter_path, tmp_path, request):
    if path.stem in STARTS_CLUSTERS:
        request.getfixturevalue("one_cluster_at_a_time")
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(
        notebook,
        kernel_name=KERNEL_NAME,
        kernel_manager_class=SocketFileKernelManager,  # nbclient's own, shut down as it returns
        timeout=CELL_TIMEOUT_S,
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()  # a failing cell (a hidden check among them) raises CellExecutionError with its traceback
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert all(cell.execution_count for cell in code), "every code cell ran"
    refusing = [cell for cell in code if "raises-exception" in cell.metadata.get("tags", [])]
    errors = [o for cell in code if cell not in refusing for o in cell.outputs if o.output_type == "error"]
    assert errors == []
    shown, expected = [_shown(cell) for cell in refusing], REFUSALS.get(path.stem, [])
    assert len(shown) == len(expected) and all(e in s for e, s in zip(expected, shown)), shown
    drawn = _figures_drawn(notebook)
    # A live dashboard is redrawn from a background thread once its cell has returned, which
    # nbclient does not record (tests/widgets check dashboards drawing); every other view draws
    # in the cell that shows it.
    views = [names for names in drawn if set(names) not in LIVE_DASHBOARD]
    assert [names for names in views if not any(names.values())] == [], "a view the notebook shows is blank"
    assert {p.pid for p in psutil.Process().children(recursive=True)} <= before, "a process outlived the kernel"
    CLAIMS[path.stem](notebook)


def _shown(cell) -> str:
    """The text a cell showed: its streams, and its error as IPython writes it."""
    streams = [o.text for o in cell.outputs if o.output_type == "stream"]
    errors = [f"{o.ename}: {o.evalue}" for o in cell.outputs if o.output_type == "error"]
    return "".join(streams + errors)


def _figures_drawn(notebook) -> list[dict[str, int]]:
    """Each plotly figure widget the notebook showed, as the kernel last sent it to the front end
    (nbclient keeps the widgets' state): points drawn per trace, a graph view's edges left out."""
    state = notebook.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {})
    figures = [m["state"]["_widget_data"] for m in state.get("state", {}).values() if "_widget_data" in m["state"]]
    return [
        {t.get("name") or f"trace {j}": len(_points(t)) for j, t in enumerate(traces) if t.get("name") != "edges"}
        for traces in figures
    ]


def _points(trace: dict) -> list:
    for key in ("x", "z", "values", "y"):
        if trace.get(key) is not None and len(trace[key]):
            return trace[key]
    return []
