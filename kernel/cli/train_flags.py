"""``hotswitch train``'s training flags, generated from the run configuration's settings
(``backend.train.config.run_config.SETTINGS``): one flag per setting, named after its key
(``max_len``: ``--max-len``), its type, choices and help taken from the field, and its default
shown from the field and written nowhere else. A flag not given leaves its setting to
``--config`` or to the default."""

from __future__ import annotations

import argparse
from types import NoneType, UnionType
from typing import get_args, get_origin

from hotswitch.backend.train.config.run_config import SETTINGS, Setting

TITLE = "training settings"
NUMBERS = (int, float)


def flag(setting: Setting) -> str:
    """The flag a setting goes by: its key, dashed."""
    return "--" + setting.key.replace("_", "-")


def default_text(setting: Setting) -> str | None:
    """The field's default as its help shows it; None where it has none to show (None, ())."""
    default = setting.default
    if default is None or default == ():
        return None
    return " ".join(map(str, default)) if isinstance(default, tuple) else str(default)


def value_type(setting: Setting) -> type:
    """What the flag's words are read as: the setting's number type (its elements' for a
    tuple), else text (a ``parse`` of the setting turns text into its value)."""
    hint = setting.hint
    kinds = [k for k in get_args(hint) if k is not NoneType] if isinstance(hint, UnionType) else [hint]
    if len(kinds) == 1 and get_origin(kinds[0]) is tuple:
        kinds = [get_args(kinds[0])[0]]
    return kinds[0] if len(kinds) == 1 and kinds[0] in NUMBERS else str


NONE = "none"  # the word that unsets a setting --config gave, where the setting may be None


def unsettable(setting: Setting) -> bool:
    """Whether ``setting`` may be None (its default is), so that ``--flag none`` unsets it."""
    return setting.default is None and not (setting.hint is bool or bool in get_args(setting.hint))


def or_none(kind: type):
    """``kind`` read from a flag's text, or None for the word ``none``."""

    def read(text: str):
        return None if text.lower() == NONE else kind(text)

    read.__name__ = kind.__name__  # argparse names the type in its error
    return read


def flag_options(setting: Setting) -> dict:
    """``add_argument``'s keywords for ``setting`` (no default: the field holds it)."""
    shown = default_text(setting)
    text = setting.help + (f" (default: {shown})" if shown is not None else "")
    if unsettable(setting):
        text += f"; '{NONE}' unsets it"
    options: dict = {"dest": setting.key, "help": text.replace("%", "%%")}
    if setting.hint is bool or bool in get_args(setting.hint):
        return {**options, "action": argparse.BooleanOptionalAction}
    if setting.many == "append":
        options["action"] = "append"
    elif setting.many is not None:
        options["nargs"] = setting.many
    if setting.choices:
        options["choices"] = setting.choices
    if value_type(setting) is not str or unsettable(setting):
        options["type"] = or_none(value_type(setting)) if unsettable(setting) else value_type(setting)
    if setting.choices and unsettable(setting):
        options["choices"] = (*setting.choices, None)
        options["metavar"] = "{" + ",".join(map(str, (*setting.choices, NONE))) + "}"
    return options


def add_training_flags(parser: argparse.ArgumentParser) -> None:
    """Add one flag per run configuration setting to ``parser``, in a group of their own."""
    group = parser.add_argument_group(TITLE, "each a run configuration setting; flags override --config")
    for setting in SETTINGS.values():
        group.add_argument(flag(setting), default=argparse.SUPPRESS, **flag_options(setting))


def given_settings(args: argparse.Namespace) -> dict:
    """The settings the flags given set, by key (their text parsed where the setting says how)."""
    given = {}
    for setting in SETTINGS.values():
        if hasattr(args, setting.key):
            value = getattr(args, setting.key)
            if isinstance(value, list) and None in value:  # ``--eval-data none``: the word alone unsets it
                value = None
            given[setting.key] = setting.parse(value) if setting.parse and value is not None else value
    return given
