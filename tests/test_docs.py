"""The docs site builds with no warning (a broken cross-reference, a page outside every
toctree, a setting without help, a public name without a docstring all fail it), and its
generated pages hold every run setting, every subcommand and every public name."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("docs")
    args = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", "docs", str(out)]
    done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"the docs do not build cleanly:\n{done.stderr[-6000:]}"
    return out


def test_the_docs_build_without_a_warning(built):
    assert (built / "index.html").is_file()
    pages = {p.name for p in (built / "tutorials").glob("*.html")}
    assert pages == {p.with_suffix(".html").name for p in (ROOT / "notebooks").glob("*.ipynb")}


def test_the_generated_references_hold_every_setting_subcommand_and_public_name(built):
    import importlib

    from hotswitch.backend.api import PUBLIC
    from hotswitch.backend.train.config.run_config import SETTINGS
    from hotswitch.kernel.cli.main import command_line

    reference = ROOT / "docs" / "reference"
    settings = (reference / "settings.md").read_text()
    assert [key for key in SETTINGS if f"| `{key}` |" not in settings] == []
    commands = (reference / "command-line.md").read_text()
    assert [name for name in command_line()[1] if f"## `hotswitch {name}`" not in commands] == []
    api = (reference / "api.md").read_text()
    names = [f"{p}.{n}" for p in PUBLIC for n in importlib.import_module(p).__all__]
    sections = api.split("\n## `")
    missing = [
        n
        for n in names
        if not any(s.startswith(n.rsplit(".", 1)[0] + "`") and f"### `{n.rsplit('.', 1)[1]}`" in s for s in sections)
    ]
    assert missing == []
