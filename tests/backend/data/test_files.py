"""Data named by folders and patterns, compressed files, and files no reader here understands:
each either reads as the same documents as its plain twin, or is refused before launch with what
to do, never trained as bytes."""

import bz2
import gzip
import json
import lzma
import re
import subprocess
import sys

import pytest

from hotswitch.backend.data import BYTES, FileDocuments
from hotswitch.backend.data.files import data_files
from hotswitch.backend.train.config.inputs import check_data

RECORDS = [{"text": f"document {i} " * (i + 1)} for i in range(5)]
JSONL = "".join(json.dumps(r) + "\n" for r in RECORDS)


def read_files(data, field: str = "text") -> list[str]:
    """The files a run reads for ``data``, checked before launch, as its ranks expand it."""
    return [str(path) for entry in check_data(data, field) for path in data_files(entry)]


def texts(source) -> list[str]:
    return [BYTES.decode(source.tokens(i)) for i in range(len(source))]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HOTSWITCH_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache" / "decompressed"


@pytest.mark.parametrize("suffix, opener", [(".gz", gzip.open), (".bz2", bz2.open), (".xz", lzma.open)])
def test_compressed_jsonl_and_text_read_as_their_plain_twins(tmp_path, cache, suffix, opener):
    (tmp_path / "plain.jsonl").write_text(JSONL)
    with opener(tmp_path / f"docs.jsonl{suffix}", "wt") as f:
        f.write(JSONL)
    with opener(tmp_path / f"note.txt{suffix}", "wt") as f:
        f.write("a compressed text")
    plain = texts(FileDocuments([tmp_path / "plain.jsonl"]))
    assert texts(FileDocuments([tmp_path / f"docs.jsonl{suffix}"])) == plain
    assert texts(FileDocuments([tmp_path / f"note.txt{suffix}"])) == ["a compressed text"]
    assert read_files([str(tmp_path / f"docs.jsonl{suffix}")]) == [str(tmp_path / f"docs.jsonl{suffix}")]
    with pytest.raises(ValueError, match=r"has no 'body' field \(it has \['text'\]\)"):
        check_data([str(tmp_path / f"docs.jsonl{suffix}")], "body")


def test_a_bad_line_of_a_compressed_file_is_named_by_that_file_not_its_copy(tmp_path, cache):
    path = tmp_path / "docs.jsonl.gz"
    with gzip.open(path, "wt") as f:
        f.write(JSONL + "{broken\n")
    source = FileDocuments([path])
    with pytest.raises(ValueError) as refused:
        source.tokens(len(RECORDS))
    assert str(refused.value).startswith(f"{path} line {len(RECORDS) + 1} is not JSON"), refused.value


def test_ranks_decompress_a_file_once_between_them(tmp_path, cache):
    """Four processes open the same new file at once: one decompresses it, all read it whole."""
    path = tmp_path / "docs.jsonl.gz"
    with gzip.open(path, "wt") as f:
        f.write(JSONL * 2000)
    read = "import sys; from hotswitch.backend.data import FileDocuments; print(len(FileDocuments([sys.argv[1]])))"
    ranks = [subprocess.Popen([sys.executable, "-c", read, str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(4)]  # fmt: skip
    outputs = [rank.communicate(timeout=600) for rank in ranks]
    assert [out.strip() for out, _ in outputs] == [str(len(RECORDS) * 2000)] * 4, outputs
    assert sum("decompressing" in err for _, err in outputs) == 1, [err for _, err in outputs]
    assert [p.suffix for p in cache.iterdir() if p.suffix != ".lock"] == [".jsonl"]  # one copy, no part left
    FileDocuments([path])  # found again while the file is unchanged
    assert len([p for p in cache.iterdir() if p.suffix == ".jsonl"]) == 1


def test_a_folder_reads_its_records_and_leaves_out_its_card_metadata_and_hidden_files(tmp_path, cache):
    corpus = tmp_path / "corpus"
    (corpus / "data" / ".cache").mkdir(parents=True)
    (corpus / "data" / "train-00000.jsonl").write_text(JSONL)
    with gzip.open(corpus / "data" / "train-00001.json.gz", "wt") as f:
        f.write(JSONL)
    (corpus / "README.md").write_text("# a dataset card, not training text")
    (corpus / "dataset_info.json").write_text('{\n  "features": {}\n}\n')
    (corpus / "data" / ".cache" / "old.jsonl").write_text(JSONL)
    (corpus / "_tmp.jsonl").write_text(JSONL)
    files = read_files(str(corpus), "text")
    assert [f.removeprefix(str(corpus)) for f in files] == ["/data/train-00000.jsonl", "/data/train-00001.json.gz"]
    from hotswitch.backend.train.run.recipe import documents

    assert (
        texts(documents(str(corpus)).use_tokenizer("byte"))
        == texts(FileDocuments([corpus / "data" / "train-00000.jsonl"])) * 2
    )


def test_a_folder_of_text_and_a_pattern(tmp_path, cache):
    (tmp_path / "books" / "part").mkdir(parents=True)
    (tmp_path / "books" / "one.txt").write_text("first book")
    (tmp_path / "books" / "part" / "two.md").write_text("second book")
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "a.py").write_text("x = 1")
    assert len(read_files(str(tmp_path / "books"), "text")) == 2
    assert read_files([str(tmp_path / "**" / "*.py")], "text") == [str(tmp_path / "code" / "a.py")]
    with pytest.raises(ValueError, match=r"holds no text, JSONL, Parquet or Arrow files \(1 \.py\); .*\*\*/\*\.py'"):
        check_data(str(tmp_path / "code"), "text")
    with pytest.raises(ValueError, match=r"matches no file"):
        check_data([str(tmp_path / "*.parquet")], "text")


def test_a_json_array_of_records_reads_as_its_jsonl_twin_converted_once(tmp_path, cache, capfd):
    from hotswitch.backend.data.prompted import PromptedDocuments

    alpaca = [{"instruction": f"say {i} in words ✓", "output": f"number {i}", "input": ""} for i in range(3)]
    (tmp_path / "alpaca.json").write_text(json.dumps(alpaca, indent=1, ensure_ascii=False))
    (tmp_path / "twin.jsonl").write_text("".join(json.dumps(r) + "\n" for r in alpaca))
    with gzip.open(tmp_path / "squeezed.json.gz", "wt") as f:
        f.write("  [ " + ", ".join(json.dumps(r) for r in alpaca) + " ]\n")
    check_data([str(tmp_path / "alpaca.json")], "output", prompt_field="instruction")
    assert "JSON array once as JSONL" in capfd.readouterr().err  # the check made the copy: said once
    for name in ("alpaca.json", "squeezed.json.gz"):
        read = PromptedDocuments(*(FileDocuments([tmp_path / name], key) for key in ("instruction", "output")))
        twin = PromptedDocuments(*(FileDocuments([tmp_path / "twin.jsonl"], key) for key in ("instruction", "output")))
        assert [read.document(i) for i in range(3)] == [twin.document(i) for i in range(3)]
    said = capfd.readouterr().err  # alpaca.json's copy found again, squeezed's made once for two reads
    assert "alpaca.json's JSON array" not in said and said.count("squeezed.json.gz's JSON array") == 1
    with pytest.raises(ValueError, match=r"alpaca.json record 2 has no 'text' field"):
        FileDocuments([tmp_path / "alpaca.json"]).text(1)


@pytest.mark.parametrize(
    "text, why",
    [
        ('[{"text": "a"} {"text": "b"}]', "expected ',' or ']' after a record at line 1 column 16"),
        ('[{"text": "a"},\n {"text": }]', "Expecting value at line 2 column 11"),
        ('[{"text": "a"}] {"text": "b"}', "more after the array's end"),
        ('[{"text": "a"}', "expected ',' or ']' after a record"),
    ],
)
def test_a_broken_json_array_is_refused_naming_where(tmp_path, cache, text, why):
    (tmp_path / "broken.json").write_text(text)
    with pytest.raises(ValueError, match=re.escape(f"broken.json is not one whole JSON array ({why}")):
        check_data([str(tmp_path / "broken.json")], "text")
    assert not list((cache.parent / "records").glob("*.jsonl"))


def test_files_no_reader_understands_are_refused_before_launch(tmp_path, cache):
    (tmp_path / "docs.jsonl.zst").write_bytes(b"\x28\xb5\x2f\xfd" + bytes(20))
    (tmp_path / "weights.txt").write_bytes(bytes(range(256)))
    (tmp_path / "cut.jsonl.gz").write_bytes(gzip.compress(JSONL.encode())[:40])
    (tmp_path / "fake.txt.gz").write_text("not gzip at all")
    for name, refusal in [
        ("docs.jsonl.zst", "compressed as zst, which is not read here; zstd -d"),
        ("weights.txt", "is binary (it holds NUL bytes), not text"),
        ("cut.jsonl.gz", "cannot be decompressed"),
        ("fake.txt.gz", "cannot be decompressed"),
    ]:
        with pytest.raises(ValueError, match=re.escape(refusal)):
            check_data([str(tmp_path / name)], "text")
    with pytest.raises(ValueError, match=r"cut.jsonl.gz cannot be decompressed into .*check that the file is whole"):
        FileDocuments([tmp_path / "cut.jsonl.gz"])
    assert not list(cache.glob("*.part")) and not list(cache.glob("*.jsonl"))


@pytest.mark.parametrize(
    "names",
    [
        ("data/train-00000-of-00002.parquet", "data/train-00001-of-00002.parquet", "data/test-00000.parquet"),
        ("train/data-00000-of-00001.arrow", "validation/data-00000-of-00001.arrow", "dataset_dict.json"),
        ("Train.jsonl", "dev.jsonl"),
    ],
)
def test_a_folder_of_several_splits_is_refused_and_the_split_it_names_reads(tmp_path, cache, names):
    """A hub repository's or a saved DatasetDict's folder holds its test split beside its train
    split: reading every file would train on the test split. The refusal names what to give
    instead, and that reads the train split's files."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    repo = tmp_path / "repo"
    for name in names:
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix == ".parquet":
            pq.write_table(pa.table({"text": ["row"]}), path)
        elif path.suffix == ".arrow":
            with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, pa.schema([("text", pa.string())])) as w:
                w.write_table(pa.table({"text": ["row"]}))
        else:
            path.write_text(JSONL)
    with pytest.raises(ValueError, match=r"holds the splits .*train.*give one split's files, e.g. '(.*)'$") as refused:
        check_data(str(repo), "text")
    suggested = re.search(r"e\.g\. '(.*)'$", str(refused.value)).group(1)
    assert read_files(suggested, "text") == [str(repo / name) for name in names if "train" in name.lower()]
    held = re.search(r"evaluate on '(.*)' with eval_data", str(refused.value)).group(1)
    assert read_files(held, "text") == [str(repo / name) for name in names if re.search("test|validation|dev", name)]


def test_the_checked_spec_keeps_folders_and_patterns_and_a_file_named_twice_reads_once(tmp_path, cache):
    """A corpus of thousands of shards stays one entry in the spec every rank is sent (a
    Kubeflow ConfigMap holds 1 MiB); the ranks expand it as the check did."""
    from hotswitch.backend.train.run.recipe import documents

    (tmp_path / "shards").mkdir()
    for i in range(3):
        (tmp_path / "shards" / f"part-{i}.jsonl").write_text(JSONL)
    entries = [str(tmp_path / "shards"), str(tmp_path / "shards" / "*-1.jsonl")]
    assert check_data(entries, "text") == entries
    assert len(documents(entries)) == 3 * len(RECORDS)  # part-1 once, though both entries name it
