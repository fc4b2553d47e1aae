"""The keys a benchmark's JSON promises, checked against what it printed.

Every script in ``benchmarks/`` names the figures its docstring documents in a module-level
``OUTPUT_KEYS``: key paths, dot-separated, where ``[]`` after a key means every item of that list
and ``*`` every value of a dict (``pairs[].switch_s``, ``launchers.*.warm.first_step_s``). The
script checks its output against them, and ``tests/benchmarks/test_benchmarks_smoke.py`` checks
that each path's last key is named in the docstring, so the docstring, the output and the test
read one list.
"""

from __future__ import annotations

from typing import Any


def _resolve(value: Any, parts: list[str], where: str) -> list[str]:
    """The paths under ``value`` (reached by ``where``) that lack the rest of ``parts``."""
    if not parts:
        return []
    part, rest = parts[0], parts[1:]
    if part == "*":
        if not isinstance(value, dict) or not value:
            return [f"{where}.*"]
        return [m for key, item in value.items() for m in _resolve(item, rest, f"{where}.{key}")]
    key, every = (part[:-2], True) if part.endswith("[]") else (part, False)
    if not isinstance(value, dict) or key not in value:
        return [f"{where}.{part}".lstrip(".")]
    item, here = value[key], f"{where}.{key}".lstrip(".")
    if not every:
        return _resolve(item, rest, here)
    if not isinstance(item, list) or not item:
        return [f"{here}[] (an empty list or not a list)"]
    return [m for i, element in enumerate(item) for m in _resolve(element, rest, f"{here}[{i}]")]


def missing_keys(out: dict, paths: tuple[str, ...]) -> list[str]:
    """Every promised path that ``out`` does not hold, spelled where it is missing."""
    return [m for path in paths for m in _resolve(out, path.split("."), "")]


def check_promised(out: dict, paths: tuple[str, ...]) -> None:
    """Raise if ``out`` lacks a promised key. Call it after printing ``out``: a long run's
    figures are printed even when one is missing."""
    missing = missing_keys(out, paths)
    if missing:
        raise SystemExit(
            f"the output lacks {missing}, which OUTPUT_KEYS promises; produce them, or drop them from "
            "OUTPUT_KEYS and from the docstring that documents them"
        )


def leaf_keys(paths: tuple[str, ...]) -> set[str]:
    """The last key of every path (what the docstring must name)."""
    return {path.split(".")[-1].removesuffix("[]") for path in paths}
