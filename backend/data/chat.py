"""Supervised fine-tuning on conversations: records whose field holds a list of messages
(``{"role": ..., "content": ...}``, as TRL's conversational datasets do), each one document
written out by the tokenizer's chat template (``chat_template``), of which only the assistant's
turns train: everything else is context (``DocumentSource.document``).

The conversation is tokenised whole, as transformers' ``apply_chat_template`` tokenises it: no
beginning or end of document added (the template writes its own, its ``bos_token`` and
end-of-turn marker), and its pieces never apart (a SentencePiece tokenizer would begin each with
a word boundary of its own). Which tokens train follows from their character offsets
(``HFTokenizer.encode_offsets``), as transformers' assistant mask does.
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
        self.records = records
        self.prompts = prompts

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
        try:
            pieces = self.template().pieces(*self.messages(index))
        except ChatTemplateError as error:
            raise ChatTemplateError(f"conversation {index} of {self.records.describe()}: {error}") from None
        trained = []  # the [start, end) characters of the assistant's turns
        at = 0
        for text, trains in pieces:
            if trains:
                trained.append((at, at + len(text)))
            at += len(text)
        tokens, offsets = self.tokenizer.encode_offsets("".join(text for text, _ in pieces))  # type: ignore[attr-defined]
        return tokens, context_of(offsets, trained)

    def template(self) -> ChatTemplate:
        if self.tokenizer.chat_template is None:
            raise ValueError(chat_template_missing(self.tokenizer.name))
        return self.tokenizer.chat_template

    def describe(self) -> str:
        return f"{self.records.describe()}, each a conversation" + (" after its prompt" if self.prompts else "")


def context_of(offsets: list[tuple[int, int]], trained: list[tuple[int, int]]) -> Context:
    """The token ranges that are context: the tokens (at ``offsets``, in characters) that touch
    none of the ``trained`` character ranges, as transformers marks an assistant's tokens (every
    token from the one holding its first character to the one holding its last)."""
    context: list[tuple[int, int]] = []
    span = 0
    for token, (start, end) in enumerate(offsets):
        while span < len(trained) and trained[span][1] <= start:
            span += 1
        touches = span < len(trained) and trained[span][0] < max(end, start + 1)
        if touches:
            continue
        if context and context[-1][1] == token:
            context[-1] = (context[-1][0], token + 1)
        else:
            context.append((token, token + 1))
    return tuple(context)


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
