"""Every script in ``benchmarks/`` runs at its ``--smoke`` size and prints the JSON its docstring
promises, so a change to a shared interface cannot break a benchmark unseen.

The scripts are found by globbing ``benchmarks/*.py`` (``__init__.py`` aside; the helpers they
share live in ``benchmarks/common/``): a new script is covered the day it lands. Each runs from the
repository root as ``python -m benchmarks.NAME``, must take ``--smoke`` and ``--json`` and name its
promised key paths in a module-level ``OUTPUT_KEYS`` that it checks its output against
(``benchmarks/common/promised.py``) and whose every last key its docstring names.
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from benchmarks.common import promised

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"
pytestmark = pytest.mark.slow  # minutes in all: every script starts processes of its own
SCRIPTS = sorted(p for p in BENCHMARKS.glob("*.py") if p.name != "__init__.py")
IDS = [p.stem for p in SCRIPTS]


# Reads each script's docstring and OUTPUT_KEYS in a process of its own, started in the
# repository root as the scripts are: importing them all (torch, transformers, the tests' kernel
# driver) stays out of the test's process.
DECLARED = """
import importlib, json, sys, traceback
out = {}
for name in sys.argv[1:]:
    try:
        module = importlib.import_module("benchmarks." + name)
        out[name] = {"doc": module.__doc__ or "", "keys": list(getattr(module, "OUTPUT_KEYS", ()))}
    except Exception:
        out[name] = {"error": traceback.format_exc()}
print(json.dumps(out))
"""


@functools.cache
def _declared_all() -> dict:
    args = [sys.executable, "-c", DECLARED, *IDS]
    done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def declared(script: Path) -> tuple[str, tuple[str, ...]]:
    """The script's docstring and its ``OUTPUT_KEYS`` (as the script itself computes them)."""
    found = _declared_all()[script.stem]
    assert "error" not in found, f"{script.name} cannot be imported:\n{found.get('error')}"
    assert found["keys"], f"{script.name} has no OUTPUT_KEYS; name the keys its docstring promises there"
    return found["doc"], tuple(found["keys"])


@pytest.fixture(scope="module")
def fresh_cache():
    """One cache for the scripts' smoke runs, empty at first: profiles are measured afresh, not
    read from the user's cache, and once for the scripts that share a model and world."""
    with tempfile.TemporaryDirectory(prefix="hotswitch-bench-cache-") as cache:
        yield cache


@functools.cache
def smoke_output(script: Path, cache: str) -> dict:
    """What ``python -m benchmarks.NAME --smoke --json`` printed (run once per session)."""
    command = ["-m", f"benchmarks.{script.stem}", "--smoke", "--json"]
    done = subprocess.run(
        [sys.executable, *command],
        cwd=ROOT,
        env={**os.environ, "HOTSWITCH_CACHE": cache},
        capture_output=True,
        text=True,
    )
    shown = " ".join(["python", *command])
    assert done.returncode == 0, f"{shown} exited {done.returncode}:\n{done.stderr[-4000:]}"
    try:
        return json.loads(done.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"{shown} printed no single JSON document:\n{done.stdout[-2000:]}")


def skipped_parts(value, where: str = "") -> dict[str, object]:
    """Every ``skipped`` entry in the output, by where it is."""
    if isinstance(value, dict):
        found = {f"{where}.skipped": value["skipped"]} if "skipped" in value else {}
        for key, item in value.items():
            found |= skipped_parts(item, f"{where}.{key}")
        return found
    if isinstance(value, list):
        return {k: v for i, item in enumerate(value) for k, v in skipped_parts(item, f"{where}[{i}]").items()}
    return {}


def test_the_glob_finds_the_scripts_and_leaves_the_helpers():
    helpers = {p.stem for p in (BENCHMARKS / "common").glob("*.py")} - {"__init__"}
    assert SCRIPTS, f"no benchmark scripts under {BENCHMARKS}"
    assert helpers and not {p.stem for p in SCRIPTS} & helpers
    not_scripts = [p.name for p in SCRIPTS if 'if __name__ == "__main__":' not in p.read_text()]
    assert not not_scripts, f"{not_scripts} run nothing as scripts; move a helper module into benchmarks/common/"


@pytest.mark.parametrize("script", SCRIPTS, ids=IDS)
def test_the_docstring_names_every_promised_key_and_the_script_checks_them(script):
    docstring, keys = declared(script)
    unnamed = promised.leaf_keys(keys) - set(re.findall(r"\w+", docstring))
    assert not unnamed, f"{script.name} promises {sorted(unnamed)} in OUTPUT_KEYS; document them in its docstring"
    assert "--smoke" in docstring, f"{script.name}: the docstring does not say what --smoke runs"
    assert re.search(r"check_promised\(\w+, OUTPUT_KEYS\)", script.read_text()), (
        f"{script.name} never checks its output against OUTPUT_KEYS"
    )


@pytest.mark.parametrize("script", SCRIPTS, ids=IDS)
def test_the_smoke_run_prints_every_promised_key(script, fresh_cache):
    out = smoke_output(script, fresh_cache)
    assert promised.missing_keys(out, declared(script)[1]) == []
    assert out.get("smoke"), f"{script.name}: a smoke run's JSON must say it is one (a 'smoke' entry)"
    for where, why in skipped_parts(out).items():
        assert isinstance(why, str) and why, f"{script.name}: {where} says nothing of why it was skipped"


def test_a_gpu_only_part_says_whether_it_ran(fresh_cache):
    import torch

    gpu = smoke_output(BENCHMARKS / "precision.py", fresh_cache)["gpu"]
    if torch.cuda.is_available():
        assert gpu["runs"] and all(r["tokens"] for r in gpu["runs"])
    else:
        assert "CUDA" in gpu["skipped"]


def test_a_missing_key_is_named_where_it_is_missing():
    out = {"rows": [{"a": 1, "cp": {"2": {"e": 1}, "4": {}}}, {"b": 2}], "summary": {}}
    paths = ("rows[].a", "rows[].cp.*.e", "summary.worst", "absent[]")
    missing = ["rows[1].a", "rows[0].cp.4.e", "rows[1].cp", "summary.worst", "absent[]"]
    assert promised.missing_keys(out, paths) == missing
    assert promised.missing_keys({"rows": []}, ("rows[].a",)) == ["rows[] (an empty list or not a list)"]
    assert promised.leaf_keys(paths) == {"a", "e", "worst", "absent"}
