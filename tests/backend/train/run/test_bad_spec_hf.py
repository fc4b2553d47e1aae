"""The bad-input catalogue of what users bring: Hugging Face checkpoints and tokenizers and
dataset files, each refused by ``check_spec`` before any rank starts, naming the problem."""

import json

import pytest

from hotswitch.backend.train.run.recipe import ENV_NOTEBOOK_DIR, check_spec
from tests.backend.models.hf_fixtures import make_checkpoint
from tests.backend.models.hf_train_workers import make_parquet, make_tokenizer


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("bring")
    (root / "empty").mkdir()
    (root / "gpt2").mkdir()
    (root / "gpt2" / "config.json").write_text(json.dumps({"model_type": "gpt2", "n_embd": 64}))
    make_checkpoint(root / "small", vocab_size=320)
    make_tokenizer(root / "big-tokenizer", vocab=600)  # learns ~430 tokens from the fixture's documents
    make_parquet(root / "body.parquet", field="body")
    (root / "content.jsonl").write_text(json.dumps({"content": "def f(): pass"}) + "\n")
    (root / "broken.jsonl").write_text("{not json\n")
    (root / "notes.txt").write_text("a document with no fields\n")
    (root / "empty.jsonl").write_text("\n\n")
    (root / "empty.json").write_text("[]")
    chat = [{"role": "user", "content": "def f():"}, {"role": "assistant", "content": "pass"}]
    (root / "chats.jsonl").write_text(json.dumps({"messages": chat, "system": "be brief"}) + "\n")
    make_tokenizer(root / "chat-tokenizer", vocab=300)
    (root / "chat-tokenizer" / "chat_template.jinja").write_text("{% for m in messages %}{{ m.content }}{% endfor %}")
    return root


CASES = [
    ({"model": "hf:empty"}, ["no config.json", "folder of a Hugging Face checkpoint"]),
    ({"model": "hf:missing"}, ["no config.json"]),
    ({"model": "hf:gpt2"}, ["model_type='gpt2'", "the families that load are llama, mistral, qwen2"]),
    ({"model": 7}, ["give a model name such as 'tiny', or 'hf:DIR'"]),
    ({"model": "hf:small", "tokenizer": "hf:big-tokenizer"}, ["more than hf:small's vocabulary of 320"]),
    ({"tokenizer": "hf:empty"}, ["has no tokenizer.json", "Hugging Face tokenizer folder"]),
    ({"data": ["body.parquet"]}, ["has no 'text' field (it has ['body', 'id'])", "set text_field"]),
    ({"data": ["content.jsonl"]}, ["has no 'text' field (it has ['content'])"]),
    ({"data": ["body.parquet"], "text_field": "id"}, ["'id' column holds int64, not text", "set text_field"]),
    ({"data": ["broken.jsonl"]}, ["its first line is not JSON"]),
    ({"data": ["empty.jsonl"]}, ["empty.jsonl holds no records; remove it"]),
    ({"data": ["empty.json"]}, ["empty.json holds no records; remove it"]),
    ({"text_field": ""}, ["give the name of the field"]),
    ({"export_hf": "small"}, ["already exists; choose a new folder to export into"]),
    ({"prompt_field": "prompt"}, ["'prompt_field' = 'prompt'", "data 'stdlib' holds no prompts"]),
    ({"data": ["notes.txt"], "prompt_field": "prompt"}, ["notes.txt is a text file, one document with no fields"]),
    (
        {"data": ["content.jsonl"], "text_field": "content", "prompt_field": "prompt"},
        ["no 'prompt' field", "set prompt_field"],
    ),
    (
        {"data": ["body.parquet"], "text_field": "body", "prompt_field": "id"},
        ["'id' column holds int64", "set prompt_field"],
    ),
    ({"data": ["body.parquet"], "text_field": "body", "prompt_field": "body"}, ["another than text_field ('body')"]),
    ({"chat_field": "messages"}, ["'chat_field' = 'messages'", "data 'stdlib' holds no conversations"]),
    ({"data": ["chats.jsonl"], "text_field": "messages"}, ["'messages' is a list, not text", "set chat_field"]),
    ({"data": ["content.jsonl"], "chat_field": "content"}, ["'content' is not a list of messages; set chat_field"]),
    ({"data": ["body.parquet"], "chat_field": "body"}, ["'body' column holds string, not lists of messages"]),
    ({"data": ["chats.jsonl"], "chat_field": "messages"}, ["the 'byte' tokenizer has none; give tokenizer 'hf:DIR'"]),
    (
        {"data": ["chats.jsonl"], "chat_field": "messages", "tokenizer": "hf:big-tokenizer", "model": "1b"},
        ["big-tokenizer has no chat template (chat_template.jinja"],
    ),
    (
        {"data": ["chats.jsonl"], "chat_field": "messages", "prompt_field": "prompt"},
        ["chats.jsonl has no 'prompt' field (it has ['messages', 'system']); set prompt_field"],
    ),
    (
        {"data": ["chats.jsonl"], "chat_field": "messages", "prompt_field": "system"},
        ["first record's 'system' is not a list of messages; set prompt_field"],
    ),
    (
        {"data": ["chats.jsonl"], "chat_field": "messages", "prompt_field": "messages"},
        ["'prompt_field' = 'messages'", "another than chat_field"],
    ),
]


@pytest.mark.parametrize(("spec", "fragments"), CASES, ids=[repr(c[0])[:50] for c in CASES])
def test_what_users_bring_is_checked_before_launch(folder, monkeypatch, spec, fragments):
    monkeypatch.setenv(ENV_NOTEBOOK_DIR, str(folder))
    with pytest.raises(ValueError) as error:
        check_spec({"max_len": 48, **spec})
    for fragment in fragments:
        assert fragment in str(error.value)


def test_a_field_named_by_text_field_is_accepted(folder, monkeypatch):
    monkeypatch.setenv(ENV_NOTEBOOK_DIR, str(folder))
    s = check_spec({"data": ["body.parquet"], "text_field": "body", "model": "hf:small", "max_len": 48})
    assert s["data"] == [str(folder / "body.parquet")] and s["model"] == f"hf:{folder / 'small'}"


def test_conversations_read_with_a_tokenizer_that_has_a_chat_template_are_accepted(folder, monkeypatch):
    monkeypatch.setenv(ENV_NOTEBOOK_DIR, str(folder))
    spec = {"data": ["chats.jsonl"], "chat_field": "messages", "tokenizer": "hf:chat-tokenizer", "max_len": 48}
    assert check_spec(spec)["tokenizer"] == f"hf:{folder / 'chat-tokenizer'}"


def test_a_checkpoint_trains_with_its_own_tokenizer_unless_another_is_named(folder, monkeypatch):
    monkeypatch.setenv(ENV_NOTEBOOK_DIR, str(folder))
    assert check_spec({"model": "hf:small", "max_len": 48})["tokenizer"] == "byte"  # it ships none
    make_tokenizer(folder / "with-tokenizer", vocab=300)
    make_checkpoint(folder / "with-tokenizer", vocab_size=320)
    own = f"hf:{folder / 'with-tokenizer'}"
    assert check_spec({"model": "hf:with-tokenizer", "max_len": 48})["tokenizer"] == own
    assert check_spec({"model": "hf:with-tokenizer", "tokenizer": "byte", "max_len": 48})["tokenizer"] == "byte"
    assert check_spec({"max_len": 48})["tokenizer"] == "byte"
