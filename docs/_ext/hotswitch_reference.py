"""The pages of the docs that are generated, never written by hand: every run setting (from the
typed definitions in ``backend/train/config``), every subcommand's ``--help`` (from the parser
the command line builds), the public API (from ``backend/api.py``), and the tutorials (the
notebooks with their stored outputs). Written into ``docs/reference/`` and ``docs/tutorials/``
when the build starts; a setting without help, or a public name without a docstring, fails it."""

from __future__ import annotations

import inspect
import shutil
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1]
ROOT = DOCS.parent


class ReferenceError(Exception):
    """What the generated pages cannot say (a setting without help, say)."""


def settings_page() -> str:
    from hotswitch.backend.train.config.run_config import SETTINGS

    out = [
        "# Run settings\n",
        "Every setting of a run configuration, by section, as `hotswitch train --help`, a TOML file",
        "(`[section]` tables) and a spec dict name them. Generated from the typed definitions",
        "(`backend/train/config/`), where each setting is declared once with its default and help.\n",
    ]
    section = object()
    for key, s in SETTINGS.items():
        if not s.help.strip():
            raise ReferenceError(f"the setting {key!r} has no help; give it one where it is declared")
        if s.section != section:
            section = s.section
            out += [f"\n## `{section or 'run'}`\n", "| setting | default | what it does |", "|---|---|---|"]
        choices = f" One of: {', '.join(f'`{c}`' for c in s.choices)}." if s.choices else ""
        cell = (s.help + choices).replace("|", "\\|").replace("\n", " ")
        out.append(f"| `{key}` | `{s.default!r}` | {cell} |")
    return "\n".join(out) + "\n"


def command_line_page() -> str:
    from hotswitch.kernel.cli.main import command_line

    parser, commands = command_line()
    out = ["# Command-line reference\n", "Each subcommand's `--help`, as the installed command prints it.\n"]
    out += ["```text", parser.format_help().rstrip(), "```"]
    for name, sub in commands.items():
        out += [f"\n## `hotswitch {name}`\n", "```text", sub.format_help().rstrip(), "```"]
    return "\n".join(out) + "\n"


def _summary(obj, where: str) -> str:
    doc = inspect.getdoc(obj)
    if not doc:
        raise ReferenceError(f"{where} has no docstring; the API reference shows one for every public name")
    return doc


def _signature(name: str, obj) -> str:
    if not callable(obj):
        return f"{name} = {type(obj).__name__}"
    try:
        return f"{name}{inspect.signature(obj)}"
    except (TypeError, ValueError):
        return name


def api_page() -> str:
    import importlib

    from hotswitch.backend.api import PUBLIC

    out = [
        "# API reference\n",
        "The public API: the names these packages export (`backend/api.py`), imported on first use.",
        "Notebooks and these docs import nothing else; every other module may move.\n",
    ]
    for package in PUBLIC:
        module = importlib.import_module(package)
        out += [f"\n## `{package}`\n", _summary(module, package) + "\n"]
        for name in module.__all__:
            obj = getattr(module, name)
            described = obj if callable(obj) or inspect.ismodule(obj) else None
            doc = _summary(described, f"{package}.{name}") if described is not None else ""
            out += [f"\n### `{name}`\n", "```text", _signature(name, obj), "", doc, "```"]
    return "\n".join(out) + "\n"


def write_pages(app=None) -> None:
    """Every generated page, written afresh (the build's ``builder-inited`` hook)."""
    reference = DOCS / "reference"
    reference.mkdir(exist_ok=True)
    for name, page in (("settings", settings_page), ("command-line", command_line_page), ("api", api_page)):
        (reference / f"{name}.md").write_text(page())
    tutorials = DOCS / "tutorials"
    shutil.rmtree(tutorials, ignore_errors=True)
    tutorials.mkdir()
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
        shutil.copy(notebook, tutorials / notebook.name)


def setup(app):
    app.connect("builder-inited", write_pages)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
