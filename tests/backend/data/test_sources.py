"""Document sources: the stdlib corpus, the user's files, synthetic long-tailed lengths."""

import json

import pytest

from hotswitch.backend.data import BYTES, FileDocuments, SyntheticDocuments, stdlib_documents


def test_stdlib_corpus_has_a_long_tail_of_code_units():
    source = stdlib_documents()
    lengths = sorted(len(source.tokens(i)) for i in range(0, len(source), 7))
    assert len(source) > 1000
    assert lengths[len(lengths) // 2] < 1000 < lengths[-1] // 4  # most short, some much longer
    assert BYTES.decode(source.tokens(0)).strip()


def test_user_files(tmp_path):
    (tmp_path / "a.txt").write_text("hello world")
    (tmp_path / "b.jsonl").write_text(json.dumps({"text": "one"}) + "\n\n" + json.dumps({"text": "two"}) + "\n")
    source = FileDocuments([tmp_path / "a.txt", tmp_path / "b.jsonl"])
    assert sorted(BYTES.decode(source.tokens(i)) for i in range(len(source))) == ["hello world", "one", "two"]
    assert source.tokens(0)[-1] == BYTES.eos  # every document ends with EOS
    with pytest.raises(ValueError, match="is not a file"):
        FileDocuments([tmp_path / "missing.txt"])
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(ValueError, match="the dataset is empty"):
        FileDocuments([tmp_path / "empty.jsonl"])


@pytest.mark.parametrize(
    "line, refusal",
    [
        ("{not json", "line 3 is not JSON (Expecting property name enclosed in double quotes at column 2)"),
        ("[1, 2]", "line 3 is a JSON array, not an object with a 'text' field"),
        ('{"body": "x"}', "line 3 has no 'text' field (it has ['body']); set text_field"),
        ('{"text": 5}', "line 3: its 'text' is a JSON number, not a string"),
    ],
)
def test_a_bad_jsonl_line_is_refused_naming_its_line(tmp_path, line, refusal):
    """A malformed line met while training names its file and line (the blank line counts), not
    the decoder's position within the line."""
    path = tmp_path / "docs.jsonl"
    path.write_text(json.dumps({"text": "one"}) + "\n\n" + line + "\n")
    source = FileDocuments([path])
    assert BYTES.decode(source.tokens(0)) == "one"
    with pytest.raises(ValueError) as refused:
        source.tokens(1)
    assert str(refused.value).startswith(f"{path} line 3") and refusal in str(refused.value), refused.value


def test_a_record_is_refused_naming_the_setting_of_its_missing_field(tmp_path):
    path = tmp_path / "sft.jsonl"
    path.write_text(json.dumps({"prompt": "a", "completion": "b"}) + "\n" + json.dumps({"completion": "c"}) + "\n")
    prompts = FileDocuments([path], "prompt", "prompt_field")
    with pytest.raises(ValueError, match=r"line 2 has no 'prompt' field \(it has \['completion'\]\); set prompt_field"):
        prompts.text(1)


def test_a_null_text_of_a_jsonl_record_is_an_empty_document_as_a_datasets_null_row(tmp_path):
    path = tmp_path / "nulls.jsonl"
    path.write_text(json.dumps({"text": "abc"}) + "\n" + json.dumps({"text": None}) + "\n")
    source = FileDocuments([path])
    assert [source.text(0), source.text(1)] == [b"abc", b""]
    assert source.tokens(1) == [BYTES.eos]


def test_a_null_row_of_a_dataset_is_an_empty_document_not_the_text_none(tmp_path, monkeypatch):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from hotswitch.backend.data.hf_data import DatasetDocuments

    monkeypatch.setenv("HOTSWITCH_CACHE", str(tmp_path / "cache"))
    pq.write_table(pa.table({"text": ["one", None, "three"], "id": [1, 2, 3]}), tmp_path / "rows.parquet")
    source = DatasetDocuments([tmp_path / "rows.parquet"])
    assert [source.text(i) for i in range(len(source))] == [b"one", b"", b"three"]
    with pytest.raises(ValueError, match=r"'id' column holds int64, not text; set text_field to a string one"):
        DatasetDocuments([tmp_path / "rows.parquet"], text_field="id")


def test_text_jsonl_parquet_and_arrow_files_train_together(tmp_path, monkeypatch):
    """Files of several kinds in one ``data``: each kind read its own way, the documents joined."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from hotswitch.backend.train.run.recipe import documents

    monkeypatch.setenv("HOTSWITCH_CACHE", str(tmp_path / "cache"))
    (tmp_path / "a.txt").write_text("plain text")
    (tmp_path / "b.jsonl").write_text(json.dumps({"text": "json one"}) + "\n" + json.dumps({"text": "json two"}) + "\n")
    pq.write_table(pa.table({"text": ["parquet row"]}), tmp_path / "c.parquet")
    with (
        pa.OSFile(str(tmp_path / "d.arrow"), "wb") as sink,
        pa.ipc.new_stream(sink, pa.schema([("text", pa.string())])) as w,
    ):
        w.write_table(pa.table({"text": ["arrow row"]}))
    paths = [str(tmp_path / name) for name in ("c.parquet", "a.txt", "d.arrow", "b.jsonl")]
    source = documents(paths).use_tokenizer("byte")
    texts = sorted(BYTES.decode(source.tokens(i)) for i in range(len(source)))
    assert texts == ["arrow row", "json one", "json two", "parquet row", "plain text"], texts
    assert source.describe().count("file(s)") == 3, source.describe()  # text and JSONL, Parquet, Arrow
    with pytest.raises(IndexError):
        source.text(len(source))


def test_synthetic_lengths_are_long_tailed():
    source = SyntheticDocuments("commoncrawl", count=2000)
    lengths = sorted(source.length(i) for i in range(len(source)))
    assert lengths[1000] < 1000 and lengths[-1] > 10 * lengths[1000]
    with pytest.raises(ValueError, match="choose one of commoncrawl, github"):
        SyntheticDocuments("books")
