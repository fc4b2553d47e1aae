import json

import pytest

from hotswitch.backend.data import BYTES, BatchStream, FileDocuments, SyntheticDocuments, stdlib_documents
from hotswitch.backend.data.stream import Sequence
from hotswitch.backend.models import IGNORE
from hotswitch.backend.train.batching import balance, collate, pack


def test_stdlib_corpus_has_a_long_tail_of_code_units():
    source = stdlib_documents()
    lengths = sorted(len(source.tokens(i)) for i in range(0, len(source), 7))
    assert len(source) > 1000
    assert lengths[len(lengths) // 2] < 1000 < lengths[-1] // 4  # most short, some much longer
    assert BYTES.decode(source.tokens(0)).strip()


def test_stream_is_deterministic_and_resumes_exactly():
    first = BatchStream(stdlib_documents(), 8, 128, seed=3)
    batches = [first.next_batch() for _ in range(3)]
    assert all(1 <= s.length <= 128 for b in batches for s in b)
    resumed = BatchStream(stdlib_documents(), 8, 128, seed=3)
    resumed.next_batch()
    state = resumed.state_dict()
    again = BatchStream(stdlib_documents(), 8, 128, seed=3)
    again.load_state_dict(json.loads(json.dumps(state)))
    assert [again.next_batch(), again.next_batch()] == batches[1:]
    assert BatchStream(stdlib_documents(), 8, 128, seed=4).next_batch() != batches[0]


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


def test_synthetic_lengths_are_long_tailed():
    source = SyntheticDocuments("commoncrawl", count=2000)
    lengths = sorted(source.length(i) for i in range(len(source)))
    assert lengths[1000] < 1000 and lengths[-1] > 10 * lengths[1000]
    with pytest.raises(ValueError, match="choose one of commoncrawl, github"):
        SyntheticDocuments("books")


def seqs(*lengths):
    return [Sequence(i, tuple(range(n + 1))) for i, n in enumerate(lengths)]


def test_collate_pads_right_and_ignores_padding():
    micro = collate(seqs(3, 5))
    assert micro.shape == (2, 5)
    assert micro.targets[0, 3:].tolist() == [IGNORE, IGNORE] and micro.targets[0, :3].tolist() == [1, 2, 3]
    assert micro.tokens[1].tolist() == [0, 1, 2, 3, 4]


def test_pack_respects_the_token_budget():
    groups = pack(seqs(100, 90, 40, 30, 30, 300), 200)
    assert [[s.length for s in g] for g in groups] == [[300], [100, 90], [40, 30, 30]]
    assert all(len(g) * g[0].length <= 200 or len(g) == 1 for g in groups)


def test_pack_holds_no_more_rows_than_memory_allows():
    at_most_two = pack(seqs(40, 30, 30, 20, 10), 200, max_rows=lambda length: 2)
    assert [[s.length for s in g] for g in at_most_two] == [[40, 30], [30, 20], [10]]
    by_length = pack(seqs(50, 50, 20, 20, 20, 20), 1000, max_rows=lambda length: 100 // length)
    assert [[s.length for s in g] for g in by_length] == [[50, 50], [20, 20, 20, 20]]


def test_balance_spreads_cost_evenly():
    parts = balance(seqs(8, 7, 6, 5, 4, 3, 2, 1), 2, float)
    loads = [sum(s.length for s in p) for p in parts]
    assert sorted(loads) == [18, 18]
