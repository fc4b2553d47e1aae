"""Every tokenizer a run trains with, written as Hugging Face tokenizer files: transformers'
``AutoTokenizer`` loads them and encodes text to the ids training saw (less the end-of-document
id training appends), and names that end-of-document token as its eos."""

import json

from hotswitch.backend.data.bpe import BPETokenizer
from hotswitch.backend.data.hf_data import HFTokenizer
from hotswitch.backend.data.tokenizer import BYTES

TEXTS = ["héllo wörld 🎉", "def f(x):\n\treturn  x  # two spaces", "\x00 and \x7f, \r\n", " leading space", ""]


def loaded(directory):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(directory)


def check_round_trip(ours, directory):
    ids = ours.save_hf(directory)
    theirs = loaded(directory)
    for text in TEXTS:
        assert theirs(text).input_ids == ours.encode(text)[:-1], text
    assert theirs.eos_token_id == ours.eos == ids["eos_token_id"]
    assert theirs.convert_ids_to_tokens(ids["eos_token_id"]) == theirs.eos_token
    return ids, theirs


def test_the_byte_tokenizer_loads_as_its_bytes(tmp_path):
    ids, theirs = check_round_trip(BYTES, tmp_path)
    assert ids == {"bos_token_id": None, "eos_token_id": 256, "pad_token_id": None}
    assert theirs.decode(theirs("héllo 🎉").input_ids) == "héllo 🎉"


def test_a_trained_bpe_loads_with_its_merges_and_specials(tmp_path):
    ours = BPETokenizer.train(["def f(x):\n    return x * 2\n"] * 20 + TEXTS, 300)
    ids, theirs = check_round_trip(ours, tmp_path)
    assert ids == {"bos_token_id": None, "eos_token_id": 1, "pad_token_id": 0}
    assert theirs.pad_token == "<pad>"
    assert len(theirs("def f(x):").input_ids) < len(b"def f(x):")  # its merges apply


def hf_folder(directory, config: dict | None, specials=("<s>", "</s>", "<|im_end|>")):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300, special_tokens=list(specials), initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tokenizer.train_from_iterator(TEXTS * 5, trainer)
    tokenizer.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 0)])
    directory.mkdir()
    tokenizer.save(str(directory / "tokenizer.json"))
    if config is not None:
        (directory / "tokenizer_config.json").write_text(json.dumps(config))
    (directory / "chat_template.jinja").write_text("{{ messages }}")
    return directory


def test_a_hugging_face_tokenizer_is_copied_and_keeps_its_named_eos(tmp_path):
    source = hf_folder(
        tmp_path / "source",
        {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>",
         "eos_token": {"__type": "AddedToken", "content": "<|im_end|>", "special": True}},
    )  # fmt: skip
    ours = HFTokenizer(source)
    assert ours.eos == 2  # the one tokenizer_config.json names, though "</s>" is there too
    (tmp_path / "out").mkdir()
    ids, theirs = check_round_trip(ours, tmp_path / "out")
    assert ids == {"bos_token_id": 0, "eos_token_id": 2, "pad_token_id": None}
    assert theirs("x").input_ids[0] == 0  # its template's BOS, as in training
    assert (tmp_path / "out" / "chat_template.jinja").read_text() == "{{ messages }}"


def test_a_bare_tokenizer_json_gets_a_config_naming_the_usual_eos(tmp_path):
    ours = HFTokenizer(hf_folder(tmp_path / "source", None, specials=("<s>", "<|end_of_text|>")))
    assert ours.eos == 1
    (tmp_path / "out").mkdir()
    ids, theirs = check_round_trip(ours, tmp_path / "out")
    assert ids["eos_token_id"] == 1 and theirs.eos_token == "<|end_of_text|>"
