"""A byte-level BPE (Hugging Face ``tokenizers``) trained on the training documents, cached
on disk under a hash of their contents, so that every rank and every later run reads the
same merges."""

from __future__ import annotations

import fcntl
import hashlib
import os
from collections.abc import Iterable
from pathlib import Path

from hotswitch.backend.cache import cache_dir
from hotswitch.backend.data.hf_tokenizer_files import TokenIds, write_tokenizer
from hotswitch.backend.data.tokenizer import as_text

SPECIALS = ["<pad>", "<eos>"]  # ids 0 and 1: PAD, then end of document


class BPETokenizer:
    chat_template = None  # learnt from plain text: it knows no conversations

    def __init__(self, tokenizer, vocab_size: int):
        self._tokenizer = tokenizer
        self.vocab_size = tokenizer.get_vocab_size()
        self.name = f"bpe:{vocab_size}"
        self.eos = tokenizer.token_to_id("<eos>")

    @classmethod
    def train(cls, texts: Iterable[str], vocab_size: int) -> BPETokenizer:
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

        tokenizer = Tokenizer(models.BPE())
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tokenizer.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            special_tokens=SPECIALS,
            show_progress=False,
        )
        tokenizer.train_from_iterator(texts, trainer)
        return cls(tokenizer, vocab_size)

    @classmethod
    def from_str(cls, text: str, vocab_size: int) -> BPETokenizer:
        from tokenizers import Tokenizer

        return cls(Tokenizer.from_str(text), vocab_size)

    def to_str(self) -> str:
        return self._tokenizer.to_str()

    def encode(self, text: str | bytes) -> list[int]:
        return [*self._tokenizer.encode(as_text(text)).ids, self.eos]

    def encode_prompted(self, prompt: str | bytes, completion: str | bytes) -> tuple[list[int], int]:
        first, then = (self._tokenizer.encode(as_text(t)).ids for t in (prompt, completion))
        return [*first, *then, self.eos], len(first)

    def decode(self, tokens: list[int]) -> str:
        return self._tokenizer.decode(list(tokens), skip_special_tokens=True)

    def save_hf(self, directory: Path) -> TokenIds:
        return write_tokenizer(directory, self.to_str(), eos=SPECIALS[1], pad=SPECIALS[0])


def bpe_for(texts: list[bytes], vocab_size: int) -> BPETokenizer:
    """The BPE of ``vocab_size`` tokens trained on ``texts``: read from the cache, or trained
    there by the first process to ask (the others wait for it and read the same file)."""
    import tokenizers

    digest = hashlib.sha256(f"{vocab_size} {tokenizers.__version__} {len(texts)}".encode())
    for text in texts:
        digest.update(hashlib.sha256(text).digest())
    path = cache_dir("tokenizers") / f"bpe{vocab_size}-{digest.hexdigest()[:20]}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if path.is_file():
            return BPETokenizer.from_str(path.read_text(), vocab_size)
        trained = BPETokenizer.train((t.decode("utf-8", errors="replace") for t in texts), vocab_size)
        scratch = path.with_suffix(f".{os.getpid()}.tmp")
        scratch.write_text(trained.to_str())
        scratch.replace(path)
        return trained
