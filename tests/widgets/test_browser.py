"""The views render in a real JupyterLab page in Debian's chromium, and their controls work.

Needs the system browser: ``apt-get install -y chromium`` (the test fails, never skips,
without it). Screenshots go to $HOTSWITCH_ARTIFACTS or tests/artifacts/.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

from tests.widgets.recorded_events import recorded_events

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

CELLS = [
    """import json
from hotswitch.backend.graph.logical import LogicalGraph
from hotswitch.backend.models import get_config
from hotswitch.widgets import Dashboard, GraphView
graph_view = GraphView.of(LogicalGraph.build(get_config("tiny"), ["dp4", "tp4", "dp2tp2"]))
graph_view""",
    """import ipywidgets as widgets

class FakeJob:
    '''Records control calls and prints them where the page shows them.'''
    def __init__(self):
        self.out = widgets.Output()
    def switch(self, strategy="auto"):
        self.out.append_stdout(f"FakeJob.switch({strategy!r})\\n")
    def pause(self): pass
    def resume(self): pass
    def stop(self): pass
    def checkpoint(self, path=None): pass

job = FakeJob()
dashboard = Dashboard.replay(json.load(open("events.json")), job=job)
widgets.VBox([dashboard, job.out])""",
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _artifacts() -> Path:
    folder = Path(os.environ.get("HOTSWITCH_ARTIFACTS") or ROOT / "tests" / "artifacts")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: install Debian's browser with `apt-get install -y chromium`")
    root = tmp_path_factory.mktemp("lab-root")
    home = tmp_path_factory.mktemp("lab-home")
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in CELLS])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(notebook, root / "widgets.ipynb")
    (root / "events.json").write_text(json.dumps(recorded_events(steps=30, switch_at=12)))
    port, token = _free_port(), secrets.token_hex(16)
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "JUPYTER_CONFIG_DIR": str(home / "config"),
        "JUPYTER_DATA_DIR": str(home / "data"),
        "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
    }
    command = [sys.executable, "-m", "jupyterlab", "--no-browser", f"--ServerApp.port={port}",
               "--ServerApp.ip=127.0.0.1", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
               f"--LabApp.workspaces_dir={home / 'workspaces'}", "--ServerApp.port_retries=0", "--allow-root",
               "--LabApp.extension_manager=readonly",  # loopback only: no extension index look-ups
               "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]  # fmt: skip
    log = open(home / "lab.log", "w")  # noqa: SIM115 - closed in the finalizer
    server = subprocess.Popen(command, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2) as reply:
                    if reply.status == 200:
                        break
            except OSError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"JupyterLab did not start:\n{(home / 'lab.log').read_text()[-3000:]}")
            time.sleep(0.5)
        yield f"{url}/lab/tree/widgets.ipynb?token={token}"
    finally:
        server.terminate()
        try:
            server.wait(15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(5)
        log.close()


DRAWN = """(() => {
    const plots = [...document.querySelectorAll('.js-plotly-plot')];
    return plots.length >= 3 && plots.slice(0, 3).every(p => (p.data || []).some(t => (t.x || []).length > 0));
})()"""


GRAPH_TITLE_SHOWS = "document.querySelectorAll('.js-plotly-plot')[0].layout.title.text.includes('%s')"


def _choose(page, select, value: str, effect: str, tries: int = 4) -> None:
    """Pick ``value`` and wait for ``effect``; on a loaded machine the first pick can land
    before the widget view listens, so pick again (a few times) before failing."""
    for attempt in range(tries):
        select.select_option(value)
        try:
            _wait_for(page, effect, 20)
            return
        except Exception:
            if attempt == tries - 1:
                raise
            select.select_option(index=0)


def _accept_kernel_dialog(page) -> None:
    """JupyterLab may ask which kernel to start; take the notebook's (Python 3)."""
    select = page.locator(".jp-Dialog button", has_text="Select")
    try:
        select.wait_for(timeout=5_000)
    except Exception:  # no dialog this time
        return
    select.click()


def _wait_for(page, script: str, timeout_s: float = 60):
    page.wait_for_function(script, timeout=timeout_s * 1000)


def test_graph_view_and_dashboard_render_and_respond(lab):
    from playwright.sync_api import sync_playwright

    artifacts = _artifacts()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1600, "height": 1200})
            page.goto(lab)
            page.wait_for_selector(".jp-Notebook", timeout=90_000)
            _accept_kernel_dialog(page)
            _wait_for(page, "document.querySelector('.jp-Notebook-ExecutionIndicator')?.dataset.status === 'idle'", 90)
            page.locator("li.lm-MenuBar-item", has_text="Run").first.click()
            page.locator("li.lm-Menu-item", has_text="Run All Cells").first.click()
            _accept_kernel_dialog(page)
            # a plot's div appears before its figure arrives: wait for drawn points, not the div
            _wait_for(page, DRAWN, 120)
            page.screenshot(path=str(artifacts / "widgets-rendered.png"), full_page=True)

            traces = page.evaluate("[...document.querySelectorAll('.js-plotly-plot')].map(p => p.data.length)")
            assert traces[:3] == [9, 3, 4], traces  # graph: edges + 8 kinds; tokens/s, loss, marks; 4 phases
            steps = page.evaluate("document.querySelectorAll('.js-plotly-plot')[1].data[0].x.length")
            assert steps == 30

            selects = page.locator(".widget-dropdown:has(label:text-is('strategy')) select")
            _choose(page, selects.nth(0), "dp1tp4pp1", GRAPH_TITLE_SHOWS % "dp1tp4pp1")
            title = page.evaluate("document.querySelectorAll('.js-plotly-plot')[0].layout.title.text")
            assert "0 dummy" in title  # tp4 needs every comm node of the tiny model

            selects.nth(1).select_option("dp2tp2")
            page.get_by_text("FakeJob.switch('dp2tp2')").wait_for(timeout=30_000)
            assert page.get_by_text("sent switch dp2tp2").count() == 1
            page.screenshot(path=str(artifacts / "widgets-after-controls.png"), full_page=True)
        except Exception:
            page.screenshot(path=str(artifacts / "widgets-failure.png"), full_page=True)
            raise
        finally:
            browser.close()
