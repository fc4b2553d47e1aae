"""The batch stream: deterministic given its seed, resumable from its state."""

import itertools
import json

import pytest

from hotswitch.backend.data import BatchStream, DocumentSource, stdlib_documents


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


class Counting(DocumentSource):
    """Documents whose tokens are their own positions (offset per document), so a sequence says
    exactly which tokens of which document it holds."""

    def __init__(self, lengths):
        self.lengths = lengths

    def __len__(self):
        return len(self.lengths)

    def tokens(self, index):
        return [1000 * index + t for t in range(self.lengths[index])]


def epoch_of(stream: BatchStream) -> list:
    """The sequences of one epoch, one batch of one at a time."""
    sequences = [stream.next_batch()[0]]
    while stream.position < len(stream.source) or stream.piece is not None:
        sequences.extend(stream.next_batch())
    return sequences


def test_split_documents_train_every_token_once_and_cut_ones_only_their_start():
    source = Counting([5, 40, 9, 23, 3])  # max_len 8: two documents are longer
    split = epoch_of(BatchStream(source, 1, 8, seed=1, split=True))
    assert all(2 <= s.length <= 8 for s in split)
    targets = sorted(t for s in split for t in s.tokens[1:])
    assert targets == sorted(1000 * d + t for d, n in enumerate(source.lengths) for t in range(1, n))
    for a, b in itertools.pairwise(split):
        assert a.doc != b.doc or a.tokens[-1] == b.tokens[0], "a piece starts with the last target before it"
    cut = epoch_of(BatchStream(source, 1, 8, seed=1))
    assert sorted(s.tokens for s in cut) == sorted(tuple(source.tokens(d)[:9]) for d in range(5))


def test_a_split_stream_resumes_mid_document():
    source = Counting([50, 7, 31])
    first = BatchStream(source, 2, 8, seed=5, split=True)
    batches = [first.next_batch() for _ in range(6)]
    again = BatchStream(source, 2, 8, seed=5, split=True)
    again.next_batch()
    state = json.loads(json.dumps(again.state_dict()))
    assert state["piece"] is not None  # the batch ended inside a document
    resumed = BatchStream(source, 2, 8, seed=5, split=True)
    resumed.load_state_dict(state)
    assert [resumed.next_batch() for _ in range(5)] == batches[1:]
    older = BatchStream(source, 2, 8, seed=5)
    older.load_state_dict({k: v for k, v in state.items() if k != "piece"})  # a checkpoint from before
    assert older.piece is None and older.position == state["position"]


def test_a_stream_resumes_only_its_own_documents_and_order():
    source = Counting([5, 40, 9, 23, 3, 17])
    trained = BatchStream(source, 2, 8, seed=1)
    trained.next_batch()
    state = json.loads(json.dumps(trained.state_dict()))
    same = BatchStream(Counting([5, 40, 9, 23, 3, 17]), 2, 8, seed=1)
    assert same.load_state_dict(state) is None and same.position == state["position"] == 2
    older = BatchStream(source, 2, 8, seed=1)
    assert older.load_state_dict({k: v for k, v in state.items() if k != "documents"}) is None  # no fingerprint
    assert older.position == 2
    for other, named in [
        (BatchStream(Counting([5, 40, 9, 23, 3]), 2, 8, seed=1), "documents"),  # one fewer
        (BatchStream(Counting([5, 40, 10, 23, 3, 17]), 2, 8, seed=1), "documents"),  # one it samples changed
        (BatchStream(source, 2, 8, seed=2), "seed (2) is not the checkpoint's (1)"),
    ]:
        why = other.load_state_dict(state)
        assert why is not None and named in why and "from their first batch" in why, why
        assert (other.position, other.piece) == (0, None)
        assert other.next_batch() == BatchStream(other.source, 2, 8, seed=other.seed).next_batch()


def test_one_pass_takes_each_document_once_however_many_are_asked_for():
    """What evaluation draws: a held-out split smaller than its batches, once over."""
    source = Counting([5, 40, 9, 1, 3])  # a one-token document trains nothing
    for asked in (2, 3, 4, 100):
        sequences = BatchStream(source, 3, 8, seed=1).one_pass(asked)
        docs = [s.doc for s in sequences]
        assert len(docs) == len(set(docs)) == min(asked, 4) and 3 not in docs
    pieces = BatchStream(source, 3, 8, seed=1, split=True).one_pass(100)
    assert sum(s.doc == 1 for s in pieces) == 5  # 40 tokens, 8 a piece: each piece once
    with pytest.raises(ValueError, match="no document has at least 3 tokens"):
        BatchStream(Counting([1, 1]), 2, 8).one_pass(4)
