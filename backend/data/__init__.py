"""Training data: documents, byte-level tokens and resumable global batches."""

from hotswitch.backend.data.sources import FileDocuments, SyntheticDocuments, stdlib_documents
from hotswitch.backend.data.stream import BatchStream, Sequence
from hotswitch.backend.data.tokenizer import BYTE_VOCAB, EOS, PAD, decode, encode

__all__ = [
    "BYTE_VOCAB",
    "EOS",
    "PAD",
    "BatchStream",
    "FileDocuments",
    "Sequence",
    "SyntheticDocuments",
    "decode",
    "encode",
    "stdlib_documents",
]
