"""Conversations for supervised fine-tuning: a record's messages written out by its tokenizer's
chat template to the very ids transformers' ``apply_chat_template`` gives, of which the
assistant's turns alone train: the targets that train are the tokens transformers' own
assistant mask marks (read from the template's ``{% generation %}`` markers, which ours does not
use), however many turns, and wherever a long conversation is split."""

import json

import pytest

from hotswitch.backend.data import BatchStream
from hotswitch.backend.data.chat import ChatDocuments
from hotswitch.backend.data.chat_template import ChatTemplateError
from hotswitch.backend.data.file_documents import FileDocuments
from hotswitch.backend.data.hf_data import HFTokenizer
from hotswitch.backend.data.tokenizer import IGNORE
from hotswitch.backend.train.planning.batching import collate
from tests.backend.data.test_hf_tokenizer_files import hf_folder

CHATML = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' }}"
    "{% if message['role'] == 'assistant' %}{% generation %}{{ message['content'] + '<|im_end|>\\n' }}"
    "{% endgeneration %}{% else %}{{ message['content'] + '<|im_end|>\\n' }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
# Qwen's published shape: the newline after the end-of-turn marker outside the marked text, so
# it does not train (rendered turn by turn it would: it comes before the next turn)
CHATML_OUTSIDE = CHATML.replace(
    "'<|im_end|>\\n' }}{% endgeneration %}", "'<|im_end|>' }}{% endgeneration %}{{ '\\n' }}"
)
# LLaMA 3's shape: the beginning token written by the template, a role check, contents trimmed
HEADERS = (
    "{{ bos_token }}{% for m in messages %}{% if m.role not in ['system', 'user', 'assistant'] %}"
    "{{ raise_exception('unknown role ' + m.role) }}{% endif %}{{ '<|im_start|>' + m.role + '\\n\\n' }}"
    "{% if m.role == 'assistant' %}{% generation %}{{ m.content | trim }}{{ '</s>' }}{% endgeneration %}"
    "{% else %}{{ m.content | trim }}{{ '</s>' }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n\\n' }}{% endif %}"
)
CONVERSATIONS = [
    [{"role": "user", "content": "def f(x):"}, {"role": "assistant", "content": "return x"}],
    [
        {"role": "system", "content": "You write code."},
        {"role": "user", "content": "héllo wörld"},
        {"role": "assistant", "content": "def f(x):\n\treturn  x"},
        {"role": "user", "content": " leading space"},
        {"role": "assistant", "content": "two  spaces # 🎉"},
    ],
    [{"role": "user", "content": "only a question"}],
]


def chat_folder(path, template: str):
    folder = hf_folder(
        path,
        {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "<|im_end|>"},
        specials=("<s>", "</s>", "<|im_start|>", "<|im_end|>"),
    )
    (folder / "chat_template.jinja").write_text(template)
    return folder


def write_chats(path, conversations, field="messages"):
    path.write_text("".join(json.dumps({field: c, "id": i}) + "\n" for i, c in enumerate(conversations)))
    return path


def chats(tmp_path, template: str) -> ChatDocuments:
    folder = chat_folder(tmp_path / "tokenizer", template)
    source = ChatDocuments(FileDocuments([write_chats(tmp_path / "chats.jsonl", CONVERSATIONS)], "messages"))
    return source.use_tokenizer(f"hf:{folder}")


@pytest.mark.parametrize("template", [CHATML, CHATML_OUTSIDE, HEADERS], ids=["chatml", "chatml-outside", "headers"])
def test_the_ids_are_transformers_and_the_assistant_turns_alone_train(tmp_path, template):
    from transformers import AutoTokenizer

    source = chats(tmp_path, template)
    theirs = AutoTokenizer.from_pretrained(tmp_path / "tokenizer")
    for index, conversation in enumerate(CONVERSATIONS):
        expected = theirs.apply_chat_template(
            conversation, tokenize=True, return_dict=True, return_assistant_tokens_mask=True
        )
        tokens, _ = source.document(index)
        assert tokens == expected["input_ids"]
        assert source.text(index).decode() == theirs.apply_chat_template(conversation, tokenize=False)
        stream = BatchStream(_only(source, index), 1, 4096)
        if not any(expected["assistant_masks"]):  # no assistant turn: it trains nothing, and is left out
            with pytest.raises(ValueError, match="no document has at least 3 tokens and a trained one"):
                stream.next_batch()
            continue
        (sequence,) = stream.next_batch()
        targets = collate([sequence]).targets[0].tolist()
        trained = [t != IGNORE for t in targets]
        assert trained == [bool(m) for m in expected["assistant_masks"][1:]]
        assert sequence.trained == sum(expected["assistant_masks"][1:]) == sum(trained)
    # the system and first user turns, the second user turn (and the last newline, outside the marks)
    assert len(source.document(1)[1]) == (3 if template is CHATML_OUTSIDE else 2)


def _only(source, index):
    """``source`` as a one-document source (its document ``index``)."""
    from hotswitch.backend.data.split import Subset

    return Subset(source, [index], "one")


def test_a_split_conversation_trains_each_assistant_token_once(tmp_path):
    source = chats(tmp_path, CHATML)
    tokens, context = source.document(1)
    stream = BatchStream(_only(source, 1), 1, 7, split=True)
    pieces = [stream.next_batch()[0]]
    while stream.piece is not None:  # its pieces of 7 targets, those all context left out
        pieces.append(stream.next_batch()[0])
    learnt = [t for p in pieces for t in collate([p]).targets[0].tolist() if t != IGNORE]
    in_context = {i for a, b in context for i in range(a, b)}
    assert learnt == [t for i, t in enumerate(tokens) if i and i not in in_context]
    assert all(p.trained for p in pieces) and len(pieces) < -(-(len(tokens) - 1) // 7)  # some were all context


def test_a_marked_template_that_rewrites_earlier_turns_trains_what_it_marks(tmp_path):
    rewrites = (
        "{% for m in messages %}{% if m.role == 'assistant' %}{% generation %}"
        "{{ m.content if loop.last else m.content[:1] }}{% endgeneration %}{% else %}{{ m.content }}{% endif %}"
        "{% endfor %}"
    )
    source = chats(tmp_path, rewrites)
    pieces = source.template().pieces(CONVERSATIONS[1])
    assert [text for text, trains in pieces if trains] == ["d", "two  spaces # 🎉"]


def test_a_template_that_rewrites_earlier_turns_is_refused_by_name(tmp_path):
    rewrites = "{% for m in messages %}{{ m.content if loop.last else m.content[:1] }}{% endfor %}"
    with pytest.raises(ChatTemplateError, match="renders the conversation up to message 2 differently once later"):
        chats(tmp_path, rewrites).document(1)


def test_a_reasoning_prompt_the_turn_does_not_begin_with_is_refused_naming_both(tmp_path):
    opens = (
        "{% for m in messages %}{{ '<' + m.role + '>' }}{% if m.role == 'assistant' %}{{ m.content }}"
        "{% else %}{{ m.content }}{% endif %}{% endfor %}{% if add_generation_prompt %}<assistant><think>\n{% endif %}"
    )
    with pytest.raises(ChatTemplateError) as error:
        chats(tmp_path, opens).document(0)
    said = str(error.value)
    assert "generation prompt for message 1 ends '<think>\\n'" in said and "{% generation %}" in said


def test_records_that_are_not_conversations_are_refused_naming_their_line(tmp_path):
    folder = chat_folder(tmp_path / "tokenizer", CHATML)
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"messages": CONVERSATIONS[0]}) + "\n" + json.dumps({"messages": [{"content": "x"}]}))
    source = ChatDocuments(FileDocuments([path], "messages")).use_tokenizer(f"hf:{folder}")
    assert source.document(0)[0]
    with pytest.raises(ValueError, match=r"bad.jsonl line 2: the conversation message 0 is not an object with a"):
        source.document(1)
    with pytest.raises(ValueError, match="its 'messages' is a JSON array, not a string; a conversation's"):
        FileDocuments([path], "messages").text(0)


def test_a_tokenizer_without_a_chat_template_is_named():
    from hotswitch.backend.data.chat import chat_template_missing

    assert "the 'byte' tokenizer has none; give tokenizer 'hf:DIR'" in chat_template_missing("byte")
    assert "has no chat template" in chat_template_missing("hf:/models/base")


def test_named_templates_take_the_default_and_the_jinja_file_comes_first(tmp_path):
    from hotswitch.backend.data.chat_template import template_source

    folder = chat_folder(tmp_path / "tokenizer", CHATML)
    config = json.loads((folder / "tokenizer_config.json").read_text())
    named = [{"name": "tool_use", "template": "x"}, {"name": "default", "template": HEADERS}]
    (folder / "tokenizer_config.json").write_text(json.dumps({**config, "chat_template": named}))
    assert template_source(folder) == CHATML
    (folder / "chat_template.jinja").unlink()
    assert template_source(folder) == HEADERS
    assert HFTokenizer(folder).chat_template.render(CONVERSATIONS[0]).startswith("<s><|im_start|>user\n\ndef f(x):")


def test_a_parquet_column_of_conversations_reads_as_the_jsonl_records_do(tmp_path, monkeypatch):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from hotswitch.backend.data.hf_data import DatasetDocuments

    monkeypatch.setenv("HOTSWITCH_CACHE", str(tmp_path / "cache"))
    with_name = [[*c[:-1], {**c[-1], "name": "bot"}] if i == 0 else c for i, c in enumerate(CONVERSATIONS)]
    path = tmp_path / "chats.parquet"
    pq.write_table(pa.table({"messages": with_name}), path)  # a key one message has is null in the others
    folder = chat_folder(tmp_path / "tokenizer", CHATML)
    table = ChatDocuments(DatasetDocuments([path], "messages", chat=True)).use_tokenizer(f"hf:{folder}")
    lines = ChatDocuments(FileDocuments([write_chats(tmp_path / "c.jsonl", with_name)], "messages"))
    lines.use_tokenizer(f"hf:{folder}")
    assert [table.document(i) for i in range(3)] == [lines.document(i) for i in range(3)]
    assert table.records.conversation(1) == CONVERSATIONS[1]  # no 'name': None added to its messages


def test_a_conversations_prompt_conditions_it_and_trains_none_of_its_turns(tmp_path):
    """TRL's conversational prompt-completion: a prompt's messages (an example exchange among
    them) then the completion's; only the completion's assistant turns train."""
    from transformers import AutoTokenizer

    folder = chat_folder(tmp_path / "tokenizer", CHATML)
    prompt, completion = CONVERSATIONS[1][:4], CONVERSATIONS[1][4:]  # the prompt holds an assistant turn
    path = tmp_path / "pairs.jsonl"
    path.write_text(json.dumps({"prompt": prompt, "completion": completion}) + "\n")
    source = ChatDocuments(FileDocuments([path], "completion"), FileDocuments([path], "prompt"))
    source.use_tokenizer(f"hf:{folder}")
    theirs = AutoTokenizer.from_pretrained(folder)
    whole = theirs.apply_chat_template(prompt + completion, return_dict=True, return_assistant_tokens_mask=True)
    asked = theirs.apply_chat_template(prompt, add_generation_prompt=True, return_dict=True)["input_ids"]
    (sequence,) = BatchStream(source, 1, 4096).next_batch()
    assert list(sequence.tokens) == whole["input_ids"] and source.describe().endswith("a conversation after its prompt")
    trained = [t != IGNORE for t in collate([sequence]).targets[0].tolist()]
    expected = [bool(m) and i >= len(asked) for i, m in enumerate(whole["assistant_masks"])]
    assert trained == expected[1:] and sum(trained) < sum(whole["assistant_masks"])  # the prompt's turn did not


def test_a_sentencepiece_tokenizer_tokenises_the_conversation_whole(tmp_path):
    """A SentencePiece tokenizer (LLaMA 2's, Mistral's) begins every text it encodes with a word
    boundary: a ChatML conversation encoded piece by piece would hold one before each assistant
    turn ("assistant\\n" then "four" apart) that the whole has not."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import AutoTokenizer

    conversation = CONVERSATIONS[0] + [{"role": "user", "content": "and?"}, {"role": "assistant", "content": "x"}]
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="first")
    tokenizer.decoder = decoders.Metaspace(prepend_scheme="first")
    trainer = trainers.BpeTrainer(vocab_size=150, special_tokens=["<s>", "</s>", "<|im_start|>", "<|im_end|>"])
    tokenizer.train_from_iterator([m["role"] + "\n" + m["content"] for m in conversation] * 10, trainer)
    folder = tmp_path / "sentencepiece"
    folder.mkdir()
    tokenizer.save(str(folder / "tokenizer.json"))
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "<|im_end|>"}
    (folder / "tokenizer_config.json").write_text(json.dumps({**config, "chat_template": CHATML}))
    source = ChatDocuments(FileDocuments([write_chats(tmp_path / "c.jsonl", [conversation])], "messages"))
    source.use_tokenizer(f"hf:{folder}")
    expected = AutoTokenizer.from_pretrained(folder).apply_chat_template(
        conversation, return_dict=True, return_assistant_tokens_mask=True
    )
    (sequence,) = BatchStream(source, 1, 4096).next_batch()
    assert list(sequence.tokens) == expected["input_ids"]
    trained = [t != IGNORE for t in collate([sequence]).targets[0].tolist()]
    assert trained == [bool(m) for m in expected["assistant_masks"][1:]] and any(trained)
    pieces = source.template().pieces(conversation)
    apart = [t for text, _ in pieces for t in source.tokenizer.encode_offsets(text)[0]]
    assert apart != expected["input_ids"]  # what encoding the pieces apart would have trained on
