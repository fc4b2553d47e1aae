"""Refuse a checkpoint that could run code when it is resumed, before DCP reads it.

``torch.distributed.checkpoint`` unpickles the checkpoint's ``.metadata`` file, and unpickling
calls whatever the pickle names: a crafted ``.metadata`` runs code on every rank. So before a
load, ``check_checkpoint_safe`` requires that

- the folder and every file in it belong to this user and are not writable by group or others
  (nobody else could have swapped a file in), and
- every global the ``.metadata`` pickle references (its GLOBAL, INST and STACK_GLOBAL opcodes,
  listed with ``pickletools.genops`` without unpickling anything) is one of the classes and
  constants DCP itself writes: its metadata dataclasses, ``torch.Size``, dtypes, layouts and
  memory formats, ``pathlib`` paths and ``collections.OrderedDict``. A pickle that names
  anything else (``os.system``, ``builtins.eval``, ``torch.hub.load``), or whose references
  cannot be read statically (extension codes, persistent ids, a global name built at run
  time), is refused.
"""

from __future__ import annotations

import os
import pickletools
import stat
from pathlib import Path

import torch

DCP_METADATA = ".metadata"

_DCP_CLASSES = {
    "torch.distributed.checkpoint.metadata": {
        "Metadata",
        "MetadataIndex",
        "StorageMeta",
        "ChunkStorageMetadata",
        "TensorStorageMetadata",
        "BytesStorageMetadata",
        "TensorProperties",
        "_MEM_FORMAT_ENCODING",
    },
    "torch.distributed.checkpoint.filesystem": {"_StorageInfo"},
    "torch.serialization": {"_get_layout"},
    "pathlib": {"Path", "PosixPath", "PurePosixPath", "WindowsPath", "PureWindowsPath"},
    "collections": {"OrderedDict"},
}
_TORCH_VALUE_TYPES = (torch.dtype, torch.layout, torch.memory_format)
_STRING_OPS = {"UNICODE", "SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "STRING", "BINSTRING", "SHORT_BINSTRING"}
_MEMO_PUT_OPS = {"PUT", "BINPUT", "LONG_BINPUT"}
_MEMO_GET_OPS = {"GET", "BINGET", "LONG_BINGET"}
_OPAQUE_OPS = {"EXT1", "EXT2", "EXT4", "PERSID", "BINPERSID"}


class UnsafeCheckpointError(ValueError):
    """The checkpoint could run code if it were loaded; nothing of it was unpickled."""


def _allowed(module: str, name: str) -> bool:
    if name in _DCP_CLASSES.get(module, ()):
        return True
    if module == "torch" and "." not in name:
        return name == "Size" or isinstance(getattr(torch, name, None), _TORCH_VALUE_TYPES)
    return False


def pickle_globals(data: bytes) -> list[tuple[str, str]]:
    """Every (module, name) the pickle ``data`` would import, read from its opcodes without
    unpickling. Raises UnsafeCheckpointError where a reference cannot be read statically."""
    found: list[tuple[str, str]] = []
    pushed: list[object] = []  # the strings pushed since the last op that was not a string/memo op
    memo: dict[object, object] = {}  # keyed by the memo opcodes' argument (an int)
    for op, arg, _ in pickletools.genops(data):
        name = op.name
        if name in _STRING_OPS:
            pushed.append(arg)
        elif name == "MEMOIZE":
            memo[len(memo)] = pushed[-1] if pushed else None
        elif name in _MEMO_PUT_OPS:
            memo[arg] = pushed[-1] if pushed else None
        elif name in _MEMO_GET_OPS:
            pushed.append(memo.get(arg))
        elif name in ("GLOBAL", "INST"):
            module, _, attr = str(arg).partition(" ")  # the opcode's argument: "module name"
            found.append((module, attr))
            pushed = []
        elif name == "STACK_GLOBAL":
            pushed_module, pushed_attr = pushed[-2:] if len(pushed) >= 2 else (None, None)
            if not isinstance(pushed_module, str) or not isinstance(pushed_attr, str):
                raise UnsafeCheckpointError("its pickle builds a global's name at run time")
            found.append((pushed_module, pushed_attr))
            pushed = []
        elif name in _OPAQUE_OPS:
            raise UnsafeCheckpointError(f"its pickle uses the {name} opcode, which can load any object")
        else:
            pushed = []
    return found


def _check_owner_and_mode(path: Path) -> None:
    info = path.lstat()
    if stat.S_ISLNK(info.st_mode):
        raise UnsafeCheckpointError(f"{path} is a symbolic link")
    if info.st_uid != os.getuid():
        raise UnsafeCheckpointError(f"{path} belongs to user id {info.st_uid}, not to this user ({os.getuid()})")
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise UnsafeCheckpointError(
            f"{path} is writable by group or others (mode {stat.filemode(info.st_mode)}); "
            f"run `chmod -R go-w {path}` if you trust its contents"
        )


def protect_checkpoint(path: str | Path) -> None:
    """Take write permission from group and others on the checkpoint folder ``path`` and its
    files, so that ``check_checkpoint_safe`` accepts it under a umask such as 002."""
    for entry in [Path(path), *Path(path).rglob("*")]:
        mode = entry.lstat().st_mode
        if not stat.S_ISLNK(mode):
            entry.chmod(stat.S_IMODE(mode) & ~(stat.S_IWGRP | stat.S_IWOTH))


def _metadata_globals(metadata: Path) -> list[tuple[str, str]]:
    try:
        return pickle_globals(metadata.read_bytes())
    except UnsafeCheckpointError:
        raise
    except Exception as error:  # genops on bytes that are no (whole) pickle
        raise UnsafeCheckpointError(f"{metadata} is not a readable pickle ({error})") from None


def check_checkpoint_safe(path: str | Path) -> None:
    """Raise UnsafeCheckpointError (saying what is wrong and what to do) unless the checkpoint
    folder ``path`` can be loaded without running code from it; reads but never unpickles."""
    path = Path(path).resolve()  # the folder may be reached through a link; its files may not
    try:
        _check_owner_and_mode(path)
        for entry in path.rglob("*"):
            _check_owner_and_mode(entry)
        metadata = path / DCP_METADATA
        if not metadata.is_file():
            raise UnsafeCheckpointError(f"{metadata} is missing")
        references = _metadata_globals(metadata)
        foreign = sorted({f"{m}.{n}" for m, n in references if not _allowed(m, n)})
        if foreign:
            raise UnsafeCheckpointError(f"{metadata} references {', '.join(foreign)}, which DCP never writes")
    except UnsafeCheckpointError as error:
        raise UnsafeCheckpointError(
            f"refusing to resume from {path}: {error}. Loading it could run code on every rank; "
            "resume only from checkpoints this user wrote (nothing was loaded)"
        ) from None
