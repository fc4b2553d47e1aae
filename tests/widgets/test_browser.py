"""The views render in a real JupyterLab page in Debian's chromium, and a live job obeys them.

The notebook runs on the hotswitch kernel: a graph view, then a real ``%%train -n 4`` job whose
dashboard must redraw while the ranks train; picking a strategy in the dashboard must change
the job's plan, and its stop button must end the job with no rank left behind.

Needs the system browser: ``apt-get install -y chromium`` (the test fails, never skips,
without it). Screenshots go to $HOTSWITCH_ARTIFACTS or tests/artifacts/; ``dashboard.png``
there is the live dashboard after the plan change (the README shows it).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import nbformat
import pytest

from tests.widgets.lab_server import lab_server
from tests.widgets.page_waits import CAP_S, STALL_S, Progress, holds_within, wait_for

pytestmark = pytest.mark.slow

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ROOT = Path(__file__).resolve().parents[2]
STEPS = 100_000  # never reached: the job is still training when it is steered (200 ran out on a loaded machine)
TP4, DP4 = "dp1tp4pp1", "dp4tp1pp1"
HOT_SWITCH_STEPS, TP4_STEPS = 8, 12  # drawn before and after the switch (dashboard.png shows both)

GRAPH_CELL = """from hotswitch.backend.graph.logical import LogicalGraph
from hotswitch.backend.models import get_config
from hotswitch.widgets import GraphView
GraphView.of(LogicalGraph.build(get_config("tiny"), ["dp4", "tp4", "dp2tp2"]))"""
# within 4.5 MB per rank dp4 holds sequences up to 80 tokens, tp4 all 96: a hot-switch plan
TRAIN_CELL = f"""%%train -n 4 --name live --timeout 1500
from hotswitch.backend.train.run.recipe import run
run({{"model": "tiny", "steps": {STEPS}, "batch_size": 8, "max_len": 96, "plan": [["tp4", 64], ["dp4", 0]],
     "memory_budget": 4.5e6}}, job.emit, job.control)"""
CHECK_CELL = """live = jobs["live"]
print("status:", live.wait(60))
print("plan:", live.plan["source"], live.plan["buckets"])
print("ranks left:", live.pids())"""
CELLS = [GRAPH_CELL, TRAIN_CELL, CHECK_CELL]
GRAPH, TRAIN, CHECK = range(3)

CELL = "document.querySelectorAll('.jp-Notebook .jp-Cell')[%d]"
PLOTS = f"[...{CELL}.querySelectorAll('.js-plotly-plot')]"
# a plot's div appears before its figure arrives: wait for drawn points, not the div
DRAWN = f"(() => {{ const p = {PLOTS}; return p.length >= %d && p.every(f => (f.data || []).some(t => (t.x || []).length > 0)); }})()"  # noqa: E501
POINTS = f"({PLOTS}[0]?.data?.[0]?.x?.length ?? 0)"
DRAWN_POINTS = "[0, 1].map(c => [...document.querySelectorAll('.jp-Notebook .jp-Cell')[c].querySelectorAll('.js-plotly-plot')].map(p => (p.data || []).map(t => (t.x || []).length)))"  # noqa: E501
OUTPUT = f"({CELL}?.querySelector('.jp-OutputArea')?.innerText ?? '')"
PROGRESS = f"({CELL}?.querySelector('.widget-html-content')?.innerText ?? '')"  # the dashboard's first HTML
STEP_SHOWN = f"(parseInt({PROGRESS}) || 0)"  # "N / 100000 steps — ETA ..."
RUN_CELL = """(index) => {
    const notebook = window.jupyterapp.shell.currentWidget.content;
    notebook.activeCellIndex = index;
    notebook.deselectAll();
    void window.jupyterapp.commands.execute('notebook:run-cell');
}"""


def _artifacts() -> Path:
    folder = Path(os.environ.get("HOTSWITCH_ARTIFACTS") or ROOT / "tests" / "artifacts")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
def lab(tmp_path):
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: install Debian's browser with `apt-get install -y chromium`")
    root, home = tmp_path / "root", tmp_path / "home"
    root.mkdir()
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in CELLS])
    notebook.metadata["kernelspec"] = {"name": "hotswitch", "display_name": "hotswitch", "language": "python"}
    nbformat.write(notebook, root / "live.ipynb")
    env = {"HOTSWITCH_CACHE": str(home / "cache"), "HOTSWITCH_RUNS": str(home / "runs")}  # profiles measured afresh
    with lab_server(root, home, env) as server:
        yield server


def _choose(progress, select, value: str, effect: str, what: str, tries: int = 3) -> None:
    """Pick ``value`` and wait for ``effect``; on a loaded machine the first pick can land
    before the widget view listens, so pick again (its change event fires each time) before failing."""
    for attempt in range(tries):
        select.select_option(value)
        if attempt == tries - 1:
            wait_for(progress, effect, what)
        elif holds_within(progress.page, effect, 30.0):
            return


def _job_events(runs: Path, lines: int = 15) -> str:
    """The newest run folder's outcome and last events: how far the job got."""
    found = sorted(runs.glob("*/events.jsonl"), key=lambda p: p.stat().st_mtime)
    if not found:
        return f"no run folder with events in {runs}"
    summary = found[-1].with_name("job.json")
    tail = found[-1].read_text(errors="replace").splitlines()[-lines:]
    return "\n".join([f"run {found[-1].parent.name}:", summary.read_text()[-1500:] if summary.exists() else "", *tail])


def _accept_kernel_dialog(page) -> None:
    """JupyterLab may ask which kernel to start; take the notebook's."""
    select = page.locator(".jp-Dialog button", has_text="Select")
    try:
        select.wait_for(timeout=5_000)
    except Exception:  # no dialog this time
        return
    select.click()


def _open_notebook(progress) -> None:
    page, lab = progress.page, progress.lab
    page.goto(lab.page("live.ipynb"))
    page.wait_for_selector(".jp-Notebook", timeout=90_000)
    _accept_kernel_dialog(page)
    idle = "document.querySelector('.jp-Notebook-ExecutionIndicator')?.dataset.status === 'idle'"
    wait_for(progress, idle, "the hotswitch kernel starting")
    assert page.evaluate("window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.name") == "hotswitch"


def _check_graph_view(progress, artifacts: Path) -> None:
    page = progress.page
    wait_for(progress, DRAWN % (GRAPH, 1), "the graph view drawing its nodes")
    assert page.evaluate(f"{PLOTS % GRAPH}.map(p => p.data.length)") == [9]  # edges + 8 node kinds
    select = page.locator(".jp-Cell").nth(GRAPH).locator(".widget-dropdown:has(label:text-is('strategy')) select")
    title = f"{PLOTS % GRAPH}[0].layout.title.text"
    _choose(progress, select, TP4, f"{title}.includes('{TP4}')", f"the graph view redrawing for {TP4}")
    assert "0 dummy" in page.evaluate(title)  # tp4 needs every comm node of the tiny model
    page.screenshot(path=str(artifacts / "widgets-rendered.png"), full_page=True)


def _check_dashboard_is_live(progress) -> None:
    page = progress.page
    wait_for(progress, DRAWN % (TRAIN, 2), "the job's dashboard drawing its first training steps")
    assert page.evaluate(f"{PLOTS % TRAIN}.map(p => p.data.length)") == [4, 4]  # tokens/s, loss, marks, eval; 4 phases
    shown, steps = page.evaluate(POINTS % TRAIN), page.evaluate(STEP_SHOWN % TRAIN)
    more = max(3, HOT_SWITCH_STEPS - shown)
    advanced = f"{POINTS % TRAIN} >= {shown + more} && {STEP_SHOWN % TRAIN} >= {steps + more}"
    wait_for(progress, advanced, f"the dashboard plotting {more} more steps and counting them after step {steps}")


def _switch_in_dashboard(progress) -> int:
    """Pick tp4 for every sequence; return the step at which the new plan was shown."""
    page = progress.page
    cell = page.locator(".jp-Cell").nth(TRAIN)
    select = cell.locator(".widget-dropdown:has(label:text-is('strategy')) select")
    offered = f"[...{CELL % TRAIN}.querySelectorAll('option')].some(o => o.value === '{TP4}')"
    wait_for(progress, offered, f"the dashboard offering {TP4}")
    fixed = f"{OUTPUT % TRAIN}.includes('plan (fixed)') && {PLOTS % TRAIN}[0]?.data?.[2]?.x?.length === 1"
    _choose(progress, select, TP4, fixed, f"the dashboard showing the job's new plan and its mark after picking {TP4}")
    plan = cell.locator(".widget-html-content:has-text('plan (fixed)')").inner_text()
    assert TP4 in plan and DP4 not in plan, plan
    return page.evaluate(STEP_SHOWN % TRAIN)


def _screenshot_live(page, cell: int, path: Path) -> None:
    """The cell's output as it is now. Playwright's element screenshot waits for the element to
    hold still, which a dashboard redrawing ten times a second may never do on a loaded machine."""
    box = page.evaluate(
        f"""(() => {{
        const out = {CELL % cell}.querySelector('.jp-OutputArea');
        out.scrollIntoView({{block: 'start'}});
        const r = out.getBoundingClientRect();
        return {{x: r.x, y: r.y, width: r.width, height: Math.min(r.height, innerHeight - r.y)}};
    }})()"""
    )
    page.screenshot(path=str(path), clip=box)


def _stop_in_dashboard(progress) -> None:
    progress.page.locator(".jp-Cell").nth(TRAIN).locator("button:has-text('stop')").click()
    wait_for(progress, f"{PROGRESS % TRAIN}.includes('stopped')", "the dashboard showing the job stopped")


def _check_job_in_kernel(progress) -> None:
    page, lab = progress.page, progress.lab
    page.evaluate(RUN_CELL, CHECK)
    wait_for(progress, f"{OUTPUT % CHECK}.includes('ranks left:')", "the check cell printing the job's state")
    text = page.evaluate(OUTPUT % CHECK)
    assert "status: stopped" in text, text
    assert f"plan: fixed [['{TP4}', 0]]" in text, text
    assert "ranks left: []" in text, text
    deadline = time.monotonic() + STALL_S  # a stopped rank exits within seconds; this is a backstop
    while lab.ranks() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert lab.ranks() == [], f"rank processes outlived the stopped job: {lab.ranks()}"


@pytest.mark.timeout(CAP_S + 100)  # the test's own limit comes first: its failure says what the job did
def test_live_job_dashboard_renders_redraws_and_obeys_its_controls(lab, tmp_path):
    from playwright.sync_api import sync_playwright

    artifacts = _artifacts()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1600, "height": 1200})
        page.set_default_timeout(60_000)  # clicks and picks on a loaded machine
        console: list[str] = []  # the page's errors and warnings, shown when the test fails
        page.on("console", lambda m: console.append(f"{m.type}: {m.text}") if m.type in ("error", "warning") else None)
        page.on("pageerror", lambda error: console.append(f"page error: {error}"))
        progress = Progress(page, lab)
        try:
            _open_notebook(progress)
            page.evaluate(RUN_CELL, GRAPH)
            page.evaluate(RUN_CELL, TRAIN)  # queued: runs once the graph cell is done, returns at once
            _check_graph_view(progress, artifacts)
            _check_dashboard_is_live(progress)
            switched_at = _switch_in_dashboard(progress)
            after = switched_at + TP4_STEPS
            wait_for(progress, f"{POINTS % TRAIN} >= {after}", f"steps under the new plan being drawn up to {after}")
            _screenshot_live(page, TRAIN, artifacts / "dashboard.png")
            _stop_in_dashboard(progress)
            _check_job_in_kernel(progress)
            page.screenshot(path=str(artifacts / "widgets-after-controls.png"), full_page=True)
        except Exception:
            page.screenshot(path=str(artifacts / "widgets-failure.png"), full_page=True)
            print("points per trace, per plot of each cell:", page.evaluate(DRAWN_POINTS))
            print("the job cell's output:", page.evaluate(OUTPUT % TRAIN)[-3000:])
            print("browser console:", *console[-40:], sep="\n")
            print(lab.log_tail())
            print(_job_events(tmp_path / "home" / "runs"))
            print(lab.rank_stacks())
            raise
        finally:
            browser.close()
