"""Fine-tuning data as TRL reads it, on every chat template TRL ships (read from the installed
``trl`` package, never copied): where TRL's ``assistant_only_loss`` trains a conversation (the
template's own ``{% generation %}`` markers, or the training version TRL swaps in for it), the
text is TRL's and the characters that train are the ones its assistant mask marks; and on a
tokenizer, the tokens and the trained ones are transformers' own."""

import json
from pathlib import Path

import pytest
import trl  # a test extra: `pip install -e '.[dev]'` installs it

from hotswitch.backend.data.chat import ChatDocuments
from hotswitch.backend.data.chat_template import ChatTemplate, ChatTemplateError, trl_training_template
from hotswitch.backend.data.file_documents import FileDocuments

FOLDER = Path(trl.__file__).parent / "chat_templates"
TEMPLATES = sorted(p.stem for p in FOLDER.glob("*.jinja"))
TOKENS = {"bos_token": "<s>", "eos_token": "</s>"}
CONVERSATIONS = [
    [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello there"}],
    [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "4"},
    ],
    [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b"},
        {"role": "user", "content": "c"},
        {"role": "assistant", "content": "d"},
    ],
    [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b"},
        {"role": "user", "content": "c"},
        {"role": "assistant", "content": "d"},
    ],
    [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}, {"role": "user", "content": "thanks"}],
    [
        {"role": "user", "content": "think"},
        {"role": "assistant", "content": "answer", "reasoning_content": "let me see"},
    ],
    [
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": "a1", "reasoning_content": "r1"},
        {"role": "user", "content": "q2"},
        {"role": "assistant", "content": "a2", "reasoning_content": "r2"},
    ],
    [{"role": "user", "content": "  spaced  "}, {"role": "assistant", "content": "  also  "}],
]


def trls_template(name: str) -> str | None:
    """The template TRL's assistant-only loss renders with for template ``name``."""
    source = (FOLDER / f"{name}.jinja").read_text()
    return source if "{% generation" in source else trl_training_template(source)


def trls_spans(template: str, conversation: list[dict]):
    """TRL's rendering and its trained character spans (transformers' generation indices)."""
    from transformers.utils.chat_template_utils import render_jinja_template

    rendered, indices = render_jinja_template(
        conversations=[conversation], chat_template=template, return_assistant_tokens_mask=True, **TOKENS
    )
    return rendered[0], merged(indices[0])


def merged(spans) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for start, end in sorted(map(tuple, spans)):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        elif end > start:
            out.append((start, end))
    return out


def our_spans(source: str, conversation: list[dict]):
    pieces = ChatTemplate.for_training(source, TOKENS).pieces(conversation)
    spans, at = [], 0
    for text, trains in pieces:
        if trains:
            spans.append((at, at + len(text)))
        at += len(text)
    return "".join(text for text, _ in pieces), merged(spans)


@pytest.mark.parametrize("name", TEMPLATES)
def test_every_conversation_trl_trains_trains_the_same_characters(name):
    template = trls_template(name)
    if template is None:  # TRL's assistant-only loss refuses it; ours reads it turn by turn
        return read_turn_by_turn(name)
    trained = 0
    for conversation in CONVERSATIONS:
        try:
            expected = trls_spans(template, conversation)
        except Exception:  # the template itself refuses it (Gemma's system turn, a VLM's content): TRL too
            continue
        try:
            got = our_spans((FOLDER / f"{name}.jinja").read_text(), conversation)
        except ChatTemplateError as error:
            raise AssertionError(f"{name} refuses a conversation TRL trains: {error}") from None
        assert got == expected, (name, conversation)
        trained += 1
    assert trained or name.startswith("llava_next"), f"TRL trains none of the conversations on {name}"


def read_turn_by_turn(name: str) -> None:
    """A template TRL has no training version of: each conversation trains its assistant turns'
    text, or is refused by name (never another error)."""
    source = (FOLDER / f"{name}.jinja").read_text()
    trained = 0
    for conversation in CONVERSATIONS:
        try:
            text, spans = our_spans(source, conversation)
        except ChatTemplateError:
            continue
        assert all(text[a:b].strip() for a, b in spans), (name, conversation)
        trained += bool(spans)
    assert trained, f"{name}: no conversation trains"


FAMILIES = ["llama3", "qwen3", "qwen2_5", "gemma3", "gptoss", "phi3", "deepseek_r1_distill", "nemotron_3_nano"]


@pytest.mark.parametrize("name", FAMILIES)
def test_the_tokens_and_the_trained_ones_are_transformers_on_trls_template(name, tmp_path):
    from transformers import AutoTokenizer

    from tests.backend.data.test_hf_tokenizer_files import hf_folder

    folder = hf_folder(tmp_path / "tokenizer", {"tokenizer_class": "PreTrainedTokenizerFast", **TOKENS})
    (folder / "chat_template.jinja").write_text((FOLDER / f"{name}.jinja").read_text())
    records = tmp_path / "chats.jsonl"
    records.write_text("".join(json.dumps({"messages": c}) + "\n" for c in CONVERSATIONS))
    source = ChatDocuments(FileDocuments([records], "messages")).use_tokenizer(f"hf:{folder}")
    theirs = AutoTokenizer.from_pretrained(folder)
    for index, conversation in enumerate(CONVERSATIONS):
        expected = theirs.apply_chat_template(
            conversation, chat_template=trls_template(name), return_dict=True, return_assistant_tokens_mask=True
        )
        tokens, context = source.document(index)
        assert tokens == expected["input_ids"], (name, index)
        in_context = {i for a, b in context for i in range(a, b)}
        assert [int(i not in in_context) for i in range(len(tokens))] == expected["assistant_masks"], (name, index)
