"""The BPE trained on the training documents: lossless, shorter sequences, one set of merges
for every process (trained once, deterministically), cached."""

import multiprocessing

import pytest

from hotswitch.backend.data import BatchStream, FileDocuments, SyntheticDocuments, stdlib_documents
from hotswitch.backend.data.bpe import BPETokenizer


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HOTSWITCH_CACHE", str(tmp_path / "cache"))


def test_bpe_on_the_stdlib_round_trips_and_shortens_sequences_threefold():
    byte_level, bpe = stdlib_documents(), stdlib_documents().use_tokenizer("bpe:2048")
    assert bpe.tokenizer.vocab_size == 2048
    sample = range(0, len(bpe), 50)
    for i in sample:
        tokens = bpe.tokens(i)
        assert max(tokens) < 2048 and tokens[-1] == bpe.tokenizer.eos
        assert bpe.tokenizer.decode(tokens) == byte_level.text(i).decode("utf-8", errors="replace")
    ratio = sum(len(byte_level.tokens(i)) for i in sample) / sum(len(bpe.tokens(i)) for i in sample)
    assert ratio > 2.5  # code: ~3 bytes per token


def train_in_process(path):
    return FileDocuments([path]).use_tokenizer("bpe:300").tokenizer.to_str()


def test_processes_share_one_training_and_the_cache_serves_later_ones(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("\n".join(f'{{"text": "def f{i}(x):\\n    return x * {i} + {i * i}"}}' for i in range(300)))
    with multiprocessing.get_context("spawn").Pool(3) as pool:
        merges = pool.map(train_in_process, [corpus] * 3)
    assert len(set(merges)) == 1
    assert len(list((tmp_path / "cache" / "tokenizers").glob("*.json"))) == 1
    again = FileDocuments([corpus]).use_tokenizer("bpe:300")
    assert again.tokenizer.to_str() == merges[0]
    fresh = BPETokenizer.train(["def f(x):\n    return x"] * 3, 300)
    assert fresh.decode(fresh.encode("def g(y): pass")) == "def g(y): pass"


def test_other_documents_train_another_bpe(tmp_path):
    (tmp_path / "a.txt").write_text("alpha beta gamma " * 200)
    (tmp_path / "b.txt").write_text("one two three " * 200)
    first = FileDocuments([tmp_path / "a.txt"]).use_tokenizer("bpe:300").tokenizer
    second = FileDocuments([tmp_path / "b.txt"]).use_tokenizer("bpe:300").tokenizer
    assert first.to_str() != second.to_str()


def test_bad_tokenizer_requests_are_refused_clearly():
    with pytest.raises(ValueError, match="give 'byte', 'bpe:<vocabulary size"):
        stdlib_documents().use_tokenizer("wordpiece")
    with pytest.raises(ValueError, match="at least 260"):
        stdlib_documents().use_tokenizer("bpe:100")
    with pytest.raises(ValueError, match="synthetic documents are token ids"):
        SyntheticDocuments("github", count=10).use_tokenizer("bpe:512")
    assert BatchStream(SyntheticDocuments("github", count=10).use_tokenizer("byte"), 2, 64).next_batch()


def test_a_recipe_whose_bpe_outgrows_the_models_vocabulary_fails_before_training():
    from hotswitch.backend.train.run.recipe import build

    with pytest.raises(ValueError, match="1024 tokens, more than tiny's vocabulary of 512"):
        build({"model": "tiny", "tokenizer": "bpe:1024"})
