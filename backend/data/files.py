"""What a ``data`` entry names as files, and how each file reads.

An entry is a file, a folder or a glob pattern (``corpus/**/*.jsonl``). A folder is read for its
data files, recursively: its JSONL, Parquet and Arrow files where it holds any (a dataset's
README.md and its metadata JSON, which Hugging Face ``datasets`` writes beside them, left out),
else its text files; hidden files and those whose name starts with '_' are left out.

A file's format comes from its suffix beneath any compression (``shard-0001.jsonl.gz`` is
JSONL): text (one document), JSONL (``.jsonl``, or ``.json`` holding one object per line or one
array of them, as Hugging Face ``datasets`` reads them: ``backend.data.json_array``), Parquet or
Arrow. gzip, bzip2 and xz files are read through the standard library; a file no reader here
understands (zstd, an archive, a binary file taken for text) is refused before launch, never
trained as bytes."""

from __future__ import annotations

import bz2
import glob
import gzip
import lzma
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

COMPRESSIONS: dict[str, Callable[..., Any]] = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}
# formats no reader here understands, with what turns them into one that is
UNREAD = {
    ".zst": "zstd -d FILE",
    ".zstd": "zstd -d FILE",
    ".lz4": "lz4 -d FILE",
    ".zip": "unzip FILE",
    ".tar": "tar -xf FILE",
    ".tgz": "tar -xzf FILE",
    ".7z": "7z x FILE",
}
DATASET_SUFFIXES = {".parquet": "parquet", ".arrow": "arrow"}
JSONL_SUFFIXES = (".jsonl", ".json")
TEXT_SUFFIXES = (".txt", ".text", ".md")
RECORD_SUFFIXES = (*JSONL_SUFFIXES, *DATASET_SUFFIXES)  # files of records, before text in a folder
METADATA = {"dataset_info.json", "state.json", "dataset_dict.json"}  # what ``save_to_disk`` writes beside the data
# a file or folder name that starts a split's word, as ``datasets`` reads a repository's splits
SPLIT_WORDS = {word: split for split, words in {
    "train": ("train", "training"),
    "validation": ("validation", "valid", "dev", "val"),
    "test": ("test", "testing", "eval", "evaluation"),
}.items() for word in words}  # fmt: skip
SPLIT_NAME = re.compile(rf"^({'|'.join(sorted(SPLIT_WORDS, key=len, reverse=True))})(?:[-._ 0-9]|$)")
SNIFF_BYTES = 8192
GLOB_CHARACTERS = "*?["


def format_suffix(path: Path) -> str:
    """The suffix that names ``path``'s format, beneath any compression: '.jsonl' for
    'docs.jsonl.gz'."""
    return Path(path.stem).suffix if path.suffix in COMPRESSIONS else path.suffix


def open_plain(path: Path):
    """``path`` opened for reading bytes, decompressed as it is read."""
    return COMPRESSIONS.get(path.suffix, open)(path, "rb")


def data_files(entry: str | Path) -> list[Path]:
    """The files one ``data`` entry names: itself, a folder's data files, or a pattern's
    matches, sorted; ValueError for a folder or pattern that names none, or a missing file."""
    path = Path(entry)
    if path.is_dir():
        return folder_files(path)
    if not path.exists() and any(c in str(entry) for c in GLOB_CHARACTERS):
        matches = sorted(Path(p) for p in glob.glob(str(entry), recursive=True) if Path(p).is_file())
        if not matches:
            raise ValueError(f"{entry} matches no file")
        return matches
    if not path.is_file():
        raise ValueError(f"{path} is not a file or a folder; give existing text/JSONL/Parquet/Arrow files")
    return [path]


def folder_files(folder: Path) -> list[Path]:
    """The data files under ``folder``: its files of records (JSONL, Parquet, Arrow), else its
    text files, compressed or not; ValueError naming what it holds when there are none."""
    files = [path for path in sorted(folder.rglob("*")) if path.is_file() and not _left_out(path, folder)]
    for suffixes in (RECORD_SUFFIXES, TEXT_SUFFIXES):
        chosen = [path for path in files if format_suffix(path) in suffixes]
        if chosen:
            return _one_split(folder, chosen)
    held = Counter(path.suffix or "(no suffix)" for path in files).most_common(4)
    what = ", ".join(f"{count} {suffix}" for suffix, count in held) or "it is empty"
    suffix = next((s for s, _ in held if s.startswith(".")), ".txt")
    raise ValueError(
        f"{folder} holds no text, JSONL, Parquet or Arrow files ({what}); name the files to read with a "
        f"pattern, e.g. '{folder}/**/*{suffix}'"
    )


def _one_split(folder: Path, files: list[Path]) -> list[Path]:
    """``files``, refused where their names split them as Hugging Face names splits (a hub
    repository's ``data/train-*.parquet`` beside ``data/test-*.parquet``, a saved DatasetDict's
    ``train/`` beside ``test/``): training on every file would train on the test split."""
    splits: dict[str, Path] = {}  # split -> what names its files: a folder, or a pattern
    for path in files:
        parts = path.relative_to(folder).parts
        for index, part in enumerate(parts):
            if match := SPLIT_NAME.match(part.lower()):
                last = index == len(parts) - 1
                named = Path(folder, *parts[:index], f"{part[: len(match.group(1))]}*" if last else part)
                splits.setdefault(SPLIT_WORDS[match.group(1)], named)
                break
    if len(splits) < 2:
        return files
    listed = ", ".join(sorted(splits))
    chosen = splits.get("train", next(iter(splits.values())))
    held = next((splits[name] for name in ("validation", "test") if name in splits and splits[name] != chosen), None)
    evaluate = f"evaluate on '{held}' with eval_data (--eval-data), and " if held else ""
    raise ValueError(
        f"{folder} holds the splits {listed}, as Hugging Face names them; {evaluate}give one split's files, "
        f"e.g. '{chosen}'"
    )


def _left_out(path: Path, folder: Path) -> bool:
    """Hidden files and folders, those named with a leading '_', and dataset metadata."""
    return path.name in METADATA or any(part[0] in "._" for part in path.relative_to(folder).parts)


def unreadable(path: Path) -> str | None:
    """Why ``path`` cannot be read as data, with what to do; None where it can. Reads at most
    its first few kilobytes."""
    if path.suffix in UNREAD:
        command = UNREAD[path.suffix].replace("FILE", str(path))
        return f"{path} is compressed as {path.suffix[1:]}, which is not read here; {command} first, or use gzip"
    if format_suffix(path) in DATASET_SUFFIXES:
        return None
    try:
        with open_plain(path) as f:
            head = f.read(SNIFF_BYTES)
    except (OSError, EOFError, lzma.LZMAError) as error:
        return f"{path} cannot be decompressed ({error}); it is damaged or not what its suffix says"
    if b"\0" in head:
        return f"{path} is binary (it holds NUL bytes), not text; give text, JSONL, Parquet or Arrow files"
    return None
