"""A tokenizer written as Hugging Face tokenizer files, so that an exported checkpoint loads
with ``AutoTokenizer`` and encodes text to the ids it trained on.

Callers may rely on: ``write_tokenizer(directory, tokenizer_json, eos, pad)`` writes
``tokenizer.json`` and a ``tokenizer_config.json`` naming the ``PreTrainedTokenizerFast``
class (transformers 4 and 5 read it); ``byte_level_json()`` is the ``tokenizer.json`` of
``ByteTokenizer`` (each byte its own id, no merges); ``copy_tokenizer(source, directory)``
copies a Hugging Face folder's tokenizer files as they are. Each returns the special tokens'
ids (``TokenIds``) that a model's ``config.json`` and ``generation_config.json`` carry.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import TypedDict

# what transformers' save_pretrained writes for a tokenizer (slow and fast), and chat templates
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "tokenizer.model",
    "vocab.json",
    "merges.txt",
    "chat_template.jinja",
    "chat_template.json",
)


class TokenIds(TypedDict):
    bos_token_id: int | None
    eos_token_id: int | None
    pad_token_id: int | None


def write_tokenizer(directory: Path, tokenizer_json: str, eos: str, pad: str | None) -> TokenIds:
    """``tokenizer.json`` (the serialised ``tokenizers.Tokenizer``) and its config into ``directory``."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_str(tokenizer_json)
    (directory / "tokenizer.json").write_text(tokenizer_json)
    _write_config(directory, eos, pad)
    return {
        "bos_token_id": None,
        "eos_token_id": tokenizer.token_to_id(eos),
        "pad_token_id": None if pad is None else tokenizer.token_to_id(pad),
    }


def _write_config(directory: Path, eos: str | None, pad: str | None) -> None:
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        **({"eos_token": eos} if eos is not None else {}),
        **({"pad_token": pad} if pad is not None else {}),
        "clean_up_tokenization_spaces": False,
        "model_max_length": 1_000_000_000_000,  # no limit of the tokenizer's own: the model's applies
    }
    (directory / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")


def _bytes_to_unicode() -> list[str]:
    """The printable character GPT-2's byte-level pre-tokenizer (``tokenizers``' ``ByteLevel``)
    stands for each byte with, by byte value."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars = {}
    extra = 0
    for byte in range(256):
        if byte in printable:
            chars[byte] = chr(byte)
        else:
            chars[byte] = chr(256 + extra)
            extra += 1
    return [chars[byte] for byte in range(256)]


def byte_level_json(eos: str) -> str:
    """A ``tokenizer.json`` that encodes text to its UTF-8 bytes' values (ids 0-255) and knows
    ``eos`` as id 256: ``ByteTokenizer``'s ids, without the end-of-document id it appends."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    vocab = {char: byte for byte, char in enumerate(_bytes_to_unicode())}
    tokenizer = Tokenizer(models.BPE(vocab={**vocab, eos: 256}, merges=[]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens([eos])
    return tokenizer.to_str()


def _token_text(value) -> str | None:
    """A special token as ``tokenizer_config.json`` gives it: a string, or an AddedToken's dict."""
    return value.get("content") if isinstance(value, dict) else value


def named_tokens(source: Path) -> dict[str, str]:
    """The special tokens (``bos_token``, ``eos_token``, ``pad_token``) a Hugging Face folder's
    ``tokenizer_config.json`` names; empty where it has none."""
    path = source / "tokenizer_config.json"
    if not path.is_file():
        return {}
    raw = json.loads(path.read_text())
    named = {key: _token_text(raw.get(key)) for key in ("bos_token", "eos_token", "pad_token")}
    return {key: text for key, text in named.items() if isinstance(text, str)}


def copy_tokenizer(source: Path, directory: Path, tokenizer, eos: int | None) -> TokenIds:
    """``source``'s tokenizer files copied into ``directory``; ``tokenizer`` is its loaded
    ``tokenizers.Tokenizer`` and ``eos`` the end-of-document id training appended. A folder
    with a bare ``tokenizer.json`` gets a ``tokenizer_config.json`` naming that eos."""
    for name in TOKENIZER_FILES:
        if (source / name).is_file():
            shutil.copyfile(source / name, directory / name)
    if not (source / "tokenizer_config.json").is_file():
        _write_config(directory, None if eos is None else tokenizer.id_to_token(eos), None)
    named = named_tokens(source)
    ids = {key: tokenizer.token_to_id(text) for key, text in named.items()}
    return {"bos_token_id": ids.get("bos_token"), "eos_token_id": eos, "pad_token_id": ids.get("pad_token")}
