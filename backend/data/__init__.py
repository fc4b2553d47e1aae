"""Training data: documents, tokenisers (byte-level or a locally trained BPE) and resumable
global batches."""

from hotswitch.backend.data.file_documents import FileDocuments
from hotswitch.backend.data.sources import DocumentSource, JoinedDocuments, SyntheticDocuments, stdlib_documents
from hotswitch.backend.data.stream import BatchStream, Sequence
from hotswitch.backend.data.tokenizer import BYTES, PAD, Tokenizer

__all__ = [
    "BYTES",
    "PAD",
    "BatchStream",
    "DocumentSource",
    "FileDocuments",
    "JoinedDocuments",
    "Sequence",
    "SyntheticDocuments",
    "Tokenizer",
    "stdlib_documents",
]
