"""Package exports imported on first use (PEP 562), so that light parts load without heavy ones."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_exports(package: str, exports: dict[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` resolving ``exports[name]`` on first access: a module path,
    where the name is the module's own, or ``module:attribute`` where the package exports it
    under another name. Typed ``Any``: what a name resolves to depends on the name, which only
    the import can tell."""

    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, _, attribute = exports[name].partition(":")
        return getattr(importlib.import_module(module), attribute or name)

    return __getattr__
