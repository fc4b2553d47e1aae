"""What a run trains, checked before anything starts: the model (a preset or a Hugging Face
checkpoint), the tokenizer and the data."""

from __future__ import annotations

import json
import os
from pathlib import Path

from hotswitch.backend.data.files import (
    DATASET_SUFFIXES,
    JSONL_SUFFIXES,
    RECORD_SUFFIXES,
    data_files,
    format_suffix,
    open_plain,
    unreadable,
)
from hotswitch.backend.data.lengths import SYNTHETIC
from hotswitch.backend.data.tokenizer import BYTES, parse_tokenizer
from hotswitch.backend.models.config import ModelConfig, get_config
from hotswitch.backend.train.config.paths import resolve
from hotswitch.backend.train.config.setting import bad_setting

HF = "hf:"  # a model or tokenizer from a Hugging Face folder


def model_config(model: str) -> ModelConfig:
    """A preset's config, or a Hugging Face checkpoint's (``"hf:DIR"``)."""
    if not model.startswith(HF):
        return get_config(model)
    from hotswitch.backend.models.hf_config import config_from_hf

    try:
        return config_from_hf(model[len(HF) :])
    except (FileNotFoundError, ValueError) as error:
        raise bad_setting("model", model, f"{error}") from None


def check_model(model) -> str:
    """``model`` checked; an ``hf:`` folder made absolute."""
    if not isinstance(model, str):
        raise bad_setting("model", model, "give a model name such as 'tiny', or 'hf:DIR' (a Hugging Face folder)")
    if model.startswith(HF):
        model = HF + str(resolve(model[len(HF) :]))
    model_config(model)
    return model


def default_tokenizer(model: str) -> str:
    """The tokenizer of a run that names none: a Hugging Face checkpoint's own (``model`` an
    ``hf:`` folder holding a ``tokenizer.json``: its weights mean those token ids), else byte-level."""
    if model.startswith(HF) and (Path(model[len(HF) :]) / "tokenizer.json").is_file():
        return model
    return "byte"


def check_tokenizer(tokenizer, config: ModelConfig) -> str:
    """``tokenizer`` checked against the model's vocabulary; an ``hf:`` folder made absolute."""
    if not isinstance(tokenizer, str):
        raise bad_setting("tokenizer", tokenizer, "give 'byte', 'bpe:<vocabulary size>' or 'hf:DIR'")
    if tokenizer.startswith(HF):
        from hotswitch.backend.data.hf_data import HFTokenizer

        tokenizer = HF + str(resolve(tokenizer[len(HF) :]))
        try:
            size = HFTokenizer(tokenizer[len(HF) :]).vocab_size
        except ValueError as error:
            raise bad_setting("tokenizer", tokenizer, str(error)) from None
    else:
        size = parse_tokenizer(tokenizer) or BYTES.vocab_size
    if size > config.vocab_size:
        raise bad_setting(
            "tokenizer", tokenizer, f"it has {size} tokens, more than {config.name}'s vocabulary of {config.vocab_size}"
        )
    return tokenizer


def data_from_words(words: list[str]) -> str | list[str]:
    """The ``data`` setting a flag's words give: one named source ('stdlib', 'synthetic:...') or files."""
    one = len(words) == 1 and (words[0] == "stdlib" or ":" in words[0])
    return words[0] if one else list(words)


def check_data(
    data, text_field: str, key: str = "data", prompt_field: str | None = None, chat_field: str | None = None
) -> str | list[str]:
    """``data`` checked (its files, folders' and patterns' too, readable and holding
    ``text_field``, and ``prompt_field`` where given; or conversations under ``chat_field``, and
    their prompts' under ``prompt_field``: then records only); its entries made absolute (each
    rank reads a folder or pattern again).
    ``key``: the setting that names them (``data``, ``eval_data``), as errors say."""
    _check_record_field("prompt_field", prompt_field, data, text_field, key)
    _check_record_field("chat_field", chat_field, data, text_field, key)
    if prompt_field is not None and prompt_field == chat_field:
        why = "give the field of each record's prompt, another than chat_field"
        raise bad_setting("prompt_field", prompt_field, why)
    if data == "stdlib":
        return data
    if isinstance(data, str) and data.startswith("synthetic:"):
        if data.split(":", 1)[1] not in SYNTHETIC:
            raise bad_setting(key, data, f"choose one of {', '.join('synthetic:' + k for k in SYNTHETIC)}")
        return data
    entries = [data] if isinstance(data, str | os.PathLike) else data
    listed = isinstance(entries, list | tuple) and entries
    if not listed or not all(isinstance(entry, str | os.PathLike) for entry in entries):
        why = "give 'stdlib', 'synthetic:github', or text/JSONL/Parquet/Arrow files, folders or patterns"
        raise bad_setting(key, data, why)
    resolved = [resolve(entry) for entry in entries]
    for entry in resolved:
        try:
            files = data_files(entry)
        except ValueError as error:
            raise bad_setting(key, data, str(error)) from None
        for path in files:
            if chat_field is not None:  # a conversation, after its prompt's messages where prompt_field names them
                problem = unreadable(path) or _records_only(path)
                problem = problem or _field_problem(path, chat_field, key, "chat_field", messages=True)
                problem = problem or (prompt_field and _field_problem(path, prompt_field, key, "prompt_field", True))
            else:
                problem = unreadable(path) or _field_problem(path, text_field, key, "text_field")
                problem = problem or (prompt_field and _records_only(path))
                problem = problem or (prompt_field and _field_problem(path, prompt_field, key, "prompt_field"))
            if problem:
                raise bad_setting(key, data, problem)
    return [str(entry) for entry in resolved]  # folders and patterns stay: a spec of 20K shards fits a ConfigMap


def _check_record_field(name: str, field, data, text_field: str, key: str) -> None:
    """``field`` (the ``name`` setting: ``prompt_field``, ``chat_field``) none, or a field's name
    other than ``text_field``, of files that may hold records."""
    if field is None:
        return
    if not isinstance(field, str) or not field or field == text_field:
        what = "prompt" if name == "prompt_field" else "conversation (its messages)"
        why = f"give the field that holds each record's {what}, another than text_field ({text_field!r})"
        raise bad_setting(name, field, why)
    if data == "stdlib" or (isinstance(data, str) and data.startswith("synthetic:")):
        held = "prompts" if name == "prompt_field" else "conversations"
        why = f"{key} {data!r} holds no {held}; give JSONL, Parquet or Arrow files of records"
        raise bad_setting(name, field, why)


def _records_only(path: Path) -> str | None:
    if format_suffix(path) not in RECORD_SUFFIXES:
        return f"{path} is a text file, one document with no fields; give JSONL, Parquet or Arrow records"
    return None


def _field_problem(path: Path, field: str, key: str, field_key: str, messages: bool = False) -> str | None:
    """Why ``path`` holds no documents under ``field`` (the ``field_key`` setting's): a JSONL
    file's first record or a dataset file's column lacks it or holds other than text (or lists
    of messages, where ``messages`` says so); None for text files."""
    if format_suffix(path) in DATASET_SUFFIXES:
        from hotswitch.backend.data.hf_data import column_problem

        return column_problem(path, field, field_key, messages)
    if format_suffix(path) not in JSONL_SUFFIXES:
        return None
    first = _first_record(path)
    if first is None:
        return f"{path} holds no records; remove it, or give files that hold some"
    try:
        record = json.loads(first)
    except json.JSONDecodeError as error:
        raise bad_setting(key, str(path), f"its first line is not JSON ({error})") from None
    fields = list(record) if isinstance(record, dict) else []
    if field not in fields:
        return f"{path} has no {field!r} field (it has {fields}); set {field_key}"
    conversation = isinstance(record[field], list)
    if messages and not conversation:
        return f"{path}'s first record's {field!r} is not a list of messages; set {field_key} to the field that is"
    if not messages and conversation:
        return f"{path}'s first record's {field!r} is a list, not text: a conversation's messages? set chat_field"
    return None


def _first_record(path: Path) -> bytes | None:
    """The first record of a JSONL file, or of a JSON array (from its JSONL copy, made now);
    None if it holds none."""
    from hotswitch.backend.data.json_array import holds_array, records_copy

    with records_copy(path).open("rb") if holds_array(path) else open_plain(path) as f:
        return next((line for line in f if line.strip()), None)


def check_chat_template(chat_field: str | None, tokenizer: str) -> None:
    """A ``chat_field`` needs ``tokenizer`` (a checked ``tokenizer`` setting) to have a chat template."""
    if chat_field is None:
        return
    from hotswitch.backend.data.chat import chat_template_missing
    from hotswitch.backend.data.chat_template import template_source

    if not tokenizer.startswith(HF) or template_source(Path(tokenizer[len(HF) :])) is None:
        raise bad_setting("chat_field", chat_field, chat_template_missing(tokenizer))
