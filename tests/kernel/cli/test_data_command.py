"""``hotswitch data``: a corpus's lengths in the tokens a run trains on, and what each max_len
does to them, figured from the documents themselves."""

import json

import pytest

from hotswitch.kernel.cli.main import main

SIZES = [10, 100, 300, 1000, 5000]  # bytes: a byte-level document of n bytes trains n targets (its EOS last)


@pytest.fixture
def corpus(tmp_path, monkeypatch):
    monkeypatch.setenv("HOTSWITCH_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "docs.jsonl").write_text("".join(json.dumps({"text": "x" * n}) + "\n" for n in SIZES))
    return folder


def test_the_lengths_and_what_each_max_len_cuts_or_splits(corpus, capsys):
    assert main(["data", str(corpus), "--max-len", "256", "1024", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["documents"], out["sampled"], out["tokenizer"]) == (5, 5, "byte")
    assert out["targets"] == sum(SIZES) and out["longest"] == 5000 and out["quantiles"]["p50"] == 300
    at_256, at_1024 = out["max_len"]
    assert at_256 == {
        "max_len": 256,
        "longer": 3 / 5,
        "cut_trains": pytest.approx((10 + 100 + 3 * 256) / sum(SIZES)),
        "split_sequences": pytest.approx((1 + 1 + 2 + 4 + 20) / 5),
    }
    assert at_1024["longer"] == 1 / 5 and at_1024["cut_trains"] == pytest.approx((1410 + 1024) / sum(SIZES))


def test_the_table_and_a_smaller_seeded_sample(corpus, capsys):
    assert main(["data", str(corpus / "*.jsonl"), "--sample", "3", "--seed", "4", "--max-len", "512"]) == 0
    captured = capsys.readouterr()
    assert "5 documents from 1 file(s), byte tokens" in captured.out and "sampled 3 documents (seed 4)" in captured.out
    row = next(line for line in captured.out.splitlines() if line.strip().startswith("512"))
    assert len(row.split()) == 4 and row.split()[1].endswith("%")
    assert "3/3 documents tokenised" in captured.err  # the progress bar, on stderr


@pytest.mark.parametrize(
    "args, refusal",
    [
        (["--sample", "0"], "--sample 0 reads nothing"),
        (["--max-len", "0"], "--max-len 0 holds no token"),
        (["--max-len", "1"], "--max-len 1 holds no token to predict; give at least 2"),
        (["--seed", "-1"], "--seed -1: give a whole number of at least 0"),
        (["--tokenizer", "bpe:5"], "'bpe:5'"),
    ],
)
def test_bad_inputs_are_refused_naming_the_fix(corpus, capsys, args, refusal):
    assert main(["data", str(corpus), *args]) == 2
    assert refusal in capsys.readouterr().err
    assert main(["data", str(corpus / "missing")]) == 2
    assert "missing is not a file or a folder" in capsys.readouterr().err


def test_conversations_count_the_assistant_turns_targets_as_transformers_marks_them(tmp_path, capsys):
    from transformers import AutoTokenizer

    from tests.backend.data.test_chat import CHATML, CONVERSATIONS, chat_folder, write_chats

    folder = chat_folder(tmp_path / "tokenizer", CHATML)
    chats = write_chats(tmp_path / "chats.jsonl", CONVERSATIONS)
    argv = ["data", str(chats), "--chat-field", "messages", "--tokenizer", f"hf:{folder}", "--max-len", "4096"]
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    theirs = AutoTokenizer.from_pretrained(folder)
    marks = [theirs.apply_chat_template(c, return_dict=True, return_assistant_tokens_mask=True) for c in CONVERSATIONS]
    assert out["data"] == "3 documents from 1 file(s), each a conversation"
    assert out["targets"] == sum(sum(m["assistant_masks"][1:]) for m in marks)
    assert out["longest"] == max(len(m["input_ids"]) - 1 for m in marks)
    assert main(["data", str(chats), "--chat-field", "messages"]) == 2
    assert "the 'byte' tokenizer has none" in capsys.readouterr().err
