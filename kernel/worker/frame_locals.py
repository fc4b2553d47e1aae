"""The failing frame's local variables, each as a short repr, shown under a rank's traceback:
what a user would print first at a post-mortem prompt, without one. A repr is cut to one short
line; a tensor (anything with a shape and a dtype) shows those, never its values; an object
whose repr raises is named by its type (reprlib's way). A module-level frame (a ``%%train``
body's or a ``%%ranks`` cell's top level) lists its plain values, not the modules, functions
and classes it defined or imported."""

from __future__ import annotations

import inspect
import reprlib
from pathlib import Path
from types import TracebackType

SHOWN = 24  # locals listed at most; the rest are counted
WIDTH = 100  # characters of a repr

_REPR = reprlib.Repr()
_REPR.maxstring = WIDTH
_REPR.maxother = WIDTH
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = 6


def short_repr(value: object) -> str:
    """``value`` in one line of at most about ``WIDTH`` characters."""
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    if shape is not None and dtype is not None and not isinstance(value, type):
        return f"{type(value).__name__}(shape={tuple(shape)}, dtype={dtype})"
    text = " ".join(_REPR.repr(value).split())  # reprlib names an instance whose own repr raises
    return text if len(text) <= WIDTH else text[: WIDTH - 3] + "..."


def _shown(name: str, value: object, module_level: bool) -> bool:
    if name.startswith("__"):
        return False
    definitions = inspect.ismodule(value) or inspect.isclass(value) or inspect.isroutine(value)
    return not (module_level and definitions) and not inspect.ismodule(value)


def failing_locals(tb: TracebackType | None) -> str:
    """The innermost frame of ``tb``: ``locals of NAME (FILE:LINE):`` and a line per local;
    empty where there is no frame or nothing to show."""
    if tb is None:
        return ""
    while tb.tb_next is not None:
        tb = tb.tb_next
    frame, code = tb.tb_frame, tb.tb_frame.f_code
    module_level = code.co_name == "<module>"
    names = [(n, v) for n, v in frame.f_locals.items() if _shown(n, v, module_level)]
    if not names:
        return ""
    lines = [f"locals of {code.co_name} ({Path(code.co_filename).name}:{tb.tb_lineno}):"]
    lines += [f"    {name} = {short_repr(value)}" for name, value in names[:SHOWN]]
    if len(names) > SHOWN:
        lines.append(f"    ... and {len(names) - SHOWN} more")
    return "\n".join(lines) + "\n"
