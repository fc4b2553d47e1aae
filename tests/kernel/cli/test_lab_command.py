"""``hotswitch lab``: the kernelspec is installed once, the tutorials are found or copied, and
JupyterLab serves them on loopback behind a token, leaving no process behind."""

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil
import pytest
from jupyter_client.kernelspec import KernelSpecManager

from hotswitch.kernel.cli.lab_command import FIRST_PORT, docs_line, ensure_kernelspec, free_port
from hotswitch.kernel.cli.tutorials import installed_tutorials, working_folder
from hotswitch.kernel.notebook.kernelspec import install_kernelspec

ROOT = Path(__file__).resolve().parents[3]
TUTORIALS = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))


def test_the_kernelspec_is_installed_when_missing_then_reused(tmp_path):
    kernels = tmp_path / "share" / "jupyter" / "kernels"
    folder, installed = ensure_kernelspec(KernelSpecManager(kernel_dirs=[str(kernels)]), prefix=str(tmp_path))
    assert installed and Path(folder).resolve() == (kernels / "hotswitch").resolve()
    argv = json.loads((Path(folder) / "kernel.json").read_text())["argv"]
    assert argv[:3] == [sys.executable, "-m", "hotswitch.kernel"]
    again = ensure_kernelspec(KernelSpecManager(kernel_dirs=[str(kernels)]), prefix=str(tmp_path))
    assert again == (folder, False)


def test_a_source_checkout_opens_its_notebooks_in_place():
    assert working_folder(None) == (ROOT / "notebooks", [])


def test_tutorials_are_copied_into_a_folder_and_edits_are_kept(tmp_path):
    (tmp_path / TUTORIALS[0]).write_text("my edits")
    root, copied = working_folder(tmp_path)
    assert root == tmp_path and copied == TUTORIALS[1:]
    assert (tmp_path / TUTORIALS[0]).read_text() == "my edits"
    assert sorted(p.name for p in tmp_path.glob("*.ipynb")) == TUTORIALS


def test_an_installed_package_finds_its_tutorials_under_its_prefix(tmp_path):
    assert installed_tutorials(tmp_path) is None
    shipped = tmp_path / "share" / "hotswitch" / "notebooks"  # where pyproject's data-files puts them
    shipped.mkdir(parents=True)
    assert installed_tutorials(tmp_path) == shipped


def test_the_default_port_is_the_first_nothing_listens_on():
    first = free_port("127.0.0.1")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", first))
        taken.listen()
        assert free_port("127.0.0.1", first) > first


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=60) as reply:  # generous: the machine is shared
        return json.loads(reply.read())


@pytest.mark.slow
def test_lab_serves_the_tutorials_on_loopback_behind_a_token(tmp_path):
    prefix, home = tmp_path / "prefix", tmp_path / "home"
    install_kernelspec(prefix=str(prefix))  # found there: nothing is written into this environment
    env = {
        **os.environ,
        "JUPYTER_PATH": str(prefix / "share" / "jupyter"),
        "JUPYTER_CONFIG_DIR": str(home / "config"),
        "JUPYTER_DATA_DIR": str(home / "data"),
        "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
    }
    # No --port: the command's own choice, the first free port from 8888, which lies below the
    # ephemeral range; a port the test drew from that range could be some rank's connection's by
    # the time JupyterLab binds it, on a busy machine.
    argv = [sys.executable, "-m", "hotswitch.kernel.cli", "lab", "--no-browser"]
    argv += ["--allow-root"] if os.geteuid() == 0 else []
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    log = open(tmp_path / "lab.log", "w")  # noqa: SIM115 - closed below
    lab = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=log, text=True)
    try:
        printed = []
        while not (url := re.search(r"http://\S+", "".join(printed))):
            line = lab.stdout.readline()
            assert line, f"hotswitch lab ended early:\n{''.join(printed)}{(tmp_path / 'lab.log').read_text()[-3000:]}"
            printed.append(line)
        assert "using the 'hotswitch' kernel" in "".join(printed)
        base, token = re.fullmatch(r"(http://127\.0\.0\.1:\d+)/lab\?token=(\S+)", url.group()).groups()
        assert int(base.rsplit(":", 1)[1]) >= FIRST_PORT

        deadline = time.monotonic() + 90
        while True:
            try:
                contents = _get(f"{base}/api/contents?token={token}")
                break
            except OSError:
                assert lab.poll() is None and time.monotonic() < deadline, (tmp_path / "lab.log").read_text()[-3000:]
                time.sleep(0.5)
        assert sorted(item["name"] for item in contents["content"] if item["type"] == "notebook") == TUTORIALS
        assert "hotswitch" in _get(f"{base}/api/kernelspecs?token={token}")["kernelspecs"]
        with pytest.raises(urllib.error.HTTPError) as refused:
            _get(f"{base}/api/contents")
        assert refused.value.code == 403

        server = psutil.Process(lab.pid)  # hotswitch lab became the server (exec): same process
        assert token not in " ".join(server.cmdline()), "the token must not show in the process list"
        listening = {c.laddr.ip for c in server.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN}
        assert listening == {"127.0.0.1"}
    finally:
        lab.terminate()
        try:
            lab.wait(30)
        except subprocess.TimeoutExpired:
            lab.kill()
            lab.wait(5)
        lab.stdout.close()
        log.close()
    assert {p.pid for p in psutil.Process().children(recursive=True)} <= before


def test_a_kernel_installed_into_a_prefix_is_removed_from_there(tmp_path, capsys):
    from hotswitch.kernel.cli.main import main

    assert main(["kernel", "install", "--prefix", str(tmp_path)]) == 0
    folder = tmp_path / "share" / "jupyter" / "kernels" / "hotswitch"
    assert (folder / "kernel.json").is_file()
    assert main(["kernel", "uninstall", "--prefix", str(tmp_path)]) == 0
    assert not folder.exists() and f"removed {folder}" in capsys.readouterr().out
    assert main(["kernel", "uninstall", "--prefix", str(tmp_path)]) == 2
    assert f"no 'hotswitch' kernelspec is installed under --prefix {tmp_path}" in capsys.readouterr().err


def test_lab_says_where_the_docs_are(tmp_path):
    assert docs_line(tmp_path).startswith("the docs: the docs/ folder")  # an installed package: no checkout
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "conf.py").write_text("")
    assert (
        docs_line(tmp_path)
        == f"the docs: {tmp_path / 'docs'} (build the site: python -m sphinx -b html docs docs/_build/html)"
    )
    site = tmp_path / "docs" / "_build" / "html"
    site.mkdir(parents=True)
    (site / "index.html").write_text("<html></html>")
    assert docs_line(tmp_path) == f"the docs: {(site / 'index.html').as_uri()}"
