"""How a setting is declared and checked. ``setting(default, help, ...)`` is a dataclass field
carrying what the command line and the error messages need, so a setting is written once: its
name, its one default, its help. The checks here are the ones several sections share."""

from __future__ import annotations

from dataclasses import Field, field
from numbers import Real


def setting(default, help: str, *, key: str | None = None, choices=None, many=None, parse=None):
    """A section's field. ``key``: its name in a spec dict, in TOML and as a flag, where that is
    not the field's own name; ``choices``: the values allowed; ``many``: how a flag takes it ("+"
    for one or more words, a count, or "append" for a repeatable flag); ``parse``: what turns the
    flag's text (or words) into the value (e.g. a plan's buckets)."""
    metadata = {"help": help, "key": key, "choices": choices, "many": many, "parse": parse}
    return field(default=default, metadata=metadata)


def key_of(f: Field) -> str:
    """The name a setting goes by outside Python: in a spec dict, in TOML, as ``--flag``."""
    return f.metadata.get("key") or f.name


def bad_setting(key: str, value, fix: str) -> ValueError:
    return ValueError(f"training setting {key!r} = {value!r} is not valid: {fix}")


def whole(key: str, value, least: int, why: str = "") -> None:
    """``value`` must be a whole number of at least ``least``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise bad_setting(key, value, f"give a whole number of at least {least}{why}")


def whole_or_none(key: str, value, least: int = 1) -> None:
    if value is not None:
        whole(key, value, least, " (or None)")


def positive(key: str, value, example, optional: bool = False) -> None:
    """``value`` must be a number above 0 (or None, where ``optional``)."""
    if optional and value is None:
        return
    # numbers.Real's stub declares only __lt__ and __le__ (every Real compares both ways at run time)
    if isinstance(value, bool) or not isinstance(value, Real) or not value > 0:  # type: ignore[operator]
        none = " (or None)" if optional else ""
        raise bad_setting(key, value, f"give a number above 0{none}, e.g. {example}")


def at_least_zero(key: str, value, below=None) -> None:
    """``value`` must be a number in [0, ``below``) (no upper bound where ``below`` is None)."""
    if isinstance(value, bool) or not isinstance(value, Real) or value < 0 or (below is not None and value >= below):
        bound = f"at least 0 and below {below}" if below is not None else "at least 0"
        raise bad_setting(key, value, f"give a number {bound}")


def three_way(key: str, value, why: str) -> None:
    """``value`` must be True, False or None (the run decides)."""
    if not (value is None or isinstance(value, bool)):
        raise bad_setting(key, value, f"give true, false or leave it out ({why})")


def choice(key: str, value, choices, none: bool = False) -> None:
    """``value`` must be one of ``choices`` (or None, where ``none``)."""
    if value is None and none:
        return
    if value not in choices:
        raise bad_setting(key, value, f"choose one of {', '.join(choices)}" + (" or None" if none else ""))


def is_fraction(value) -> bool:
    # numbers.Real's stub lacks the reflected comparisons (as in ``positive``)
    return not isinstance(value, bool) and isinstance(value, Real) and 0 <= value < 1  # type: ignore[operator]
