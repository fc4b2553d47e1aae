"""The line index of JSONL files: the offsets of exactly the lines a reader of the file's lines
would keep, whatever the block boundaries; a large file's made once per machine and mapped."""

import gzip
import io

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hotswitch.backend.data import line_index
from hotswitch.backend.data.line_index import line_offsets, scan

LINE = st.one_of(st.just(b""), st.sampled_from([b"  ", b"\t \r", b"\x0b"]), st.binary(max_size=12))


def reference(data: bytes) -> list[int]:
    """The offsets a loop over the file's lines keeps: those of lines that strip to something."""
    offsets, position = [], 0
    for line in io.BytesIO(data):
        if line.strip():
            offsets.append(position)
        position += len(line)
    return offsets


@settings(max_examples=200, deadline=None)
@given(lines=st.lists(LINE, max_size=30), newline_at_end=st.booleans(), block=st.sampled_from([1, 3, 7, 64, 1 << 22]))
def test_scan_keeps_the_lines_a_line_reader_keeps(tmp_path_factory, lines, newline_at_end, block):
    lines = [line.replace(b"\n", b"") for line in lines]
    data = b"\n".join(lines) + (b"\n" if newline_at_end and lines else b"")
    path = tmp_path_factory.mktemp("scan") / "docs.jsonl"
    path.write_bytes(data)
    assert scan(path, block).tolist() == reference(data), data


def test_a_large_files_index_is_made_once_and_mapped(tmp_path, monkeypatch):
    monkeypatch.setenv("HOTSWITCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(line_index, "INDEXED_BYTES", 100)
    path = tmp_path / "docs.jsonl"
    path.write_bytes(b'{"text": "a"}\n\n{"text": "b"}\n' * 20)
    first = line_offsets(path)
    assert isinstance(first, np.memmap) and first.tolist() == reference(path.read_bytes())
    made = [p for p in (tmp_path / "cache" / "line_index").iterdir() if p.suffix == ".npy"]
    assert len(made) == 1
    stamp = made[0].stat().st_mtime_ns
    assert line_offsets(path).tolist() == first.tolist() and made[0].stat().st_mtime_ns == stamp
    path.write_bytes(b'{"text": "c"}\n')  # a changed file gets a new index
    assert line_offsets(path).tolist() == [0]


def test_an_unwritable_cache_keeps_the_index_in_memory_and_a_compressed_file_says_what_to_set(tmp_path, monkeypatch):
    from hotswitch.backend.data.decompressed import plain_copy

    (tmp_path / "a-file").write_text("not a folder")
    monkeypatch.setenv("HOTSWITCH_CACHE", str(tmp_path / "a-file" / "cache"))  # cannot be made, even by root
    monkeypatch.setattr(line_index, "INDEXED_BYTES", 10)
    path = tmp_path / "docs.jsonl"
    path.write_bytes(b'{"text": "a"}\n{"text": "b"}\n')
    assert line_offsets(path).tolist() == [0, 14]
    (tmp_path / "docs.jsonl.gz").write_bytes(gzip.compress(path.read_bytes()))
    with pytest.raises(ValueError, match=r"cache .*a-file/cache/decompressed cannot be written .*set HOTSWITCH_CACHE"):
        plain_copy(tmp_path / "docs.jsonl.gz")
