"""Supervised fine-tuning on conversations: records whose field holds a list of messages
(``{"role": ..., "content": ...}``, as TRL's conversational datasets do), each one document
written out by the tokenizer's chat template (``chat_template``), of which only the assistant's
turns train: everything else is context (``DocumentSource.document``).

Each piece the template renders is tokenised alone (``HFTokenizer.encode_plain``), with no
beginning or end of document added: the template writes its own (its ``bos_token``, its
end-of-turn marker), as transformers' ``apply_chat_template`` tokenises.
"""

from __future__ import annotations

from hotswitch.backend.data.chat_template import ChatTemplate, ChatTemplateError
from hotswitch.backend.data.sources import Context, DocumentSource


class ChatDocuments(DocumentSource):
    """The conversations of ``records`` (a source of JSONL, Parquet or Arrow records whose
    field holds messages), tokenised by a tokenizer with a chat template. With ``prompts`` (the
    same records' other field, TRL's conversational prompt-completion), each conversation is
    its prompt's messages then its own, and only its own assistant turns train."""

    def __init__(self, records: DocumentSource, prompts: DocumentSource | None = None):
        if prompts is not None and len(prompts) != len(records):
            raise ValueError(f"{len(prompts)} prompts but {len(records)} completions; give the records of one file")
        self.records, self.prompts = records, prompts

    def __len__(self) -> int:
        return len(self.records)

    def messages(self, index: int) -> tuple[list[dict], int]:
        """Record ``index``'s messages, and how many lead them as its prompt."""
        prompt = self.prompts.conversation(index) if self.prompts is not None else []
        return [*prompt, *self.records.conversation(index)], len(prompt)

    def text(self, index: int) -> bytes:
        return self.template().render(self.messages(index)[0]).encode("utf-8")

    def tokens(self, index: int) -> list[int]:
        return self.document(index)[0]

    def document(self, index: int) -> tuple[list[int], Context]:
        tokens: list[int] = []
        context: list[tuple[int, int]] = []
        try:
            pieces = self.template().pieces(*self.messages(index))
        except ChatTemplateError as error:
            raise ChatTemplateError(f"conversation {index} of {self.records.describe()}: {error}") from None
        for text, trains in pieces:
            ids = self.tokenizer.encode_plain(text)  # type: ignore[attr-defined]  # a chat template's: HFTokenizer
            if not trains and ids:
                context.append((len(tokens), len(tokens) + len(ids)))
            tokens += ids
        return tokens, tuple(context)

    def template(self) -> ChatTemplate:
        if self.tokenizer.chat_template is None:
            raise ValueError(chat_template_missing(self.tokenizer.name))
        return self.tokenizer.chat_template

    def describe(self) -> str:
        return f"{self.records.describe()}, each a conversation" + (" after its prompt" if self.prompts else "")


def chat_template_missing(tokenizer: str) -> str:
    """Why conversations cannot be read with ``tokenizer``, and the fix."""
    if tokenizer.startswith("hf:"):
        return (
            f"the tokenizer {tokenizer} has no chat template (chat_template.jinja, or chat_template in its "
            "tokenizer_config.json); give the tokenizer of a chat model, or one you added a template to"
        )
    return (
        f"conversations are written out by a tokenizer's chat template, and the {tokenizer!r} tokenizer has none; "
        "give tokenizer 'hf:DIR', the folder of a Hugging Face tokenizer with a chat template"
    )
