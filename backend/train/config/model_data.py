"""What trains and on what: the model section and the data section of a run configuration."""

from __future__ import annotations

from dataclasses import dataclass, replace

from hotswitch.backend.models.config import ModelConfig
from hotswitch.backend.train.config.inputs import (
    check_chat_template,
    check_data,
    check_model,
    check_tokenizer,
    data_from_words,
    default_tokenizer,
    model_config,
)
from hotswitch.backend.train.config.setting import at_least_zero, bad_setting, choice, setting, whole

LONG_DOCUMENTS = ("cut", "split")


@dataclass(frozen=True)
class ModelSettings:
    """The architecture that trains: a preset's, or a Hugging Face checkpoint's (weights too)."""

    name: str = setting(
        "tiny", "tiny, 1b, 7b, llama3.2-1b, qwen3-8b, ..., or hf:DIR (a Hugging Face checkpoint)", key="model"
    )
    router_aux_loss_coef: float | None = setting(
        None,
        "a mixture of experts' load-balancing auxiliary loss, this times it added to the loss (per sequence, "
        "as transformers computes it with output_router_logits); 0: none; default: the checkpoint's (on "
        "where its config.json sets output_router_logits)",
    )

    def check(self) -> ModelSettings:
        """This section checked; an ``hf:`` folder made absolute."""
        checked = ModelSettings(check_model(self.name), self.router_aux_loss_coef)
        if self.router_aux_loss_coef is not None:
            at_least_zero("router_aux_loss_coef", self.router_aux_loss_coef)
            if checked.architecture().experts is None:
                raise bad_setting(
                    "router_aux_loss_coef", self.router_aux_loss_coef, f"{self.name} has no experts; leave it out"
                )
        return checked

    def architecture(self) -> ModelConfig:
        """The ``ModelConfig`` of a checked section (an ``hf:`` checkpoint's as its config.json sets
        it), its auxiliary loss as ``router_aux_loss_coef`` weighs it where given."""
        config = model_config(self.name)
        if self.router_aux_loss_coef is None or config.experts is None:
            return config
        return config.with_(experts=replace(config.experts, aux_loss_coef=float(self.router_aux_loss_coef)))


@dataclass(frozen=True)
class DataSettings:
    """The documents, how they are tokenised, and the global batches they are cut into."""

    source: str | list[str] = setting(  # noqa: RUF009  (a field with metadata; its default, a str, is immutable)
        "stdlib",
        "'stdlib', 'synthetic:github', or text/JSONL/Parquet/Arrow files (gzip, bzip2, xz too), folders or patterns",
        key="data",
        many="+",
        parse=data_from_words,
    )
    text_field: str = setting("text", "the field or column holding each document's text")
    prompt_field: str | None = setting(
        None,
        "the field or column holding each record's prompt, which conditions its text_field (the completion) "
        "but does not train: supervised fine-tuning (with chat_field: the messages each conversation begins "
        "with); default: none, every token trains",
    )
    chat_field: str | None = setting(
        None,
        "the field or column holding each record's conversation (a list of {role, content} messages), written "
        "out by the tokenizer's chat template; only the assistant's turns train (supervised fine-tuning); "
        "in place of text_field",
    )
    tokenizer: str | None = setting(
        None,
        "'byte', 'bpe:N' (a byte-level BPE of N tokens trained on the data, cached) or hf:DIR; "
        "default: the model's own where it is hf:DIR with a tokenizer.json, else byte",
    )
    batch_size: int = setting(16, "sequences per global batch")
    max_len: int = setting(
        256, "targets per sequence at most: a sequence keeps max_len + 1 tokens, each predicting the next"
    )
    long_documents: str = setting(
        "cut",
        "a document longer than max_len: 'cut', its first max_len tokens train (the paper's setup); "
        "'split', all of them, as consecutive sequences",
        choices=LONG_DOCUMENTS,
    )

    def check(self, model: ModelConfig, model_name: str = "") -> DataSettings:
        """This section checked against ``model`` (its sequence length and vocabulary); files
        must exist and hold ``text_field`` (and ``prompt_field``), or ``chat_field`` (and the tokenizer a chat
        template); paths made absolute; no tokenizer means the one of ``model_name`` (the checked ``model``
        setting) where it is an ``hf:`` checkpoint with one."""
        whole("batch_size", self.batch_size, 1)
        whole("max_len", self.max_len, 2)
        choice("long_documents", self.long_documents, LONG_DOCUMENTS)
        if self.max_len > model.max_seq_len:
            why = f"{model.name} holds at most {model.max_seq_len} tokens per sequence"
            raise bad_setting("max_len", self.max_len, why)
        named = self.tokenizer if self.tokenizer is not None else default_tokenizer(model_name)
        tokenizer = check_tokenizer(named, model)
        if not isinstance(self.text_field, str) or not self.text_field:
            why = "give the name of the field that holds each document's text"
            raise bad_setting("text_field", self.text_field, why)
        source = check_data(self.source, self.text_field, prompt_field=self.prompt_field, chat_field=self.chat_field)
        check_chat_template(self.chat_field, tokenizer)
        return replace(self, source=source, tokenizer=tokenizer)

    @property
    def splits(self) -> bool:
        """Whether a document longer than ``max_len`` trains whole, as consecutive sequences."""
        return self.long_documents == "split"
