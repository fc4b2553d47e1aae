"""Data users already have in Hugging Face formats: a ``tokenizer.json`` (``tokenizers``) and
Parquet or Arrow files read through ``datasets``.

``datasets`` memory-maps the Arrow table it builds (once, cached) from the files, so a corpus
larger than memory is indexed and shuffled like a small one without being loaded; a streaming
dataset could not be shuffled by document and resumed at a position, which every
``BatchStream`` is. JSONL files stay with ``FileDocuments``, which reads one line at a time by
its byte offset and needs no conversion.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path

from hotswitch.backend.cache import cache_dir
from hotswitch.backend.data.chat_template import ChatTemplate, check_messages, template_source
from hotswitch.backend.data.files import DATASET_SUFFIXES
from hotswitch.backend.data.hf_tokenizer_files import TokenIds, copy_tokenizer, named_tokens
from hotswitch.backend.data.sources import DocumentSource
from hotswitch.backend.data.tokenizer import as_text

USUAL_EOS = ("</s>", "<|end_of_text|>", "<|endoftext|>")  # LLaMA 1-2 and Mistral, LLaMA 3, GPT-2's BPE


def _require(module: str):
    try:
        return __import__(module)
    except ImportError:
        raise ImportError(f"reading this needs {module!r}: pip install 'hotswitch[hf]'") from None


class HFTokenizer:
    """The tokenizer of a Hugging Face folder (its ``tokenizer.json``); documents end with its
    end-of-sequence token: the one its ``tokenizer_config.json`` names, else a usual one it has,
    else none."""

    def __init__(self, directory: str | Path):
        tokenizers = _require("tokenizers")
        self.directory = Path(directory)
        path = self.directory / "tokenizer.json"
        if not path.is_file():
            raise ValueError(f"{directory} has no tokenizer.json; give a Hugging Face tokenizer folder")
        self.tokenizer = tokenizers.Tokenizer.from_file(str(path))
        self.name = f"hf:{directory}"
        self.vocab_size = self.tokenizer.get_vocab_size()
        named = named_tokens(self.directory).get("eos_token")
        candidates = (named, *USUAL_EOS) if named else USUAL_EOS
        self.eos = next((self.tokenizer.token_to_id(t) for t in candidates
                         if self.tokenizer.token_to_id(t) is not None), None)  # fmt: skip

    @functools.cached_property
    def chat_template(self) -> ChatTemplate | None:
        """The folder's chat template, compiled when first asked for (by conversations only)."""
        template = template_source(self.directory)
        return None if template is None else ChatTemplate.for_training(template, named_tokens(self.directory))

    def save_hf(self, directory: Path) -> TokenIds:
        return copy_tokenizer(self.directory, directory, self.tokenizer, self.eos)

    def encode(self, text: str | bytes) -> list[int]:
        ids = self.tokenizer.encode(as_text(text)).ids
        return ids if self.eos is None else [*ids, self.eos]

    def encode_prompted(self, prompt: str | bytes, completion: str | bytes) -> tuple[list[int], int]:
        """Prompt and completion tokenised whole, as TRL tokenises them (apart, a SentencePiece
        tokenizer would begin the completion with a word boundary of its own); the prompt's
        tokens are those before the first that holds a character of the completion."""
        prompt = as_text(prompt)
        encoding = self.tokenizer.encode(prompt + as_text(completion))  # its template's beginning (BOS), if any
        boundary = len(prompt)
        prompt_tokens = next(
            (i for i, (start, end) in enumerate(encoding.offsets) if not (start < boundary and end <= boundary)),
            len(encoding.ids),
        )
        return [*encoding.ids, *([] if self.eos is None else [self.eos])], prompt_tokens

    def encode_offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        """``text``'s ids alone (no template's beginning, no end of document: a conversation its
        chat template wrote holds its own), and each id's [start, end) characters of ``text``."""
        encoding = self.tokenizer.encode(text, add_special_tokens=False)
        return encoding.ids, encoding.offsets

    def decode(self, tokens: list[int]) -> str:
        return self.tokenizer.decode(tokens)


def column_problem(path: Path, column: str, setting: str = "text_field", messages: bool = False) -> str | None:
    """What keeps ``column`` (the ``setting`` setting's) of a Parquet or Arrow file from holding
    its documents' text (or lists of messages, where ``messages`` says so): it is missing or
    holds other values, with the fix; None where it can. Read from the schema only."""
    import pyarrow.types

    schema = _schema(path)
    if column not in schema.names:
        return f"{path} has no {column!r} field (it has {list(schema.names)}); set {setting}"
    kind = schema.field(column).type
    if messages:
        lists = pyarrow.types.is_list(kind) or pyarrow.types.is_large_list(kind)
        return None if lists else f"{path}'s {column!r} column holds {kind}, not lists of messages; set {setting}"
    strings = (pyarrow.types.is_string, pyarrow.types.is_large_string, getattr(pyarrow.types, "is_string_view", None))
    if any(check is not None and check(kind) for check in strings):
        return None
    return f"{path}'s {column!r} column holds {kind}, not text; set {setting} to a string one"


def _schema(path: Path):
    _require("pyarrow")
    if path.suffix == ".parquet":
        import pyarrow.parquet

        return pyarrow.parquet.read_schema(path)
    import pyarrow.ipc

    with path.open("rb") as f:
        try:
            return pyarrow.ipc.open_stream(f).schema
        except pyarrow.ArrowInvalid:
            f.seek(0)
            return pyarrow.ipc.open_file(f).schema


class DatasetDocuments(DocumentSource):
    """One document per row of Parquet or Arrow files, its text in ``text_field`` (or its
    messages, read as a ``conversation``, where ``chat`` says so)."""

    def __init__(self, paths: Sequence[str | Path], text_field: str = "text", chat: bool = False):
        datasets = _require("datasets")
        files = sorted(Path(p) for p in paths)
        kinds = {DATASET_SUFFIXES.get(p.suffix) for p in files}
        if len(kinds) != 1 or None in kinds:
            raise ValueError(f"give Parquet or Arrow files of one kind, got {[p.name for p in files]}")
        for path in files:
            if problem := column_problem(path, text_field, "chat_field" if chat else "text_field", chat):
                raise ValueError(problem)
        self.text_field = text_field
        self.files = files
        self.dataset = datasets.load_dataset(
            kinds.pop(), data_files=[str(p) for p in files], split="train", cache_dir=str(cache_dir("datasets"))
        )

    def __len__(self) -> int:
        return len(self.dataset)

    def text(self, index: int) -> bytes:
        text = self.dataset[index][self.text_field]
        return b"" if text is None else text.encode("utf-8")  # a null row: an empty document, too short to train

    def conversation(self, index: int) -> list[dict]:
        messages = check_messages(self.dataset[index][self.text_field], f"row {index} of {self.describe()}")
        # a table's messages share one type: a key some lack (tool_calls, say) is null in the others
        return [{key: value for key, value in message.items() if value is not None} for message in messages]

    def describe(self) -> str:
        return f"{len(self)} rows from {len(self.files)} file(s)"
