"""Supervised fine-tuning records: a prompt conditions its completion but does not train. The
stream marks how many of a sequence's targets are the prompt's, collation ignores exactly those,
and a prompt that fills a sequence trains nothing (the sequence is left out)."""

import json

import pytest

from hotswitch.backend.data import BatchStream, DocumentSource
from hotswitch.backend.data.prompted import PromptedDocuments
from hotswitch.backend.data.tokenizer import BYTES, IGNORE
from hotswitch.backend.train.planning.batching import collate


class Texts(DocumentSource):
    def __init__(self, texts):
        self.texts = [t.encode() for t in texts]

    def __len__(self):
        return len(self.texts)

    def text(self, index):
        return self.texts[index]

    def describe(self):
        return f"{len(self)} documents"


PROMPTS = ["Q: 2+2?\nA: ", "Translate 'chat': ", "", "x" * 50]
COMPLETIONS = ["4", "cat", "no prompt at all", "after a long prompt"]


def test_only_the_completion_and_the_end_of_the_document_are_targets():
    source = PromptedDocuments(Texts(PROMPTS[:3]), Texts(COMPLETIONS[:3]))
    assert source.describe() == "3 documents, each a prompt and its completion"
    batch = BatchStream(source, 3, 64, seed=0).next_batch()
    assert sorted(s.doc for s in batch) == [0, 1, 2]
    micro = collate(batch)
    for row, s in enumerate(batch):
        prompt, completion = PROMPTS[s.doc].encode(), COMPLETIONS[s.doc].encode()
        assert s.tokens == (*prompt, *completion, BYTES.eos)
        trained = micro.targets[row][micro.targets[row] != IGNORE].tolist()
        if prompt:  # its last token predicts the completion's first
            assert s.untrained == ((0, len(prompt) - 1),) and trained == [*completion, BYTES.eos]
        else:  # nothing before the completion's first token: it is an input only, as in any document
            assert s.untrained == () and trained == [*completion[1:], BYTES.eos]
        assert s.trained == len(trained)
    assert sum(s.trained for s in batch) == int((micro.targets != IGNORE).sum())  # what a step's mean is over


def test_a_prompt_that_fills_the_sequence_trains_nothing_and_a_split_one_trains_its_completion_once():
    source = PromptedDocuments(Texts(PROMPTS[3:]), Texts(COMPLETIONS[3:]))
    with pytest.raises(ValueError, match="a prompt longer than max_len trains nothing"):
        BatchStream(source, 1, 30, seed=0).next_batch()  # cut to 30 targets, all of them the prompt's
    split = BatchStream(source, 1, 30, seed=0, split=True)
    pieces = [split.next_batch()[0] for _ in range(2)]  # the first piece, all prompt, is left out
    assert [(s.length, s.untrained) for s in pieces] == [(30, ((0, 49 - 30),)), (9, ())]
    trained = [t for s in pieces for t in collate([s]).targets[0].tolist() if t != IGNORE]
    assert trained == [*COMPLETIONS[3].encode(), BYTES.eos]


def test_a_hugging_face_tokenizer_begins_the_prompt_only_and_a_bpe_keeps_the_two_apart(tmp_path):
    from hotswitch.backend.data.bpe import BPETokenizer
    from hotswitch.backend.data.hf_data import HFTokenizer
    from tests.backend.data.test_hf_tokenizer_files import hf_folder

    hf = HFTokenizer(hf_folder(tmp_path / "tok", {"eos_token": "</s>", "bos_token": "<s>"}))
    ids, prompt = hf.encode_prompted("def f(x):", " return x")
    bos, eos = hf.tokenizer.token_to_id("<s>"), hf.tokenizer.token_to_id("</s>")
    assert ids[0] == bos and ids.count(bos) == 1 and ids[-1] == eos  # one beginning, before the prompt
    assert ids[:prompt] == hf.encode("def f(x):")[:-1]  # the prompt as a document of its own begins
    assert hf.tokenizer.decode(ids[prompt:-1]) == " return x"
    bpe = BPETokenizer.train(["def f(x):\n    return x * 2\n"] * 20, 300)
    ids, prompt = bpe.encode_prompted("def f(x):", " return x")
    assert ids == [*bpe.encode("def f(x):")[:-1], *bpe.encode(" return x")[:-1], bpe.eos] and prompt == len(
        bpe.encode("def f(x):")[:-1]
    )


def test_the_length_profile_counts_what_trains_the_completions_targets():
    from hotswitch.backend.data.length_profile import length_profile

    # "abcd" + "xy" + end: 6 targets, the prompt's first 3 train nothing; "" + "hello" + end: 5 targets, all train
    source = PromptedDocuments(Texts(["abcd", ""]), Texts(["xy", "hello"]))
    profile = length_profile(source, [4], sample=10)
    assert profile["targets"] == 3 + 5 and profile["longest"] == 6
    assert profile["max_len"][0]["cut_trains"] == (1 + 4) / 8  # max_len 4 keeps "x" of the first, "ello" of the second
    split = length_profile(source, [2], sample=10)["max_len"][0]["split_sequences"]
    assert split == (2 + 3) / 2  # the first's 3 pieces of 2 targets, less one all prompt; the second's 3


def test_a_sentencepiece_tokenizer_tokenises_prompt_and_completion_whole_as_trl_does(tmp_path):
    """TRL tokenises prompt + completion whole; apart, a SentencePiece tokenizer (LLaMA 2's,
    Mistral's) would end a prompt "A: " with a lone word boundary and begin the completion with
    another. Whole, the completion's first word holds the space before it, and trains."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import AutoTokenizer

    from hotswitch.backend.data.hf_data import HFTokenizer

    prompt, completion = "Q: what is two and two?\nA: ", "four, it is four"
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="first")
    tokenizer.decoder = decoders.Metaspace(prepend_scheme="first")
    trainer = trainers.BpeTrainer(vocab_size=80, special_tokens=["<s>", "</s>"])
    tokenizer.train_from_iterator([prompt + completion] * 10, trainer)
    tokenizer.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 0)])
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>"}
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    ours, theirs = HFTokenizer(tmp_path), AutoTokenizer.from_pretrained(tmp_path)
    ids, lead = ours.encode_prompted(prompt, completion)
    whole = theirs(prompt + completion).input_ids
    assert ids == [*whole, ours.eos]
    words = theirs.convert_ids_to_tokens(ids[lead:-1])
    assert words == ["\u2581four,", "\u2581it", "\u2581is", "\u2581four"], words  # the completion's words, whole
    apart = [*theirs(prompt).input_ids, *theirs(completion, add_special_tokens=False).input_ids]
    assert len(apart) == len(whole) + 1  # a lone word boundary more: what apart would have trained on
