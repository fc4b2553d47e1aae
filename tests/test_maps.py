"""The subsystem maps (issue 39): a README in ``backend/train/``, ``kernel/`` and ``backend/sim/``
traces the path from a cell to a step on the ranks by file. Every ``.py`` file a map names in
backquotes must exist, so that a map cannot silently rot when a file moves or goes.

How a name is looked up: with a folder in it (``loop/engine.py``, ``kernel/worker/entry.py``),
from the README's own folder or from the repository root; a bare file name (``scenario.py``),
anywhere under the README's folder, so that a map naming files by name and role still holds
when they move into a subfolder.
"""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAPS = ("backend/README.md", "backend/train/README.md", "kernel/README.md", "backend/sim/README.md")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"`([^`\n]+)`")
PY_FILE = re.compile(r"[\w./-]*\w\.py\b")


def named_py_files(text: str) -> set[str]:
    """The ``.py`` names in the inline code spans and fenced blocks of Markdown ``text``."""
    fenced = FENCE.findall(text)
    spans = CODE_SPAN.findall(FENCE.sub("", text))
    return {name for chunk in [*fenced, *spans] for name in PY_FILE.findall(chunk)}


def exists(name: str, folder: Path) -> bool:
    if "/" in name:
        return (folder / name).is_file() or (ROOT / name).is_file()
    return any(path.is_file() for path in folder.rglob(name))


def test_named_py_files_reads_spans_and_fences():
    text = "see `loop/engine.py` and `python benchmarks/paper.py --json`, not engine.py\n```\na/b.py\n```\n"
    assert named_py_files(text) == {"loop/engine.py", "benchmarks/paper.py", "a/b.py"}


@pytest.mark.parametrize("readme", MAPS)
def test_every_file_a_map_names_exists(readme):
    path = ROOT / readme
    assert path.is_file(), f"{readme} is missing: each of {', '.join(MAPS)} maps its subsystem (issue 39)"
    names = named_py_files(path.read_text())
    assert names, f"{readme} names no .py file in backquotes; a map names the files it traces"
    missing = sorted(name for name in names if not exists(name, path.parent))
    assert missing == [], f"{readme} names files that are not in the repository: {missing}; update the map"
